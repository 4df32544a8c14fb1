// Package oip is the "oip" runtime: a model that runs on an inference server
// Sluice does not run (Triton, MLServer, another Sluice worker), reached
// through the Open Inference Protocol v2 over gRPC. Sluice keeps its own
// contract, admission, batching, routing, releases and records in front; a
// Model only sends each batch the serving layer formed as one ModelInfer
// call and returns the answer.
//
// The artifact is a small YAML (or JSON) document naming the endpoint
// (docs/oip-runtime.md):
//
//	address: 127.0.0.1:8001   # host:port of the OIP v2 gRPC server
//	model: fraud              # model_name on that server
//	version: ""               # model_version ("" = the server's choice)
//	input: input__0           # FP32 [n, d], or INT64 [n, L] for sequence packages
//	output: output__0         # FP32 [n, k], or [n] when k is 1
//	timeout: 2s               # per-call bound (default 2s)
//
// Load dials (one connection per Model, closed by Close), asks ModelReady
// and ModelMetadata, and checks the remote tensors against the package.
// Predict sends raw little-endian contents and checks the answer's shape and
// byte size exactly: a server that answers wrongly is an error, never a
// panic. The connection is plaintext (no TLS).
package oip

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/runtime"
)

func init() { runtime.Register("oip", Runtime{}) }

// Limits on what a Model sends and accepts.
const (
	// MaxMetadataBytes bounds every answer but ModelInfer's.
	MaxMetadataBytes = 1 << 20
	// MaxResponseBytes bounds a ModelInfer answer; each call is bounded
	// more tightly, by the size its output must have plus responseSlack.
	MaxResponseBytes = 1 << 30
	// responseSlack is the room allowed beyond an answer's tensor bytes
	// for names, shapes and parameters.
	responseSlack = 64 << 10
	// MaxOutputs and MaxFeatures bound the remote model's shape.
	MaxOutputs  = 1 << 16
	MaxFeatures = 1 << 24
)

// Runtime loads endpoint artifacts.
type Runtime struct{}

// Load decodes the artifact, dials the endpoint and checks the remote model
// against spec. ctx bounds the whole load; each call is also bounded by the
// artifact's timeout.
func (Runtime) Load(ctx context.Context, spec runtime.Spec, data []byte) (runtime.Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ep, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, spec, ep)
}

// Model is a model on a remote OIP v2 server.
type Model struct {
	ep     Endpoint
	where  string // `model "fraud" at 127.0.0.1:8001`, for messages
	conn   *grpc.ClientConn
	client inferencepb.GRPCInferenceServiceClient
	shape  shape
	detail string
	pad    int64 // sequence packages: the pad token id

	closeOnce sync.Once
	closeErr  error
}

// shape is what Load learned about the remote tensors.
type shape struct {
	inputs   int // d (0: any width; sequence models: 0)
	outputs  int // k
	sequence bool
	seqLen   int // sequence models with a fixed length L (0: pad to the batch's longest)
}

// Dial connects to ep and checks the remote model against spec.
func Dial(ctx context.Context, spec runtime.Spec, ep Endpoint) (*Model, error) {
	where := fmt.Sprintf("model %q", ep.Model)
	if ep.Version != "" {
		where += fmt.Sprintf(" version %q", ep.Version)
	}
	where += " at " + ep.Address
	if len(spec.SeqInputs) > 1 {
		return nil, fmt.Errorf("oip: %s: model.yaml declares %d sequence fields; runtime oip sends one input tensor (serve a model of several inputs with runtime onnx)", where, len(spec.SeqInputs))
	}
	conn, err := grpc.NewClient(ep.Address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMetadataBytes)))
	if err != nil {
		return nil, fmt.Errorf("oip: %s: %v", where, err)
	}
	m := &Model{ep: ep, where: where, conn: conn, client: inferencepb.NewGRPCInferenceServiceClient(conn), pad: spec.PadValue}
	if err := m.check(ctx, spec); err != nil {
		conn.Close()
		return nil, err
	}
	return m, nil
}

func (m *Model) check(ctx context.Context, spec runtime.Spec) error {
	cctx, cancel := context.WithTimeout(ctx, m.ep.Timeout.Duration)
	defer cancel()
	ready, err := m.client.ModelReady(cctx, &inferencepb.ModelReadyRequest{Name: m.ep.Model, Version: m.ep.Version})
	if err != nil {
		return m.callError(ctx, "model ready", err)
	}
	if !ready.GetReady() {
		return fmt.Errorf("oip: %s: the server says the model is not ready (is it loaded there, and is the name right?)", m.where)
	}
	cctx, cancel = context.WithTimeout(ctx, m.ep.Timeout.Duration)
	defer cancel()
	meta, err := m.client.ModelMetadata(cctx, &inferencepb.ModelMetadataRequest{Name: m.ep.Model, Version: m.ep.Version})
	if err != nil {
		return m.callError(ctx, "model metadata", err)
	}
	sh, err := checkMetadata(spec, m.ep, meta)
	if err != nil {
		return fmt.Errorf("oip: %s: %v", m.where, err)
	}
	m.shape = sh
	in, out := tensorOf(meta.GetInputs(), m.ep.Input), tensorOf(meta.GetOutputs(), m.ep.Output)
	m.detail = fmt.Sprintf("oip, %s, platform %q, input %s %s %v, output %s %s %v",
		m.where, meta.GetPlatform(), in.GetName(), in.GetDatatype(), in.GetShape(), out.GetName(), out.GetDatatype(), out.GetShape())
	return nil
}

func tensorOf(ts []*inferencepb.ModelMetadataResponse_TensorMetadata, name string) *inferencepb.ModelMetadataResponse_TensorMetadata {
	for _, t := range ts {
		if t.GetName() == name {
			return t
		}
	}
	return nil
}

func tensorNames(ts []*inferencepb.ModelMetadataResponse_TensorMetadata) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = fmt.Sprintf("%q", t.GetName())
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// checkMetadata compares the remote model's tensors with what the package
// declares and returns the shape the Model uses.
func checkMetadata(spec runtime.Spec, ep Endpoint, meta *inferencepb.ModelMetadataResponse) (shape, error) {
	sh := shape{sequence: spec.Sequence}
	in := tensorOf(meta.GetInputs(), ep.Input)
	if in == nil {
		return sh, fmt.Errorf("the model has no input %q (its inputs: %s)", ep.Input, tensorNames(meta.GetInputs()))
	}
	if n := len(meta.GetInputs()); n > 1 {
		return sh, fmt.Errorf("the model has %d inputs (%s); the oip runtime sends one, %q", n, tensorNames(meta.GetInputs()), ep.Input)
	}
	want, what := hop.FP32, "FP32 [n, d] rows of features"
	if spec.Sequence {
		want, what = hop.INT64, "INT64 [n, L] token ids (the package's input is a sequence field)"
	}
	if in.GetDatatype() != want {
		return sh, fmt.Errorf("input %q is %s, the oip runtime sends %s", ep.Input, in.GetDatatype(), what)
	}
	s := in.GetShape()
	if len(s) != 2 || s[0] != -1 || s[1] < -1 || s[1] == 0 {
		return sh, fmt.Errorf("input %q has shape %v, the oip runtime needs [-1, d]: a variable batch dimension, then one row (a Triton model needs max_batch_size > 0)", ep.Input, s)
	}
	switch {
	case spec.Sequence && s[1] > MaxFeatures:
		return sh, fmt.Errorf("input %q takes rows of %d tokens, at most %d are supported", ep.Input, s[1], MaxFeatures)
	case spec.Sequence && s[1] > 0:
		sh.seqLen = int(s[1])
	case spec.Sequence:
		// rows are padded to each batch's longest
	case s[1] > 0 && spec.Features > 0 && s[1] != int64(spec.Features):
		return sh, fmt.Errorf("input %q reads %d features per row (shape %v), the package's schema produces %d", ep.Input, s[1], s, spec.Features)
	case s[1] > MaxFeatures:
		return sh, fmt.Errorf("input %q reads %d features per row, at most %d are supported", ep.Input, s[1], MaxFeatures)
	case s[1] > 0:
		sh.inputs = int(s[1])
	default:
		sh.inputs = spec.Features
	}

	out := tensorOf(meta.GetOutputs(), ep.Output)
	if out == nil {
		return sh, fmt.Errorf("the model has no output %q (its outputs: %s)", ep.Output, tensorNames(meta.GetOutputs()))
	}
	if out.GetDatatype() != hop.FP32 {
		return sh, fmt.Errorf("output %q is %s, the oip runtime reads FP32", ep.Output, out.GetDatatype())
	}
	s = out.GetShape()
	var k int64
	switch {
	case len(s) == 1 && s[0] == -1:
		k = 1
	case len(s) == 2 && s[0] == -1 && (s[1] > 0 || s[1] == -1):
		k = s[1]
	default:
		return sh, fmt.Errorf("output %q has shape %v, the oip runtime needs [-1, k] or [-1]: a variable batch dimension first", ep.Output, s)
	}
	switch {
	case k == -1 && spec.Outputs < 1:
		return sh, fmt.Errorf("output %q has shape %v: its number of columns is not fixed and the package does not say it", ep.Output, s)
	case k == -1:
		k = int64(spec.Outputs)
	case k > MaxOutputs:
		return sh, fmt.Errorf("output %q has %d columns, at most %d are supported", ep.Output, k, MaxOutputs)
	case spec.Outputs > 0 && k != int64(spec.Outputs):
		return sh, fmt.Errorf("output %q has %d columns (shape %v), the package declares %d outputs", ep.Output, k, s, spec.Outputs)
	}
	sh.outputs = int(k)
	return sh, nil
}

// Info reports the shape learned at load.
func (m *Model) Info() runtime.Info {
	return runtime.Info{Inputs: m.shape.inputs, Outputs: m.shape.outputs, Sequence: m.shape.sequence, Detail: m.detail}
}

// Predict sends the batch as one ModelInfer call and returns its output.
func (m *Model) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	req, err := m.request(in)
	if err != nil {
		return runtime.Output{}, err
	}
	n, k := in.Rows, m.shape.outputs
	want := n * k * 4
	if want > MaxResponseBytes-responseSlack {
		return runtime.Output{}, fmt.Errorf("oip: %s: a batch of %d rows needs an answer of %d bytes, more than the limit %d", m.where, n, want, MaxResponseBytes)
	}
	cctx, cancel := context.WithTimeout(ctx, m.ep.Timeout.Duration)
	defer cancel()
	resp, err := m.client.ModelInfer(cctx, req, grpc.MaxCallRecvMsgSize(want+responseSlack))
	if err != nil {
		return runtime.Output{}, m.callError(ctx, "infer", err)
	}
	out, err := m.output(resp, n)
	if err != nil {
		return runtime.Output{}, fmt.Errorf("oip: %s: infer: %v", m.where, err)
	}
	return out, nil
}

// request builds the ModelInfer request of a batch: raw little-endian FP32
// [n, d], or INT64 [n, L] token ids padded with the package's pad value.
func (m *Model) request(in runtime.Batch) (*inferencepb.ModelInferRequest, error) {
	if in.Rows < 1 {
		return nil, fmt.Errorf("oip: %s: empty batch", m.where)
	}
	t := &inferencepb.ModelInferRequest_InferInputTensor{Name: m.ep.Input}
	var raw []byte
	if m.shape.sequence {
		if len(in.Tokens) != in.Rows {
			return nil, fmt.Errorf("oip: %s: sequence batch has %d rows but %d token rows", m.where, in.Rows, len(in.Tokens))
		}
		l := m.shape.seqLen
		if l == 0 {
			for _, r := range in.Tokens {
				l = max(l, len(r))
			}
		}
		if l == 0 {
			return nil, fmt.Errorf("oip: %s: every token row of the batch is empty", m.where)
		}
		for i, r := range in.Tokens {
			if len(r) > l {
				return nil, fmt.Errorf("oip: %s: row %d has %d tokens, the remote input takes %d", m.where, i, len(r), l)
			}
		}
		raw = hop.TokensRaw(in.Tokens, l, m.pad)
		t.Datatype, t.Shape = hop.INT64, []int64{int64(in.Rows), int64(l)}
	} else {
		if in.Cols < 1 || len(in.Data) != in.Rows*in.Cols {
			return nil, fmt.Errorf("oip: %s: malformed batch: %d rows × %d columns but %d values", m.where, in.Rows, in.Cols, len(in.Data))
		}
		if m.shape.inputs > 0 && in.Cols != m.shape.inputs {
			return nil, fmt.Errorf("oip: %s: batch has %d features per row, the remote input takes %d", m.where, in.Cols, m.shape.inputs)
		}
		raw = hop.FP32Raw(in.Data)
		t.Datatype, t.Shape = hop.FP32, []int64{int64(in.Rows), int64(in.Cols)}
	}
	return &inferencepb.ModelInferRequest{
		ModelName:        m.ep.Model,
		ModelVersion:     m.ep.Version,
		Inputs:           []*inferencepb.ModelInferRequest_InferInputTensor{t},
		Outputs:          []*inferencepb.ModelInferRequest_InferRequestedOutputTensor{{Name: m.ep.Output}},
		RawInputContents: [][]byte{raw},
	}, nil
}

// output checks the answer to a batch of n rows and decodes its output
// tensor, raw or typed.
func (m *Model) output(resp *inferencepb.ModelInferResponse, n int) (runtime.Output, error) {
	k := m.shape.outputs
	i := slices.IndexFunc(resp.GetOutputs(), func(o *inferencepb.ModelInferResponse_InferOutputTensor) bool {
		return o.GetName() == m.ep.Output
	})
	if i < 0 {
		names := make([]string, len(resp.GetOutputs()))
		for j, o := range resp.GetOutputs() {
			names[j] = fmt.Sprintf("%q", o.GetName())
		}
		return runtime.Output{}, fmt.Errorf("the answer has no output %q (it has: %s)", m.ep.Output, strings.Join(names, ", "))
	}
	o := resp.GetOutputs()[i]
	if o.GetDatatype() != hop.FP32 {
		return runtime.Output{}, fmt.Errorf("output %q is %s, want FP32", m.ep.Output, o.GetDatatype())
	}
	if s := o.GetShape(); !(slices.Equal(s, []int64{int64(n), int64(k)}) || (k == 1 && slices.Equal(s, []int64{int64(n)}))) {
		return runtime.Output{}, fmt.Errorf("output %q has shape %v, want [%d %d] for a batch of %d rows", m.ep.Output, s, n, k, n)
	}
	out := runtime.Output{Rows: n, Cols: k, Data: make([]float32, n*k)}
	if raws := resp.GetRawOutputContents(); len(raws) > 0 {
		if len(raws) != len(resp.GetOutputs()) {
			return runtime.Output{}, fmt.Errorf("the answer has %d outputs but %d raw contents (want one per output)", len(resp.GetOutputs()), len(raws))
		}
		raw := raws[i]
		if len(raw) != 4*n*k {
			return runtime.Output{}, fmt.Errorf("output %q has %d bytes of raw contents, want %d (%d rows × %d columns × 4)", m.ep.Output, len(raw), 4*n*k, n, k)
		}
		hop.ReadFP32(out.Data, raw)
		return out, nil
	}
	vals := o.GetContents().GetFp32Contents()
	if len(vals) != n*k {
		return runtime.Output{}, fmt.Errorf("output %q has %d FP32 values, want %d (%d rows × %d columns)", m.ep.Output, len(vals), n*k, n, k)
	}
	copy(out.Data, vals)
	return out, nil
}

// callError describes a failed call. When the caller's ctx ended, the error
// wraps ctx.Err() (so the serving layer sees context.DeadlineExceeded); a
// call that outlived the artifact's timeout, or that the server refused,
// names the endpoint and the gRPC status.
func (m *Model) callError(ctx context.Context, call string, err error) error {
	st, _ := status.FromError(err)
	if ctx.Err() != nil {
		return fmt.Errorf("oip: %s: %s: %w (gRPC %s)", m.where, call, ctx.Err(), st.Code())
	}
	if dl, ok := ctx.Deadline(); ok && st.Code() == codes.DeadlineExceeded && time.Until(dl) < m.ep.Timeout.Duration {
		// The caller's deadline was the shorter one; gRPC may see it pass a
		// moment before ctx does.
		return fmt.Errorf("oip: %s: %s: %w (gRPC %s)", m.where, call, context.DeadlineExceeded, st.Code())
	}
	if st.Code() == codes.DeadlineExceeded {
		return fmt.Errorf("oip: %s: %s: no answer within the endpoint timeout %v (gRPC %s)", m.where, call, m.ep.Timeout.Duration, st.Code())
	}
	return fmt.Errorf("oip: %s: %s: gRPC %s: %s", m.where, call, st.Code(), st.Message())
}

// Close closes the connection. Calls after the first return the first's
// result.
func (m *Model) Close() error {
	m.closeOnce.Do(func() {
		if err := m.conn.Close(); err != nil && !errors.Is(err, context.Canceled) {
			m.closeErr = fmt.Errorf("oip: %s: close: %v", m.where, err)
		}
	})
	return m.closeErr
}
