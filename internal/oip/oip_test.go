package oip

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/schema"
)

func ints(xs ...string) []schema.Value {
	out := make([]schema.Value, len(xs))
	for i, x := range xs {
		out[i] = schema.Value{Kind: schema.Number, Text: x}
	}
	return out
}

// TestSequencePadding: rows of an [n,L] tensor are right-padded with -1;
// the schema then checks each row as /v1 checks an instance's tokens.
func TestSequencePadding(t *testing.T) {
	sch, probs := schema.Compile([]schema.Field{{Name: "tokens", Type: schema.TypeSequence, MaxLength: 4}}, nil)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	cases := []struct {
		name  string
		t     Tensor
		want  []string // tokens per row, joined
		error string
	}{
		{"padded", Tensor{Name: "tokens", Datatype: INT64, Shape: []int64{2, 3}, Data: ints("5", "17", "3", "9", "-1", "-1")}, []string{"5 17 3", "9"}, ""},
		{"one column is a length-1 sequence", Tensor{Name: "tokens", Datatype: INT32, Shape: []int64{2, 1}, Data: ints("5", "6")}, []string{"5", "6"}, ""},
		{"pad inside", Tensor{Name: "tokens", Datatype: INT64, Shape: []int64{1, 3}, Data: ints("5", "-1", "3")}, nil, `input "tokens" row 0 element 1: token id must be in [0, 2^31), got -1`},
		{"all padding", Tensor{Name: "tokens", Datatype: INT64, Shape: []int64{1, 2}, Data: ints("-1", "-1")}, nil, `input "tokens" row 0: must hold at least 1 token id`},
		{"too long", Tensor{Name: "tokens", Datatype: INT64, Shape: []int64{1, 5}, Data: ints("1", "2", "3", "4", "5")}, nil, `input "tokens" row 0: has 5 token ids, maxLength is 4`},
		{"rank 1", Tensor{Name: "tokens", Datatype: INT64, Shape: []int64{2}, Data: ints("1", "2")}, nil, `input "tokens": shape [2]: a sequence tensor is [n,L]`},
		{"fp32", Tensor{Name: "tokens", Datatype: FP32, Shape: []int64{1, 1}, Data: ints("1")}, nil, `input "tokens": datatype FP32 does not fit field type sequence`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			insts, err := Instances([]Tensor{c.t}, sch)
			if err == nil {
				for i, inst := range insts {
					_, err = sch.Tokens("instances["+string(rune('0'+i))+"]", inst)
					if err != nil {
						break
					}
				}
			}
			if c.error != "" {
				if err == nil || !strings.Contains(Message(errs.As(err)), c.error) {
					t.Fatalf("error %v, want %q", err, c.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, inst := range insts {
				if got := strings.Join(inst[0].Value.Items, " "); got != c.want[i] {
					t.Errorf("row %d: %q, want %q", i, got, c.want[i])
				}
			}
		})
	}
}

// TestSequenceInputs: a model of two sequence inputs takes one [n,L]
// tensor per field, each row right-padded with -1; an instance's row is
// its fields end to end, and rows of two lengths are refused by name.
func TestSequenceInputs(t *testing.T) {
	sch, probs := schema.Compile([]schema.Field{
		{Name: "input_ids", Type: schema.TypeSequence, MaxLength: 4},
		{Name: "attention_mask", Type: schema.TypeSequence, MaxLength: 4, Mask: true},
	}, nil)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	ids := Tensor{Name: "input_ids", Datatype: INT64, Shape: []int64{2, 3}, Data: ints("5", "17", "3", "9", "-1", "-1")}
	mask := Tensor{Name: "attention_mask", Datatype: INT32, Shape: []int64{2, 3}, Data: ints("1", "0", "1", "1", "-1", "-1")}
	insts, err := Instances([]Tensor{mask, ids}, sch)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int64{{5, 17, 3, 1, 0, 1}, {9, 1}}
	for i, inst := range insts {
		row, err := sch.Tokens("instances[0]", inst)
		if err != nil || fmt.Sprint(row) != fmt.Sprint(want[i]) {
			t.Errorf("row %d: %v %v, want %v", i, row, err, want[i])
		}
	}
	short := Tensor{Name: "attention_mask", Datatype: INT64, Shape: []int64{2, 3}, Data: ints("1", "-1", "-1", "1", "-1", "-1")}
	insts, err = Instances([]Tensor{ids, short}, sch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sch.Tokens("instances[0]", insts[0]); err == nil || !strings.Contains(err.Error(), "has 1 mask values but input_ids has 3") {
		t.Error(err)
	}
	if _, err := Instances([]Tensor{ids}, sch); err == nil || !strings.Contains(Message(errs.As(err)), `input "attention_mask": required input tensor is missing (datatype INT64, shape [-1,-1])`) {
		t.Error(err)
	}
}

// TestCheckInputsManyTensors: with more tensors than the scan for
// duplicates covers (a map then), a duplicate and a missing required
// tensor are named as with a few.
func TestCheckInputsManyTensors(t *testing.T) {
	for _, n := range []int{3, 40} {
		var fields []schema.Field
		var ts []Tensor
		for i := range n {
			name := "f" + strconv.Itoa(i)
			fields = append(fields, schema.Field{Name: name, Type: schema.TypeFloat})
			ts = append(ts, Tensor{Name: name, Datatype: FP32, Shape: []int64{1}, Raw: []byte{0, 0, 0, 0}})
		}
		sch, probs := schema.Compile(fields, nil)
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		if rows, err := checkInputs(ts, sch); err != nil || rows != 1 {
			t.Fatalf("%d tensors: %d rows, %v", n, rows, err)
		}
		dup := append(append([]Tensor(nil), ts...), ts[1])
		if _, err := checkInputs(dup, sch); err == nil || err.Error() != `input "f1": duplicate input tensor` {
			t.Fatalf("%d tensors: duplicate: %v", n, err)
		}
		if _, err := checkInputs(ts[:n-1], sch); err == nil || !strings.Contains(err.Error(), `input "f`+strconv.Itoa(n-1)+`": required input tensor is missing`) {
			t.Fatalf("%d tensors: missing: %v", n, err)
		}
	}
}
