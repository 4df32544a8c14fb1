// Package hosting turns one published version into a running
// serving.Server: load the artifact into the runtime (as many replicas as
// asked), check each model's shape against the schema, run the golden
// examples, warm up (seeding the service-time model), and only then hand
// the server over. The gateway's process (replicas in process) and every
// worker process (`sluice worker`) host versions with this one code, so a
// version is checked the same way wherever it runs. It knows nothing of
// the registry, tenants, deployments or transports: it is given the
// manifest's Spec and the artifact's bytes, already verified.
package hosting

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/serving"
)

// Config is one version to host.
type Config struct {
	ID       string // "fraud@3", for messages and logs
	Spec     *modelpkg.Spec
	Runtime  string
	Artifact []byte // verified bytes
	Replicas int    // 0: the manifest's serving.replicas
	Logger   *slog.Logger
	Observer serving.Observer // nil: none
	CPUs     *serving.CPUs    // the process's model CPUs (nil: no bound)
}

// Timings are how long each step of a start took.
type Timings struct {
	Load, Golden, Warmup time.Duration
}

// Start loads cfg.Replicas models, checks them and starts their server.
// The returned server has passed the golden examples and is warm. A
// crashed replica is later replaced by loading the same bytes again and
// checking the golden examples again.
func Start(ctx context.Context, cfg Config) (*serving.Server, Timings, error) {
	var tm Timings
	spec := cfg.Spec
	sv := spec.Manifest.Serving
	n := cfg.Replicas
	if n <= 0 {
		n = sv.Replicas
	}
	n = max(n, 1)
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	t0 := time.Now()
	var models []runtime.Model
	closeAll := func() {
		for _, m := range models {
			_ = m.Close()
		}
	}
	for i := 0; i < n; i++ {
		m, err := LoadModel(ctx, cfg.ID, cfg.Runtime, spec, cfg.Artifact)
		if err != nil {
			closeAll()
			return nil, tm, err
		}
		models = append(models, m)
	}
	tm.Load = time.Since(t0)
	t1 := time.Now()
	for _, m := range models {
		if err := CheckGolden(ctx, cfg.ID, spec, m); err != nil {
			closeAll()
			return nil, tm, err
		}
	}
	tm.Golden = time.Since(t1)
	loader := func(ctx context.Context) (runtime.Model, error) {
		m, err := LoadModel(ctx, cfg.ID, cfg.Runtime, spec, cfg.Artifact)
		if err != nil {
			return nil, err
		}
		if err := CheckGolden(ctx, cfg.ID, spec, m); err != nil {
			_ = m.Close()
			return nil, err
		}
		return m, nil
	}
	srv := serving.New(serving.Config{
		Name: cfg.ID, MaxBatchSize: sv.MaxBatchSize, MaxBatchDelay: sv.MaxBatchDelay.Duration,
		MaxQueueInstances: sv.MaxQueueInstances, Logger: log, Load: loader, Observer: cfg.Observer,
		LengthBuckets: sv.LengthBuckets, SeqInputs: len(spec.Schema.SequenceFields()), CPUs: cfg.CPUs,
	}, models)
	t2 := time.Now()
	if err := warmup(ctx, spec, models[0], srv); err != nil {
		_ = srv.Close(context.Background())
		return nil, tm, fmt.Errorf("warmup %s: %w", cfg.ID, err)
	}
	tm.Warmup = time.Since(t2)
	return srv, tm, nil
}

// LoadModel loads one model from verified artifact bytes and checks its
// shape against the schema.
func LoadModel(ctx context.Context, id, runtimeName string, spec *modelpkg.Spec, art []byte) (runtime.Model, error) {
	rt, err := runtime.Lookup(runtimeName)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", id, err)
	}
	m, err := safeLoad(ctx, rt, RuntimeSpec(id, spec), art)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", id, err)
	}
	if err := CheckShape(spec, m.Info()); err != nil {
		_ = m.Close()
		return nil, fmt.Errorf("load %s: %w", id, err)
	}
	return m, nil
}

// RuntimeSpec is what the runtime is told of the version it loads.
func RuntimeSpec(name string, spec *modelpkg.Spec) runtime.Spec {
	rs := runtime.Spec{Name: name, Artifact: spec.Manifest.Artifact, Features: spec.Schema.Width(), Outputs: len(spec.ModelOutputs)}
	if spec.Manifest.ONNX != nil {
		rs.Session = *spec.Manifest.ONNX
	}
	if _, _, ok := spec.Schema.Sequence(); ok {
		rs.Sequence = true
		if pv := spec.Manifest.Serving.PadValue; pv != nil {
			rs.PadValue = *pv
		}
		for _, f := range spec.Schema.SequenceFields() {
			in := runtime.SeqInput{Name: f.Name, DType: f.DType, Pad: rs.PadValue, Mask: f.Mask}
			if in.DType == "" {
				in.DType = schema.DTypeInt64
			}
			if f.Mask {
				in.Pad = 0
			}
			rs.SeqInputs = append(rs.SeqInputs, in)
		}
	}
	return rs
}

func safeLoad(ctx context.Context, rt runtime.Runtime, s runtime.Spec, art []byte) (m runtime.Model, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("runtime panicked while loading the artifact: %v", p)
		}
	}()
	return rt.Load(ctx, s, art)
}

// CheckShape compares what a loaded model reads and produces with the
// schema: the width, the outputs, and the order of the columns when the
// artifact names them (CheckFieldOrder).
func CheckShape(spec *modelpkg.Spec, info runtime.Info) error {
	if name, _, ok := spec.Schema.Sequence(); ok || info.Sequence {
		// Sequence models read token rows: no feature count to compare.
		switch {
		case ok && !info.Sequence:
			return fmt.Errorf("input field %q is a sequence of token ids but the model does not read token ids (%s)", name, info.Detail)
		case !ok && info.Sequence:
			return fmt.Errorf("the model reads token ids but no input field has type sequence (%v)", spec.Schema.Features())
		case max(info.SeqInputs, 1) != len(spec.Schema.SequenceFields()):
			return fmt.Errorf("the model reads %d sequence inputs but the schema has %d sequence fields (%s)", max(info.SeqInputs, 1), len(spec.Schema.SequenceFields()), info.Detail)
		}
	} else if info.Inputs > 0 && info.Inputs != spec.Schema.Width() {
		return fmt.Errorf("the model reads %d features but the schema produces %d after preprocessing (%v)", info.Inputs, spec.Schema.Width(), spec.Schema.Features())
	}
	if info.Outputs != len(spec.ModelOutputs) {
		return fmt.Errorf("the model produces %d output columns but output.fields names %d (%v)", info.Outputs, len(spec.ModelOutputs), spec.ModelOutputs)
	}
	return CheckFieldOrder(spec, info)
}

// GoldenResult is one compared output of one golden example.
type GoldenResult struct {
	Example   int
	Output    string
	Got, Want float64
	Tolerance float64
	OK        bool
	// Labels: a labelled output (postprocess:): Got and Want are indices
	// into them.
	Labels []string
}

// GotText is Got as a message shows it: a number in plain digits, or a
// labelled output's label.
func (r GoldenResult) GotText() string {
	if r.Labels != nil {
		return labelText(r.Labels, r.Got)
	}
	return strconv.FormatFloat(r.Got, 'f', -1, 32)
}

// WantText is Want as a message shows it.
func (r GoldenResult) WantText() string {
	if r.Labels != nil {
		return labelText(r.Labels, r.Want)
	}
	return strconv.FormatFloat(r.Want, 'f', -1, 64)
}

func labelText(labels []string, v float64) string {
	if v != v || v < 0 || int(v) >= len(labels) {
		return "no label"
	}
	return strconv.Quote(labels[int(v)])
}

// CompareGolden runs the golden examples on m and compares every expected
// output within its tolerance.
func CompareGolden(ctx context.Context, spec *modelpkg.Spec, m runtime.Model) ([]GoldenResult, error) {
	if len(spec.Golden) == 0 {
		return nil, nil
	}
	raw, err := PredictGolden(ctx, spec, m)
	if err != nil {
		return nil, err
	}
	out := spec.Post.Apply(raw) // the golden examples expect the answer's outputs
	var res []GoldenResult
	for i, g := range spec.Golden {
		row := out.Row(i)
		names := make([]string, 0, len(g.Expect))
		for k := range g.Expect {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			got := float64(row[indexOf(spec.OutputNames, k)])
			want := g.Expect[k]
			j := indexOf(spec.OutputNames, k)
			var labels []string
			if cols := spec.Post.Columns(); j < len(cols) {
				labels = cols[j].Labels
			}
			res = append(res, GoldenResult{Example: i, Output: k, Got: got, Want: want, Tolerance: g.Tolerance, OK: math.Abs(got-want) <= g.Tolerance, Labels: labels})
		}
	}
	return res, nil
}

// CheckGolden fails with the first golden mismatch.
func CheckGolden(ctx context.Context, id string, spec *modelpkg.Spec, m runtime.Model) error {
	res, err := CompareGolden(ctx, spec, m)
	if err != nil {
		return fmt.Errorf("golden examples of %s: %w", id, err)
	}
	for _, r := range res {
		if !r.OK {
			return fmt.Errorf("golden example %d of %s: %s = %s, expected %s (tolerance %s)", r.Example, id, r.Output,
				r.GotText(), r.WantText(), strconv.FormatFloat(r.Tolerance, 'f', -1, 64))
		}
	}
	return nil
}

// LoadPackage loads a package's model straight from its bytes (for
// `sluice check`) and checks its shape against the schema.
func LoadPackage(ctx context.Context, p *modelpkg.Package) (runtime.Model, error) {
	rt, err := runtime.Lookup(p.Spec.Manifest.Runtime)
	if err != nil {
		return nil, err
	}
	m, err := safeLoad(ctx, rt, RuntimeSpec(p.Spec.Manifest.Name, p.Spec), p.Artifact)
	if err != nil {
		return nil, err
	}
	if err := CheckShape(p.Spec, m.Info()); err != nil {
		_ = m.Close()
		return nil, err
	}
	return m, nil
}

// PredictGolden predicts the golden rows in one batch: the model's
// outputs, before postprocess:.
func PredictGolden(ctx context.Context, spec *modelpkg.Spec, m runtime.Model) (runtime.Output, error) {
	w := spec.Schema.Width()
	b := runtime.Batch{Rows: len(spec.Golden), Cols: w, Data: make([]float32, 0, len(spec.Golden)*w)}
	for _, g := range spec.Golden {
		b.Data = append(b.Data, g.Row...)
		if g.Tokens != nil {
			b.Tokens = append(b.Tokens, g.Tokens)
		}
	}
	out, err := SafePredict(ctx, m, b)
	if err != nil {
		return out, err
	}
	if out.Rows != b.Rows || out.Cols != len(spec.ModelOutputs) || len(out.Data) != out.Rows*out.Cols {
		return out, fmt.Errorf("runtime returned %d×%d outputs for %d rows", out.Rows, out.Cols, b.Rows)
	}
	return out, nil
}

// SafePredict calls m.Predict, turning a panic into an error.
func SafePredict(ctx context.Context, m runtime.Model, b runtime.Batch) (out runtime.Output, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("runtime panicked: %v", p)
		}
	}()
	return m.Predict(ctx, b)
}

func indexOf(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}

// warmup runs batches of several sizes to warm caches and seed the server's
// service-time model.
func warmup(ctx context.Context, spec *modelpkg.Spec, m runtime.Model, srv *serving.Server) error {
	n := *spec.Manifest.Serving.WarmupBatches
	if n == 0 {
		return nil
	}
	w := spec.Schema.Width()
	maxB := spec.Manifest.Serving.MaxBatchSize
	sizes := []int{1, max(1, maxB/2), maxB}
	var src []float32
	var toks [][]int64 // sequence models: golden token rows, or one pad id
	for _, g := range spec.Golden {
		src = append(src, g.Row...)
		if g.Tokens != nil {
			toks = append(toks, g.Tokens)
		}
	}
	if len(src) == 0 {
		src = make([]float32, w)
	}
	_, _, seq := spec.Schema.Sequence()
	if seq && len(toks) == 0 {
		// The pad id is always a valid input: the runtime pads with it. A
		// mask field's one value is 1 (the pad id counts).
		var pad int64
		if pv := spec.Manifest.Serving.PadValue; pv != nil {
			pad = *pv
		}
		var row []int64
		for _, f := range spec.Schema.SequenceFields() {
			if f.Mask {
				row = append(row, 1)
			} else {
				row = append(row, pad)
			}
		}
		toks = [][]int64{row}
	}
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		size := sizes[i%len(sizes)]
		b := runtime.Batch{Rows: size, Cols: w, Data: make([]float32, size*w)}
		if seq {
			for j := 0; j < size; j++ {
				b.Tokens = append(b.Tokens, toks[j%len(toks)])
			}
		} else {
			for j := 0; j < size*w; j += len(src) {
				copy(b.Data[j:], src)
			}
		}
		t := time.Now()
		if _, err := SafePredict(ctx, m, b); err != nil {
			return err
		}
		srv.Observe(size, time.Since(t))
	}
	return nil
}

// UpdateGolden runs p's golden examples on m and rewrites the expected
// outputs in p's model.yaml with what m answers (only the numbers change;
// see modelpkg.SetGoldenExpect). It returns the new model.yaml and, per
// example and output, the old value (Want) and the new one (Got). It
// refuses a package without golden examples, and checks that the new
// manifest parses and that m passes its golden examples before returning.
func UpdateGolden(ctx context.Context, file string, p *modelpkg.Package, m runtime.Model) ([]byte, []GoldenResult, error) {
	if len(p.Spec.Golden) == 0 {
		return nil, nil, fmt.Errorf("%s: no golden examples to update; add golden: with instances and the outputs to expect (docs/model-yaml.md)", file)
	}
	res, err := CompareGolden(ctx, p.Spec, m)
	if err != nil {
		return nil, nil, err
	}
	var vals []modelpkg.GoldenValue
	for _, r := range res {
		if isLabel(p.Spec, r.Output) {
			continue // a label is written by hand, not rewritten as a number
		}
		if float32(r.Got) != float32(r.Want) { // a value that reads as the same float32 keeps its text
			vals = append(vals, modelpkg.GoldenValue{Example: r.Example, Output: r.Output, Value: r.Got})
		}
	}
	out, err := modelpkg.SetGoldenExpect(file, p.ManifestYAML, vals)
	if err != nil {
		return nil, nil, err
	}
	spec, err := modelpkg.Parse(file, out)
	if err != nil {
		return nil, nil, fmt.Errorf("the updated manifest does not parse (nothing written): %w", err)
	}
	if err := CheckGolden(ctx, spec.Manifest.Name, spec, m); err != nil {
		return nil, nil, fmt.Errorf("the updated golden examples do not pass (nothing written): %w", err)
	}
	return out, res, nil
}

// isLabel says whether output name is a labelled column of the answer.
func isLabel(spec *modelpkg.Spec, name string) bool {
	for _, c := range spec.Post.Columns() {
		if c.Name == name {
			return c.Labels != nil
		}
	}
	return false
}
