package xgboost

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestExampleGoldens checks the example models in examples/ against the
// golden predictions that scripts/make_examples.py recorded from xgboost,
// applying the same preprocessing the script documents.
func TestExampleGoldens(t *testing.T) {
	type golden struct {
		Instance map[string]any     `json:"instance"`
		Expect   map[string]float64 `json:"expect"`
	}
	nan := float32(math.NaN())
	num := func(in map[string]any, k string) (float64, bool) {
		v, ok := in[k].(float64)
		return v, ok
	}
	cases := []struct {
		name     string
		features func(map[string]any) []float32
		outputs  []string
	}{
		{"fraud", func(in map[string]any) []float32 {
			amount, _ := num(in, "amount")
			age, _ := num(in, "accountAgeDays")
			row := []float32{float32(math.Log1p(amount)), float32(age), nan, nan, nan, nan}
			if d, ok := num(in, "declines5m"); ok {
				row[2] = float32(d)
			}
			if c, ok := in["country"].(string); ok {
				for i, k := range []string{"US", "GB", "DE"} {
					row[3+i] = 0
					if c == k {
						row[3+i] = 1
					}
				}
			}
			return row
		}, []string{"riskScore"}},
		{"iris", func(in map[string]any) []float32 {
			var row []float32
			for _, k := range []string{"sepalLength", "sepalWidth", "petalLength", "petalWidth"} {
				v, _ := num(in, k)
				row = append(row, float32(v))
			}
			return row
		}, []string{"setosa", "versicolor", "virginica"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "..", "examples", tc.name)
			art, err := os.ReadFile(filepath.Join(dir, "model.json"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := Parse(art)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			var gs []golden
			if err := json.Unmarshal(raw, &gs); err != nil {
				t.Fatal(err)
			}
			if len(gs) != 3 {
				t.Fatalf("%d golden examples, want 3", len(gs))
			}
			for i, g := range gs {
				out, err := m.Predict(t.Context(), batchOf(tc.features(g.Instance)))
				if err != nil {
					t.Fatal(err)
				}
				if out.Cols != len(tc.outputs) {
					t.Fatalf("%d outputs, want %d", out.Cols, len(tc.outputs))
				}
				for k, name := range tc.outputs {
					want, ok := g.Expect[name]
					if !ok {
						t.Fatalf("example %d: no expected %s", i, name)
					}
					if got := float64(out.Data[k]); math.Abs(got-want) > 1e-6 {
						t.Errorf("example %d %s: got %v, golden %v", i, name, got, want)
					}
				}
			}
		})
	}
}
