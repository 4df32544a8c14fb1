package postproc

import (
	"math"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

func f(x float64) *float64 { return &x }
func i(x int) *int         { return &x }
func s(x string) *string   { return &x }

// TestApply runs every op on known rows; the expected numbers are worked
// out by hand (Platt: 1/(1+exp(a·x+b)); isotonic: numpy.interp).
func TestApply(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name    string
		outputs []string
		steps   []Step
		in      []float32 // one row
		names   string
		want    []float32
		labels  map[string][]string
	}{
		{name: "none", outputs: []string{"p"}, in: []float32{0.3}, names: "p", want: []float32{0.3}},
		{name: "platt in place", outputs: []string{"p"}, steps: []Step{{Op: "calibrate", Output: "p", Method: "platt", A: f(-2), B: f(1)}},
			in: []float32{0.5}, names: "p", want: []float32{float32(1 / (1 + math.Exp(-2*0.5+1)))}},
		{name: "isotonic as new column", outputs: []string{"p"}, steps: []Step{{Op: "calibrate", Output: "p", As: "cal", Method: "isotonic", X: []float64{0, 0.5, 1}, Y: []float64{0.1, 0.2, 0.9}}},
			in: []float32{0.75}, names: "p,cal", want: []float32{0.75, 0.55}},
		{name: "isotonic clipped", outputs: []string{"p"}, steps: []Step{{Op: "calibrate", Output: "p", Method: "isotonic", X: []float64{0.2, 0.8}, Y: []float64{0.1, 0.9}}},
			in: []float32{0.9}, names: "p", want: []float32{0.9}},
		{name: "threshold with labels and threshold output", outputs: []string{"p"},
			steps: []Step{{Op: "threshold", Output: "p", As: "label", Threshold: f(0.5), Labels: []string{"ok", "fraud"}, ThresholdAs: "threshold"}},
			in:    []float32{0.5}, names: "p,label,threshold", want: []float32{0.5, 1, 0.5}, labels: map[string][]string{"label": {"ok", "fraud"}}},
		{name: "threshold below, no labels", outputs: []string{"p"}, steps: []Step{{Op: "threshold", Output: "p", As: "y", Threshold: f(0.5)}},
			in: []float32{0.49}, names: "p,y", want: []float32{0.49, 0}},
		{name: "threshold of NaN", outputs: []string{"p"}, steps: []Step{{Op: "threshold", Output: "p", As: "y", Threshold: f(0.5)}},
			in: []float32{nan}, names: "p,y", want: []float32{nan, nan}},
		{name: "topk", outputs: []string{"a", "b", "c"}, steps: []Step{{Op: "topk", K: 2, Labels: []string{"setosa", "versicolor", "virginica"}}},
			in: []float32{0.2, 0.5, 0.3}, names: "a,b,c,top1,top1Score,top2,top2Score", want: []float32{0.2, 0.5, 0.3, 1, 0.5, 2, 0.3},
			labels: map[string][]string{"top1": {"setosa", "versicolor", "virginica"}}},
		{name: "topk ties keep order", outputs: []string{"a", "b"}, steps: []Step{{Op: "topk", As: "best", Labels: []string{"x", "y"}}},
			in: []float32{0.5, 0.5}, names: "a,b,best1,best1Score", want: []float32{0.5, 0.5, 0, 0.5}},
		{name: "clip and round", outputs: []string{"y"}, steps: []Step{{Op: "clip", Output: "y", Min: f(0), Max: f(100)}, {Op: "round", Output: "y", As: "r", Digits: i(1)}},
			in: []float32{123.456}, names: "y,r", want: []float32{100, 100}},
		{name: "round half to even", outputs: []string{"y"}, steps: []Step{{Op: "round", Output: "y", Digits: i(0)}},
			in: []float32{2.5}, names: "y", want: []float32{2}},
		{name: "map a label to a code", outputs: []string{"p"}, steps: []Step{
			{Op: "threshold", Output: "p", As: "label", Threshold: f(0.5), Labels: []string{"ok", "fraud"}},
			{Op: "map", Output: "label", As: "action", Values: map[string]string{"fraud": "REVIEW", "ok": "APPROVE"}}},
			in: []float32{0.9}, names: "p,label,action", want: []float32{0.9, 1, 0}, labels: map[string][]string{"action": {"REVIEW", "APPROVE"}}},
		{name: "map a number, default", outputs: []string{"k"}, steps: []Step{{Op: "map", Output: "k", As: "code", Values: map[string]string{"1": "A", "2.5": "B"}, Default: s("Z")}},
			in: []float32{3}, names: "k,code", want: []float32{3, 2}, labels: map[string][]string{"code": {"A", "B", "Z"}}},
		{name: "map without default", outputs: []string{"k"}, steps: []Step{{Op: "map", Output: "k", As: "code", Values: map[string]string{"2.5": "B"}}},
			in: []float32{2.5}, names: "k,code", want: []float32{2.5, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, ps := Compile(c.outputs, c.steps)
			if len(ps) > 0 {
				t.Fatalf("problems %v", ps)
			}
			if got := strings.Join(ch.Names(), ","); got != c.names {
				t.Fatalf("names %s, want %s", got, c.names)
			}
			for name, want := range c.labels {
				for _, col := range ch.Columns() {
					if col.Name == name && strings.Join(col.Labels, ",") != strings.Join(want, ",") {
						t.Errorf("%s labels %v, want %v", name, col.Labels, want)
					}
				}
			}
			out := ch.Apply(runtime.Output{Rows: 1, Cols: len(c.outputs), Data: c.in})
			for j, w := range c.want {
				if g := out.Data[j]; !(g == w || g != g && w != w) && math.Abs(float64(g-w)) > 1e-6 {
					t.Errorf("column %d: %v, want %v (row %v)", j, g, w, out.Data)
				}
			}
		})
	}
}

// TestCompileProblems: every bad step is refused with its key path and a
// message that says what to write.
func TestCompileProblems(t *testing.T) {
	cases := []struct {
		steps []Step
		path  string
		msg   string
	}{
		{[]Step{{Op: "sigmoid", Output: "p"}}, "postprocess[0].op", `unknown op "sigmoid" (one of: calibrate, clip, map, round, threshold, topk)`},
		{[]Step{{Op: "clip", Output: "q", Min: f(0)}}, "postprocess[0].output", `unknown output "q" (the columns so far: p)`},
		{[]Step{{Op: "clip", Min: f(0)}}, "postprocess[0].output", "is required"},
		{[]Step{{Op: "clip", Output: "p", Digits: i(2), Min: f(0)}}, "postprocess[0].digits", "does not apply to op clip (its parameters: min, max)"},
		{[]Step{{Op: "clip", Output: "p", Min: f(2), Max: f(1)}}, "postprocess[0].min", "must be <= max"},
		{[]Step{{Op: "calibrate", Output: "p", Method: "platt", A: f(1)}}, "postprocess[0]", "platt calibration needs finite a and b"},
		{[]Step{{Op: "calibrate", Output: "p", Method: "beta"}}, "postprocess[0].method", `must be platt (a, b) or isotonic (x, y), got "beta"`},
		{[]Step{{Op: "calibrate", Output: "p", Method: "isotonic", X: []float64{0, 1}, Y: []float64{0}}}, "postprocess[0].y", "must have one value per x"},
		{[]Step{{Op: "calibrate", Output: "p", Method: "isotonic", X: []float64{1, 0}, Y: []float64{0, 1}}}, "postprocess[0].x[1]", "x must not decrease"},
		{[]Step{{Op: "threshold", Output: "p", As: "y"}}, "postprocess[0].threshold", "is required"},
		{[]Step{{Op: "threshold", Output: "p", Threshold: f(0.5)}}, "postprocess[0].as", "is required: the name of the column the step adds"},
		{[]Step{{Op: "threshold", Output: "p", As: "p", Threshold: f(0.5)}}, "postprocess[0].as", `output "p" exists already`},
		{[]Step{{Op: "threshold", Output: "p", As: "y", Threshold: f(0.5), Labels: []string{"a"}}}, "postprocess[0].labels", "must be two distinct non-empty labels"},
		{[]Step{{Op: "threshold", Output: "p", As: "y", Threshold: f(0.5), Labels: []string{"a", "b"}}, {Op: "round", Output: "y", Digits: i(1)}}, "postprocess[1].output", `"y" holds labels, not numbers`},
		{[]Step{{Op: "topk", Labels: []string{"a"}}}, "postprocess[0].outputs", "topk ranks at least two outputs"},
		{[]Step{{Op: "round", Output: "p"}}, "postprocess[0].digits", "is required"},
		{[]Step{{Op: "map", Output: "p", As: "c", Values: map[string]string{"x": "A"}}}, "postprocess[0].values.x", `"x" is not a number`},
		{[]Step{{Op: "map", Output: "p", As: "c"}}, "postprocess[0].values", "must map at least one value"},
	}
	for _, c := range cases {
		_, ps := Compile([]string{"p"}, c.steps)
		found := false
		for _, p := range ps {
			if p.Path == c.path && strings.Contains(p.Message, c.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%+v: problems %v, want %s: %s", c.steps, ps, c.path, c.msg)
		}
	}
}
