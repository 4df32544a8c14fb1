package oip

import (
	"strings"
	"testing"
	"time"

	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
)

// TestRequestParameters: the parameters that mean something are checked
// as strictly as data, the rest are ignored; REST and gRPC take each in
// every kind the clients send.
func TestRequestParameters(t *testing.T) {
	in := `"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]`
	cases := []struct {
		params string
		check  func(*Request) bool
		err    string
	}{
		{`{"sequence_id":42,"sequence_start":true,"sequence_end":false,"custom":"x","n":null}`, func(r *Request) bool { return r.Deadline() == 0 }, ""},
		{`{"timeout":2000000}`, func(r *Request) bool { return r.Deadline() == 2*time.Second }, ""},
		{`{"timeout":0}`, func(r *Request) bool { return r.Deadline() == 0 }, ""},
		{`{"timeout":99000000000}`, func(r *Request) bool { return r.Deadline() == time.Minute }, ""}, // capped like grpc-timeout
		{`{"timeout":2000000,"deadline_ms":500}`, func(r *Request) bool { return r.Deadline() == 500*time.Millisecond }, ""},
		{`{"timeout":100000,"deadline_ms":500}`, func(r *Request) bool { return r.Deadline() == 100*time.Millisecond }, ""},
		{`{"timeout":-1}`, nil, "parameters.timeout: must be a non-negative integer (microseconds)"},
		{`{"timeout":1.5}`, nil, "parameters.timeout: must be a non-negative integer (microseconds)"},
		{`{"priority":1}`, func(r *Request) bool { return r.Priority == 1 && !r.Batch }, ""},
		{`{"priority":"high"}`, nil, "parameters.priority: must be a non-negative integer"},
		{`{"sluice_priority":"batch"}`, func(r *Request) bool { return r.Batch }, ""},
		{`{"sluice_priority":"high"}`, nil, `parameters.sluice_priority: must be "batch"`},
		{`{"idempotency_key":"k-1"}`, func(r *Request) bool { return r.IdempotencyKey == "k-1" }, ""},
		{`{"idempotency_key":"a b"}`, nil, "parameters.idempotency_key: must be 1 to 128 printable ASCII characters"},
		{`{"binary_data_output":"yes"}`, nil, "parameters.binary_data_output: must be true or false"},
		{`{"x":{}}`, nil, "parameters.x: a parameter is a string, number or boolean"},
		{`{` + strings.Repeat(`"p":1,`, 0) + manyParams(65) + `}`, nil, "parameters: more than 64 parameters"},
	}
	for _, c := range cases {
		body := `{"model_name":"m","model_version":"2","parameters":` + c.params + `,` + in + `}`
		for _, dec := range []struct {
			name string
			f    func([]byte, time.Duration, bool) (*Request, error)
		}{{"scanner", decodeJSON}, {"tokens", decodeJSONTokens}} {
			r, err := dec.f([]byte(body), time.Minute, false)
			switch {
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("%s %s: %v, want %q", dec.name, c.params, err, c.err)
			case c.err == "" && err != nil:
				t.Errorf("%s %s: %v", dec.name, c.params, err)
			case c.err == "" && (!c.check(r) || r.ModelName != "m" || r.ModelVersion != "2"):
				t.Errorf("%s %s: %+v", dec.name, c.params, r)
			}
		}
	}
}

func manyParams(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"p` + string(rune('a'+i/26)) + string(rune('a'+i%26)) + `":1`)
	}
	return b.String()
}

func TestProtoParameters(t *testing.T) {
	u := func(v uint64) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: v}}
	}
	i := func(v int64) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: v}}
	}
	d := func(v float64) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_DoubleParam{DoubleParam: v}}
	}
	b := func(v bool) *pb.InferParameter {
		return &pb.InferParameter{ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: v}}
	}
	tensor := func(ps map[string]*pb.InferParameter) []*pb.ModelInferRequest_InferInputTensor {
		return []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: FP32, Shape: []int64{1}, Parameters: ps}}
	}
	raw := [][]byte{{0, 0, 128, 63}}
	cases := []struct {
		name string
		req  *pb.ModelInferRequest
		raw  bool
		err  string
	}{
		{"Triton's priority (uint64) and timeout (int64), a double", &pb.ModelInferRequest{Parameters: map[string]*pb.InferParameter{"priority": u(2), "timeout": i(5000), "temperature": d(0.5)},
			Inputs: tensor(nil), RawInputContents: raw}, true, ""},
		{"deadline_ms as a double", &pb.ModelInferRequest{Parameters: map[string]*pb.InferParameter{"deadline_ms": d(2.5)}, Inputs: tensor(nil), RawInputContents: raw}, true, ""},
		{"KServe's binary_data_size with raw contents", &pb.ModelInferRequest{Inputs: tensor(map[string]*pb.InferParameter{"binary_data_size": i(4)}), RawInputContents: raw}, true, ""},
		{"binary_data_size that lies", &pb.ModelInferRequest{Inputs: tensor(map[string]*pb.InferParameter{"binary_data_size": i(8)}), RawInputContents: raw}, true,
			`input "a": binary_data_size is 8, but its raw_input_contents has 4 bytes`},
		{"binary_data_size without raw contents", &pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: FP32, Shape: []int64{1},
			Parameters: map[string]*pb.InferParameter{"binary_data_size": i(4)}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1}}}}}, false,
			`input "a": parameter binary_data_size goes with raw_input_contents`},
		{"an input's other parameter is ignored", &pb.ModelInferRequest{Inputs: tensor(map[string]*pb.InferParameter{"binary_data": b(true)}), RawInputContents: raw}, true, ""},
		{"shared memory", &pb.ModelInferRequest{Inputs: tensor(map[string]*pb.InferParameter{"shared_memory_region": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "r"}}})}, false,
			`input "a": parameter shared_memory_region: shared memory is not supported`},
		{"typed inputs, raw outputs asked", &pb.ModelInferRequest{Parameters: map[string]*pb.InferParameter{"binary_data_output": b(true)},
			Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: FP32, Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1}}}}}, true, ""},
		{"typed inputs, one output asks raw", &pb.ModelInferRequest{Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y", Parameters: map[string]*pb.InferParameter{"binary_data": b(true)}}},
			Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: FP32, Shape: []int64{1}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1}}}}}, true, ""},
		{"classification", &pb.ModelInferRequest{Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y", Parameters: map[string]*pb.InferParameter{"classification": i(3)}}},
			Inputs: tensor(nil), RawInputContents: raw}, true, `output "y": parameter classification is not supported`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, gotRaw, err := FromProto(c.req, time.Minute)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("%v, want %q", err, c.err)
				}
				return
			}
			if err != nil || gotRaw != c.raw {
				t.Fatalf("raw %v, %v; want raw %v", gotRaw, err, c.raw)
			}
		})
	}
}
