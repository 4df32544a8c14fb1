package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/examples"
	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/server/oipgrpc"
)

func newGRPC(t *testing.T) (pb.GRPCInferenceServiceClient, *grpc.ClientConn, string) {
	t.Helper()
	ts, _, s := newTestServerAll(t, Config{}, examples.FS)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := oipgrpc.New(oipgrpc.Config{MaxRecvBytes: 64 << 10, Version: "test"}, s.Gateway(), s)
	go gs.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs.Stop(ctx)
	})
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewGRPCInferenceServiceClient(cc), cc, ts.URL
}

func fp32Raw(xs ...float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func i64Raw(xs ...int64) []byte {
	b := make([]byte, 8*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func bytesRaw(xs ...string) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
		b = append(b, x...)
	}
	return b
}

type in = pb.ModelInferRequest_InferInputTensor

// TestOIPGRPCEqualsV1: typed and raw contents give /v1's predictions.
func TestOIPGRPCEqualsV1(t *testing.T) {
	c, cc, url := newGRPC(t)
	ctx := context.Background()
	r1 := post(t, url+"/v1/models/churn:predict", "application/json", `{"instances":[{"tenureMonths":3,"supportTickets":4,"plan":"basic"},{"tenureMonths":30.5,"supportTickets":0,"plan":"team"}]}`, nil)
	var p1 struct{ Predictions []map[string]float64 }
	json.Unmarshal(r1.body, &p1)
	typed := &pb.ModelInferRequest{ModelName: "churn", Id: "g-1", Inputs: []*in{
		{Name: "tenureMonths", Datatype: "FP32", Shape: []int64{2}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{3, 30.5}}},
		{Name: "supportTickets", Datatype: "INT64", Shape: []int64{2, 1}, Contents: &pb.InferTensorContents{Int64Contents: []int64{4, 0}}},
		{Name: "plan", Datatype: "BYTES", Shape: []int64{2}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("basic"), []byte("team")}}},
	}}
	resp, err := c.ModelInfer(ctx, typed)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ModelName != "churn" || resp.ModelVersion != "1" || resp.Id != "g-1" || len(resp.Outputs) != 1 {
		t.Fatalf("resp %v", resp)
	}
	for i, v := range resp.Outputs[0].Contents.Fp32Contents {
		if v != float32(p1.Predictions[i]["churnProbability"]) {
			t.Errorf("typed row %d: %v vs /v1 %v", i, v, p1.Predictions[i]["churnProbability"])
		}
	}
	raw := &pb.ModelInferRequest{ModelName: "churn", ModelVersion: "1", Inputs: []*in{
		{Name: "tenureMonths", Datatype: "FP32", Shape: []int64{2}},
		{Name: "supportTickets", Datatype: "INT64", Shape: []int64{2}},
		{Name: "plan", Datatype: "BYTES", Shape: []int64{2}},
	}, RawInputContents: [][]byte{fp32Raw(3, 30.5), i64Raw(4, 0), bytesRaw("basic", "team")}}
	resp, err = c.ModelInfer(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.RawOutputContents) != 1 || len(resp.RawOutputContents[0]) != 8 || resp.Outputs[0].Contents != nil {
		t.Fatalf("raw resp %v", resp)
	}
	for i := 0; i < 2; i++ {
		v := math.Float32frombits(binary.LittleEndian.Uint32(resp.RawOutputContents[0][4*i:]))
		if v != float32(p1.Predictions[i]["churnProbability"]) {
			t.Errorf("raw row %d: %v vs /v1 %v", i, v, p1.Predictions[i]["churnProbability"])
		}
	}
	md, err := c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "churn"})
	if err != nil || md.Platform != "linear" || len(md.Inputs) != 3 || md.Inputs[2].Datatype != "BYTES" {
		t.Fatalf("metadata %v %v", md, err)
	}
	h, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", h, err)
	}
}

func TestOIPGRPCRejects(t *testing.T) {
	c, _, _ := newGRPC(t)
	good := func() []*in {
		return []*in{
			{Name: "tenureMonths", Datatype: "FP32", Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{3}}},
			{Name: "supportTickets", Datatype: "INT64", Shape: []int64{1}, Contents: &pb.InferTensorContents{Int64Contents: []int64{4}}},
			{Name: "plan", Datatype: "BYTES", Shape: []int64{1}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("basic")}}},
		}
	}
	rawIns := func() []*in {
		return []*in{{Name: "tenureMonths", Datatype: "FP32", Shape: []int64{1}}, {Name: "supportTickets", Datatype: "INT64", Shape: []int64{1}}, {Name: "plan", Datatype: "BYTES", Shape: []int64{1}}}
	}
	cases := []struct {
		name string
		req  func() *pb.ModelInferRequest
		code codes.Code
		want string
	}{
		{"wrong shape", func() *pb.ModelInferRequest {
			ins := good()
			ins[0].Shape = []int64{2}
			return &pb.ModelInferRequest{ModelName: "churn", Inputs: ins}
		}, codes.InvalidArgument, `input "tenureMonths": shape [2] holds 2 elements but 1 were sent`},
		{"wrong datatype", func() *pb.ModelInferRequest {
			ins := good()
			ins[2] = &in{Name: "plan", Datatype: "INT32", Shape: []int64{1}, Contents: &pb.InferTensorContents{IntContents: []int32{1}}}
			return &pb.ModelInferRequest{ModelName: "churn", Inputs: ins}
		}, codes.InvalidArgument, `input "plan": datatype INT32 does not fit field type category`},
		{"contents of another datatype", func() *pb.ModelInferRequest {
			ins := good()
			ins[0].Contents = &pb.InferTensorContents{Fp64Contents: []float64{3}}
			return &pb.ModelInferRequest{ModelName: "churn", Inputs: ins}
		}, codes.InvalidArgument, `input "tenureMonths": datatype FP32 is sent in fp32_contents, not fp64_contents`},
		{"unknown name", func() *pb.ModelInferRequest {
			ins := append(good(), &in{Name: "age", Datatype: "FP32", Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1}}})
			return &pb.ModelInferRequest{ModelName: "churn", Inputs: ins}
		}, codes.InvalidArgument, `input "age": unknown input tensor`},
		{"raw size", func() *pb.ModelInferRequest {
			return &pb.ModelInferRequest{ModelName: "churn", Inputs: rawIns(), RawInputContents: [][]byte{fp32Raw(3, 4), i64Raw(4), bytesRaw("basic")}}
		}, codes.InvalidArgument, `input "tenureMonths": raw_input_contents has 8 bytes; 1 FP32 elements need 4`},
		{"raw count", func() *pb.ModelInferRequest {
			return &pb.ModelInferRequest{ModelName: "churn", Inputs: rawIns(), RawInputContents: [][]byte{fp32Raw(3)}}
		}, codes.InvalidArgument, `raw_input_contents has 1 entries for 3 inputs`},
		{"raw bytes prefix", func() *pb.ModelInferRequest {
			return &pb.ModelInferRequest{ModelName: "churn", Inputs: rawIns(), RawInputContents: [][]byte{fp32Raw(3), i64Raw(4), {9, 0, 0, 0, 'b'}}}
		}, codes.InvalidArgument, `input "plan": raw_input_contents element 0 claims 9 bytes`},
		{"row counts", func() *pb.ModelInferRequest {
			ins := good()
			ins[2] = &in{Name: "plan", Datatype: "BYTES", Shape: []int64{2}, Contents: &pb.InferTensorContents{BytesContents: [][]byte{[]byte("basic"), []byte("pro")}}}
			return &pb.ModelInferRequest{ModelName: "churn", Inputs: ins}
		}, codes.InvalidArgument, `input "plan": has 2 rows but input "tenureMonths" has 1`},
		{"NaN", func() *pb.ModelInferRequest {
			ins := good()
			ins[0].Contents.Fp32Contents[0] = float32(math.NaN())
			return &pb.ModelInferRequest{ModelName: "churn", Inputs: ins}
		}, codes.InvalidArgument, `input "tenureMonths" row 0: NaN and infinities are not allowed`},
		{"unknown model", func() *pb.ModelInferRequest { return &pb.ModelInferRequest{ModelName: "nope", Inputs: good()} }, codes.NotFound, `model "nope" not found`},
		{"bad version", func() *pb.ModelInferRequest {
			return &pb.ModelInferRequest{ModelName: "churn", ModelVersion: "x", Inputs: good()}
		}, codes.InvalidArgument, `"x" is not a version number`},
		{"too large", func() *pb.ModelInferRequest {
			ins := good()
			ins[0].Contents.Fp32Contents = make([]float32, 20000)
			return &pb.ModelInferRequest{ModelName: "churn", Inputs: ins}
		}, codes.ResourceExhausted, `larger than max`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.ModelInfer(context.Background(), tc.req())
			st := status.Convert(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), tc.code, tc.want)
			}
		})
	}
}

// TestOIPGRPCEnvelope: an unknown model is not ready (OK), the request id
// is echoed and never an idempotency key, idempotency_key replays, and a
// timeout parameter (Triton's microseconds) is the deadline.
func TestOIPGRPCEnvelope(t *testing.T) {
	c, _, _ := newGRPC(t)
	ctx := context.Background()
	if r, err := c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "nope"}); err != nil || r.Ready {
		t.Fatalf("unknown model: %v %v, want OK and ready false", r, err)
	}
	if r, err := c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "churn", Version: "9"}); err != nil || r.Ready {
		t.Fatalf("unknown version: %v %v, want OK and ready false", r, err)
	}
	req := func(id string, tenure float32, params map[string]*pb.InferParameter) *pb.ModelInferRequest {
		return &pb.ModelInferRequest{ModelName: "churn", Id: id, Parameters: params, Inputs: []*in{
			{Name: "tenureMonths", Datatype: "FP32", Shape: []int64{1}}, {Name: "supportTickets", Datatype: "INT64", Shape: []int64{1}},
			{Name: "plan", Datatype: "BYTES", Shape: []int64{1}}}, RawInputContents: [][]byte{fp32Raw(tenure), i64Raw(4), bytesRaw("basic")}}
	}
	var md metadata.MD
	for _, tenure := range []float32{3, 5} { // the same id, other rows: two requests
		r, err := c.ModelInfer(ctx, req("1", tenure, nil), grpc.Header(&md))
		if err != nil || r.Id != "1" || len(md.Get("idempotent-replay")) != 0 || md.Get("x-request-id")[0] == "1" {
			t.Fatalf("id 1, tenure %v: %v %v %v", tenure, r, err, md)
		}
	}
	key := map[string]*pb.InferParameter{"idempotency_key": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "g-key"}}}
	for i := range 2 {
		r, err := c.ModelInfer(ctx, req("", 3, key), grpc.Header(&md))
		if err != nil || r.Id != "g-key" || md.Get("x-request-id")[0] != "g-key" || (i == 1) != (len(md.Get("idempotent-replay")) == 1) {
			t.Fatalf("idempotency_key try %d: %v %v %v", i, r, err, md)
		}
	}
	if _, err := c.ModelInfer(ctx, req("", 4, key)); status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "parameters.idempotency_key") {
		t.Fatalf("idempotency_key with other rows: %v", err)
	}
	// A timeout of 1µs cannot be met: refused at admission, not computed.
	tiny := map[string]*pb.InferParameter{"timeout": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 1}}}
	if _, err := c.ModelInfer(ctx, req("", 3, tiny)); status.Code(err) == codes.OK {
		t.Fatalf("timeout 1µs: answered")
	}
}
