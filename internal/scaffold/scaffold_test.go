package scaffold

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/modelpkg"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	_ "github.com/sluiceml/sluice/internal/runtime/onnx"
	_ "github.com/sluiceml/sluice/internal/runtime/xgboost"
)

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// named is a real XGBoost model (examples/fraud, 6 features) with the
// feature names and types a pandas DataFrame would have given it.
func named(t *testing.T) []byte {
	var m map[string]any
	if err := json.Unmarshal(read(t, "../../examples/fraud/model.json"), &m); err != nil {
		t.Fatal(err)
	}
	l := m["learner"].(map[string]any)
	l["feature_names"] = []string{"amount (log)", "accountAgeDays", "declines5m", "is_us", "is_gb", "2fa"}
	l["feature_types"] = []string{"float", "int", "int", "i", "i", "q"}
	b, _ := json.Marshal(m)
	return b
}

const (
	xgbTD       = "../runtime/xgboost/testdata/"
	eightFloats = "f0:float f1:float f2:float f3:float f4:float f5:float f6:float f7:float"
)

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		name, file string
		data       []byte
		runtime    string
		fields     string // name:type, ...
		outputs    string
	}{
		{"xgboost named", "model.json", named(t), "xgboost",
			"amount_log:float accountAgeDays:int declines5m:int is_us:bool is_gb:bool _2fa:float", "probability"},
		{"xgboost unnamed ubjson", "m.ubj", read(t, "../runtime/xgboost/testdata/tiny_binary.ubj"), "xgboost",
			"f0:float f1:float f2:float f3:float f4:float f5:float f6:float f7:float", "probability"},
		{"xgboost softprob", "model.json", read(t, "../../examples/iris/model.json"), "xgboost",
			"f0:float f1:float f2:float f3:float", "class0 class1 class2"},
		{"xgboost categorical", "m.json", read(t, xgbTD+"cat_binary.json"), "xgboost",
			"color:category city:category amount:float visits:float", "probability"},
		{"xgboost dart", "m.ubj", read(t, xgbTD+"dart_softprob.ubj"), "xgboost",
			"f0:float f1:float f2:float f3:float f4:float f5:float f6:float f7:float", "class0 class1 class2"},
		{"xgboost hinge", "m.json", read(t, xgbTD+"binary_hinge.json"), "xgboost", eightFloats, "label"},
		{"xgboost ranking", "m.json", read(t, xgbTD+"rank_ndcg.json"), "xgboost", eightFloats, "score"},
		{"xgboost cox", "m.json", read(t, xgbTD+"survival_cox.json"), "xgboost", eightFloats, "hazardRatio"},
		{"xgboost aft", "m.json", read(t, xgbTD+"survival_aft.json"), "xgboost", eightFloats, "survivalTime"},
		{"xgboost multi-target", "m.json", read(t, xgbTD+"multi_target.json"), "xgboost", eightFloats, "target0 target1 target2"},
		{"xgboost multi-label", "m.ubj", read(t, xgbTD+"multi_label.ubj"), "xgboost", eightFloats, "probability0 probability1 probability2"},
		{"xgboost quantiles", "m.json", read(t, xgbTD+"quantile_v2.json"), "xgboost", eightFloats, "quantile0 quantile1 quantile2"},
		{"xgboost tweedie", "m.json", read(t, xgbTD+"reg_tweedie.json"), "xgboost", eightFloats, "prediction"},
		{"linear", "model.json", read(t, "../../examples/churn/model.json"), "linear",
			"x0:float x1:float x2:float x3:float x4:float", "prediction"},
		{"onnx sequence", "model.onnx", read(t, "../../examples/seq/model.onnx"), "onnx", "tokens:sequence", "score"},
		{"onnx two inputs", "model.onnx", read(t, "../../examples/text/model.onnx"), "onnx", "input_ids:sequence attention_mask:sequence", "probs_0 probs_1 probs_2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Describe(c.file, c.data, "")
			if err != nil {
				t.Fatal(err)
			}
			y := YAML("demo", c.file, c.file, m, true)
			var fs []string
			for _, f := range m.Fields {
				fs = append(fs, f.Name+":"+f.Type)
			}
			if m.Runtime != c.runtime || strings.Join(fs, " ") != c.fields || strings.Join(m.Outputs, " ") != c.outputs {
				t.Fatalf("got %s %v %v\n%s", m.Runtime, fs, m.Outputs, y)
			}
			spec, err := modelpkg.Parse("model.yaml", y)
			if err != nil {
				t.Fatalf("generated model.yaml does not parse: %v\n%s", err, y)
			}
			if len(spec.Golden) != 1 {
				t.Fatalf("want one golden example:\n%s", y)
			}
			if _, err := modelpkg.Parse("model.yaml", YAML("demo", c.file, c.file, m, false)); err != nil {
				t.Fatalf("without golden: %v", err)
			}
		})
	}
	onnxMLP, err := Describe("model.onnx", read(t, "../../examples/mlp/model.onnx"), "")
	if err != nil || len(onnxMLP.Fields) != 30 || onnxMLP.Fields[29].Name != "features_29" || onnxMLP.Outputs[0] != "probability" {
		t.Fatalf("mlp: %v %+v", err, onnxMLP)
	}
}

// TestCategorical: a categorical XGBoost feature becomes a category field
// with an ordinal step; its values are the codes the splits use until
// SetValues names them, and the golden example uses the first.
func TestCategorical(t *testing.T) {
	m, err := Describe("m.json", read(t, xgbTD+"cat_onehot.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Detail, "XGBoost gbtree, objective reg:squarederror") {
		t.Errorf("Detail = %q", m.Detail)
	}
	y := string(YAML("demo", "m.json", "m.json", m, true))
	for _, want := range []string{
		`- {name: color, type: category, values: ["0", "1"`,
		`replace the values with list(df["color"].cat.categories), in order (or sluice init --categories color=a,b,...)`,
		"preprocess:\n  - {op: ordinal, field: color}\n  - {op: ordinal, field: city}\n",
		`instance: {color: "0", city: "0", amount: 0, visits: 0}`,
	} {
		if !strings.Contains(y, want) {
			t.Errorf("model.yaml lacks %q:\n%s", want, y)
		}
	}
	if _, err := modelpkg.Parse("model.yaml", []byte(y)); err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	colors := []string{"blue", "gray", "green", "red", "white"}
	if err := m.SetValues("color", colors); err != nil {
		t.Fatal(err)
	}
	y = string(YAML("demo", "m.json", "m.json", m, true))
	if !strings.Contains(y, `{name: color, type: category, values: ["blue", "gray", "green", "red", "white"]}`) || !strings.Contains(y, `instance: {color: "blue",`) {
		t.Errorf("after SetValues:\n%s", y)
	}
	for _, tc := range []struct {
		field  string
		values []string
		want   string
	}{
		{"city", []string{"Austin"}, "--categories city: 1 values given, but the model's splits use category codes 0.."},
		{"amount", colors, "--categories amount: the field is float, not a categorical feature of the artifact"},
		{"colour", colors, "--categories colour: no such categorical feature (the artifact's are color, city)"},
		{"color", []string{"a", "a", "b", "c", "d"}, "values must be distinct and non-empty"},
	} {
		if err := m.SetValues(tc.field, tc.values); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetValues(%s, %v) = %v, want %q", tc.field, tc.values, err, tc.want)
		}
	}
}

// TestCategoriesFromTheArtifact: a model saved by XGBoost 3.1 or later
// keeps the frame's categories; init writes them as the values.
func TestCategoriesFromTheArtifact(t *testing.T) {
	m, err := Describe("m.json", read(t, xgbTD+"cat_v31.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	y := string(YAML("demo", "m.json", "m.json", m, true))
	for _, want := range []string{
		`{name: color, type: category, values: ["blue", "gray", "green", "red", "white"]}   # XGBoost feature type c: the training frame's categories, saved in the artifact, in code order`,
		`{name: city, type: category, values: ["Austin", "Berlin",`,
		`"Zurich"]}`,
	} {
		if !strings.Contains(y, want) {
			t.Errorf("model.yaml lacks %q:\n%s", want, y)
		}
	}
}

func TestDescribeRefuses(t *testing.T) {
	if _, err := Describe("x.json", []byte(`[1, 2]`), ""); err == nil || !strings.Contains(err.Error(), "not an artifact sluice init can read") {
		t.Fatalf("got %v", err)
	}
	if _, err := Describe("model.json", read(t, "../../examples/churn/model.json"), "onnx"); err == nil || !strings.Contains(err.Error(), "not an artifact of runtime onnx") {
		t.Fatalf("got %v", err)
	}
	if _, err := Describe("m", nil, "torch"); err == nil || !strings.Contains(err.Error(), `not "torch"`) {
		t.Fatalf("got %v", err)
	}
}

// TestONNXFeatureNames: an ONNX model's metadata property feature_names
// names the fields.
func TestONNXFeatureNames(t *testing.T) {
	b, err := os.ReadFile("../runtime/onnx/testdata/named.onnx")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Describe("named.onnx", b, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m.Fields {
		names = append(names, f.Name+":"+f.Type)
	}
	if got := strings.Join(names, ","); got != "age:float,income:float,tenure:float" {
		t.Errorf("fields %s", got)
	}
}

// TestSklearnPipeline: an exported scikit-learn pipeline gives its fields
// with their real types, the steps of its transformers in ColumnTransformer
// order, its outputs, and the rows it was given with scikit-learn's outputs
// as golden examples.
func TestSklearnPipeline(t *testing.T) {
	for _, c := range []struct {
		file, fields, steps, outputs string
	}{
		{"pipe_hgb.json", "color:category city:category age:int income:float score:float visits:int",
			"- {op: ordinal, field: color}\n  - {op: ordinal, field: city}\n", "prediction"},
		{"pipe_tree.json", "age:int income:float score:float color:category city:category",
			"- {op: standardize, field: age, mean: ", "label probability_0 probability_1"},
		{"pipe_linear.json", "age:float income:float score:float color:category city:category",
			"- {op: standardize, field: age, mean: 48.44375, std: 17.829731796566655}", "label probability_0 probability_1"},
	} {
		t.Run(c.file, func(t *testing.T) {
			m, err := Describe("model.json", read(t, "../runtime/sklearn/testdata/"+c.file), "")
			if err != nil {
				t.Fatal(err)
			}
			y := YAML("demo", "model.json", "model.json", m, true)
			var fs []string
			for _, f := range m.Fields {
				fs = append(fs, f.Name+":"+f.Type)
			}
			if m.Runtime != "sklearn" || strings.Join(fs, " ") != c.fields || strings.Join(m.Outputs, " ") != c.outputs || !strings.Contains(string(y), c.steps) {
				t.Fatalf("got %s %v %v\n%s", m.Runtime, fs, m.Outputs, y)
			}
			spec, err := modelpkg.Parse("model.yaml", y)
			if err != nil {
				t.Fatalf("generated model.yaml does not parse: %v\n%s", err, y)
			}
			if len(spec.Golden) != 8 {
				t.Fatalf("want the exporter's 8 examples as golden:\n%s", y)
			}
		})
	}
	m, err := Describe("model.json", read(t, "../runtime/sklearn/testdata/pipe_linear.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	if y := string(YAML("demo", "model.json", "model.json", m, true)); !strings.Contains(y, "- {name: income, type: float, default: 22149.08}") || !strings.Contains(y, "the pipeline drops the columns visits") {
		t.Fatalf("the imputer's default or the dropped column is not written:\n%s", y)
	}
}

func TestGroupDummies(t *testing.T) {
	fl := func(name, typ string) Field { return Field{Name: name, Type: typ} }
	for _, tc := range []struct {
		name string
		in   []Field
		want string // fields as name:type[values]
	}{
		{"get_dummies between numbers", []Field{fl("tenure", "float"), fl("plan_basic", "int"), fl("plan_pro", "int"), fl("plan_team", "int"), fl("tickets", "float")},
			"tenure:float plan:category[basic pro team] tickets:float"},
		{"bool dummies, prefix and levels with _", []Field{fl("home_country_US", "bool"), fl("home_country_GB", "bool"), fl("home_country_new_zealand", "bool")},
			"home_country:category[US GB new_zealand]"},
		{"two groups side by side", []Field{fl("a_x", "int"), fl("a_y", "int"), fl("b_x", "int"), fl("b_y", "int")},
			"a:category[x y] b:category[x y]"},
		{"floats are never dummies", []Field{fl("pixel_0", "float"), fl("pixel_1", "float")}, "pixel_0:float pixel_1:float"},
		{"one column alone stays", []Field{fl("plan_basic", "int"), fl("tickets", "int")}, "plan_basic:int tickets:int"},
		{"not consecutive", []Field{fl("plan_basic", "int"), fl("age", "float"), fl("plan_pro", "int")}, "plan_basic:int age:float plan_pro:int"},
		{"no underscore", []Field{fl("x", "int"), fl("y", "int")}, "x:int y:int"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range GroupDummies(tc.in) {
				s := f.Name + ":" + f.Type
				if f.Type == "category" {
					s += "[" + strings.Join(f.Values, " ") + "]"
					if f.Encode != "onehot" {
						t.Errorf("%s: encode %q, want onehot", f.Name, f.Encode)
					}
				}
				got = append(got, s)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Fatalf("got %s, want %s", g, tc.want)
			}
		})
	}
}

func TestReadRows(t *testing.T) {
	m := &Model{Outputs: []string{"p"}, Fields: GroupDummies([]Field{{Name: "tenure", Type: "float"}, {Name: "plan_basic", Type: "int"}, {Name: "plan_pro", Type: "int"}, {Name: "vip", Type: "bool"}, {Name: "n", Type: "int"}})}
	for _, tc := range []struct {
		name, csv, want string // want: the instances, or the error's substring
	}{
		{"the raw frame", "tenure,plan,vip,n\n3.5,pro,true,2\n", "tenure=3.5 plan=pro vip=true n=2"},
		{"the dummies frame", "tenure,plan_basic,plan_pro,vip,n\n1,1,0,0,4\n2,0,1,1,5\n", "tenure=1 plan=basic vip=false n=4|tenure=2 plan=pro vip=true n=5"},
		{"only the first rows", "tenure,plan,vip,n\n" + strings.Repeat("1,pro,0,1\n", 9), strings.TrimSuffix(strings.Repeat("tenure=1 plan=pro vip=false n=1|", MaxRows), "|")},
		{"a missing column", "tenure,plan\n1,pro\n", `line 2: no column "vip"`},
		{"an unknown level", "tenure,plan,vip,n\n1,gold,0,1\n", `"gold" is not one of its values`},
		{"not an integer", "tenure,plan,vip,n\n1,pro,0,1.5\n", `field n: "1.5" is not an integer`},
		{"no rows", "tenure,plan,vip,n\n", "no row under the header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs, err := ReadRows("d.csv", strings.NewReader(tc.csv), m)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				return
			}
			var rows []string
			for _, g := range gs {
				var vs []string
				for _, v := range g.Instance {
					vs = append(vs, fmt.Sprintf("%s=%v", v.Field, v.Value))
				}
				rows = append(rows, strings.Join(vs, " "))
			}
			if got := strings.Join(rows, "|"); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}
