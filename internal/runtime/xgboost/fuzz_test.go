package xgboost

import (
	"context"
	"fmt"
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

// FuzzTreeShape builds one-tree models from arbitrary child, feature and
// default-direction arrays. Whatever the loader accepts must predict exactly
// what a plain walk over the stored arrays gives, so the flattening and the
// fixed-depth walk cannot go wrong silently on odd shapes.
func FuzzTreeShape(f *testing.F) {
	f.Add([]byte{1, 3, 0xff, 0xff, 0xff}, []byte{2, 4, 0xff, 0xff, 0xff}, []byte{0, 1, 0, 0, 0}, []byte{1, 0, 0, 0, 0})
	f.Add([]byte{0xff}, []byte{0xff}, []byte{0}, []byte{0})
	f.Add([]byte{1, 0xff, 3, 0xff, 0xff}, []byte{2, 0xff, 4, 0xff, 0xff}, []byte{1, 0, 0, 0, 0}, []byte{0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, left, right, feat, dflt []byte) {
		n := len(left)
		if n == 0 || n > 64 || len(right) != n || len(feat) != n || len(dflt) != n {
			return
		}
		const nf = 3
		l, r, fi, c, dl := make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			l[i], r[i], fi[i], dl[i] = int(int8(left[i])), int(int8(right[i])), int(feat[i]%4), int(dflt[i]%2)
			c[i] = float64(i%3) - 1 // thresholds and leaf values -1, 0, 1
		}
		model := tinyModel()
		tr := treeOf(model)
		tr["left_children"], tr["right_children"], tr["split_indices"] = l, r, fi
		tr["split_conditions"], tr["default_left"] = c, dl
		delete(tr, "split_type")
		tr["tree_param"].(map[string]any)["num_nodes"] = fmt.Sprint(n)
		paramsOf(model)["num_feature"] = fmt.Sprint(nf)
		learnerOf(model)["objective"] = map[string]any{"name": "reg:squarederror"}
		paramsOf(model)["base_score"] = "0"
		m, err := Parse(mustJSON(t, model))
		if err != nil {
			return
		}
		nan := float32(math.NaN())
		vals := []float32{-2, -1, 0, 1, 2, nan}
		var all [][]float32
		var wants []float32
		for a := range vals {
			for b := range vals {
				row := []float32{vals[a], vals[b], vals[(a+b)%len(vals)]}
				// reference: follow the stored arrays by node id
				id, steps := 0, 0
				for l[id].(int) != -1 {
					if steps++; steps > n {
						t.Fatalf("accepted a tree whose walk does not end (row %v)", row)
					}
					v := row[fi[id].(int)]
					switch {
					case v != v:
						if dl[id].(int) == 1 {
							id = l[id].(int)
						} else {
							id = r[id].(int)
						}
					case v < float32(c[id].(float64)):
						id = l[id].(int)
					default:
						id = r[id].(int)
					}
				}
				want := float32(c[id].(float64))
				out, err := m.PredictMargin(context.Background(), batchOf(row))
				if err != nil {
					t.Fatal(err)
				}
				if out.Data[0] != want {
					t.Fatalf("row %v: got %v, walking the arrays gives %v", row, out.Data[0], want)
				}
				all, wants = append(all, row), append(wants, want)
			}
		}
		// All 36 rows in one batch: 32 walk the tree eight at a time, the
		// last 4 one by one.
		out, err := m.PredictMargin(context.Background(), batchOf(all...))
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range wants {
			if out.Data[i] != want {
				t.Fatalf("batch row %d %v: got %v, walking the arrays gives %v", i, all[i], out.Data[i], want)
			}
		}
	})
}

// FuzzCategorical builds a one-split categorical model from an arbitrary
// category set and checks every code the fuzzer picks against XGBoost's
// rule (common::Decision): right when the code, truncated, is a valid
// category (0 <= code < 2^24) in the set; left otherwise; missing takes
// the default direction.
func FuzzCategorical(f *testing.F) {
	f.Add([]byte{1, 2, 40}, uint32(0x40000000), true)     // code 2
	f.Add([]byte{0}, uint32(0xbf000000), false)           // -0.5
	f.Add([]byte{}, uint32(0x7fc00000), true)             // NaN, empty set
	f.Add([]byte{255, 31, 32}, uint32(0x4b800000), false) // 2^24
	f.Fuzz(func(t *testing.T, set []byte, code uint32, dflt bool) {
		if len(set) > 64 {
			return
		}
		cats := make([]any, len(set))
		in := map[int]bool{}
		for i, c := range set {
			k := int(c) * 3 // spread the categories over several words
			cats[i], in[k] = k, true
		}
		m := tinyModel()
		catSplit(0, cats)(m)
		dl := 0
		if dflt {
			dl = 1
		}
		treeOf(m)["default_left"].([]any)[0] = dl
		mod, err := Parse(mustJSON(t, m))
		if err != nil {
			t.Fatal(err)
		}
		v := math.Float32frombits(code)
		// node 0 sends left to node 1 (f1 < 1.0 ? -0.5 : 0.75; f1 = 0
		// gives -0.5) and right to leaf 2 (0.25)
		right := v >= 0 && v < 1<<24 && in[int(v)]
		if v != v {
			right = !dflt
		}
		want := float32(-0.5)
		if right {
			want = 0.25
		}
		out, err := mod.PredictMargin(t.Context(), batchOf([]float32{v, 0}))
		if err != nil {
			t.Fatal(err)
		}
		if out.Data[0] != want {
			t.Fatalf("set %v, code %v (%#x), default left %v: margin %v, want %v", set, v, code, dflt, out.Data[0], want)
		}
	})
}
