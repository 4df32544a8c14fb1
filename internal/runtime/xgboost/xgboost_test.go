package xgboost

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

// fixtureRows loads the shared test rows written by
// scripts/make_xgboost_fixtures.py.
func fixtureRows(t testing.TB) runtime.Batch { return rowsFile(t, "rows.json") }

// rowsFile loads test rows (rows.json, or cat_rows.json for the
// categorical models).
func rowsFile(t testing.TB, name string) runtime.Batch {
	t.Helper()
	var f struct {
		Cols int        `json:"cols"`
		Rows [][]uint32 `json:"rows"`
	}
	readJSON(t, name, &f)
	b := runtime.Batch{Rows: len(f.Rows), Cols: f.Cols}
	for _, r := range f.Rows {
		if len(r) != f.Cols {
			t.Fatalf("%s: row has %d values, want %d", name, len(r), f.Cols)
		}
		for _, u := range r {
			b.Data = append(b.Data, math.Float32frombits(u))
		}
	}
	return b
}

func readJSON(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func loadFile(t testing.TB, name string) *Model {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// TestMatchesXGBoost compares every fixture model, in every format it was
// saved in, against XGBoost's own predictions: margins bit for bit,
// transformed predictions within 1e-6 (relative above 1).
func TestMatchesXGBoost(t *testing.T) {
	rows := fixtureRows(t)
	catRows := rowsFile(t, "cat_rows.json")
	nanRows := 0
	for r := range rows.Rows {
		for _, v := range rows.Row(r) {
			if v != v {
				nanRows++
				break
			}
		}
	}
	if nanRows == 0 {
		t.Fatal("fixture rows contain no missing values")
	}
	cases := []struct {
		name    string
		formats []string
		outCols int
		groups  int
		cat     bool // categorical: trained on a pandas frame, predicted on cat_rows.json
	}{
		{"binary_logistic", []string{"json", "ubj"}, 1, 1, false},
		{"binary_logitraw", []string{"json", "ubj"}, 1, 1, false},
		{"reg_squarederror", []string{"json", "ubj"}, 1, 1, false},
		{"reg_logistic", []string{"json", "ubj"}, 1, 1, false},
		{"count_poisson", []string{"json", "ubj"}, 1, 1, false},
		{"multi_softprob", []string{"json", "ubj"}, 3, 3, false},
		{"multi_softmax", []string{"json", "ubj"}, 1, 4, false},
		{"parallel_trees", []string{"json", "ubj"}, 1, 1, false},
		{"pruned_exact", []string{"json", "ubj"}, 1, 1, false},
		{"tiny_binary", []string{"json", "ubj"}, 1, 1, false},
		{"tiny_softprob", []string{"json", "ubj"}, 3, 3, false},
		// issue 24: the other objectives and boosters people train
		{"reg_absoluteerror", []string{"json", "ubj"}, 1, 1, false},
		{"reg_pseudohubererror", []string{"json", "ubj"}, 1, 1, false},
		{"reg_squaredlogerror", []string{"json", "ubj"}, 1, 1, false},
		{"reg_tweedie", []string{"json", "ubj"}, 1, 1, false},
		{"reg_gamma", []string{"json", "ubj"}, 1, 1, false},
		{"binary_hinge", []string{"json", "ubj"}, 1, 1, false},
		{"rank_pairwise", []string{"json", "ubj"}, 1, 1, false},
		{"rank_ndcg", []string{"json", "ubj"}, 1, 1, false},
		{"rank_map", []string{"json", "ubj"}, 1, 1, false},
		{"survival_cox", []string{"json", "ubj"}, 1, 1, false},
		{"survival_aft", []string{"json", "ubj"}, 1, 1, false},
		{"multi_target", []string{"json", "ubj"}, 3, 3, false},
		{"multi_label", []string{"json", "ubj"}, 3, 3, false},
		{"vector_base_score", []string{"json"}, 3, 3, false},
		{"quantile_v2", []string{"json"}, 3, 3, false},
		{"quantile_v34", []string{"json"}, 3, 3, false},
		{"dart_binary", []string{"json", "ubj"}, 1, 1, false},
		{"dart_softprob", []string{"json", "ubj"}, 3, 3, false},
		{"dart_reg", []string{"json", "ubj"}, 1, 1, false},
		{"cat_binary", []string{"json", "ubj"}, 1, 1, true},
		{"cat_onehot", []string{"json", "ubj"}, 1, 1, true},
		{"cat_softprob", []string{"json", "ubj"}, 3, 3, true},
		{"cat_dart", []string{"json", "ubj"}, 1, 1, true},
	}
	for _, tc := range cases {
		rows := rows
		if tc.cat {
			rows = catRows
		}
		var exp struct {
			Margin [][]uint32 `json:"margin"`
			Pred   [][]uint32 `json:"pred"`
		}
		readJSON(t, tc.name+".expect.json", &exp)
		if len(exp.Margin) != rows.Rows || len(exp.Pred) != rows.Rows {
			t.Fatalf("%s: expectations for %d/%d rows, have %d rows", tc.name, len(exp.Margin), len(exp.Pred), rows.Rows)
		}
		for _, format := range tc.formats {
			t.Run(tc.name+"."+format, func(t *testing.T) {
				m := loadFile(t, tc.name+"."+format)
				if got := m.Info(); got.Inputs != rows.Cols || got.Outputs != tc.outCols {
					t.Fatalf("Info() = %+v, want %d inputs, %d outputs", got, rows.Cols, tc.outCols)
				}
				if m.NumGroups() != tc.groups {
					t.Fatalf("NumGroups() = %d, want %d", m.NumGroups(), tc.groups)
				}
				mg, err := m.PredictMargin(context.Background(), rows)
				if err != nil {
					t.Fatal(err)
				}
				pr, err := m.Predict(context.Background(), rows)
				if err != nil {
					t.Fatal(err)
				}
				if mg.Cols != tc.groups || pr.Cols != tc.outCols || mg.Rows != rows.Rows || pr.Rows != rows.Rows {
					t.Fatalf("shapes: margin %dx%d, pred %dx%d", mg.Rows, mg.Cols, pr.Rows, pr.Cols)
				}
				bad := 0
				for r := range rows.Rows {
					for k, want := range exp.Margin[r] {
						if got := math.Float32bits(mg.Row(r)[k]); got != want && bad < 5 {
							bad++
							t.Errorf("row %d margin %d: got %v (%#08x), xgboost %v (%#08x)", r, k,
								math.Float32frombits(got), got, math.Float32frombits(want), want)
						}
					}
					for k, wantBits := range exp.Pred[r] {
						got, want := float64(pr.Row(r)[k]), float64(math.Float32frombits(wantBits))
						if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) && bad < 5 {
							bad++
							t.Errorf("row %d prediction %d: got %v, xgboost %v", r, k, got, want)
						}
					}
				}
			})
		}
	}
}

func TestRegistered(t *testing.T) {
	rt, err := runtime.Lookup("xgboost")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/binary_logistic.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Load(context.Background(), runtime.Spec{Name: "fraud@1", Features: 8, Outputs: 1}, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Info().Detail; got != "gbtree, 20 trees, binary:logistic" {
		t.Errorf("Detail = %q", got)
	}
	_, err = rt.Load(context.Background(), runtime.Spec{Name: "fraud@1", Features: 6}, b)
	if err == nil || err.Error() != "xgboost: fraud@1: model reads 8 features, package schema produces 6" {
		t.Errorf("feature mismatch: err = %v", err)
	}
	_, err = rt.Load(context.Background(), runtime.Spec{Name: "fraud@1"}, b[:100])
	if err == nil || !strings.HasPrefix(err.Error(), "xgboost: fraud@1: json: ") {
		t.Errorf("truncated: err = %v", err)
	}
}

// TestFeatureNames: the artifact's own feature names reach Info (for the
// check of the schema's field order) and Describe; a model trained on an
// unnamed array has none.
func TestFeatureNames(t *testing.T) {
	for _, format := range []string{"json", "ubj"} {
		m := tinyModel()
		learnerOf(m)["feature_names"] = []any{"income", "age"}
		learnerOf(m)["feature_types"] = []any{"float", "int"}
		art := mustJSON(t, m)
		if format == "ubj" {
			art = mustUBJ(m)
		}
		got, err := Parse(art)
		if err != nil {
			t.Fatal(err)
		}
		if n := got.Info().FeatureNames; strings.Join(n, ",") != "income,age" {
			t.Errorf("%s: Info().FeatureNames = %q", format, n)
		}
		d, err := Describe(art)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(d.FeatureNames, ",") != "income,age" || strings.Join(d.FeatureTypes, ",") != "float,int" {
			t.Errorf("%s: Describe = %+v", format, d)
		}
	}
	for _, f := range []string{"cat_binary.json", "cat_binary.ubj"} {
		if n := loadFile(t, f).Info().FeatureNames; strings.Join(n, ",") != "color,city,amount,visits" {
			t.Errorf("%s: FeatureNames = %q", f, n)
		}
	}
	if n := loadFile(t, "binary_logistic.json").Info().FeatureNames; n != nil {
		t.Errorf("unnamed model: FeatureNames = %q", n)
	}
}

func TestPredictInputChecks(t *testing.T) {
	m := loadFile(t, "binary_logistic.json")
	ctx := context.Background()
	cases := []struct {
		name string
		in   runtime.Batch
		want string
	}{
		{"too few columns", runtime.Batch{Rows: 1, Cols: 7, Data: make([]float32, 7)}, "batch has 7 columns, model reads 8 features"},
		{"too many columns", runtime.Batch{Rows: 1, Cols: 9, Data: make([]float32, 9)}, "batch has 9 columns, model reads 8 features"},
		{"short data", runtime.Batch{Rows: 2, Cols: 8, Data: make([]float32, 8)}, "batch data has 8 values, want 2 rows x 8 columns"},
		{"negative rows", runtime.Batch{Rows: -1, Cols: 8}, "invalid batch shape"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Predict(ctx, tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	out, err := m.Predict(ctx, runtime.Batch{Cols: 8})
	if err != nil || out.Rows != 0 || len(out.Data) != 0 {
		t.Fatalf("empty batch: %+v, %v", out, err)
	}
}

func TestPredictHonoursContext(t *testing.T) {
	m := loadFile(t, "binary_logistic.json")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Predict(ctx, runtime.Batch{Rows: 1, Cols: 8, Data: make([]float32, 8)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestLargeBatchMatchesRowByRow checks the blocked evaluation (rows in
// blocks, trees outer) against one row at a time, across block boundaries.
func TestLargeBatchMatchesRowByRow(t *testing.T) {
	for _, name := range []string{"binary_logistic.json", "multi_softprob.json", "cat_softprob.json", "dart_binary.ubj"} {
		rows := fixtureRows(t)
		if strings.HasPrefix(name, "cat_") {
			rows = rowsFile(t, "cat_rows.json")
		}
		m := loadFile(t, name)
		// repeat the rows to cross both the row block and the ctx block
		big := runtime.Batch{Cols: rows.Cols}
		for big.Rows < 2*ctxBlock+rowBlock+3 {
			big.Data = append(big.Data, rows.Data...)
			big.Rows += rows.Rows
		}
		all, err := m.PredictMargin(context.Background(), big)
		if err != nil {
			t.Fatal(err)
		}
		for r := range big.Rows {
			one, err := m.PredictMargin(context.Background(), runtime.Batch{Rows: 1, Cols: big.Cols, Data: big.Row(r)})
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range one.Data {
				if math.Float32bits(v) != math.Float32bits(all.Row(r)[k]) {
					t.Fatalf("%s row %d col %d: batch %v, single %v", name, r, k, all.Row(r)[k], v)
				}
			}
		}
	}
}

func batchOf(rows ...[]float32) runtime.Batch {
	b := runtime.Batch{Rows: len(rows), Cols: len(rows[0])}
	for _, r := range rows {
		b.Data = append(b.Data, r...)
	}
	return b
}
