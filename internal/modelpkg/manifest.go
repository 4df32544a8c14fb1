// Package modelpkg owns the model package: a folder (or .tar.gz) holding
// model.yaml and one artifact. It decodes model.yaml strictly, validates it
// (schema, preprocessing, runtime name, serving limits, golden examples) and
// hashes the artifact. Every problem names the file, line and key path. It
// does not load models or touch the registry.
package modelpkg

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/postproc"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/strictyaml"
)

// ManifestFile is the name of the manifest inside a package.
const ManifestFile = "model.yaml"

// MaxManifestBytes bounds model.yaml.
const MaxManifestBytes = 1 << 20

// Manifest is model.yaml.
type Manifest struct {
	Name        string        `yaml:"name"`
	Description string        `yaml:"description,omitempty"`
	Runtime     string        `yaml:"runtime"`
	Artifact    string        `yaml:"artifact"`
	Input       Input         `yaml:"input"`
	Preprocess  []schema.Step `yaml:"preprocess,omitempty"`
	Output      Output        `yaml:"output"`
	// Postprocess turns the model's output columns into the answer's
	// (internal/postproc).
	Postprocess []postproc.Step `yaml:"postprocess,omitempty"`
	Serving     Serving         `yaml:"serving,omitempty"`
	// Placement says how the version is kept on workers: its tier and
	// replica bounds (defaults filled in by Parse).
	Placement Placement `yaml:"placement,omitempty"`
	Golden    []Golden  `yaml:"golden,omitempty"`
	// Drift names a reference sample (JSON lines of instances) that online
	// feature and prediction distributions are compared with (PSI).
	Drift *Drift `yaml:"drift,omitempty"`
	// Logging opts in to storing sampled input payloads with prediction
	// records (a privacy choice: named fields only).
	Logging *Logging `yaml:"logging,omitempty"`
	// Release is the rollout plan used when a new version of this model is
	// released (sluice deploy, or a changed package in --models).
	Release *Release `yaml:"release,omitempty"`
	// Cache turns on the version's prediction cache (cache.go).
	Cache *Cache `yaml:"cache,omitempty"`
	// ONNX holds ONNX Runtime session options (runtime: onnx only).
	ONNX *runtime.SessionOptions `yaml:"onnx,omitempty"`
	// Features fills input fields from an entity's stored features
	// (features.go).
	Features *Features `yaml:"features,omitempty"`
}

// Input is model.yaml input:.
type Input struct {
	Schema string         `yaml:"schema"`
	Fields []schema.Field `yaml:"fields"`
}

// Output is model.yaml output:.
type Output struct {
	Schema string        `yaml:"schema"`
	Fields []OutputField `yaml:"fields"`
}

// OutputField names one output column of the model.
type OutputField struct {
	Name string `yaml:"name"`
}

// Serving holds a version's serving limits (model.yaml serving:).
type Serving struct {
	MaxInstancesPerRequest int      `yaml:"maxInstancesPerRequest,omitempty"`
	DefaultDeadline        Duration `yaml:"defaultDeadline,omitempty"`
	Replicas               int      `yaml:"replicas,omitempty"`
	MaxBatchSize           int      `yaml:"maxBatchSize,omitempty"`
	MaxBatchDelay          Duration `yaml:"maxBatchDelay,omitempty"`
	MaxQueueInstances      int      `yaml:"maxQueueInstances,omitempty"`
	WarmupBatches          *int     `yaml:"warmupBatches,omitempty"` // nil: default; 0: no warmup
	// LengthBuckets (sequence inputs only): increasing length boundaries; a
	// batch holds rows of one bucket. The last must be >= the field's maxLength.
	LengthBuckets []int `yaml:"lengthBuckets,omitempty"`
	// PadValue (sequence inputs only): the token id rows are padded with
	// (default 0).
	PadValue *int64 `yaml:"padValue,omitempty"`
	// Memory (optional) is what one replica of the version takes on a
	// worker; it overrides the estimate made from the artifact's size
	// before the first load (nil: estimate, then measure).
	Memory *Size `yaml:"memory,omitempty"`
}

// Placement is model.yaml placement:. Parse fills in the defaults.
type Placement struct {
	// Tier is hot, warm or cold (default warm):
	//   - hot: loaded at start with at least MinReplicas (>= 1) and never
	//     evicted;
	//   - warm: MinReplicas (default 0) are loaded at start and kept while
	//     idle, but unlike hot ones they may be evicted under memory
	//     pressure once idle; more are loaded while used;
	//   - cold: nothing loaded until the first request needs it
	//     (MinReplicas must be 0); evicted under pressure once idle.
	Tier string `yaml:"tier,omitempty"`
	// MinReplicas is the replicas kept loaded when the version is idle
	// (default: hot 1, warm and cold 0).
	MinReplicas *int `yaml:"minReplicas,omitempty"`
	// MaxReplicas bounds the autoscaler (default: the larger of
	// serving.replicas and minReplicas; 1 – 64).
	MaxReplicas int `yaml:"maxReplicas,omitempty"`
}

// Tiers.
const (
	TierHot  = "hot"
	TierWarm = "warm"
	TierCold = "cold"
)

// Min is the placement's MinReplicas (0 before Parse filled it in).
func (p Placement) Min() int {
	if p.MinReplicas == nil {
		return 0
	}
	return *p.MinReplicas
}

// Drift is model.yaml drift:.
type Drift struct {
	Reference  string   `yaml:"reference"`            // file in the package: one JSON instance per line
	Bins       int      `yaml:"bins,omitempty"`       // reference histogram bins per feature (default 10)
	Window     Duration `yaml:"window,omitempty"`     // online window (default 10m)
	MinSamples int      `yaml:"minSamples,omitempty"` // rows before PSI is judged (default 100)
}

// Logging is model.yaml logging:. Without it no input values are stored.
type Logging struct {
	SampleRate float64  `yaml:"sampleRate"` // fraction of requests whose inputs are stored, 0..1
	Fields     []string `yaml:"fields"`     // the input fields stored; others are left out
	// Outputs: false keeps the answers out of the prediction records
	// (default: every answered record holds the outputs the caller got).
	Outputs *bool `yaml:"outputs,omitempty"`
}

// Serving defaults.
const (
	DefaultMaxInstancesPerRequest = 1000
	DefaultDeadline               = time.Second
	DefaultReplicas               = 1
	DefaultMaxBatchSize           = 64
	DefaultMaxQueueInstances      = 4096
	DefaultWarmupBatches          = 20
	MaxReplicas                   = 64
)

// Golden is one golden example: an instance and the outputs it must produce.
type Golden struct {
	Instance  yaml.Node            `yaml:"instance"`
	Expect    map[string]yaml.Node `yaml:"expect"` // numbers, or a labelled output's label
	Tolerance *float64             `yaml:"tolerance,omitempty"`
}

// Duration is a time.Duration written as a string ("50ms") in YAML.
type Duration = strictyaml.Duration

// Size is a number of bytes written as a string ("64MiB") in YAML.
type Size = strictyaml.Size

// Problem is one thing wrong with a package file.
type Problem = strictyaml.Problem

// Error collects every problem found in one file.
type Error = strictyaml.Error

// GoldenCase is a golden example compiled against the schema.
type GoldenCase struct {
	Row       []float32          // preprocessed features
	Tokens    []int64            // sequence schemas: the token ids (Row is nil)
	Expect    map[string]float64 // output field -> expected value
	Tolerance float64
}

// Spec is a validated manifest with its compiled schema and golden rows.
type Spec struct {
	Manifest Manifest
	Schema   *schema.Schema
	Golden   []GoldenCase
	// OutputNames are the answer's columns: the model's (output.fields),
	// then those postprocess: adds. What transports, records and golden
	// examples name.
	OutputNames []string
	// ModelOutputs are output.fields: the columns the model computes.
	ModelOutputs []string
	// Post is the compiled postprocess: (an empty chain without it);
	// Post.Apply turns the model's columns into OutputNames.
	Post *postproc.Chain
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// ValidName says whether name is a model name: lowercase letters, digits
// and '-', starting with a letter or digit, at most 63 characters.
//
// A loop, not nameRE: it runs on every predict call (the regexp cost 1 %
// of a core at 28k calls a second); TestValidName checks both agree.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0) {
			return false
		}
	}
	return true
}

// Parse decodes and validates model.yaml. file names the file in messages.
func Parse(file string, data []byte) (*Spec, error) {
	if len(data) > MaxManifestBytes {
		return nil, &Error{File: file, Problems: []Problem{{Message: fmt.Sprintf("is %d bytes, the limit is %d", len(data), MaxManifestBytes)}}}
	}
	var m Manifest
	idx, err := strictyaml.Decode(file, data, &m)
	if err != nil {
		return nil, err
	}
	spec, probs := validate(&m)
	if len(probs) > 0 {
		for i := range probs {
			probs[i].Line = idx.Line(probs[i].Path)
		}
		return nil, &Error{File: file, Problems: probs}
	}
	return spec, nil
}

// checkPlacement fills in placement's defaults and checks its bounds
// against each other and serving.replicas (the replicas a version starts
// with when it is loaded). replicasSet says serving.replicas was written:
// an unwritten one grows to minReplicas.
func checkPlacement(m *Manifest, replicasSet bool) []Problem {
	var probs []Problem
	add := func(path, format string, args ...any) {
		probs = append(probs, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	p, s := &m.Placement, &m.Serving
	if p.Tier == "" {
		p.Tier = TierWarm
	}
	switch p.Tier {
	case TierHot, TierWarm, TierCold:
	default:
		add("placement.tier", "unknown tier %q (one of: hot, warm, cold)", p.Tier)
		return probs
	}
	if p.MinReplicas == nil {
		n := 0
		if p.Tier == TierHot {
			n = 1
		}
		p.MinReplicas = &n
	}
	lo := *p.MinReplicas
	switch {
	case lo < 0 || lo > MaxReplicas:
		add("placement.minReplicas", "must be between 0 and %d, got %d", MaxReplicas, lo)
		return probs
	case p.Tier == TierHot && lo < 1:
		add("placement.minReplicas", "a hot version is always loaded: must be >= 1, got %d", lo)
	case p.Tier == TierCold && lo > 0:
		add("placement.minReplicas", "a cold version is loaded by its first request: must be 0, got %d (use tier: warm or hot to keep replicas loaded)", lo)
	}
	if !replicasSet && lo > s.Replicas {
		s.Replicas = lo
	}
	if p.MaxReplicas == 0 {
		p.MaxReplicas = max(s.Replicas, lo, 1)
	}
	switch hi := p.MaxReplicas; {
	case hi < 1 || hi > MaxReplicas:
		add("placement.maxReplicas", "must be between 1 and %d, got %d", MaxReplicas, hi)
	case hi < lo:
		add("placement.maxReplicas", "must be >= placement.minReplicas (%d), got %d", lo, hi)
	case s.Replicas > hi:
		add("serving.replicas", "must be <= placement.maxReplicas (%d), got %d: the replicas a version starts with are within its bounds", hi, s.Replicas)
	case replicasSet && s.Replicas < lo:
		add("serving.replicas", "must be >= placement.minReplicas (%d), got %d", lo, s.Replicas)
	}
	return probs
}

// checkSequence checks what depends on the schema being a sequence field:
// serving.lengthBuckets and serving.padValue apply to sequence inputs only,
// and drift monitoring (per-feature histograms) does not apply to them.
func checkSequence(m *Manifest, sch *schema.Schema) []Problem {
	var probs []Problem
	add := func(path, format string, args ...any) {
		probs = append(probs, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	s := &m.Serving
	name, maxLen, isSeq := sch.Sequence()
	if !isSeq {
		if len(s.LengthBuckets) > 0 {
			add("serving.lengthBuckets", "applies to sequence inputs only (no input field has type sequence)")
		}
		if s.PadValue != nil {
			add("serving.padValue", "applies to sequence inputs only (no input field has type sequence)")
		}
		return probs
	}
	for i, b := range s.LengthBuckets {
		p := fmt.Sprintf("serving.lengthBuckets[%d]", i)
		switch {
		case b < 1:
			add(p, "must be >= 1, got %d", b)
		case i > 0 && b <= s.LengthBuckets[i-1]:
			add(p, "buckets must be strictly increasing, got %d after %d", b, s.LengthBuckets[i-1])
		}
	}
	if n := len(s.LengthBuckets); n > 0 && s.LengthBuckets[n-1] < maxLen {
		add(fmt.Sprintf("serving.lengthBuckets[%d]", n-1), "the last bucket (%d) must be >= %s's maxLength (%d)", s.LengthBuckets[n-1], name, maxLen)
	}
	if len(s.LengthBuckets) > 64 {
		add("serving.lengthBuckets", "has %d buckets, at most 64 are allowed", len(s.LengthBuckets))
	}
	if v := s.PadValue; v != nil && (*v < 0 || *v >= 1<<31) {
		add("serving.padValue", "must be a token id in [0, 2^31), got %d", *v)
	}
	if m.Drift != nil {
		add("drift", "drift monitoring compares feature histograms and does not apply to sequence inputs; remove drift:")
	}
	return probs
}

func fieldOf(err error, fallback string) string {
	if e := errs.As(err); e.Field != "" {
		return e.Field
	}
	return fallback
}

func msgOf(err error) string { return errs.As(err).Message }

// Package is a model package read from a folder or an upload.
type Package struct {
	Spec         *Spec
	ManifestYAML []byte
	Artifact     []byte
	ArtifactSHA  string // hex SHA-256 of Artifact
	// Reference is the drift reference sample (nil without drift:).
	Reference    []byte
	ReferenceSHA string
	// Digest identifies the package's content: SHA-256 over model.yaml and
	// the artifact hash. Publishing the same digest twice is a no-op.
	Digest string

	// An upload (ReadTarGz) keeps the artifact and the reference in
	// temporary files instead of Artifact and Reference; Close deletes them.
	artifactPath, referencePath string
	artifactSize, referenceSize int64
}

// ArtifactSize is the artifact's size in bytes.
func (p *Package) ArtifactSize() int64 {
	if p.artifactPath != "" {
		return p.artifactSize
	}
	return int64(len(p.Artifact))
}

// ReferenceSize is the drift reference's size in bytes (0 without one).
func (p *Package) ReferenceSize() int64 {
	if p.referencePath != "" {
		return p.referenceSize
	}
	return int64(len(p.Reference))
}

// OpenArtifact returns a reader of the artifact, wherever it is held.
func (p *Package) OpenArtifact() (io.ReadCloser, error) {
	return open(p.artifactPath, p.Artifact)
}

// OpenReference returns a reader of the drift reference (empty without one).
func (p *Package) OpenReference() (io.ReadCloser, error) {
	return open(p.referencePath, p.Reference)
}

func open(file string, b []byte) (io.ReadCloser, error) {
	if file == "" {
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	return os.Open(file)
}

// Close deletes the temporary files of an upload; a package read from a
// folder holds none.
func (p *Package) Close() error {
	var err error
	for _, f := range []string{p.artifactPath, p.referencePath} {
		if f == "" {
			continue
		}
		if e := os.Remove(f); e != nil && !errors.Is(e, fs.ErrNotExist) {
			err = errors.Join(err, e)
		}
	}
	p.artifactPath, p.referencePath = "", ""
	return err
}

// FromFiles builds a package from its files (name -> content). dir names the
// package in messages.
func FromFiles(dir string, files map[string][]byte) (*Package, error) {
	man, ok := files[ManifestFile]
	if !ok {
		return nil, &Error{File: dir, Problems: []Problem{{Message: "no model.yaml in the package"}}}
	}
	spec, err := Parse(joinFile(dir, ManifestFile), man)
	if err != nil {
		return nil, err
	}
	art, ok := files[spec.Manifest.Artifact]
	if !ok {
		return nil, &Error{File: joinFile(dir, ManifestFile), Problems: []Problem{{Path: "artifact", Message: fmt.Sprintf("file %q is not in the package", spec.Manifest.Artifact)}}}
	}
	sum := sha256.Sum256(art)
	p := &Package{Spec: spec, ManifestYAML: man, Artifact: art, ArtifactSHA: hex.EncodeToString(sum[:])}
	if d := spec.Manifest.Drift; d != nil {
		ref, ok := files[d.Reference]
		if !ok {
			return nil, &Error{File: joinFile(dir, ManifestFile), Problems: []Problem{{Path: "drift.reference", Message: fmt.Sprintf("file %q is not in the package", d.Reference)}}}
		}
		rs := sha256.Sum256(ref)
		p.Reference, p.ReferenceSHA = ref, hex.EncodeToString(rs[:])
	}
	p.Digest = digest(man, p.ArtifactSHA+p.ReferenceSHA)
	return p, nil
}

func digest(manifest []byte, artifactSHA string) string {
	h := sha256.New()
	io.WriteString(h, "sluice-package-v1\n")
	fmt.Fprintf(h, "%d\n", len(manifest))
	h.Write(manifest)
	io.WriteString(h, artifactSHA)
	return hex.EncodeToString(h.Sum(nil))
}

func joinFile(dir, name string) string {
	if dir == "" {
		return name
	}
	return strings.TrimSuffix(dir, "/") + "/" + name
}
