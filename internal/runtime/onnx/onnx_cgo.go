//go:build cgo

package onnx

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/sluiceml/sluice/internal/runtime"
)

// Available reports whether this build can run ONNX models (it has cgo).
const Available = true

var (
	envMu      sync.Mutex
	envReady   bool
	envVersion string
	envLibrary string
)

// ensureEnvironment loads the shared library and creates ONNX Runtime's
// process-global environment, once. A failure is not remembered: the next
// load tries again (the library may have been installed meanwhile). The
// environment is never destroyed: models may be loaded at any time.
func ensureEnvironment() error {
	envMu.Lock()
	defer envMu.Unlock()
	if envReady {
		return nil
	}
	path, source, err := resolveLibrary(libraryPathSetting(), os.Getenv(EnvLibrary), StandardLocations(), fileExists)
	if err != nil {
		return err
	}
	if source != "standard location" && !fileExists(path) {
		return fmt.Errorf("onnx: %w: %s names %s, which does not exist; %s", errNoLibrary, source, path, libraryHint())
	}
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(); err != nil {
		return fmt.Errorf("onnx: %w: loading %s (from %s) failed: %v; %s", errNoLibrary, path, source, err, libraryHint())
	}
	envReady, envVersion, envLibrary = true, ort.GetVersion(), path
	return nil
}

// LibraryInfo returns the loaded library's path and ONNX Runtime's version,
// or "" before the first ONNX model loads.
func LibraryInfo() (path, version string) {
	envMu.Lock()
	defer envMu.Unlock()
	return envLibrary, envVersion
}

// Model is one ONNX Runtime session: one per replica. It keeps its input
// and output tensors per batch shape (tensorCache): one of floats for a
// tabular model, one of token ids for a sequence model.
type Model struct {
	name string
	c    *Contract
	info runtime.Info
	pads []int64 // sequence models: what each input's padded positions hold

	mu       sync.Mutex // guards sess, the caches and closed: Close against Predict
	sess     *ort.DynamicAdvancedSession
	floats   *tensorCache[float32]
	tokens   *tensorCache[int64] // int64 sequence inputs
	tokens32 *tensorCache[int32] // int32 sequence inputs
	closed   bool
}

// Load checks the model's tensors against the package and creates a session.
func (Runtime) Load(ctx context.Context, spec runtime.Spec, data []byte) (runtime.Model, error) {
	if err := ensureEnvironment(); err != nil {
		return nil, err
	}
	mi, err := ReadModelInfo(data)
	if err != nil {
		return nil, fmt.Errorf("onnx: not a valid ONNX model: %v", err)
	}
	c, err := CheckContract(mi, spec.Features, spec.Outputs)
	if err != nil {
		return nil, fmt.Errorf("onnx: %v", err)
	}
	if spec.Sequence && !c.Sequence {
		return nil, fmt.Errorf("onnx: model.yaml declares a sequence field but input %q is %s %s; a sequence model's input is int64 token ids [batch, seq]", c.Input.Name, c.Input.TypeString(), c.Input.ShapeString())
	}
	if !spec.Sequence && len(c.Inputs) > 1 {
		return nil, fmt.Errorf("onnx: the model has %d integer inputs [batch, seq] (%s) but model.yaml declares no sequence field; declare one sequence field per input, named as it", len(c.Inputs), inputNames(c.Inputs))
	}
	if err := c.Bind(spec.SeqInputs); err != nil {
		return nil, fmt.Errorf("onnx: %v", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	intra, inter := sessionThreads(spec.Session)
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx: session options: %v", err)
	}
	defer opts.Destroy()
	if err := opts.SetIntraOpNumThreads(intra); err != nil {
		return nil, fmt.Errorf("onnx: intraOpThreads %d: %v", intra, err)
	}
	if err := opts.SetInterOpNumThreads(inter); err != nil {
		return nil, fmt.Errorf("onnx: interOpThreads %d: %v", inter, err)
	}
	inputs := []string{c.Input.Name}
	if c.Sequence {
		inputs = inputs[:0]
		for _, t := range c.Inputs {
			inputs = append(inputs, t.Name)
		}
	}
	sess, err := ort.NewDynamicAdvancedSessionWithONNXData(data, inputs, []string{c.Output.Name}, opts)
	if err != nil {
		return nil, fmt.Errorf("onnx: ONNX Runtime could not load the model: %v", err)
	}
	m := &Model{name: spec.Name, sess: sess, c: c}
	if c.Sequence {
		// The pad of each input: its field's (a mask's is 0), else the pad value.
		for i := range c.Inputs {
			pad := spec.PadValue
			if i < len(spec.SeqInputs) {
				pad = spec.SeqInputs[i].Pad
			}
			m.pads = append(m.pads, pad)
		}
	}
	k := int64(c.Outputs)
	outShape := func(n int) ort.Shape { return ort.NewShape(int64(n), k) }
	if c.VectorOutput {
		outShape = func(n int) ort.Shape { return ort.NewShape(int64(n)) }
	}
	switch {
	case c.Sequence && c.Input.ElemType == 6:
		m.tokens32 = newTensorCache[int32](len(c.Inputs), c.Outputs, outShape)
	case c.Sequence:
		m.tokens = newTensorCache[int64](len(c.Inputs), c.Outputs, outShape)
	default:
		m.floats = newTensorCache[float32](1, c.Outputs, outShape)
	}
	producer := mi.Producer
	if producer == "" {
		producer = "unknown producer"
	}
	m.info = runtime.Info{
		Inputs:    c.Features,
		Outputs:   c.Outputs,
		Sequence:  c.Sequence,
		SeqInputs: len(c.Inputs),
		// The artifact's own names for its columns (metadata
		// feature_names), for the check of the package's field order.
		FeatureNames: mi.FeatureNames,
		Detail: fmt.Sprintf("onnx, input %q %s %s, output %q float32 %s, opset %d, %s, ONNX Runtime %s, threads intra %d inter %d",
			c.Input.Name, c.Input.TypeString(), c.Input.ShapeString(), c.Output.Name, c.Output.ShapeString(), mi.Opset, producer, envVersion, intra, inter),
	}
	if len(c.Inputs) > 1 {
		m.info.Detail = fmt.Sprintf("onnx, inputs %s, output %q float32 %s, opset %d, %s, ONNX Runtime %s, threads intra %d inter %d",
			inputNames(c.Inputs), c.Output.Name, c.Output.ShapeString(), mi.Opset, producer, envVersion, intra, inter)
	}
	switch {
	case len(m.pads) == 1:
		m.info.Detail += fmt.Sprintf(", pad value %d", m.pads[0])
	case len(m.pads) > 1:
		m.info.Detail += fmt.Sprintf(", pad values %v", m.pads)
	}
	return m, nil
}

// Info reports the model's shape.
func (m *Model) Info() runtime.Info { return m.info }

// Predict runs the batch through the session: input [n, d], output [n, k]
// (or [n]). The rows are copied into the replica's input tensor for the
// batch's shape and the result copied out of its output tensor into a new
// slice the caller owns; the tensors are made on a shape's first batch and
// reused after (tensorCache).
func (m *Model) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	if m.c.Sequence {
		return m.predictSequence(ctx, in)
	}
	d, k := m.c.Features, m.c.Outputs
	if in.Cols != d {
		return runtime.Output{}, fmt.Errorf("onnx: batch has %d features per row, input %q expects %d", in.Cols, m.c.Input.Name, d)
	}
	if in.Rows < 0 || len(in.Data) != in.Rows*in.Cols {
		return runtime.Output{}, fmt.Errorf("onnx: batch of %d×%d has %d values", in.Rows, in.Cols, len(in.Data))
	}
	if in.Rows == 0 {
		return runtime.Output{Cols: k, Data: []float32{}}, nil
	}
	if err := ctx.Err(); err != nil {
		return runtime.Output{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return runtime.Output{}, m.closedError()
	}
	p, bufs, res, err := m.floats.get(in.Rows, d)
	if err != nil {
		return runtime.Output{}, err
	}
	copy(bufs[0], in.Data)
	return m.runLocked(p, in.Rows, res)
}

// predictSequence pads the batch's token rows to its longest row into the
// replica's [n, L] tensor of each input (a row packs its inputs end to
// end, runtime.Batch), each input's positions past the row padded with
// that input's pad (the pad value; 0 for a mask), and runs them.
func (m *Model) predictSequence(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	if in.Rows < 0 || len(in.Tokens) != in.Rows {
		return runtime.Output{}, fmt.Errorf("onnx: input %q reads token ids: batch of %d rows has %d token rows", m.c.Input.Name, in.Rows, len(in.Tokens))
	}
	k := m.c.Outputs
	if in.Rows == 0 {
		return runtime.Output{Cols: k, Data: []float32{}}, nil
	}
	K := len(m.c.Inputs)
	L := 0
	for i, r := range in.Tokens {
		if len(r) == 0 {
			return runtime.Output{}, fmt.Errorf("onnx: input %q: row %d has no token ids", m.c.Input.Name, i)
		}
		if len(r)%K != 0 {
			return runtime.Output{}, fmt.Errorf("onnx: row %d has %d values, not %d inputs (%s) of one length", i, len(r), K, inputNames(m.c.Inputs))
		}
		L = max(L, len(r)/K)
	}
	if err := ctx.Err(); err != nil {
		return runtime.Output{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return runtime.Output{}, m.closedError()
	}
	if m.tokens32 != nil {
		p, bufs, res, err := m.tokens32.get(in.Rows, L)
		if err != nil {
			return runtime.Output{}, err
		}
		fillPadded(bufs, in.Tokens, L, m.pads)
		return m.runLocked(p, in.Rows, res)
	}
	p, bufs, res, err := m.tokens.get(in.Rows, L)
	if err != nil {
		return runtime.Output{}, err
	}
	fillPadded(bufs, in.Tokens, L, m.pads)
	return m.runLocked(p, in.Rows, res)
}

// fillPadded writes input j of every row (a row packs len(bufs) inputs of
// one length end to end) into bufs[j] as [rows, L], padded with pads[j].
func fillPadded[T int64 | int32](bufs [][]T, rows [][]int64, L int, pads []int64) {
	K := len(bufs)
	for j, buf := range bufs {
		pad := T(pads[j])
		for i, r := range rows {
			l := len(r) / K
			src := r[j*l : (j+1)*l]
			dst := buf[i*L : (i+1)*L]
			for x, v := range src {
				dst[x] = T(v)
			}
			for x := l; x < L; x++ {
				dst[x] = pad
			}
		}
	}
}

// inputNames renders inputs as `"input_ids" int64 [batch, seq], ...`.
func inputNames(ts []Tensor) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = fmt.Sprintf("%q %s %s", t.Name, t.TypeString(), t.ShapeString())
	}
	return strings.Join(s, ", ")
}

// runLocked runs the session on a pair whose input is filled and copies
// res, the pair's output, into a new Output of rows rows.
func (m *Model) runLocked(p *boundPair, rows int, res []float32) (runtime.Output, error) {
	if err := m.sess.Run(p.inputs, p.outputs); err != nil {
		return runtime.Output{}, fmt.Errorf("onnx: run: %v", err)
	}
	out := runtime.Output{Rows: rows, Cols: m.c.Outputs, Data: make([]float32, len(res))}
	copy(out.Data, res)
	return out, nil
}

func (m *Model) closedError() error {
	return fmt.Errorf("onnx: %s: predict on a closed model", m.name)
}

// Close releases the cached tensors and the session.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.floats != nil {
		m.floats.flush()
	}
	if m.tokens != nil {
		m.tokens.flush()
	}
	if m.tokens32 != nil {
		m.tokens32.flush()
	}
	return m.sess.Destroy()
}
