package scaffold

import (
	"encoding/json"
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
		{"linear", "model.json", read(t, "../../examples/churn/model.json"), "linear",
			"x0:float x1:float x2:float x3:float x4:float", "prediction"},
		{"onnx sequence", "model.onnx", read(t, "../../examples/seq/model.onnx"), "onnx", "tokens:sequence", "score"},
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
