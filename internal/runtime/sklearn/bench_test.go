package sklearn

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

// benchFixture loads the 500-tree HistGradientBoostingClassifier and the
// 1000 rows written by scripts/make_sklearn_fixtures.py --bench (the shape
// of the xgboost runtime's benchmark: 500 trees of depth 6, 30 features,
// 5% missing), skipping when they are absent.
func benchFixture(tb testing.TB) (*Model, runtime.Batch) {
	tb.Helper()
	art, err := os.ReadFile("testdata/bench500.json")
	if os.IsNotExist(err) {
		tb.Skip("testdata/bench500.json is absent; run /usr/bin/python3 scripts/make_sklearn_fixtures.py --bench")
	}
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/bench_rows.f32")
	if os.IsNotExist(err) {
		tb.Skip("testdata/bench_rows.f32 is absent; run /usr/bin/python3 scripts/make_sklearn_fixtures.py --bench")
	}
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

// TestBenchModelMatchesScikitLearn keeps the benchmark honest: the
// 500-tree model's probabilities must be scikit-learn's.
func TestBenchModelMatchesScikitLearn(t *testing.T) {
	m, in := benchFixture(t)
	raw, err := os.ReadFile("testdata/bench500.expect.json")
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Probability []float64 `json:"probability"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	out, err := m.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for r, want := range exp.Probability {
		if got := float64(out.Row(r)[2]); math.Abs(got-want) > 1e-6 {
			t.Fatalf("row %d: probability %v, scikit-learn %v", r, got, want)
		}
	}
}

// BenchmarkPredict500Trees predicts 1000 rows with 500 trees in one call
// on one goroutine, as scripts/bench_sklearn.py does with scikit-learn.
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
// 500-tree model from its JSON.
func BenchmarkLoad500Trees(b *testing.B) {
	art, err := os.ReadFile("testdata/bench500.json")
	if os.IsNotExist(err) {
		b.Skip("testdata/bench500.json is absent; run /usr/bin/python3 scripts/make_sklearn_fixtures.py --bench")
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

// BenchmarkPredictForest predicts 1024 rows (rf_clf's rows repeated) with
// rf_clf, a forest whose leaves hold a probability per class: the vector
// leaves' cost.
func BenchmarkPredictForest(b *testing.B) {
	m := loadFixture(b, "rf_clf")
	rows, _ := readExpect(b, "rf_clf")
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

// BenchmarkPredictCategorical predicts 1024 rows (hgb_clf3's rows
// repeated, with missing values and unknown categories) with hgb_clf3, a
// HistGradientBoostingClassifier with categorical splits: the
// bounds-checked walk's cost.
func BenchmarkPredictCategorical(b *testing.B) {
	m := loadFixture(b, "hgb_clf3")
	rows, _ := readExpect(b, "hgb_clf3")
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
