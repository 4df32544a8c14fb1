package xgboost

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

// TestCategoricalSplit pins XGBoost's categorical decision (common::Decision)
// on a hand-made tree: node 1 is a split on feature 0 whose set {1, 2, 40}
// goes right. A code in the set goes right; a code not in it, past the
// set's bitset, negative, or at or above 2^24 goes left; a fractional code
// is truncated; a missing value takes the default direction (node 1's is
// right). Both formats, the JSON one with XGBoost's NaN split condition.
func TestCategoricalSplit(t *testing.T) {
	nan := float32(math.NaN())
	m := tinyModel()
	catSplit(1, []any{1, 2, 40})(m)
	// node 0: f1 < 0.5 ? node 1 : leaf 2, so f1 = 0 reaches the
	// categorical split
	tr := treeOf(m)
	tr["split_indices"].([]any)[0] = 1
	left, right := float32(-0.5), float32(0.75) // leaves 3 and 4
	cases := []struct {
		code float32
		want float32
	}{
		{0, left}, {1, right}, {2, right}, {3, left}, {39, left}, {40, right}, {41, left},
		{64, left}, {1e6, left}, // past the bitset
		{1.9, right}, {2.5, right}, {40.99, right}, {0.5, left}, // truncated
		{-1, left}, {-0.5, left}, {float32(math.Copysign(0, -1)), left},
		{1 << 24, left}, {3e9, left}, {float32(math.Inf(1)), left}, {float32(math.Inf(-1)), left},
		{nan, right}, // missing: default_left of node 1 is 0
	}
	// XGBoost writes NaN as a categorical split's condition; another
	// value there must not matter.
	for _, format := range []string{"json", "ubj", "json, condition 0.5"} {
		if strings.HasSuffix(format, "0.5") {
			tr["split_conditions"].([]any)[1] = 0.5
		}
		art := mustJSON(t, m)
		if format == "ubj" {
			art = mustUBJ(m)
		}
		if format == "json" && !strings.Contains(string(art), ",NaN,") {
			t.Fatalf("the JSON model lacks XGBoost's NaN token: %s", art)
		}
		mod, err := Parse(art)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if d := mod.Info().Detail; d != "gbtree, 1 trees, binary:logistic, 1 categorical splits" {
			t.Errorf("%s: Detail = %q", format, d)
		}
		var rows [][]float32
		for _, tc := range cases {
			rows = append(rows, []float32{tc.code, 0})
		}
		out, err := mod.PredictMargin(t.Context(), batchOf(rows...))
		if err != nil {
			t.Fatal(err)
		}
		for i, tc := range cases {
			if out.Data[i] != tc.want {
				t.Errorf("%s: code %v: margin %v, want %v", format, tc.code, out.Data[i], tc.want)
			}
		}
	}
}

// TestDartWeights: a dart model adds each tree's leaf times its weight,
// the product rounded to float32 as XGBoost rounds it.
func TestDartWeights(t *testing.T) {
	m := tinyModel()
	gb := boosterOf(m)
	const w = 0.7692308
	learnerOf(m)["gradient_booster"] = map[string]any{"name": "dart", "weight_drop": []any{w},
		"gbtree": map[string]any{"name": "gbtree", "model": gb["model"]}}
	for _, format := range []string{"json", "ubj"} {
		art := mustJSON(t, m)
		if format == "ubj" {
			art = mustUBJ(m)
		}
		mod, err := Parse(art)
		if err != nil {
			t.Fatal(err)
		}
		if d := mod.Info().Detail; d != "dart, 1 trees, binary:logistic" {
			t.Errorf("Detail = %q", d)
		}
		out, err := mod.PredictMargin(t.Context(), batchOf([]float32{0, 0}, []float32{0, 2}, []float32{1, 0}))
		if err != nil {
			t.Fatal(err)
		}
		for i, leaf := range []float32{-0.5, 0.75, 0.25} {
			if want := float32(leaf * float32(w)); out.Data[i] != want {
				t.Errorf("%s row %d: margin %v, want %v", format, i, out.Data[i], want)
			}
		}
	}
}

// TestQuoteNonFinite: XGBoost's bare NaN, Infinity and -Infinity tokens
// become numbers wherever they stand outside a string, and nothing inside a
// string changes.
func TestQuoteNonFinite(t *testing.T) {
	in := `{"a":[NaN,1,-Infinity,Infinity],"NaN":"x NaN \"Infinity\" \\","b":-1.5,"c":NaN}`
	v, err := decodeArtifact([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	top := v.(map[string]any)
	a := top["a"].([]any)
	if f, _ := a[0].(float64); !math.IsNaN(f) {
		t.Errorf("a[0] = %v", a[0])
	}
	if f, _ := a[2].(float64); !math.IsInf(f, -1) {
		t.Errorf("a[2] = %v", a[2])
	}
	if f, _ := a[3].(float64); !math.IsInf(f, 1) {
		t.Errorf("a[3] = %v", a[3])
	}
	if s := top["NaN"]; s != `x NaN "Infinity" \` {
		t.Errorf("string changed: %q", s)
	}
	if f, _ := top["c"].(float64); !math.IsNaN(f) {
		t.Errorf("c = %v", top["c"])
	}
	if b, changed := quoteNonFinite([]byte(`{"a":[1,2],"s":"NaN"}`)); changed || string(b) != `{"a":[1,2],"s":"NaN"}` {
		t.Errorf("a model without the tokens changed: %s", b)
	}
	for _, bad := range []string{`{"a":NaNa}`, `{"a":Inf}`, `{"a":-Infinit}`, `{"a":nan}`} {
		if _, err := decodeArtifact([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "json: ") {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
	// A NaN or infinite leaf is refused as before.
	m := tinyModel()
	treeOf(m)["split_conditions"].([]any)[2] = math.Inf(1)
	if _, err := Parse(mustJSON(t, m)); err == nil || !strings.Contains(err.Error(), "tree 0 node 2: leaf value +Inf is not finite") {
		t.Errorf("infinite leaf: %v", err)
	}
}

// TestDescribeCategories: Describe reports, per categorical feature, how
// many codes the splits use, from a real model trained on a frame whose
// color column has 5 categories and city 14.
func TestDescribeCategories(t *testing.T) {
	for _, f := range []string{"cat_binary.json", "cat_onehot.ubj"} {
		b, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Describe(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Categories) != 4 || d.Categories[0] < 2 || d.Categories[0] > 5 || d.Categories[1] < 2 || d.Categories[1] > 14 || d.Categories[2] != 0 || d.Categories[3] != 0 {
			t.Errorf("%s: Categories = %v", f, d.Categories)
		}
		if strings.Join(d.FeatureTypes, ",") != "c,c,float,float" {
			t.Errorf("%s: FeatureTypes = %v", f, d.FeatureTypes)
		}
	}
	d, err := Describe(mustJSON(t, tinyModel()))
	if err != nil || d.Categories != nil || d.Booster != "gbtree" {
		t.Errorf("numerical model: %+v, %v", d, err)
	}
}

// TestCategoryNames reads the categories XGBoost 3.1 and later save (string
// names as offsets and int8 UTF-8 bytes, integer ones as numbers), in both
// formats, and ignores what it cannot read.
func TestCategoryNames(t *testing.T) {
	b, err := os.ReadFile("testdata/cat_v31.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Describe(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.CategoryNames) != 4 || strings.Join(d.CategoryNames[0], ",") != "blue,gray,green,red,white" || len(d.CategoryNames[1]) != 14 || d.CategoryNames[1][13] != "Zurich" || d.CategoryNames[2] != nil {
		t.Errorf("CategoryNames = %q", d.CategoryNames)
	}
	m := tinyModel()
	catSplit(1, []any{1})(m)
	learnerOf(m)["feature_types"] = []any{"c", "c"}
	zurich := []byte("Zürich")
	var vals []any
	for _, c := range append([]byte("Oslo"), zurich...) {
		vals = append(vals, int(int8(c)))
	}
	gbModelOf(m)["cats"] = map[string]any{"enc": []any{
		map[string]any{"offsets": []any{0, 4, 4 + len(zurich)}, "values": vals},
		map[string]any{"type": 5, "values": []any{10, 20, 30}},
	}}
	for _, format := range []string{"json", "ubj"} {
		art := mustJSON(t, m)
		if format == "ubj" {
			art = mustUBJ(m)
		}
		d, err := Describe(art)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.CategoryNames) != 2 || strings.Join(d.CategoryNames[0], ",") != "Oslo,Zürich" || strings.Join(d.CategoryNames[1], ",") != "10,20,30" {
			t.Errorf("%s: CategoryNames = %q", format, d.CategoryNames)
		}
	}
	gbModelOf(m)["cats"] = map[string]any{"enc": []any{map[string]any{"offsets": []any{0, 99}, "values": vals}, map[string]any{}}}
	if d, err := Describe(mustJSON(t, m)); err != nil || d.CategoryNames != nil {
		t.Errorf("bad offsets: %q, %v", d.CategoryNames, err)
	}
}

// TestCategoryBitsetBound: category sets are bitsets up to their largest
// category, so a model whose many splits each name a huge category is
// refused before it allocates more than maxCatWords words.
func TestCategoryBitsetBound(t *testing.T) {
	const d = 300 // a chain of d categorical splits, each on category 2^24-1 (2^19 words)
	n := 2*d + 1
	l, r, f, c, dl, st := make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n)
	var nodes, segs, sizes, cats []any
	for i := range n {
		l[i], r[i], f[i], c[i], dl[i], st[i] = -1, -1, 0, 0.5, 0, 0
	}
	for i := 0; i < d; i++ {
		l[2*i], r[2*i], st[2*i], c[2*i] = 2*i+1, 2*i+2, 1, math.NaN()
		nodes, segs, sizes, cats = append(nodes, 2*i), append(segs, i), append(sizes, 1), append(cats, 1<<24-1)
	}
	m := tinyModel()
	tr := treeOf(m)
	tr["left_children"], tr["right_children"], tr["split_indices"], tr["split_conditions"], tr["default_left"], tr["split_type"] = l, r, f, c, dl, st
	tr["categories_nodes"], tr["categories_segments"], tr["categories_sizes"], tr["categories"] = nodes, segs, sizes, cats
	tr["tree_param"].(map[string]any)["num_nodes"] = fmt.Sprint(n)
	_, err := Parse(mustUBJ(m))
	if err == nil || !strings.Contains(err.Error(), "category sets exceed 16777216 words") {
		t.Fatalf("err = %v", err)
	}
}
