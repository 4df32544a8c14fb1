package xgboost

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

// benchFixture loads the 500-tree model and the 1000 rows written by
// scripts/make_bench_model.py, skipping when they are absent.
func benchFixture(tb testing.TB) (*Model, runtime.Batch) {
	tb.Helper()
	art, err := os.ReadFile("testdata/bench500.ubj")
	if os.IsNotExist(err) {
		tb.Skip("testdata/bench500.ubj is absent; run /usr/bin/python3 scripts/make_bench_model.py")
	}
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/bench_rows.f32")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := Parse(art)
	if err != nil {
		tb.Fatal(err)
	}
	cols := m.Info().Inputs
	if len(raw)%(4*cols) != 0 {
		tb.Fatalf("bench_rows.f32: %d bytes is not a whole number of %d-float rows", len(raw), cols)
	}
	in := runtime.Batch{Rows: len(raw) / (4 * cols), Cols: cols, Data: make([]float32, len(raw)/4)}
	for i := range in.Data {
		in.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return m, in
}

// TestBenchModelMatchesXGBoost keeps the benchmark honest: the 500-tree model
// must also be bit-exact.
func TestBenchModelMatchesXGBoost(t *testing.T) {
	m, in := benchFixture(t)
	var exp struct {
		Margin []uint32 `json:"margin"`
	}
	readJSON(t, "bench500.expect.json", &exp)
	if len(exp.Margin) != in.Rows {
		t.Fatalf("%d expected margins for %d rows", len(exp.Margin), in.Rows)
	}
	if got := m.Info().Detail; got != "gbtree, 500 trees, binary:logistic" {
		t.Fatalf("Detail = %q", got)
	}
	out, err := m.PredictMargin(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for r, want := range exp.Margin {
		if got := math.Float32bits(out.Data[r]); got != want {
			t.Fatalf("row %d: margin %v, xgboost %v", r, out.Data[r], math.Float32frombits(want))
		}
	}
	// One row at a time takes the other walk (one row through eight trees
	// at a time, 500 = 62*8+4 so the last four trees one by one), and
	// batches of 13 rows mix both.
	for _, size := range []int{1, 13} {
		for start := 0; start < in.Rows; start += size {
			n := min(size, in.Rows-start)
			part := runtime.Batch{Rows: n, Cols: in.Cols, Data: in.Data[start*in.Cols : (start+n)*in.Cols]}
			got, err := m.PredictMargin(context.Background(), part)
			if err != nil {
				t.Fatal(err)
			}
			for r := range n {
				if g, want := math.Float32bits(got.Data[r]), exp.Margin[start+r]; g != want {
					t.Fatalf("batches of %d, row %d: margin %v, xgboost %v", size, start+r, got.Data[r], math.Float32frombits(want))
				}
			}
		}
	}
}

// BenchmarkPredict500Trees predicts 1000 rows with 500 trees in one call on
// one goroutine, as scripts/bench_xgboost.py does with xgboost.
func BenchmarkPredict500Trees(b *testing.B) {
	m, in := benchFixture(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Predict(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(in.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkPredictSingleRow is the latency of one row through 500 trees.
func BenchmarkPredictSingleRow(b *testing.B) {
	m, in := benchFixture(b)
	ctx := context.Background()
	row := runtime.Batch{Rows: 1, Cols: in.Cols}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		row.Data = in.Row(i % in.Rows)
		if _, err := m.Predict(ctx, row); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkLoad500Trees is the cost of decoding and flattening the
// 500-tree model from UBJSON.
func BenchmarkLoad500Trees(b *testing.B) {
	art, err := os.ReadFile("testdata/bench500.ubj")
	if os.IsNotExist(err) {
		b.Skip("testdata/bench500.ubj is absent; run /usr/bin/python3 scripts/make_bench_model.py")
	}
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(art)))
	for b.Loop() {
		if _, err := Parse(art); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPredictCategorical predicts 1024 rows (cat_rows.json repeated)
// with cat_softprob, a model with categorical and numerical splits (18
// trees, 3 classes), in one call: the categorical walk's cost.
func BenchmarkPredictCategorical(b *testing.B) {
	m := loadFile(b, "cat_softprob.json")
	rows := rowsFile(b, "cat_rows.json")
	in := runtime.Batch{Cols: rows.Cols}
	for in.Rows < 1024 {
		n := min(rows.Rows, 1024-in.Rows)
		in.Data = append(in.Data, rows.Data[:n*rows.Cols]...)
		in.Rows += n
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Predict(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(in.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
