package hosting

import (
	"context"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/runtime"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
)

// namer is a runtime whose artifacts can name their columns, to test the
// messages without a real runtime's fixture.
type namer struct{ runtime.Runtime }

func (namer) FeatureNamesHelp() runtime.FeatureNamesHelp {
	return runtime.FeatureNamesHelp{Where: "test feature_names", Add: "set them in the test"}
}

func init() {
	lin, _ := runtime.Lookup("linear")
	runtime.Register("test-namer", namer{lin})
}

func orderSpec(t *testing.T, rt, fields, pre string) *modelpkg.Spec {
	t.Helper()
	y := "name: m\nruntime: " + rt + "\nartifact: a.bin\ninput:\n  schema: i@1\n  fields:\n" + fields + pre +
		"output:\n  schema: o@1\n  fields: [{name: score}]\n"
	spec, err := modelpkg.Parse("model.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestCheckFieldOrder(t *testing.T) {
	const ageIncome = "    - {name: age, type: float}\n    - {name: income, type: float}\n"
	const color = "    - {name: age, type: float}\n    - {name: color, type: category, values: [red, blue]}\n"
	cases := []struct {
		name        string
		fields, pre string
		names       []string
		want        string   // "" ok, else a part of the error
		wantAlso    []string // more parts of the error
	}{
		{name: "no names", fields: ageIncome},
		{name: "same order", fields: ageIncome, names: []string{"age", "income"}},
		{name: "case and punctuation", fields: "    - {name: petal_length_cm, type: float}\n", names: []string{"Petal Length (cm)"}},
		{name: "column transformer prefix", fields: ageIncome, names: []string{"num__age", "num__income"}},
		{name: "preprocessed column keeps its field's name", fields: ageIncome, pre: "preprocess:\n  - {op: standardize, field: age, mean: 40, std: 10}\n", names: []string{"age", "income"}},
		{name: "swapped", fields: ageIncome, names: []string{"income", "age"},
			want:     `the schema's field order is not the artifact's: the model reads test feature_names [income, age] but input.fields and preprocess give [age, income]`,
			wantAlso: []string{`column 0 is "income" in the artifact and "age" in the schema`, "Fix: list input.fields in the artifact's order: income, age"}},
		{name: "renamed", fields: ageIncome, names: []string{"age", "salary"},
			want:     `column 1 is "salary" in the artifact and "income" in the schema`,
			wantAlso: []string{`Fix: order and name input.fields as the artifact does`, `column 1 "income" (field income) is "salary" in the artifact`}},
		{name: "count", fields: ageIncome, names: []string{"age"}, want: "the artifact declares 1 feature names (test feature_names: age) but the schema produces 2 columns"},
		{name: "onehot dummies", fields: color, pre: "preprocess:\n  - {op: onehot, field: color}\n", names: []string{"age", "color_red", "color_blue"}},
		{name: "onehot encoder names", fields: color, pre: "preprocess:\n  - {op: onehot, field: color}\n", names: []string{"num__age", "cat__color=red", "cat__color=blue"}},
		{name: "onehot levels swapped", fields: color, pre: "preprocess:\n  - {op: onehot, field: color}\n", names: []string{"age", "color_blue", "color_red"},
			want: `column 1 is "color_blue" in the artifact and "color=red" in the schema`, wantAlso: []string{"one-hot levels in the order of the field's values"}},
		{name: "sluice feature names", fields: color, pre: "preprocess:\n  - {op: standardize, field: age, mean: 40, std: 10}\n  - {op: onehot, field: color}\n", names: []string{"standardize(age)", "color=red", "color=blue"}},
		{name: "ordinal category", fields: color, pre: "preprocess:\n  - {op: ordinal, field: color}\n", names: []string{"age", "color"}},
		{name: "bucketized onehot", fields: ageIncome, pre: "preprocess:\n  - {op: bucketize, field: age, boundaries: [30]}\n  - {op: onehot, field: age}\n", names: []string{"age_0", "age_1", "income"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := orderSpec(t, "test-namer", c.fields, c.pre)
			err := CheckFieldOrder(spec, runtime.Info{Inputs: spec.Schema.Width(), Outputs: 1, FeatureNames: c.names})
			if c.want == "" {
				if err != nil {
					t.Fatalf("got %v, want ok", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got ok, want %q", c.want)
			}
			for _, w := range append([]string{c.want}, c.wantAlso...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestFieldOrderWarning(t *testing.T) {
	const f = "    - {name: age, type: float}\n"
	if w := FieldOrderWarning(orderSpec(t, "test-namer", f, ""), runtime.Info{Inputs: 1, Outputs: 1}); !strings.Contains(w, "the artifact declares no feature names (test feature_names)") || !strings.Contains(w, "to add them: set them in the test") {
		t.Errorf("warning %q", w)
	}
	if w := FieldOrderWarning(orderSpec(t, "test-namer", f, ""), runtime.Info{Inputs: 1, Outputs: 1, FeatureNames: []string{"age"}}); w != "" {
		t.Errorf("named artifact: warning %q", w)
	}
	// A runtime whose artifacts cannot name columns: nothing to say.
	if w := FieldOrderWarning(orderSpec(t, "linear", f, ""), runtime.Info{Inputs: 1, Outputs: 1}); w != "" {
		t.Errorf("linear: warning %q", w)
	}
	// CheckShape runs the order check.
	spec := orderSpec(t, "test-namer", f+"    - {name: income, type: float}\n", "")
	if err := CheckShape(spec, runtime.Info{Inputs: 2, Outputs: 1, FeatureNames: []string{"income", "age"}}); err == nil || !strings.Contains(err.Error(), "field order") {
		t.Errorf("CheckShape: %v", err)
	}
}

// TestGoldenPostprocessed: golden examples compare the post-processed
// outputs, a labelled one by its label, and a failure names the labels.
func TestGoldenPostprocessed(t *testing.T) {
	y := `name: m
runtime: linear
artifact: a.json
input:
  schema: i@1
  fields: [{name: x, type: float}]
output:
  schema: o@1
  fields: [{name: score}]
postprocess:
  - {op: threshold, output: score, as: label, threshold: 0, labels: [neg, pos]}
golden:
  - instance: {x: 2}
    expect: {label: pos}
  - instance: {x: -2}
    expect: {label: pos}
`
	spec, err := modelpkg.Parse("model.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	lin, _ := runtime.Lookup("linear")
	m, err := lin.Load(context.Background(), RuntimeSpec("m", spec), []byte(`{"weights": [[1]], "bias": [0], "link": "identity"}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := CompareGolden(context.Background(), spec, m)
	if err != nil || len(res) != 2 || !res[0].OK || res[1].OK {
		t.Fatalf("results %+v, %v", res, err)
	}
	err = CheckGolden(context.Background(), "m", spec, m)
	if err == nil || !strings.Contains(err.Error(), `golden example 1 of m: label = "neg", expected "pos"`) {
		t.Errorf("CheckGolden: %v", err)
	}
}
