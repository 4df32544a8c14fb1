package oip

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/runtime"
)

type tm = inferencepb.ModelMetadataResponse_TensorMetadata

func meta(in, out []*tm) *inferencepb.ModelMetadataResponse {
	return &inferencepb.ModelMetadataResponse{Inputs: in, Outputs: out}
}

func TestCheckMetadata(t *testing.T) {
	ep := Endpoint{Input: "x", Output: "y"}
	x := func(dt string, s ...int64) []*tm { return []*tm{{Name: "x", Datatype: dt, Shape: s}} }
	y := func(dt string, s ...int64) []*tm { return []*tm{{Name: "y", Datatype: dt, Shape: s}} }
	tab := runtime.Spec{Features: 3, Outputs: 2}
	cases := []struct {
		name string
		spec runtime.Spec
		md   *inferencepb.ModelMetadataResponse
		want shape
		err  string
	}{
		{"fixed", tab, meta(x("FP32", -1, 3), y("FP32", -1, 2)), shape{inputs: 3, outputs: 2}, ""},
		{"dynamic widths", tab, meta(x("FP32", -1, -1), y("FP32", -1, -1)), shape{inputs: 3, outputs: 2}, ""},
		{"rank-1 output", runtime.Spec{Features: 3, Outputs: 1}, meta(x("FP32", -1, 3), y("FP32", -1)), shape{inputs: 3, outputs: 1}, ""},
		{"spec without widths", runtime.Spec{}, meta(x("FP32", -1, 5), y("FP32", -1, 4)), shape{inputs: 5, outputs: 4}, ""},
		{"sequence, dynamic", runtime.Spec{Outputs: 2, Sequence: true}, meta(x("INT64", -1, -1), y("FP32", -1, 2)), shape{outputs: 2, sequence: true}, ""},
		{"sequence, fixed", runtime.Spec{Outputs: 2, Sequence: true}, meta(x("INT64", -1, 128), y("FP32", -1, 2)), shape{outputs: 2, sequence: true, seqLen: 128}, ""},
		{"fixed batch", tab, meta(x("FP32", 8, 3), y("FP32", -1, 2)), shape{}, `input "x" has shape [8 3], the oip runtime needs [-1, d]`},
		{"no batch dim", tab, meta(x("FP32", 3), y("FP32", -1, 2)), shape{}, `input "x" has shape [3]`},
		{"zero width", tab, meta(x("FP32", -1, 0), y("FP32", -1, 2)), shape{}, `input "x" has shape [-1 0]`},
		{"fp64 input", tab, meta(x("FP64", -1, 3), y("FP32", -1, 2)), shape{}, `input "x" is FP64, the oip runtime sends FP32`},
		{"fp64 output", tab, meta(x("FP32", -1, 3), y("FP64", -1, 2)), shape{}, `output "y" is FP64, the oip runtime reads FP32`},
		{"rank-3 output", tab, meta(x("FP32", -1, 3), y("FP32", -1, 2, 1)), shape{}, `output "y" has shape [-1 2 1]`},
		{"rank-1 output, two outputs declared", tab, meta(x("FP32", -1, 3), y("FP32", -1)), shape{}, `output "y" has 1 columns (shape [-1]), the package declares 2 outputs`},
		{"unknown k", runtime.Spec{Features: 3}, meta(x("FP32", -1, 3), y("FP32", -1, -1)), shape{}, "its number of columns is not fixed"},
		{"two inputs", tab, meta(append(x("FP32", -1, 3), &tm{Name: "mask", Datatype: "FP32", Shape: []int64{-1, 3}}), y("FP32", -1, 2)), shape{},
			`the model has 2 inputs ("x", "mask"); the oip runtime sends one, "x"`},
		{"no inputs", tab, meta(nil, y("FP32", -1, 2)), shape{}, `the model has no input "x" (its inputs: none)`},
		{"huge width", runtime.Spec{Outputs: 2}, meta(x("FP32", -1, 1<<40), y("FP32", -1, 2)), shape{}, "at most 16777216 are supported"},
		{"huge k", runtime.Spec{Features: 3}, meta(x("FP32", -1, 3), y("FP32", -1, 1<<40)), shape{}, "at most 65536 are supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := checkMetadata(c.spec, ep, c.md)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestSequenceRequest: token rows are padded with the pad value to the
// batch's longest, or to a fixed remote length (longer rows refused).
func TestSequenceRequest(t *testing.T) {
	m := &Model{ep: Endpoint{Model: "m", Input: "tokens", Output: "y"}, where: "test", pad: 9, shape: shape{outputs: 1, sequence: true}}
	in := runtime.Batch{Rows: 2, Tokens: [][]int64{{1, 2}, {3}}}
	for _, c := range []struct {
		seqLen int
		want   []int64
	}{{0, []int64{1, 2, 3, 9}}, {4, []int64{1, 2, 9, 9, 3, 9, 9, 9}}} {
		m.shape.seqLen = c.seqLen
		req, err := m.request(in)
		if err != nil {
			t.Fatal(err)
		}
		tn := req.GetInputs()[0]
		l := int64(len(c.want) / 2)
		if tn.GetDatatype() != "INT64" || len(tn.GetShape()) != 2 || tn.GetShape()[0] != 2 || tn.GetShape()[1] != l {
			t.Fatalf("tensor %s %v", tn.GetDatatype(), tn.GetShape())
		}
		raw := req.GetRawInputContents()[0]
		for i, w := range c.want {
			if got := int64(binary.LittleEndian.Uint64(raw[8*i:])); got != w {
				t.Fatalf("seqLen %d: value %d is %d, want %d", c.seqLen, i, got, w)
			}
		}
	}
	m.shape.seqLen = 1
	if _, err := m.request(in); err == nil || !strings.Contains(err.Error(), "row 0 has 2 tokens, the remote input takes 1") {
		t.Fatalf("got %v", err)
	}
}
