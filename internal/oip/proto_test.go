package oip

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/schema"
)

// TestTypedContentsValues: typed contents held as raw bytes read back as
// exactly the values the typed elements give (their shortest literals),
// and are refused with the messages of values.
func TestTypedContentsValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 9))
	f32 := []float32{0, float32(math.Copysign(0, -1)), 0.1, 1e6, 16777217, float32(math.NaN()), float32(math.Inf(-1)), 3.4e38, 1e-45}
	f64 := []float64{0.1, 1e300, 1 << 53, 5e-324, math.Inf(1), -2.5}
	for iter := range 200 {
		n := rng.IntN(5)
		var c pb.InferTensorContents
		var want []schema.Value
		dt := []string{BOOL, INT32, INT64, FP32, FP64, BYTES}[iter%6]
		for range n {
			switch dt {
			case BOOL:
				v := rng.IntN(2) == 1
				c.BoolContents = append(c.BoolContents, v)
				want = append(want, schema.Value{Kind: schema.Bool, Bool: v})
			case INT32:
				v := int32(rng.Uint32())
				c.IntContents = append(c.IntContents, v)
				want = append(want, num(strconv.FormatInt(int64(v), 10)))
			case INT64:
				v := int64(rng.Uint64())
				c.Int64Contents = append(c.Int64Contents, v)
				want = append(want, num(strconv.FormatInt(v, 10)))
			case FP32:
				v := f32[rng.IntN(len(f32))] * float32(rng.NormFloat64())
				c.Fp32Contents = append(c.Fp32Contents, v)
				want = append(want, num(FormatFloat32(v)))
			case FP64:
				v := f64[rng.IntN(len(f64))] * rng.NormFloat64()
				c.Fp64Contents = append(c.Fp64Contents, v)
				want = append(want, num(strconv.FormatFloat(v, 'g', -1, 64)))
			case BYTES:
				v := []string{"US", "GB", "x\x00y", "é"}[rng.IntN(4)]
				c.BytesContents = append(c.BytesContents, []byte(v))
				want = append(want, schema.Value{Kind: schema.String, Text: v})
			}
		}
		req := &pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: dt, Shape: []int64{int64(n)}, Contents: &c}}}
		got, raw, err := FromProto(req, time.Minute)
		if err != nil || raw {
			t.Fatalf("%s × %d: %v (raw %v)", dt, n, err, raw)
		}
		insts, err := Instances(got.Inputs, nil)
		if err != nil || len(insts) != n {
			t.Fatalf("%s × %d: instances %v %v", dt, n, insts, err)
		}
		for i, inst := range insts {
			if !reflect.DeepEqual(inst[0].Value, want[i]) {
				t.Fatalf("%s element %d: %+v, want %+v", dt, i, inst[0].Value, want[i])
			}
		}
	}
	for _, c := range []struct {
		dt    string
		shape []int64
		c     *pb.InferTensorContents
		want  string
	}{
		{FP32, []int64{2}, &pb.InferTensorContents{Fp32Contents: []float32{1}}, `input "a": shape [2] holds 2 elements but 1 were sent`},
		{INT64, []int64{1}, &pb.InferTensorContents{Int64Contents: []int64{1, 2}}, `input "a": shape [1] holds 1 elements but 2 were sent`},
		{BOOL, []int64{1}, nil, `input "a": shape [1] holds 1 elements but 0 were sent`},
		{BYTES, []int64{2}, &pb.InferTensorContents{BytesContents: [][]byte{[]byte("x")}}, `input "a": shape [2] holds 2 elements but 1 were sent`},
		{FP32, []int64{1}, &pb.InferTensorContents{Fp64Contents: []float64{1}}, `input "a": datatype FP32 is sent in fp32_contents, not fp64_contents`},
		{INT32, []int64{1}, &pb.InferTensorContents{UintContents: []uint32{1}}, `input "a": datatype INT32 is sent in int_contents, not uint_contents`},
	} {
		req := &pb.ModelInferRequest{Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "a", Datatype: c.dt, Shape: c.shape, Contents: c.c}}}
		_, _, err := FromProto(req, time.Minute)
		if err == nil || errs.CodeOf(err) != errs.InvalidArgument || !strings.Contains(Message(errs.As(err)), c.want) {
			t.Errorf("%s %v: %v, want %q", c.dt, c.shape, err, c.want)
		}
	}
}
