package xgboost

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
)

// tinyModel is a valid binary:logistic model over 2 features with one tree:
//
//	node 0: f0 < 0.5 ? node 1 : node 2 (missing left)
//	node 1: f1 < 1.0 ? node 3 : node 4 (missing right)
//	leaves 2, 3, 4
func tinyModel() map[string]any {
	tree := map[string]any{
		"id":               0,
		"left_children":    []any{1, 3, -1, -1, -1},
		"right_children":   []any{2, 4, -1, -1, -1},
		"parents":          []any{2147483647, 0, 0, 1, 1},
		"split_indices":    []any{0, 1, 0, 0, 0},
		"split_conditions": []any{0.5, 1.0, 0.25, -0.5, 0.75},
		"default_left":     []any{1, 0, 0, 0, 0},
		"split_type":       []any{0, 0, 0, 0, 0},
		"base_weights":     []any{0, 0, 0, 0, 0},
		"loss_changes":     []any{0, 0, 0, 0, 0},
		"sum_hessian":      []any{0, 0, 0, 0, 0},
		"categories":       []any{},
		"categories_nodes": []any{},
		"tree_param": map[string]any{
			"num_deleted": "0", "num_feature": "2", "num_nodes": "5", "size_leaf_vector": "0",
		},
	}
	return map[string]any{
		"version": []any{1, 7, 4},
		"learner": map[string]any{
			"attributes": map[string]any{},
			"gradient_booster": map[string]any{
				"name": "gbtree",
				"model": map[string]any{
					"gbtree_model_param": map[string]any{"num_parallel_tree": "1", "num_trees": "1"},
					"tree_info":          []any{0},
					"trees":              []any{tree},
				},
			},
			"learner_model_param": map[string]any{
				"base_score": "5E-1", "num_class": "0", "num_feature": "2", "num_target": "1",
			},
			"objective": map[string]any{"name": "binary:logistic"},
		},
	}
}

func learnerOf(m map[string]any) map[string]any { return m["learner"].(map[string]any) }
func boosterOf(m map[string]any) map[string]any {
	return learnerOf(m)["gradient_booster"].(map[string]any)
}
func gbModelOf(m map[string]any) map[string]any { return boosterOf(m)["model"].(map[string]any) }
func treeOf(m map[string]any) map[string]any {
	return gbModelOf(m)["trees"].([]any)[0].(map[string]any)
}
func paramsOf(m map[string]any) map[string]any {
	return learnerOf(m)["learner_model_param"].(map[string]any)
}

// catSplit makes node of tiny's tree a categorical split on feature 0
// whose categories cats go right.
func catSplit(node int, cats []any) func(map[string]any) {
	return func(m map[string]any) {
		tr := treeOf(m)
		tr["split_type"].([]any)[node] = 1
		tr["split_indices"].([]any)[node] = 0
		tr["split_conditions"].([]any)[node] = math.NaN()
		tr["categories_nodes"] = []any{node}
		tr["categories_segments"] = []any{0}
		tr["categories_sizes"] = []any{len(cats)}
		tr["categories"] = cats
	}
}

// mustJSON encodes v as XGBoost's JSON writer does: a NaN or infinite
// float64 becomes the bare token NaN, Infinity or -Infinity.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(markNonFinite(v))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"NaN", "Infinity", "-Infinity"} {
		b = bytes.ReplaceAll(b, []byte(`"@@`+tok+`@@"`), []byte(tok))
	}
	return b
}

// markNonFinite copies v with every non-finite float64 replaced by a
// marker string mustJSON turns into XGBoost's token.
func markNonFinite(v any) any {
	switch x := v.(type) {
	case float64:
		switch {
		case math.IsNaN(x):
			return "@@NaN@@"
		case math.IsInf(x, 1):
			return "@@Infinity@@"
		case math.IsInf(x, -1):
			return "@@-Infinity@@"
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = markNonFinite(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = markNonFinite(e)
		}
		return out
	}
	return v
}

// encodeUBJ is a small UBJSON writer for tests, in XGBoost's style: keys and
// strings with int64 lengths, counted arrays, typed arrays for numeric
// slices.
func encodeUBJ(w *bytes.Buffer, v any) {
	str := func(s string) {
		w.WriteByte('L')
		binary.Write(w, binary.BigEndian, int64(len(s)))
		w.WriteString(s)
	}
	switch x := v.(type) {
	case nil:
		w.WriteByte('Z')
	case bool:
		if x {
			w.WriteByte('T')
		} else {
			w.WriteByte('F')
		}
	case int:
		w.WriteByte('L')
		binary.Write(w, binary.BigEndian, int64(x))
	case float64:
		w.WriteByte('d')
		binary.Write(w, binary.BigEndian, float32(x))
	case string:
		w.WriteByte('S')
		str(x)
	case []float32:
		w.WriteString("[$d#")
		w.WriteByte('L')
		binary.Write(w, binary.BigEndian, int64(len(x)))
		binary.Write(w, binary.BigEndian, x)
	case []any:
		w.WriteString("[#L")
		binary.Write(w, binary.BigEndian, int64(len(x)))
		for _, e := range x {
			encodeUBJ(w, e)
		}
	case map[string]any:
		w.WriteByte('{')
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			str(k)
			encodeUBJ(w, x[k])
		}
		w.WriteByte('}')
	default:
		panic(fmt.Sprintf("encodeUBJ: %T", v))
	}
}

func mustUBJ(v any) []byte {
	var b bytes.Buffer
	encodeUBJ(&b, v)
	return b.Bytes()
}

func TestTinyModel(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		row  []float32
		want float32 // margin
	}{
		{[]float32{0, 0}, -0.5},     // left, left
		{[]float32{0, 2}, 0.75},     // left, right
		{[]float32{0.5, 0}, 0.25},   // 0.5 is not < 0.5: right
		{[]float32{nan, 0}, -0.5},   // missing f0 goes left
		{[]float32{0, nan}, 0.75},   // missing f1 goes right
		{[]float32{nan, nan}, 0.75}, // left then right
		{[]float32{float32(math.Inf(1)), 0}, 0.25},
		{[]float32{float32(math.Inf(-1)), float32(math.Inf(-1))}, -0.5},
	}
	for _, format := range []string{"json", "ubj"} {
		art := mustJSON(t, tinyModel())
		if format == "ubj" {
			art = mustUBJ(tinyModel())
		}
		m, err := Parse(art)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		for _, tc := range cases {
			out, err := m.PredictMargin(t.Context(), batchOf(tc.row))
			if err != nil {
				t.Fatal(err)
			}
			if out.Data[0] != tc.want {
				t.Errorf("%s: margin(%v) = %v, want %v", format, tc.row, out.Data[0], tc.want)
			}
			p, err := m.Predict(t.Context(), batchOf(tc.row))
			if err != nil {
				t.Fatal(err)
			}
			if want := float32(1 / (1 + math.Exp(-float64(tc.want)))); math.Abs(float64(p.Data[0]-want)) > 1e-7 {
				t.Errorf("%s: predict(%v) = %v, want %v", format, tc.row, p.Data[0], want)
			}
		}
	}
}

// TestLoadRejects: every malformed or unsupported model is a load error that
// says what is wrong, in both formats.
func TestLoadRejects(t *testing.T) {
	set := func(get func(map[string]any) map[string]any, key string, v any) func(map[string]any) {
		return func(m map[string]any) { get(m)[key] = v }
	}
	setAt := func(key string, i int, v any) func(map[string]any) {
		return func(m map[string]any) { treeOf(m)[key].([]any)[i] = v }
	}
	tp := func(m map[string]any) map[string]any { return treeOf(m)["tree_param"].(map[string]any) }
	deep := func(m map[string]any) {
		// a chain 1100 splits deep: node 2i splits into 2i+1 (leaf) and 2i+2
		const d = 1100
		n := 2*d + 1
		l, r, f, c, dl := make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			l[i], r[i], f[i], c[i], dl[i] = -1, -1, 0, 0.0, 0
		}
		for i := 0; i < d; i++ {
			l[2*i], r[2*i] = 2*i+1, 2*i+2
		}
		tr := treeOf(m)
		tr["left_children"], tr["right_children"], tr["split_indices"] = l, r, f
		tr["split_conditions"], tr["default_left"] = c, dl
		delete(tr, "split_type")
		tp(m)["num_nodes"] = fmt.Sprint(n)
	}
	// dart makes m a dart model with weights w.
	dart := func(w any) func(map[string]any) {
		return func(m map[string]any) {
			gb := boosterOf(m)
			learnerOf(m)["gradient_booster"] = map[string]any{"name": "dart", "weight_drop": w,
				"gbtree": map[string]any{"name": "gbtree", "model": gb["model"]}}
		}
	}
	cases := []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"dart without gbtree", set(boosterOf, "name", "dart"), `learner.gradient_booster: missing field "gbtree"`},
		{"dart weights", dart([]any{1.0, 0.5}), "weight_drop has 2 weights for 1 trees"},
		{"dart weight type", dart("1"), "weight_drop: want an array of numbers, got string"},
		{"dart weight overflow", func(m map[string]any) {
			treeOf(m)["split_conditions"].([]any)[2] = 1e30
			dart([]any{1e30})(m)
		}, "node 2: leaf value +Inf is not finite"},
		{"gblinear", set(boosterOf, "name", "gblinear"), `booster "gblinear" is not supported (supported: gbtree, dart)`},
		{"objective", func(m map[string]any) { learnerOf(m)["objective"] = map[string]any{"name": "reg:expectileerror"} },
			`objective "reg:expectileerror" is not supported (supported: binary:hinge, binary:logistic`},
		{"categorical without categories", func(m map[string]any) {
			catSplit(1, nil)(m)
			tr := treeOf(m)
			tr["categories_nodes"], tr["categories_segments"], tr["categories_sizes"] = []any{}, []any{}, []any{}
		}, "tree 0 node 1: categorical split without categories (not in categories_nodes)"},
		{"categorical arrays missing", func(m map[string]any) {
			catSplit(1, []any{2})(m)
			delete(treeOf(m), "categories_segments")
		}, "tree 0: categorical splits without categories_segments"},
		{"category too large", catSplit(1, []any{1 << 24}), "tree 0 node 1: category 16777216 out of range [0, 16777216)"},
		{"category negative", catSplit(1, []any{-1}), "node 1: category -1 out of range"},
		{"categories past the end", func(m map[string]any) {
			catSplit(1, []any{2})(m)
			treeOf(m)["categories_sizes"] = []any{2}
		}, "node 1: categories [0, 0+2) out of range (1 categories)"},
		{"categories on a numerical split", func(m map[string]any) {
			catSplit(1, []any{2})(m)
			treeOf(m)["split_type"].([]any)[1] = 0
		}, "categories_nodes lists 1 nodes, but split_type marks no categorical split"},
		{"categories on a leaf", func(m map[string]any) {
			catSplit(1, []any{2})(m)
			treeOf(m)["categories_nodes"] = []any{2}
		}, "node 2: has categories but is not a categorical split"},
		{"categories twice", func(m map[string]any) {
			catSplit(1, []any{2})(m)
			tr := treeOf(m)
			tr["categories_nodes"], tr["categories_segments"], tr["categories_sizes"] = []any{1, 1}, []any{0, 0}, []any{1, 1}
		}, "node 1: categories given twice"},
		{"categories arrays disagree", func(m map[string]any) {
			catSplit(1, []any{2})(m)
			treeOf(m)["categories_sizes"] = []any{1, 1}
		}, "categories_nodes has 1 entries, categories_segments 1, categories_sizes 2"},
		{"split_type unknown", setAt("split_type", 1, 2), "node 1: split_type 2 is not 0 (numerical) or 1 (categorical)"},
		{"numerical split NaN", setAt("split_conditions", 1, math.NaN()), "tree 0 node 1: split condition is NaN"},
		{"left child out of range", setAt("left_children", 1, 99), "tree 0 node 1: left child 99 out of range (tree has 5 nodes)"},
		{"right child negative", setAt("right_children", 0, -7), "tree 0 node 0: right child -7 out of range"},
		{"cycle to root", setAt("left_children", 1, 0), "tree 0 node 1: left child 0 is reached twice"},
		{"self loop", setAt("right_children", 1, 1), "tree 0 node 1: right child 1 is reached twice"},
		{"shared subtree", setAt("right_children", 1, 2), "tree 0 node 1: right child 2 is reached twice"},
		{"split feature out of range", setAt("split_indices", 1, 2), "tree 0 node 1: split feature 2 out of range (model has 2 features)"},
		{"split feature negative", setAt("split_indices", 0, -1), "split feature -1 out of range"},
		{"default_left not bool", setAt("default_left", 0, 7), "node 0: default_left 7 is not 0 or 1"},
		{"short array", set(treeOf, "split_conditions", []any{0.5, 1.0, 0.25, -0.5}), "tree 0: split_conditions has 4 entries, tree has 5 nodes"},
		{"long array", set(treeOf, "left_children", []any{1, 3, -1, -1, -1, -1}), "tree 0: left_children has 6 entries, tree has 5 nodes"},
		{"absurd num_nodes", set(tp, "num_nodes", "1099511627776"), "num_nodes: 1099511627776 out of range"},
		{"zero num_nodes", set(tp, "num_nodes", "0"), "num_nodes: 0 out of range"},
		{"wrong type array", set(treeOf, "left_children", "abc"), "left_children: want an array, got string"},
		{"wrong type element", setAt("split_conditions", 2, "x"), "split_conditions[2]: want a number, got string"},
		{"wrong type learner", func(m map[string]any) { m["learner"] = 5 }, "learner: want an object, got number"},
		{"wrong type num_feature", set(paramsOf, "num_feature", []any{}), "num_feature: want an integer, got array"},
		{"missing trees", func(m map[string]any) { delete(gbModelOf(m), "trees") }, `missing field "trees"`},
		{"num_trees mismatch", func(m map[string]any) {
			gbModelOf(m)["gbtree_model_param"].(map[string]any)["num_trees"] = "2"
		}, "num_trees is 2 but there are 1 trees"},
		{"tree_info length", set(gbModelOf, "tree_info", []any{0, 0}), "tree_info has 2 entries for 1 trees"},
		{"tree group out of range", set(gbModelOf, "tree_info", []any{1}), "tree 0: output group 1 out of range (model has 1 groups)"},
		{"multi-target group out of range", func(m map[string]any) {
			learnerOf(m)["objective"] = map[string]any{"name": "reg:squarederror"}
			paramsOf(m)["num_target"] = "3"
			gbModelOf(m)["tree_info"] = []any{3}
		}, "tree 0: output group 3 out of range (model has 3 groups)"},
		{"multi-target base_score", func(m map[string]any) {
			learnerOf(m)["objective"] = map[string]any{"name": "reg:squarederror"}
			paramsOf(m)["num_target"] = "3"
			paramsOf(m)["base_score"] = "[1E0,2E0]"
		}, "base_score has 2 values, model has 3 output groups"},
		{"multi-class multi-target", func(m map[string]any) {
			learnerOf(m)["objective"] = map[string]any{"name": "multi:softprob"}
			paramsOf(m)["num_class"] = "3"
			paramsOf(m)["num_target"] = "2"
		}, "objective multi:softprob with num_target = 2 is not supported"},
		{"softprob without classes", func(m map[string]any) {
			learnerOf(m)["objective"] = map[string]any{"name": "multi:softprob"}
		}, "objective multi:softprob needs num_class >= 2, model has 0"},
		{"binary with classes", set(paramsOf, "num_class", "3"), "objective binary:logistic with num_class = 3 is not supported"},
		{"base_score out of range", set(paramsOf, "base_score", "1.5"), "base_score 1.5 must be in (0, 1)"},
		{"base_score rounds to 1", set(paramsOf, "base_score", "0.99999999"), "must be in (0, 1)"},
		{"base_score infinite", func(m map[string]any) {
			learnerOf(m)["objective"] = map[string]any{"name": "reg:squarederror"}
			paramsOf(m)["base_score"] = "1e39"
		}, `base_score: "1e39" is not a number`},
		{"base_score garbage", set(paramsOf, "base_score", "abc"), `base_score: "abc" is not a number`},
		{"num_feature zero", set(paramsOf, "num_feature", "0"), "num_feature: 0 out of range"},
		{"vector leaf", set(tp, "size_leaf_vector", "3"), `vector leaves (multi_strategy "multi_output_tree") are not supported (size_leaf_vector = 3)`},
		{"too deep", deep, "tree deeper than 1024"},
		{"feature_names length", set(learnerOf, "feature_names", []any{"a"}), "learner.feature_names has 1 entries for 2 features"},
		{"feature_names element", set(learnerOf, "feature_names", []any{"a", 3}), "learner.feature_names[1]: want a string, got number"},
		{"feature_types type", set(learnerOf, "feature_types", "c"), "learner.feature_types: want an array of strings, got string"},
	}
	for _, tc := range cases {
		for _, format := range []string{"json", "ubj"} {
			t.Run(tc.name+"."+format, func(t *testing.T) {
				m := tinyModel()
				tc.mutate(m)
				art := mustJSON(t, m)
				if format == "ubj" {
					art = mustUBJ(m)
				}
				_, err := Parse(art)
				if err == nil {
					t.Fatalf("loaded; want error containing %q", tc.want)
				}
				if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "xgboost: ") {
					t.Fatalf("error %q, want it to start with \"xgboost: \" and contain %q", err, tc.want)
				}
			})
		}
	}
}

// TestLoadRejectsDamagedFiles cuts real models short and corrupts bytes; the
// result must be an error (or, for a harmless corruption, a model), never a
// panic.
func TestLoadRejectsDamagedFiles(t *testing.T) {
	for _, name := range []string{"tiny_binary.json", "tiny_binary.ubj", "multi_softprob.ubj"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, cut := range []int{0, 1, 2, 10, len(b) / 3, len(b) / 2, len(b) - 1} {
			if _, err := Parse(b[:cut]); err == nil {
				t.Errorf("%s cut to %d bytes: loaded", name, cut)
			}
		}
		for i := 0; i < len(b); i += 7 {
			c := bytes.Clone(b)
			c[i] ^= 0xff
			Parse(c) // must not panic
		}
	}
}

func TestUBJSONDecoder(t *testing.T) {
	i64 := func(n int64) string {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(n))
		return string(b[:])
	}
	cases := []struct {
		name string
		in   string
		want string // fmt %v of the value, or error substring after "!"
	}{
		{"int8", "i\xff", "-1"},
		{"uint8", "U\xff", "255"},
		{"int16", "I\x01\x00", "256"},
		{"int32", "l\x00\x01\x00\x00", "65536"},
		{"int64", "L" + i64(-5), "-5"},
		{"float32", "d\x3f\x80\x00\x00", "1"},
		{"float64", "D\x40\x00\x00\x00\x00\x00\x00\x00", "2"},
		{"string", "SU\x02hi", "hi"},
		{"char", "Cx", "x"},
		{"bools and null", "[TFZ]", "[true false <nil>]"},
		{"noop skipped", "[Ni\x01N]", "[1]"},
		{"object", "{U\x01ai\x01U\x01bSU\x01x}", "map[a:1 b:x]"},
		{"counted object", "{#U\x01U\x01ai\x07", "map[a:7]"},
		{"typed float array", "[$d#U\x02\x3f\x80\x00\x00\x40\x00\x00\x00", "[1 2]"},
		{"typed uint8 array", "[$U#i\x03\x01\x02\x03", "[1 2 3]"},
		{"typed int32 array", "[$l#U\x01\xff\xff\xff\xfe", "[-2]"},
		{"typed int16 array", "[$I#U\x01\xff\xfe", "[-2]"},
		{"typed string array", "[$S#U\x02U\x01aU\x01b", "[a b]"},
		{"high precision", "HU\x031.5", "1.5"},
		{"empty array", "[]", "[]"},
		{"truncated", "[i\x01", "!unexpected end of data"},
		{"truncated string", "SU\x05ab", "!unexpected end of data"},
		{"absurd count", "[$d#L" + i64(1<<40), "!invalid length 1099511627776"},
		{"large count", "[$d#L" + i64(1<<30), "!container claims 1073741824 elements"},
		{"large untyped count", "[#L" + i64(1<<30), "!container claims"},
		{"large object count", "{#L" + i64(1<<30), "!container claims"},
		{"negative length", "SL" + i64(-1), "!invalid length -1"},
		{"zero-width type", "[$Z#L" + i64(1<<40), "!unsupported container element type"},
		{"type without count", "[$d\x00", "!container type given without a count"},
		{"unknown marker", "X", "!unknown type marker"},
		{"float length", "Sd\x00\x00\x00\x00", "!is not an integer type"},
		{"trailing data", "i\x01i\x02", "!trailing data"},
		{"bad high precision", "HU\x03abc", "!invalid high-precision number"},
		{"deep nesting", strings.Repeat("[", 100), "!nested deeper than 64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := decodeUBJSON([]byte(tc.in))
			if want, isErr := strings.CutPrefix(tc.want, "!"); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %v, %v; want error containing %q", v, err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(v); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFormatDetection(t *testing.T) {
	cases := []struct {
		in   string
		json bool
	}{
		{`{"learner":{}}`, true},
		{" \n{\"a\":1}", true},
		{"{}", true},
		{"{\n", true},
		{"{L\x00\x00\x00\x00\x00\x00\x00\x01a", false},
		{"{U\x01a", false},
		{"{#U\x01", false},
		{"[", false},
	}
	for _, tc := range cases {
		if got := looksLikeJSON([]byte(tc.in)); got != tc.json {
			t.Errorf("looksLikeJSON(%q) = %v, want %v", tc.in, got, tc.json)
		}
	}
}

// TestLoadRejectsRealUnsupported uses artifacts saved by xgboost itself.
func TestLoadRejectsRealUnsupported(t *testing.T) {
	cases := []struct {
		file, want string
	}{
		{"unsupported_gblinear.json", `xgboost: booster "gblinear" is not supported (supported: gbtree, dart)`},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(b); err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
