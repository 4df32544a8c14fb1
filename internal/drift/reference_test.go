package drift

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func col(vals ...float64) [][]float32 {
	rows := make([][]float32, len(vals))
	for i, v := range vals {
		rows[i] = []float32{float32(v)}
	}
	return rows
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestBuildReference(t *testing.T) {
	nan := math.NaN()
	seq := make([]float64, 1000)
	for i := range seq {
		seq[i] = float64(i)
	}
	tests := []struct {
		name string
		rows [][]float32
		bins int
		want Hist
	}{
		{"uniform deciles", col(seq...), 10, Hist{
			Edges:  []float64{99, 199, 299, 399, 499, 599, 699, 799, 899},
			Counts: []float64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100},
		}},
		{"default bins", col(seq...), 0, Hist{
			Edges:  []float64{99, 199, 299, 399, 499, 599, 699, 799, 899},
			Counts: []float64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100},
		}},
		{"one-hot mostly zero", col(append(repeat(0, 70), repeat(1, 30)...)...), 10, Hist{
			Edges: []float64{0}, Counts: []float64{70, 30},
		}},
		{"one-hot mostly one", col(append(repeat(0, 5), repeat(1, 95)...)...), 10, Hist{
			Edges: []float64{0}, Counts: []float64{5, 95},
		}},
		{"constant", col(repeat(3, 50)...), 10, Hist{
			Edges: []float64{math.Nextafter(3, math.Inf(-1)), 3}, Counts: []float64{0, 50, 0},
		}},
		{"all missing", col(repeat(nan, 7)...), 10, Hist{
			Edges: []float64{}, Counts: []float64{0}, Missing: 7,
		}},
		{"some missing", col(1, nan, 2, nan, 3, 4), 2, Hist{
			Edges: []float64{2}, Counts: []float64{2, 2}, Missing: 2,
		}},
		{"ties deduplicated", col(1, 1, 1, 1, 2, 2, 2, 2, 3, 4), 10, Hist{
			Edges: []float64{1, 2, 3}, Counts: []float64{4, 4, 1, 1},
		}},
		{"infinities are values, not edges", col(math.Inf(-1), 1, 2, math.Inf(1)), 4, Hist{
			Edges: []float64{1, 2}, Counts: []float64{2, 1, 1},
		}},
		{"short rows are missing", [][]float32{{1}, {}, {2}}, 2, Hist{
			Edges: []float64{1}, Counts: []float64{1, 1}, Missing: 1,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := BuildReference([]string{"x"}, nil, tt.rows, nil, tt.bins)
			tt.want.Name = "x"
			if len(ref.Features) != 1 || !reflect.DeepEqual(ref.Features[0], tt.want) {
				t.Fatalf("got %+v\nwant %+v", ref.Features, tt.want)
			}
			if err := ref.Check([]string{"x"}, nil); err != nil {
				t.Fatalf("check: %v", err)
			}
			b, err := json.Marshal(ref)
			if err != nil {
				t.Fatal(err)
			}
			var back Reference
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Features, ref.Features) {
				t.Fatalf("json round trip: %s", b)
			}
		})
	}
}

func TestBuildReferenceOutputs(t *testing.T) {
	ref := BuildReference([]string{"a", "b"}, []string{"p"},
		[][]float32{{1, 0}, {2, 1}}, [][]float32{{0.1}, {0.9}}, 4)
	if err := ref.Check([]string{"a", "b"}, []string{"p"}); err != nil {
		t.Fatal(err)
	}
	if got := ref.Outputs[0].Total(); got != 2 {
		t.Fatalf("output total %v, want 2", got)
	}
}

func TestCheck(t *testing.T) {
	good := func() Hist { return Hist{Name: "x", Edges: []float64{0, 1}, Counts: []float64{1, 2, 3}} }
	tests := []struct {
		name   string
		edit   func(*Reference)
		errHas string
	}{
		{"good", func(*Reference) {}, ""},
		{"no name", func(r *Reference) { r.Features[0].Name = "" }, "no name"},
		{"no bins", func(r *Reference) { r.Features[0].Counts = nil; r.Features[0].Edges = nil }, "has 0 bins"},
		{"edges count", func(r *Reference) { r.Features[0].Edges = []float64{0} }, "3 bins need 2 edges, got 1"},
		{"edges order", func(r *Reference) { r.Features[0].Edges = []float64{1, 1} }, "edge 1 (1) is not above edge 0 (1)"},
		{"edge nan", func(r *Reference) { r.Features[0].Edges[0] = math.NaN() }, "edges must be finite"},
		{"negative count", func(r *Reference) { r.Features[0].Counts[1] = -1 }, "count 1 is -1"},
		{"negative missing", func(r *Reference) { r.Features[0].Missing = -1 }, "missing is -1"},
		{"empty", func(r *Reference) { r.Features[0].Counts = []float64{0, 0, 0} }, "total weight must be finite and > 0"},
		{"wrong name", func(r *Reference) { r.Outputs[0].Name = "q" }, `output 0: histogram "q", want "p"`},
		{"missing output", func(r *Reference) { r.Outputs = nil }, "reference has 0 output histograms, the model has 1 outputs"},
		{"too many bins", func(r *Reference) {
			r.Features[0].Counts = make([]float64, MaxBins+1)
		}, "has 1001 bins"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := good()
			out.Name = "p"
			r := Reference{Features: []Hist{good()}, Outputs: []Hist{out}}
			tt.edit(&r)
			err := r.Check([]string{"x"}, []string{"p"})
			switch {
			case tt.errHas == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)):
				t.Fatalf("error %v, want one containing %q", err, tt.errHas)
			}
		})
	}
}
