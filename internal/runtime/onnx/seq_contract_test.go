package onnx

import (
	"strings"
	"testing"
)

func TestSequenceContract(t *testing.T) {
	mi, err := ReadModelInfo(readFixture(t, "seq.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := CheckContract(mi, 0, 1)
	if err != nil || !c.Sequence || c.Features != 0 || c.Outputs != 1 || c.Input.Name != "tokens" {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := CheckContract(mi, 30, 1); err == nil || !strings.Contains(err.Error(), `input "tokens" is int64 token ids [batch, seq] (a sequence model) but model.yaml's schema produces 30 float features`) {
		t.Fatal(err)
	}
	out := mi.Outputs[0]
	int64In := func(dims ...Dim) *ModelInfo {
		return &ModelInfo{Inputs: []Tensor{{Name: "ids", Kind: "tensor", ElemType: 7, HasShape: true, Dims: dims}}, Outputs: []Tensor{out}}
	}
	dyn := Dim{Value: -1, Param: "b"}
	cases := []struct {
		mi   *ModelInfo
		want string
	}{
		{int64In(dyn), `input "ids" is int64 with shape [b]; a sequence model's input must be token ids [batch, seq], rank 2`},
		{int64In(Dim{Value: 1}, dyn), `input "ids" has a fixed batch dimension of 1`},
		{int64In(dyn, Dim{Value: 128}), `input "ids" has a fixed sequence length of 128 (shape [b, 128])`},
	}
	for _, tc := range cases {
		if _, err := CheckContract(tc.mi, 0, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want ...%s...", err, tc.want)
		}
	}
}
