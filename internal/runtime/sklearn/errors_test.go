package sklearn

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

// tiny is a small valid artifact: a one-split DecisionTreeRegressor.
func tiny() map[string]any {
	return map[string]any{
		"format": Format, "formatVersion": 1, "sklearnVersion": "1.2.1",
		"estimator": "DecisionTreeRegressor", "nFeatures": 2, "nOutputs": 1,
		"trees": []any{map[string]any{
			"left": []any{1, -1, -1}, "right": []any{2, -1, -1}, "feature": []any{1, -1, -1},
			"threshold": []any{0.5, 0, 0}, "value": []any{0, -1.5, 2.5},
		}},
		"featureNames": []any{"a", "b"},
		"outputs":      []any{"prediction"},
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tree0(d map[string]any) map[string]any { return d["trees"].([]any)[0].(map[string]any) }

func TestTiny(t *testing.T) {
	m, err := Parse(mustJSON(t, tiny()))
	if err != nil {
		t.Fatal(err)
	}
	in := runtime.Batch{Rows: 3, Cols: 2, Data: []float32{9, 0.5, 9, 0.50000006, 9, -3}}
	out, err := m.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{-1.5, 2.5, -1.5}; !slicesEqual(out.Data, want) {
		t.Fatalf("outputs %v, want %v", out.Data, want)
	}
	if got := m.Info().Detail; got != "DecisionTreeRegressor, 1 trees (scikit-learn 1.2.1)" {
		t.Fatalf("Detail %q", got)
	}
	_, err = m.Predict(context.Background(), runtime.Batch{Rows: 1, Cols: 2, Data: []float32{1, float32(math.NaN())}})
	if err == nil || !strings.Contains(err.Error(), "row 0: feature 1 (b) is missing (NaN), and a DecisionTreeRegressor has no missing-value handling") {
		t.Fatalf("NaN: %v", err)
	}
	if _, err := m.Predict(context.Background(), runtime.Batch{Rows: 1, Cols: 3, Data: []float32{1, 2, 3}}); err == nil || !strings.Contains(err.Error(), "batch has 3 columns, the estimator reads 2 features") {
		t.Fatalf("width: %v", err)
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRefusals: every malformed or absurd artifact is an error that names
// the key, never a panic.
func TestRefusals(t *testing.T) {
	cases := []struct {
		name string
		edit func(d map[string]any)
		want string
	}{
		{"format", func(d map[string]any) { d["format"] = "xgboost" }, `format: "xgboost" is not "sluice-sklearn"`},
		{"version", func(d map[string]any) { d["formatVersion"] = 2 }, "formatVersion: 2 is not supported"},
		{"unknown key", func(d map[string]any) { d["colour"] = 1 }, `unknown field "colour"`},
		{"estimator", func(d map[string]any) { d["estimator"] = "KNeighborsClassifier" }, `estimator: "KNeighborsClassifier" is not supported (supported: DecisionTreeClassifier`},
		{"features", func(d map[string]any) { d["nFeatures"] = 1 << 25 }, "nFeatures: must be between 1 and 16777216, got 33554432"},
		{"type", func(d map[string]any) { d["nFeatures"] = "two" }, "nFeatures: expected int, got a JSON string"},
		{"child range", func(d map[string]any) { tree0(d)["left"] = []any{7, -1, -1} }, "trees[0].left: node 0 has children 7 and 2, out of range [0, 3)"},
		{"cycle", func(d map[string]any) { tree0(d)["left"] = []any{0, -1, -1} }, "trees[0].left: node 0 is reached twice"},
		{"shared", func(d map[string]any) { tree0(d)["left"] = []any{1, -1, -1}; tree0(d)["right"] = []any{1, -1, -1} }, "trees[0].left: node 1 is reached twice"},
		{"half leaf", func(d map[string]any) { tree0(d)["right"] = []any{-1, -1, -1} }, "trees[0].left: node 0 has children 1 and -1"},
		{"feature", func(d map[string]any) { tree0(d)["feature"] = []any{2, -1, -1} }, "trees[0].feature: node 0 splits on feature 2, outside [0, 2)"},
		{"lengths", func(d map[string]any) { tree0(d)["threshold"] = []any{0.5} }, "trees[0].threshold: has 1 entries, left has 3"},
		{"values", func(d map[string]any) { tree0(d)["value"] = []any{0, 1} }, "trees[0].value: has 2 values, want 3 nodes x 1"},
		{"no trees", func(d map[string]any) { d["trees"] = []any{} }, "trees: a DecisionTreeRegressor needs at least one tree"},
		{"two trees", func(d map[string]any) { d["trees"] = []any{tree0(d), tree0(d)} }, "trees: a DecisionTreeRegressor has one tree, got 2"},
		{"outputs", func(d map[string]any) { d["outputs"] = []any{"a", "b"} }, "outputs: the model gives 1 columns, the artifact names 2"},
		{"feature names", func(d map[string]any) { d["featureNames"] = []any{"a"} }, "featureNames: has 1 names, nFeatures is 2"},
		{"classes on a regressor", func(d map[string]any) { d["classes"] = []any{0, 1} }, "classes: a DecisionTreeRegressor has no classes"},
		{"missing left", func(d map[string]any) { tree0(d)["missingLeft"] = []any{2, 0, 0} }, "trees[0].missingLeft: node 0 has 2, want 0 or 1"},
		{"huge threshold", func(d map[string]any) { tree0(d)["threshold"] = []any{json.Number("1e999"), 0, 0} }, "threshold"},
		{"trailing", nil, "trailing data"},
		{"not json", nil, "not a JSON object"},
		{"coef on a tree", func(d map[string]any) { d["coef"] = []any{[]any{1, 2}} }, "coef: a DecisionTreeRegressor has trees, not coefficients"},
		{"linear rows", func(d map[string]any) {
			d["estimator"] = "Ridge"
			delete(d, "trees")
			d["coef"] = []any{[]any{1, 2}, []any{3, 4}}
			d["intercept"] = []any{0}
		}, "coef: a Ridge with 1 outputs has 1 rows, got 2"},
		{"linear width", func(d map[string]any) {
			d["estimator"] = "Ridge"
			delete(d, "trees")
			d["coef"] = []any{[]any{1}}
			d["intercept"] = []any{0}
		}, "coef[0]: has 1 values, nFeatures is 2"},
		{"boost init", func(d map[string]any) {
			d["estimator"] = "GradientBoostingRegressor"
			d["loss"] = "squared_error"
			d["learningRate"] = 0.1
			delete(d, "nOutputs")
		}, "init: a GradientBoostingRegressor with 0 classes has 1 raw init values, got 0"},
		{"boost loss", func(d map[string]any) {
			d["estimator"] = "GradientBoostingRegressor"
			d["loss"] = "tweedie"
			d["learningRate"] = 0.1
			d["init"] = []any{0}
			delete(d, "nOutputs")
		}, `loss: "tweedie" is not supported`},
		{"hist without missing", func(d map[string]any) {
			d["estimator"] = "HistGradientBoostingRegressor"
			d["link"] = "identity"
			d["init"] = []any{0}
			delete(d, "nOutputs")
		}, "trees[0].missingLeft: a HistGradientBoosting tree needs its missing-value directions"},
		{"classes", func(d map[string]any) {
			d["estimator"] = "DecisionTreeClassifier"
			d["classes"] = []any{0}
		}, "classes: a classifier needs 2 to 65536 classes, got 1"},
		{"mixed classes", func(d map[string]any) {
			d["estimator"] = "DecisionTreeClassifier"
			d["classes"] = []any{0, "a"}
		}, "classes: mixes numbers and strings"},
		{"examples", func(d map[string]any) {
			d["examples"] = []any{map[string]any{"instance": map[string]any{"a": 1}, "outputs": []any{1, 2}}}
		}, "examples[0].outputs: has 2 values, the model gives 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b []byte
			switch c.name {
			case "trailing":
				b = append(mustJSON(t, tiny()), []byte(" {}")...)
			case "not json":
				b = []byte("\x80\x04pickle")
			default:
				d := tiny()
				c.edit(d)
				b = mustJSON(t, d)
			}
			_, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "m@1", Artifact: "model.json"}, b)
			if err == nil {
				t.Fatalf("accepted; want %q", c.want)
			}
			if !strings.HasPrefix(err.Error(), "sklearn: m@1: model.json: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to name the file and contain %q", err, c.want)
			}
		})
	}
}

// TestDeepTree: a chain deeper than MaxDepth is refused naming the tree.
func TestDeepTree(t *testing.T) {
	n := 2*MaxDepth + 3
	left, right, feat, thr, val := make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n)
	for i := range n {
		left[i], right[i], feat[i], thr[i], val[i] = -1, -1, -1, 0, 0
	}
	for i := 0; 2*i+2 < n; i++ {
		// node 2i splits into a leaf (2i+1) and the next split (2i+2)
		left[2*i], right[2*i], feat[2*i] = 2*i+1, 2*i+2, 0
	}
	d := tiny()
	d["trees"] = []any{map[string]any{"left": left, "right": right, "feature": feat, "threshold": thr, "value": val}}
	_, err := Parse(mustJSON(t, d))
	if err == nil || !strings.Contains(err.Error(), "trees[0].left: deeper than 1024") {
		t.Fatalf("error %v", err)
	}
}

// TestSpecFeatures: the package's width must be the estimator's.
func TestSpecFeatures(t *testing.T) {
	b, err := os.ReadFile("testdata/gb_clf.json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Runtime{}.Load(context.Background(), runtime.Spec{Name: "m@1", Artifact: "model.json", Features: 5}, b)
	if err == nil || err.Error() != "sklearn: m@1: model.json: the estimator reads 6 features (nFeatures), the package schema produces 5" {
		t.Fatalf("error %v", err)
	}
}

// TestDecision: "decision" makes a binary classifier with a
// decision_function answer [label, decision] (what an exported
// CalibratedClassifierCV's calibrator reads), and is refused where the
// estimator has no such column.
func TestDecision(t *testing.T) {
	raw, err := os.ReadFile("testdata/cal_sigmoid_lr.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Outputs(); len(got) != 2 || got[1] != "decision" || m.Info().Outputs != 2 {
		t.Fatalf("outputs %v (%d columns), want [label decision]", got, m.Info().Outputs)
	}
	var lr map[string]any
	if err := json.Unmarshal(raw, &lr); err != nil {
		t.Fatal(err)
	}
	rf := map[string]any{}
	if b, err := os.ReadFile("testdata/cal_isotonic_rf.json"); err != nil || json.Unmarshal(b, &rf) != nil {
		t.Fatal(err)
	}
	rf["decision"] = true
	reg := tiny()
	reg["decision"] = true
	for _, c := range []struct {
		name string
		doc  map[string]any
		want string
	}{
		{"regressor", reg, "decision: a DecisionTreeRegressor is no classifier"},
		{"forest", rf, "decision: a RandomForestClassifier has no decision_function"},
	} {
		if _, err := Parse(mustJSON(t, c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
