package oip

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
)

// TestEveryDatatype: each datatype's element reads as the same literal
// whether it came as JSON data, REST binary data, gRPC raw contents or
// gRPC typed contents.
func TestEveryDatatype(t *testing.T) {
	le := func(size int, v uint64) []byte {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint64(b, v)
		return b[:size]
	}
	cases := []struct {
		dt, json string
		raw      []byte
		typed    *pb.InferTensorContents
		lit      string // the instance path's literal
	}{
		{INT8, "-5", le(1, 0xfb), &pb.InferTensorContents{IntContents: []int32{-5}}, "-5"},
		{INT16, "-300", le(2, 0xfed4), &pb.InferTensorContents{IntContents: []int32{-300}}, "-300"},
		{INT32, "70000", le(4, 70000), &pb.InferTensorContents{IntContents: []int32{70000}}, "70000"},
		{INT64, "-9000000000", le(8, uint64(int64ToU(-9000000000))), &pb.InferTensorContents{Int64Contents: []int64{-9000000000}}, "-9000000000"},
		{UINT8, "200", le(1, 200), &pb.InferTensorContents{UintContents: []uint32{200}}, "200"},
		{UINT16, "60000", le(2, 60000), &pb.InferTensorContents{UintContents: []uint32{60000}}, "60000"},
		{UINT32, "4000000000", le(4, 4000000000), &pb.InferTensorContents{UintContents: []uint32{4000000000}}, "4000000000"},
		{UINT64, "18446744073709551615", le(8, 1<<64-1), &pb.InferTensorContents{Uint64Contents: []uint64{1<<64 - 1}}, "18446744073709551615"},
		{FP16, "1.5", le(2, 0x3e00), nil, "1.5"},
		{BF16, "1.5", le(2, 0x3fc0), nil, "1.5"},
		{FP32, "0.1", le(4, 0x3dcccccd), &pb.InferTensorContents{Fp32Contents: []float32{0.1}}, "0.1"},
		{FP64, "0.1", le(8, 0x3fb999999999999a), &pb.InferTensorContents{Fp64Contents: []float64{0.1}}, "0.1"},
	}
	for _, c := range cases {
		t.Run(c.dt, func(t *testing.T) {
			lit := func(how string, req *Request, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", how, err)
				}
				insts, err := Instances(req.Inputs, nil)
				if err != nil || len(insts) != 1 || insts[0][0].Value.Text != c.lit {
					t.Fatalf("%s: %v %v, want %s", how, insts, err, c.lit)
				}
			}
			hdr := `{"inputs":[{"name":"a","shape":[1],"datatype":"` + c.dt + `"`
			req, err := DecodeJSON([]byte(hdr+`,"data":[`+c.json+`]}]}`), time.Minute)
			lit("JSON", req, err)
			h := hdr + `,"parameters":{"binary_data_size":` + strconv.Itoa(len(c.raw)) + `}}]}`
			req, err = DecodeBinary(append([]byte(h), c.raw...), strconv.Itoa(len(h)), time.Minute)
			lit("binary", req, err)
			in := []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: c.dt, Shape: []int64{1}}}
			req, _, err = FromProto(&pb.ModelInferRequest{Inputs: in, RawInputContents: [][]byte{c.raw}}, time.Minute)
			lit("raw_input_contents", req, err)
			in[0].Contents = c.typed
			req, _, err = FromProto(&pb.ModelInferRequest{Inputs: in}, time.Minute)
			if c.typed == nil {
				if err == nil || !strings.Contains(err.Error(), "has no typed contents field: send it in raw_input_contents") {
					t.Fatalf("typed %s: %v", c.dt, err)
				}
				return
			}
			lit("typed contents", req, err)
		})
	}
}

func TestDatatypeRanges(t *testing.T) {
	cases := []struct{ dt, v, want string }{
		{INT8, "128", `input "a": element 0: 128 overflows INT8`},
		{INT16, "-32769", `input "a": element 0: -32769 overflows INT16`},
		{UINT8, "256", `input "a": element 0: 256 overflows UINT8`},
		{UINT8, "-1", `input "a": element 0: -1 is negative (datatype UINT8 holds 0 to 255)`},
		{UINT64, "18446744073709551616", `input "a": element 0: 18446744073709551616 overflows UINT64`},
		{UINT32, "1.5", `input "a": element 0: 1.5 is not an integer (datatype UINT32)`},
		{FP16, "70000", `input "a": element 0: 70000 overflows FP16 (at most 65504)`},
		{FP16, `"x"`, `input "a": element 0: expected a number (datatype FP16)`},
	}
	for _, c := range cases {
		_, err := DecodeJSON([]byte(`{"inputs":[{"name":"a","shape":[1],"datatype":"`+c.dt+`","data":[`+c.v+`]}]}`), time.Minute)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.dt, c.v, err, c.want)
		}
	}
	// Typed contents out of a narrow datatype's range.
	in := []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: INT8, Shape: []int64{1}, Contents: &pb.InferTensorContents{IntContents: []int32{300}}}}
	if _, _, err := FromProto(&pb.ModelInferRequest{Inputs: in}, time.Minute); err == nil || !strings.Contains(err.Error(), `input "a": element 0: 300 overflows INT8`) {
		t.Errorf("typed INT8 300: %v", err)
	}
}

func int64ToU(v int64) uint64 { return uint64(v) }
