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
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluiceml/sluice/internal/errs"
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
	Serving     Serving       `yaml:"serving,omitempty"`
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
	// ONNX holds ONNX Runtime session options (runtime: onnx only).
	ONNX *runtime.SessionOptions `yaml:"onnx,omitempty"`
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
	Instance  yaml.Node          `yaml:"instance"`
	Expect    map[string]float64 `yaml:"expect"`
	Tolerance *float64           `yaml:"tolerance,omitempty"`
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
	// OutputIndex maps output field names to columns.
	OutputNames []string
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

func validate(m *Manifest) (*Spec, []Problem) {
	var probs []Problem
	add := func(path, format string, args ...any) {
		probs = append(probs, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case m.Name == "":
		add("name", "is required")
	case !ValidName(m.Name):
		add("name", "%q is not a valid model name (lowercase letters, digits and '-', starting with a letter or digit, at most 63 characters)", m.Name)
	}
	if m.Runtime == "" {
		add("runtime", "is required (one of: %s)", strings.Join(runtime.Names(), ", "))
	} else if _, err := runtime.Lookup(m.Runtime); err != nil {
		add("runtime", "unknown runtime %q (one of: %s)", m.Runtime, strings.Join(runtime.Names(), ", "))
	}
	switch {
	case m.Artifact == "":
		add("artifact", "is required: the file name of the model artifact in the package")
	case m.Artifact == ManifestFile || strings.ContainsAny(m.Artifact, `/\`) || m.Artifact == "." || m.Artifact == ".." || strings.HasPrefix(m.Artifact, "."):
		add("artifact", "%q must be a plain file name inside the package (no directories, not hidden, not model.yaml)", m.Artifact)
	}
	if d := m.Drift; d != nil {
		switch {
		case d.Reference == "":
			add("drift.reference", "is required: a file in the package with one JSON instance per line")
		case strings.ContainsAny(d.Reference, `/\`) || strings.HasPrefix(d.Reference, ".") || d.Reference == ManifestFile || d.Reference == m.Artifact:
			add("drift.reference", "%q must be a plain file name inside the package, other than model.yaml and the artifact", d.Reference)
		}
		if d.Bins == 0 {
			d.Bins = 10
		}
		if d.Bins < 2 || d.Bins > 100 {
			add("drift.bins", "must be between 2 and 100, got %d", d.Bins)
		}
		if d.Window.Duration == 0 {
			d.Window.Duration = 10 * time.Minute
		}
		if d.Window.Duration < time.Second || d.Window.Duration > 7*24*time.Hour {
			add("drift.window", "must be between 1s and 168h, got %s", d.Window)
		}
		if d.MinSamples == 0 {
			d.MinSamples = 100
		}
		if d.MinSamples < 1 {
			add("drift.minSamples", "must be >= 1, got %d", d.MinSamples)
		}
	}
	if lg := m.Logging; lg != nil {
		if !(lg.SampleRate >= 0 && lg.SampleRate <= 1) {
			add("logging.sampleRate", "must be between 0 and 1, got %v", lg.SampleRate)
		}
		if len(lg.Fields) == 0 {
			add("logging.fields", "must name the input fields to store (only named fields are ever stored)")
		}
		declared := map[string]bool{}
		for _, f := range m.Input.Fields {
			declared[f.Name] = true
		}
		for i, f := range lg.Fields {
			if !declared[f] {
				add(fmt.Sprintf("logging.fields[%d]", i), "%q is not an input field", f)
			}
		}
	}
	if m.Release != nil {
		probs = append(probs, m.Release.Check("release")...)
		m.Release.Defaults()
	}
	if m.ONNX != nil {
		if m.Runtime != "onnx" {
			add("onnx", "session options apply to runtime onnx only (runtime is %q)", m.Runtime)
		}
		if m.ONNX.IntraOpThreads < 0 || m.ONNX.IntraOpThreads > 256 {
			add("onnx.intraOpThreads", "must be between 0 (default) and 256, got %d", m.ONNX.IntraOpThreads)
		}
		if m.ONNX.InterOpThreads < 0 || m.ONNX.InterOpThreads > 256 {
			add("onnx.interOpThreads", "must be between 0 (default) and 256, got %d", m.ONNX.InterOpThreads)
		}
	}
	if m.Input.Schema == "" {
		add("input.schema", "is required (a schema version like \"fraud-input@3\"); it is echoed as schemaVersion")
	}
	if m.Output.Schema == "" {
		add("output.schema", "is required (a schema version like \"fraud-output@1\")")
	}
	outNames := make([]string, len(m.Output.Fields))
	outIdx := map[string]int{}
	if len(m.Output.Fields) == 0 {
		add("output.fields", "must name at least one output column")
	}
	for i, f := range m.Output.Fields {
		p := fmt.Sprintf("output.fields[%d].name", i)
		if f.Name == "" {
			add(p, "is required")
		} else if _, dup := outIdx[f.Name]; dup {
			add(p, "duplicate output name %q", f.Name)
		}
		outIdx[f.Name] = i
		outNames[i] = f.Name
	}
	s := &m.Serving
	if s.MaxInstancesPerRequest == 0 {
		s.MaxInstancesPerRequest = DefaultMaxInstancesPerRequest
	}
	if s.MaxInstancesPerRequest < 0 || s.MaxInstancesPerRequest > 1_000_000 {
		add("serving.maxInstancesPerRequest", "must be between 1 and 1000000, got %d", s.MaxInstancesPerRequest)
	}
	if s.DefaultDeadline.Duration == 0 {
		s.DefaultDeadline.Duration = DefaultDeadline
	}
	if s.DefaultDeadline.Duration < 0 {
		add("serving.defaultDeadline", "must be > 0, got %s", s.DefaultDeadline)
	}
	replicasSet := s.Replicas != 0
	if s.Replicas == 0 {
		s.Replicas = DefaultReplicas
	}
	if s.Replicas < 0 || s.Replicas > MaxReplicas {
		add("serving.replicas", "must be between 1 and %d, got %d", MaxReplicas, s.Replicas)
	}
	if s.Memory != nil && s.Memory.Bytes == 0 {
		add("serving.memory", "must be more than 0 (leave it out to use the estimate from the artifact's size)")
	}
	probs = append(probs, checkPlacement(m, replicasSet)...)
	if s.MaxBatchSize == 0 {
		s.MaxBatchSize = DefaultMaxBatchSize
	}
	if s.MaxBatchSize < 0 || s.MaxBatchSize > 1_000_000 {
		add("serving.maxBatchSize", "must be between 1 and 1000000, got %d", s.MaxBatchSize)
	}
	if s.MaxBatchDelay.Duration < 0 || s.MaxBatchDelay.Duration > time.Second {
		add("serving.maxBatchDelay", "must be between 0 (opportunistic batching) and 1s, got %s", s.MaxBatchDelay)
	}
	if s.MaxQueueInstances == 0 {
		// The default grows to fit an explicit maxInstancesPerRequest: one
		// full-size request must always be queueable.
		s.MaxQueueInstances = max(DefaultMaxQueueInstances, s.MaxInstancesPerRequest)
	}
	if s.MaxQueueInstances < 0 {
		add("serving.maxQueueInstances", "must be > 0, got %d", s.MaxQueueInstances)
	} else if s.MaxQueueInstances < s.MaxInstancesPerRequest {
		add("serving.maxQueueInstances", "must be >= serving.maxInstancesPerRequest (%d), got %d: a full-size request could never be queued", s.MaxInstancesPerRequest, s.MaxQueueInstances)
	}
	if s.WarmupBatches == nil {
		n := DefaultWarmupBatches
		s.WarmupBatches = &n
	}
	if w := *s.WarmupBatches; w < 0 || w > 10_000 {
		add("serving.warmupBatches", "must be between 0 (no warmup) and 10000, got %d", w)
	}

	sch, sprobs := schema.Compile(m.Input.Fields, m.Preprocess)
	for _, p := range sprobs {
		add(p.Path, "%s", p.Message)
	}
	if sch != nil {
		probs = append(probs, checkSequence(m, sch)...)
	}
	spec := &Spec{Manifest: *m, Schema: sch, OutputNames: outNames}
	if sch == nil {
		return nil, probs
	}
	for i, g := range m.Golden {
		p := fmt.Sprintf("golden[%d]", i)
		if g.Instance.Kind != yaml.MappingNode {
			add(p+".instance", "must be a mapping of input field names to values")
			continue
		}
		keys := make([]string, 0, len(g.Instance.Content)/2)
		vals := map[string]any{}
		bad := false
		for j := 0; j+1 < len(g.Instance.Content); j += 2 {
			k := g.Instance.Content[j].Value
			var v any
			if err := g.Instance.Content[j+1].Decode(&v); err != nil {
				add(p+".instance."+k, "%v", err)
				bad = true
				continue
			}
			keys = append(keys, k)
			vals[k] = v
		}
		if bad {
			continue
		}
		inst, err := schema.InstanceOf(keys, vals)
		if err != nil {
			add(p+".instance", "%v", err)
			continue
		}
		var row []float32
		var toks []int64
		if _, _, isSeq := sch.Sequence(); isSeq {
			toks, err = sch.Tokens(p+".instance", inst)
		} else {
			row = make([]float32, sch.Width())
			err = sch.Row(p+".instance", inst, row)
		}
		if err != nil {
			probs = append(probs, Problem{Path: fieldOf(err, p+".instance"), Message: msgOf(err)})
			continue
		}
		if len(g.Expect) == 0 {
			add(p+".expect", "must name at least one output and its expected value")
		}
		keysOut := make([]string, 0, len(g.Expect))
		for k := range g.Expect {
			keysOut = append(keysOut, k)
		}
		sort.Strings(keysOut)
		for _, k := range keysOut {
			if _, ok := outIdx[k]; !ok {
				add(p+".expect."+k, "unknown output %q (outputs: %s)", k, strings.Join(outNames, ", "))
			}
			if v := g.Expect[k]; math.IsNaN(v) || math.IsInf(v, 0) {
				add(p+".expect."+k, "must be a finite number")
			}
		}
		tol := 1e-6
		if g.Tolerance != nil {
			tol = *g.Tolerance
			if !(tol >= 0) || math.IsInf(tol, 0) {
				add(p+".tolerance", "must be a finite number >= 0, got %v", tol)
			}
		}
		spec.Golden = append(spec.Golden, GoldenCase{Row: row, Tokens: toks, Expect: g.Expect, Tolerance: tol})
	}
	if len(probs) > 0 {
		return nil, probs
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
