package hop

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/runtime"
)

func TestBatchRoundTrip(t *testing.T) {
	f := runtime.Batch{Rows: 2, Cols: 3, Data: []float32{1, 2, 3, -4, 5.5, float32(0)}}
	req := &inferencepb.ModelInferRequest{}
	EncodeBatch(req, f)
	got, err := DecodeBatch(req, 3, false)
	if err != nil || got.Rows != 2 || got.Cols != 3 || got.Data[4] != 5.5 {
		t.Fatalf("float rows: %+v %v", got, err)
	}
	s := runtime.Batch{Rows: 3, Tokens: [][]int64{{1, 2, 3}, {}, {-7}}}
	req = &inferencepb.ModelInferRequest{}
	EncodeBatch(req, s)
	got, err = DecodeBatch(req, 0, true)
	if err != nil || got.Rows != 3 || len(got.Tokens[0]) != 3 || len(got.Tokens[1]) != 0 || got.Tokens[2][0] != -7 {
		t.Fatalf("token rows: %+v %v", got, err)
	}
	resp := &inferencepb.ModelInferResponse{}
	EncodeOutput(resp, runtime.Output{Rows: 2, Cols: 1, Data: []float32{0.25, 0.5}})
	out, err := DecodeOutput(resp, 2)
	if err != nil || out.Data[1] != 0.5 {
		t.Fatalf("output: %+v %v", out, err)
	}
	if _, err := DecodeOutput(resp, 3); err == nil {
		t.Error("an output of 2 rows was accepted for 3")
	}
}

// Every malformed hop request is an invalid_argument naming the tensor.
func TestDecodeBatchRefuses(t *testing.T) {
	rows := func(shape []int64, raw []byte, dt string) *inferencepb.ModelInferRequest {
		return &inferencepb.ModelInferRequest{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: RowsTensor, Datatype: dt, Shape: shape}}, RawInputContents: [][]byte{raw}}
	}
	cases := []struct {
		name string
		req  *inferencepb.ModelInferRequest
		want string
	}{
		{"short raw", rows([]int64{2, 3}, make([]byte, 20), FP32), `tensor "rows": shape [2 3] needs 24 bytes`},
		{"long raw", rows([]int64{1, 3}, make([]byte, 16), FP32), "needs 12 bytes"},
		{"wrong width", rows([]int64{1, 4}, make([]byte, 16), FP32), `expected FP32 [n, 3]`},
		{"wrong datatype", rows([]int64{1, 3}, make([]byte, 12), "FP64"), `tensor "rows"`},
		{"zero rows", rows([]int64{0, 3}, nil, FP32), `tensor "rows"`},
		{"huge rows", rows([]int64{1 << 40, 3}, nil, FP32), `tensor "rows"`},
		{"rank 1", rows([]int64{3}, make([]byte, 12), FP32), `tensor "rows"`},
		{"typed contents", &inferencepb.ModelInferRequest{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: RowsTensor, Datatype: FP32, Shape: []int64{1, 3}}}}, "raw contents"},
		{"wrong name", &inferencepb.ModelInferRequest{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: FP32, Shape: []int64{1, 3}}}, RawInputContents: [][]byte{make([]byte, 12)}}, `"rows"`},
	}
	for _, c := range cases {
		_, err := DecodeBatch(c.req, 3, false)
		if errs.CodeOf(err) != errs.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want invalid_argument with %q", c.name, err, c.want)
		}
	}
	// Token rows whose length exceeds the padded width.
	req := &inferencepb.ModelInferRequest{}
	EncodeBatch(req, runtime.Batch{Rows: 1, Tokens: [][]int64{{1, 2}}})
	req.RawInputContents[1][0] = 9
	if _, err := DecodeBatch(req, 0, true); err == nil || !strings.Contains(err.Error(), `"lengths"`) {
		t.Errorf("length beyond the row: %v", err)
	}
}

// A Sluice error crosses a gRPC hop with its code, field and retry delay.
func TestStatusRoundTrip(t *testing.T) {
	in := &errs.Error{Code: errs.QueueFull, Message: "queue full", Field: "instances", RetryAfter: 1500 * 1e6}
	e, fromPeer := FromStatus(Status(in))
	if !fromPeer || e.Code != errs.QueueFull || e.Field != "instances" || e.Message != "queue full" || e.RetryAfter != in.RetryAfter {
		t.Errorf("got %+v (from peer %v)", e, fromPeer)
	}
}

// The raw helpers the "oip" runtime shares: little-endian FP32 both ways,
// token rows right-padded with the caller's pad value.
func TestRawContents(t *testing.T) {
	vs := []float32{0, -1.5, float32(math.Inf(1)), math.SmallestNonzeroFloat32}
	raw := FP32Raw(vs)
	if len(raw) != 16 || binary.LittleEndian.Uint32(raw[4:]) != math.Float32bits(-1.5) {
		t.Fatalf("FP32Raw: % x", raw)
	}
	back := make([]float32, len(vs))
	ReadFP32(back, raw)
	if !slices.Equal(back, vs) {
		t.Errorf("ReadFP32: %v, want %v", back, vs)
	}
	toks := TokensRaw([][]int64{{7, 8}, {}, {-2}}, 3, -1)
	var got []int64
	for i := 0; i < len(toks); i += 8 {
		got = append(got, int64(binary.LittleEndian.Uint64(toks[i:])))
	}
	if want := []int64{7, 8, -1, -1, -1, -1, -2, -1, -1}; !slices.Equal(got, want) {
		t.Errorf("TokensRaw: %v, want %v", got, want)
	}
}

// Set closes the channel Changed gave before it, and only that one: a
// call refused with the old session waits on it, then sends the new.
func TestCredentialsChanged(t *testing.T) {
	c := NewCredentials(WorkerKey, "w1")
	first := c.Changed()
	select {
	case <-first:
		t.Fatal("Changed closed before any Set")
	default:
	}
	c.Set(WorkerKey, "w1", SessionKey, "s1")
	select {
	case <-first:
	default:
		t.Fatal("Set did not close the channel Changed returned before it")
	}
	second := c.Changed()
	select {
	case <-second:
		t.Fatal("the new channel is closed already")
	default:
	}
	md, err := c.GetRequestMetadata(t.Context())
	if err != nil || md[SessionKey] != "s1" || md[WorkerKey] != "w1" {
		t.Fatalf("metadata after Set: %v %v", md, err)
	}
	c.Set(WorkerKey, "w1", SessionKey, "")
	if md, _ := c.GetRequestMetadata(t.Context()); len(md) != 1 {
		t.Fatalf("an empty value is left out: %v", md)
	}
	<-second
}
