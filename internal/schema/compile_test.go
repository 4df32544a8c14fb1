package schema

import (
	"strings"
	"testing"
)

// The steps of a field move its value's state on, in order; apply decides
// whether each may. The table is the decision: which step applies after
// which, and the one-hot width it leaves.
func TestEncodingApply(t *testing.T) {
	mean, std := 1.0, 2.0
	step := func(op string) Step {
		st := Step{Field: "f", Op: op}
		switch op {
		case OpStandardize:
			st.Mean, st.Std = &mean, &std
		case OpBucketize:
			st.Boundaries = []float64{1, 2, 3}
		}
		return st
	}
	for _, c := range []struct {
		name  string
		typ   string
		ops   []string
		width int    // after the steps (0: not one-hot)
		fails string // the refusal of the last step ("" none)
	}{
		{"numeric ops on a float", TypeFloat, []string{OpLog1p, OpClip, OpStandardize}, 0, ""},
		{"a category's index one-hot", TypeCategory, []string{OpOnehot}, 3, ""},
		{"ordinal, then numeric", TypeCategory, []string{OpOrdinal, OpStandardize}, 0, ""},
		{"ordinal keeps the levels for onehot", TypeCategory, []string{OpOrdinal, OpOnehot}, 3, ""},
		{"bucketize makes levels", TypeFloat, []string{OpBucketize, OpOnehot}, 4, ""},
		{"numeric after bucketize loses them", TypeFloat, []string{OpBucketize, OpLog1p, OpOnehot}, 0, "is numeric"},
		{"numeric op on an unencoded category", TypeCategory, []string{OpLog1p}, 0, "needs a numeric value"},
		{"onehot of a number", TypeInt, []string{OpOnehot}, 0, "is numeric"},
		{"ordinal of a number", TypeFloat, []string{OpOrdinal}, 0, "ordinal applies to category fields"},
		{"ordinal twice", TypeCategory, []string{OpOrdinal, OpOrdinal}, 0, "already encoded"},
		{"ordinal after onehot", TypeCategory, []string{OpOnehot, OpOrdinal}, 3, "already encoded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := field{Field: Field{Name: "f", Type: c.typ}, kind: map[string]int{TypeFloat: kFloat, TypeInt: kInt, TypeCategory: kCategory}[c.typ]}
			if c.typ == TypeCategory {
				f.Values = []string{"a", "b", "c"}
			}
			e := newEncoding([]field{f})
			var ps problems
			for i, op := range c.ops {
				ok := e.apply(&ps, "preprocess", step(op), 0, &f)
				if last := i == len(c.ops)-1; ok != (!last || c.fails == "") {
					t.Fatalf("step %d (%s): applies %v, problems %v", i, op, ok, ps)
				}
			}
			if f.width != c.width {
				t.Errorf("width %d, want %d", f.width, c.width)
			}
			if c.fails == "" && len(ps) > 0 || c.fails != "" && (len(ps) != 1 || !strings.Contains(ps[0].Message, c.fails)) {
				t.Errorf("problems %v, want %q", ps, c.fails)
			}
		})
	}
}
