package xgboost

import (
	"context"
	"math"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes (seeded with small real JSON and UBJSON
// models in testdata/fuzz/FuzzLoad) to the loader. Loading must return a
// model or an error, never panic, and any model it accepts must predict
// without panicking on ordinary, missing and infinite values.
func FuzzLoad(f *testing.F) {
	f.Add(mustJSON(f, tinyModel()))
	f.Add(mustUBJ(tinyModel()))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			if m != nil {
				t.Fatal("Parse returned a model and an error")
			}
			if !strings.HasPrefix(err.Error(), "xgboost: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		info := m.Info()
		if info.Inputs < 1 || info.Outputs < 1 {
			t.Fatalf("accepted model with info %+v", info)
		}
		if info.Inputs > 1<<12 {
			return // valid, but too wide to predict quickly here
		}
		vals := []float32{0, 1, -1, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0.5}
		rows := make([][]float32, 10)
		for r := range rows {
			rows[r] = make([]float32, info.Inputs)
			for c := range rows[r] {
				rows[r][c] = vals[(r+c)%len(vals)]
			}
		}
		out, err := m.Predict(context.Background(), batchOf(rows...))
		if err != nil {
			t.Fatal(err)
		}
		if out.Rows != len(rows) || out.Cols != info.Outputs || len(out.Data) != out.Rows*out.Cols {
			t.Fatalf("output shape %dx%d (%d values), info %+v", out.Rows, out.Cols, len(out.Data), info)
		}
	})
}
