// Package postproc runs a version's post-processing: the steps of
// model.yaml postprocess: that turn the model's output columns into the
// answer's (calibration, a threshold to a label, the top k classes, clip,
// round, a mapping to business codes). A Chain is compiled once per
// version and applied to every answer where the answers are made (the
// gateway, after the version's server computed, in process or on a
// worker), so every transport, record and batch job sees the same
// outputs. Pure functions of float32 rows: no I/O, no state.
//
// Every answer column is a float32. A labelled column (Column.Labels: a
// threshold's or top-k's class names, a map's codes) holds the index of
// its label, NaN for none; transports render the label.
package postproc

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/sluiceml/sluice/internal/runtime"
)

// MaxSteps bounds the steps of one chain; MaxTable the points of one
// isotonic table, the labels of one step and the cases of one map.
const (
	MaxSteps = 64
	MaxTable = 1 << 16
)

// Step is one step of model.yaml postprocess:.
type Step struct {
	Op string `yaml:"op"`
	// Output is the column the step reads (every op but topk).
	Output string `yaml:"output,omitempty"`
	// As names the column the step writes: a new column, or (calibrate,
	// clip, round; the default) Output itself.
	As string `yaml:"as,omitempty"`

	// calibrate: method platt (a, b: p = 1 / (1 + exp(a·x + b)), as
	// scikit-learn's CalibratedClassifierCV(method="sigmoid")) or
	// isotonic (x, y: the fitted IsotonicRegression's X_thresholds_ and
	// y_thresholds_; linear between points, clipped at the ends).
	Method string    `yaml:"method,omitempty"`
	A      *float64  `yaml:"a,omitempty"`
	B      *float64  `yaml:"b,omitempty"`
	X      []float64 `yaml:"x,omitempty"`
	Y      []float64 `yaml:"y,omitempty"`

	// threshold: the label is labels[1] (or 1) when the value is >=
	// threshold, else labels[0] (or 0). ThresholdAs adds a column holding
	// the threshold itself.
	Threshold   *float64 `yaml:"threshold,omitempty"`
	ThresholdAs string   `yaml:"thresholdAs,omitempty"`
	// Labels: threshold's [below, atOrAbove]; topk's class names, one per
	// output in Outputs' order.
	Labels []string `yaml:"labels,omitempty"`

	// topk: the k largest of Outputs (default all the model's columns):
	// columns As1…Ask (the class's label) and As1Score…AskScore.
	Outputs []string `yaml:"outputs,omitempty"`
	K       int      `yaml:"k,omitempty"`

	// clip
	Min *float64 `yaml:"min,omitempty"`
	Max *float64 `yaml:"max,omitempty"`
	// round: to this many decimal digits (0–9), half to even as numpy.round.
	Digits *int `yaml:"digits,omitempty"`

	// map: the value (a labelled column's label, else the number as
	// written) to a business code; Default for any other value.
	Values  map[string]string `yaml:"values,omitempty"`
	Default *string           `yaml:"default,omitempty"`
}

// Column is one column of the answer.
type Column struct {
	Name string
	// Labels: the column holds an index into Labels (NaN: none).
	Labels []string
}

// Problem is one thing wrong with a step: Path is its key path
// ("postprocess[2].threshold").
type Problem struct {
	Path, Message string
}

// Chain is a compiled post-processing. The zero chain (no steps) passes
// the model's columns through. Safe for concurrent use.
type Chain struct {
	in   int // the model's columns
	cols []Column
	ops  []func(row []float32)
}

// Columns are the answer's columns, in order: the model's, then each
// column a step added.
func (c *Chain) Columns() []Column {
	if c == nil {
		return nil
	}
	return c.cols
}

// Names are the answer columns' names.
func (c *Chain) Names() []string {
	if c == nil {
		return nil
	}
	out := make([]string, len(c.cols))
	for i, col := range c.cols {
		out[i] = col.Name
	}
	return out
}

// Empty says the chain changes nothing.
func (c *Chain) Empty() bool { return c == nil || len(c.ops) == 0 }

// Apply runs the chain on the model's output: a new Output with the
// answer's columns (out itself when the chain is empty).
func (c *Chain) Apply(out runtime.Output) runtime.Output {
	if c == nil || c.Empty() {
		return out
	}
	w := len(c.cols)
	res := runtime.Output{Rows: out.Rows, Cols: w, Data: make([]float32, out.Rows*w)}
	for i := 0; i < out.Rows; i++ {
		row := res.Data[i*w : (i+1)*w]
		copy(row, out.Data[i*out.Cols:i*out.Cols+min(out.Cols, c.in)])
		for j := c.in; j < w; j++ {
			row[j] = float32(math.NaN())
		}
		for _, op := range c.ops {
			op(row)
		}
	}
	return res
}

// Compile checks steps against the model's output columns and compiles
// them, or returns every problem, each with its key path and the fix.
func Compile(outputs []string, steps []Step) (*Chain, []Problem) {
	c := &Chain{in: len(outputs)}
	for _, n := range outputs {
		c.cols = append(c.cols, Column{Name: n})
	}
	var ps []Problem
	if len(steps) > MaxSteps {
		return nil, []Problem{{"postprocess", fmt.Sprintf("has %d steps, at most %d are allowed", len(steps), MaxSteps)}}
	}
	for i, st := range steps {
		p := fmt.Sprintf("postprocess[%d]", i)
		if probs := c.add(p, st); len(probs) > 0 {
			ps = append(ps, probs...)
		}
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return c, nil
}

func (c *Chain) index(name string) int {
	for i, col := range c.cols {
		if col.Name == name {
			return i
		}
	}
	return -1
}

func (c *Chain) known() string { return strings.Join(c.Names(), ", ") }

// add compiles one step at key path p.
func (c *Chain) add(p string, st Step) []Problem {
	var ps []Problem
	bad := func(key, format string, args ...any) {
		path := p
		if key != "" {
			path += "." + key
		}
		ps = append(ps, Problem{path, fmt.Sprintf(format, args...)})
	}
	// Parameters belong to their op.
	given := map[string]bool{"method": st.Method != "", "a": st.A != nil, "b": st.B != nil, "x": st.X != nil, "y": st.Y != nil,
		"threshold": st.Threshold != nil, "thresholdAs": st.ThresholdAs != "", "labels": st.Labels != nil, "outputs": st.Outputs != nil,
		"k": st.K != 0, "min": st.Min != nil, "max": st.Max != nil, "digits": st.Digits != nil, "values": st.Values != nil, "default": st.Default != nil}
	allowed := map[string][]string{
		"calibrate": {"method", "a", "b", "x", "y"},
		"threshold": {"threshold", "thresholdAs", "labels"},
		"topk":      {"outputs", "k", "labels"},
		"clip":      {"min", "max"},
		"round":     {"digits"},
		"map":       {"values", "default"},
	}
	ok, known := allowed[st.Op]
	if !known {
		ops := make([]string, 0, len(allowed))
		for k := range allowed {
			ops = append(ops, k)
		}
		sort.Strings(ops)
		bad("op", "unknown op %q (one of: %s)", st.Op, strings.Join(ops, ", "))
		return ps
	}
	for _, k := range sortedKeys(given) {
		if given[k] && !contains(ok, k) {
			bad(k, "does not apply to op %s (its parameters: %s)", st.Op, strings.Join(ok, ", "))
		}
	}
	src := -1
	if st.Op == "topk" {
		if st.Output != "" {
			bad("output", "topk reads outputs:, not output: (the columns to rank; default every model output)")
		}
	} else {
		switch src = c.index(st.Output); {
		case st.Output == "":
			bad("output", "is required: the output column the step reads (one of: %s)", c.known())
		case src < 0:
			bad("output", "unknown output %q (the columns so far: %s)", st.Output, c.known())
		}
	}
	if len(ps) > 0 {
		return ps
	}
	// dst is where an in-place op writes: As (a new column) or the source.
	newCol := func(key, name string, labels []string) int {
		switch {
		case name == "":
			bad(key, "is required: the name of the column the step adds")
			return -1
		case c.index(name) >= 0:
			bad(key, "output %q exists already; choose another name", name)
			return -1
		}
		c.cols = append(c.cols, Column{Name: name, Labels: labels})
		return len(c.cols) - 1
	}
	inPlace := func() int {
		if st.As == "" || st.As == st.Output {
			return src
		}
		return newCol("as", st.As, c.cols[src].Labels)
	}
	numeric := func() bool {
		if c.cols[src].Labels != nil {
			bad("output", "%q holds labels, not numbers (%s needs a number)", st.Output, st.Op)
			return false
		}
		return true
	}
	switch st.Op {
	case "calibrate":
		if !numeric() {
			return ps
		}
		switch st.Method {
		case "platt":
			if st.A == nil || st.B == nil || !finite(*st.A) || !finite(*st.B) {
				bad("", "platt calibration needs finite a and b (p = 1 / (1 + exp(a·x + b)); CalibratedClassifierCV(method=\"sigmoid\")'s calibrators_[0].a_ and b_)")
				return ps
			}
			if st.X != nil || st.Y != nil {
				bad("x", "x and y are isotonic's table; platt takes a and b")
				return ps
			}
			a, b, dst := *st.A, *st.B, inPlace()
			c.ops = append(c.ops, func(r []float32) {
				r[dst] = float32(1 / (1 + math.Exp(a*float64(r[src])+b)))
			})
		case "isotonic":
			if st.A != nil || st.B != nil {
				bad("a", "a and b are platt's; isotonic takes the table x, y")
				return ps
			}
			if !checkTable(bad, st.X, st.Y) {
				return ps
			}
			x, y, dst := st.X, st.Y, inPlace()
			c.ops = append(c.ops, func(r []float32) { r[dst] = float32(interp(float64(r[src]), x, y)) })
		default:
			bad("method", "must be platt (a, b) or isotonic (x, y), got %q", st.Method)
		}
	case "threshold":
		if !numeric() {
			return ps
		}
		if st.Threshold == nil || !finite(*st.Threshold) {
			bad("threshold", "is required: a finite number; the label is the second when the value is >= it")
			return ps
		}
		if st.Labels != nil && (len(st.Labels) != 2 || !distinct(st.Labels)) {
			bad("labels", "must be two distinct non-empty labels: [below, atOrAbove], got %q", st.Labels)
			return ps
		}
		t := *st.Threshold
		dst := newCol("as", st.As, st.Labels)
		if dst < 0 {
			return ps
		}
		tcol := -1
		if st.ThresholdAs != "" {
			if tcol = newCol("thresholdAs", st.ThresholdAs, nil); tcol < 0 {
				return ps
			}
		}
		tf := float32(t)
		c.ops = append(c.ops, func(r []float32) {
			v := r[src]
			switch {
			case v != v:
				r[dst] = v
			case float64(v) >= t:
				r[dst] = 1
			default:
				r[dst] = 0
			}
			if tcol >= 0 {
				r[tcol] = tf
			}
		})
	case "topk":
		names := st.Outputs
		if names == nil {
			names = c.Names()[:c.in]
		}
		var idx []int
		for i, n := range names {
			j := c.index(n)
			switch {
			case j < 0:
				bad(fmt.Sprintf("outputs[%d]", i), "unknown output %q (the columns so far: %s)", n, c.known())
			case c.cols[j].Labels != nil:
				bad(fmt.Sprintf("outputs[%d]", i), "%q holds labels, not scores", n)
			}
			idx = append(idx, j)
		}
		if len(names) < 2 {
			bad("outputs", "topk ranks at least two outputs, got %d", len(names))
		}
		if len(st.Labels) != len(names) || !distinct(st.Labels) {
			bad("labels", "must name each ranked output's class, distinct and non-empty: %d labels for %d outputs (%s)", len(st.Labels), len(names), strings.Join(names, ", "))
		}
		k := st.K
		if k == 0 {
			k = 1
		}
		if k < 1 || k > len(names) {
			bad("k", "must be between 1 and %d (the outputs ranked), got %d", len(names), st.K)
		}
		if len(ps) > 0 {
			return ps
		}
		as := st.As
		if as == "" {
			as = "top"
		}
		var lab, score []int
		for i := 1; i <= k; i++ {
			l := newCol("as", as+strconv.Itoa(i), st.Labels)
			s := newCol("as", as+strconv.Itoa(i)+"Score", nil)
			if l < 0 || s < 0 {
				return ps
			}
			lab, score = append(lab, l), append(score, s)
		}
		c.ops = append(c.ops, func(r []float32) {
			order := make([]int, len(idx)) // positions in idx, best first
			for i := range order {
				order[i] = i
			}
			// A stable sort: ties keep the outputs' order, as
			// numpy.argsort(-p, kind="stable") does; NaN ranks last.
			sort.SliceStable(order, func(a, b int) bool {
				va, vb := r[idx[order[a]]], r[idx[order[b]]]
				if vb != vb {
					return va == va
				}
				return va > vb
			})
			for i := range lab {
				r[lab[i]] = float32(order[i])
				r[score[i]] = r[idx[order[i]]]
			}
		})
	case "clip":
		if !numeric() {
			return ps
		}
		lo, hi := math.Inf(-1), math.Inf(1)
		if st.Min != nil {
			lo = *st.Min
		}
		if st.Max != nil {
			hi = *st.Max
		}
		switch {
		case st.Min == nil && st.Max == nil:
			bad("", "clip needs min, max or both")
			return ps
		case math.IsNaN(lo) || math.IsNaN(hi) || lo > hi:
			bad("min", "must be <= max, got min %v max %v", lo, hi)
			return ps
		}
		dst := inPlace()
		c.ops = append(c.ops, func(r []float32) {
			v := float64(r[src])
			if v == v {
				v = math.Min(math.Max(v, lo), hi)
			}
			r[dst] = float32(v)
		})
	case "round":
		if !numeric() {
			return ps
		}
		if st.Digits == nil || *st.Digits < 0 || *st.Digits > 9 {
			bad("digits", "is required: the decimal digits to keep, 0 to 9")
			return ps
		}
		scale := math.Pow(10, float64(*st.Digits))
		dst := inPlace()
		c.ops = append(c.ops, func(r []float32) {
			r[dst] = float32(math.RoundToEven(float64(r[src])*scale) / scale)
		})
	case "map":
		if len(st.Values) == 0 || len(st.Values) > MaxTable {
			bad("values", "must map at least one value to its code (at most %d)", MaxTable)
			return ps
		}
		in := c.cols[src].Labels
		keys := sortedKeys(st.Values)
		var codes []string
		codeIx := map[string]int{}
		code := func(s string) int {
			if i, ok := codeIx[s]; ok {
				return i
			}
			codeIx[s] = len(codes)
			codes = append(codes, s)
			return len(codes) - 1
		}
		byLabel := map[int]int{}     // labelled input: label index -> code
		byValue := map[float32]int{} // numeric input: value -> code
		for _, k := range keys {
			v := st.Values[k]
			if v == "" {
				bad("values."+k, "the code must not be empty")
				continue
			}
			if in != nil {
				li := indexOf(in, k)
				if li < 0 {
					bad("values."+k, "%q is not a label of %s (its labels: %s)", k, st.Output, strings.Join(in, ", "))
					continue
				}
				byLabel[li] = code(v)
				continue
			}
			x, err := strconv.ParseFloat(k, 64)
			if err != nil || !finite(x) {
				bad("values."+k, "%q is not a number: %s holds numbers (map its values as written: \"0\", \"1\", \"2.5\")", k, st.Output)
				continue
			}
			byValue[float32(x)] = code(v)
		}
		def := -1
		if st.Default != nil {
			if *st.Default == "" {
				bad("default", "must not be empty (leave it out to answer null for an unmapped value)")
			}
			def = code(*st.Default)
		}
		if len(ps) > 0 {
			return ps
		}
		dst := newCol("as", st.As, codes)
		if dst < 0 {
			return ps
		}
		c.ops = append(c.ops, func(r []float32) {
			v, got := r[src], def
			if in != nil {
				if v == v {
					if ci, ok := byLabel[int(v)]; ok {
						got = ci
					}
				}
			} else if ci, ok := byValue[v]; ok {
				got = ci
			}
			if got < 0 {
				r[dst] = float32(math.NaN())
			} else {
				r[dst] = float32(got)
			}
		})
	}
	return ps
}

// checkTable checks an isotonic table: x non-decreasing, y as long, both
// finite, 1 to MaxTable points.
func checkTable(bad func(key, format string, args ...any), x, y []float64) bool {
	switch {
	case len(x) == 0 || len(x) > MaxTable:
		bad("x", "isotonic calibration needs the table x (IsotonicRegression's X_thresholds_): 1 to %d points, got %d", MaxTable, len(x))
		return false
	case len(y) != len(x):
		bad("y", "must have one value per x (y_thresholds_): %d for %d", len(y), len(x))
		return false
	}
	for i := range x {
		if !finite(x[i]) || !finite(y[i]) {
			bad(fmt.Sprintf("x[%d]", i), "the table must be finite numbers")
			return false
		}
		if i > 0 && x[i] < x[i-1] {
			bad(fmt.Sprintf("x[%d]", i), "x must not decrease, got %v after %v", x[i], x[i-1])
			return false
		}
	}
	return true
}

// interp is numpy.interp(v, x, y): linear between the table's points,
// clipped to its ends (IsotonicRegression's out_of_bounds="clip"); NaN
// stays NaN.
func interp(v float64, x, y []float64) float64 {
	if v != v {
		return v
	}
	n := len(x)
	if v <= x[0] {
		return y[0]
	}
	if v >= x[n-1] {
		return y[n-1]
	}
	i := sort.SearchFloat64s(x, v) // x[i-1] < v <= x[i]
	if x[i] == v {
		// numpy.interp takes the last of equal x's.
		for i+1 < n && x[i+1] == v {
			i++
		}
		return y[i]
	}
	x0, x1, y0, y1 := x[i-1], x[i], y[i-1], y[i]
	return y0 + (v-x0)*(y1-y0)/(x1-x0)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func distinct(xs []string) bool {
	seen := map[string]bool{}
	for _, x := range xs {
		if x == "" || seen[x] {
			return false
		}
		seen[x] = true
	}
	return true
}

func contains(xs []string, s string) bool { return indexOf(xs, s) >= 0 }

func indexOf(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Label is column j's label for value v ("" and false: none, or a
// numeric column).
func (c *Chain) Label(j int, v float32) (string, bool) {
	l := c.cols[j].Labels
	if l == nil || v != v || v < 0 || int(v) >= len(l) {
		return "", false
	}
	return l[int(v)], true
}
