package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	p := filepath.Join("testdata", name)
	if name == "mlp" {
		p = filepath.Join("..", "..", "..", "examples", "mlp", "model.onnx")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadModelInfoMLP(t *testing.T) {
	mi, err := ReadModelInfo(readFixture(t, "mlp"))
	if err != nil {
		t.Fatal(err)
	}
	if mi.Opset != 17 || mi.Producer != "pytorch" || mi.IRVersion < 7 {
		t.Errorf("opset %d producer %q ir %d; want 17, pytorch, >= 7", mi.Opset, mi.Producer, mi.IRVersion)
	}
	if len(mi.Inputs) != 1 || len(mi.Outputs) != 1 {
		t.Fatalf("inputs %v outputs %v; want one each (initializers are not inputs)", mi.Inputs, mi.Outputs)
	}
	in, out := mi.Inputs[0], mi.Outputs[0]
	if in.Name != "features" || in.TypeString() != "float32" || in.ShapeString() != "[batch, 30]" {
		t.Errorf("input %q %s %s; want \"features\" float32 [batch, 30]", in.Name, in.TypeString(), in.ShapeString())
	}
	if out.Name != "probability" || out.TypeString() != "float32" || out.ShapeString() != "[batch, 1]" {
		t.Errorf("output %q %s %s; want \"probability\" float32 [batch, 1]", out.Name, out.TypeString(), out.ShapeString())
	}
	c, err := CheckContract(mi, 30, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Features != 30 || c.Outputs != 1 || c.VectorOutput {
		t.Errorf("contract %+v", c)
	}
}

// TestCheckContract runs every small graph against the shapes a package
// might declare; each error must name the tensor at fault.
func TestCheckContract(t *testing.T) {
	cases := []struct {
		file              string
		features, outputs int
		want              string // "" = accepted
	}{
		{"vec.onnx", 30, 1, ""},
		{"vec.onnx", 0, 0, ""},
		{"vec.onnx", 30, 2, `output "score" has shape [batch] (one value per row) but model.yaml declares 2 output fields`},
		{"three.onnx", 30, 3, ""},
		{"three.onnx", 30, 1, `output "y" has 3 columns (shape [N, 3]) but model.yaml declares 1 output fields`},
		{"mlp", 29, 1, `input "features" has 30 features (shape [batch, 30]) but model.yaml's input schema produces 29 after preprocessing`},
		{"f64.onnx", 30, 1, `input "x" is float64; want float32`},
		{"fixed.onnx", 30, 1, `input "x" has a fixed batch dimension of 1 (shape [1, 30]); export the model with a dynamic batch axis`},
		{"two_inputs.onnx", 30, 1, `the model has 2 inputs ("a" float32 [N, 30], "b" float32 [N, 30]); runtime onnx serves models with one float32 input [batch, features], or integer inputs`},
		{"two_outputs.onnx", 30, 1, `the model has 2 outputs ("y" float32 [N, 1], "z" float32 [N, 1])`},
		{"rank3.onnx", 30, 1, `input "x" has shape [N, 5, 6]; want [batch, 30]`},
		{"int_out.onnx", 30, 1, `output "label" is int64; want float32`},
		{"sym_features.onnx", 30, 1, `input "x" has a dynamic feature dimension "D" (shape [N, D]); want a fixed [batch, 30]`},
	}
	for _, tc := range cases {
		mi, err := ReadModelInfo(readFixture(t, tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		_, err = CheckContract(mi, tc.features, tc.outputs)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s (%d→%d): %v", tc.file, tc.features, tc.outputs, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s (%d→%d): got %v\nwant it to contain %s", tc.file, tc.features, tc.outputs, err, tc.want)
		}
	}
}

func TestReadModelInfoGarbage(t *testing.T) {
	mlp := readFixture(t, "mlp")
	cases := map[string][]byte{
		"empty":       {},
		"text":        []byte("this is not an onnx model\n"),
		"zeros":       make([]byte, 64),
		"half":        mlp[:len(mlp)/2],
		"one byte":    mlp[:1],
		"head":        mlp[:40],
		"json":        []byte(`{"weights": [[1]]}`),
		"big length":  {0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"group":       {0x0b, 0x0c},
		"no ir":       {0x3a, 0x00},
		"varint oflo": {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, b := range cases {
		if mi, err := ReadModelInfo(b); err == nil {
			t.Errorf("%s: accepted: %+v", name, mi)
		}
	}
}

// FuzzReadModelInfo: any bytes give a ModelInfo or an error, never a panic.
func FuzzReadModelInfo(f *testing.F) {
	for _, name := range []string{"mlp", "vec.onnx", "three.onnx", "two_inputs.onnx", "rank3.onnx", "sym_features.onnx"} {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		mi, err := ReadModelInfo(b)
		if err != nil {
			return
		}
		if c, err := CheckContract(mi, 0, 0); err == nil && (c.Features <= 0 || c.Outputs <= 0) {
			t.Fatalf("accepted a contract with %d features, %d outputs", c.Features, c.Outputs)
		}
	})
}

func TestResolveLibrary(t *testing.T) {
	std := []string{"/cache/1.30.0/libonnxruntime.so.1", "/usr/lib/libonnxruntime.so.1"}
	none := func(string) bool { return false }
	only := func(want string) func(string) bool { return func(p string) bool { return p == want } }

	if p, src, err := resolveLibrary("/flag/lib.so", "/env/lib.so", std, none); err != nil || p != "/flag/lib.so" || src != "--onnxruntime-lib" {
		t.Errorf("explicit: %q %q %v", p, src, err)
	}
	if p, src, err := resolveLibrary("", "/env/lib.so", std, only(std[0])); err != nil || p != "/env/lib.so" || src != EnvLibrary {
		t.Errorf("env: %q %q %v", p, src, err)
	}
	if p, _, err := resolveLibrary("", "", std, only(std[1])); err != nil || p != std[1] {
		t.Errorf("standard: %q %v", p, err)
	}
	if p, _, err := resolveLibrary("", "", std, func(string) bool { return true }); err != nil || p != std[0] {
		t.Errorf("first standard location wins: %q %v", p, err)
	}
	_, _, err := resolveLibrary("", "", std, none)
	if err == nil || !errors.Is(err, errNoLibrary) {
		t.Fatalf("nothing found: %v", err)
	}
	for _, want := range []string{"--onnxruntime-lib", "SLUICE_ONNXRUNTIME_LIB", "scripts/fetch-onnxruntime.sh", "/cache/1.30.0", "/usr/lib"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message does not name %s: %v", want, err)
		}
	}
}

func TestStandardLocationsIncludeCache(t *testing.T) {
	t.Setenv("SLUICE_ONNXRUNTIME_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	t.Setenv("LD_LIBRARY_PATH", "/opt/ort/lib")
	got := StandardLocations()
	if len(got) < 3 || got[0] != "/xdg/sluice/onnxruntime/"+ORTVersion+"/libonnxruntime.so.1" || got[2] != "/opt/ort/lib/libonnxruntime.so.1" {
		t.Errorf("StandardLocations() = %v", got)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if c := CacheDir(); c != "/home/u/.cache/sluice/onnxruntime/"+ORTVersion {
		t.Errorf("CacheDir() = %q", c)
	}
	t.Setenv("SLUICE_ONNXRUNTIME_CACHE", "/c")
	if c := CacheDir(); c != "/c/"+ORTVersion {
		t.Errorf("CacheDir() with SLUICE_ONNXRUNTIME_CACHE = %q", c)
	}
}

// TestReadModelInfoFeatureNames: the metadata property feature_names
// (scripts/make_onnx_named_fixture.py) names the input columns; a count
// other than the input's width is refused; the property's two forms.
func TestReadModelInfoFeatureNames(t *testing.T) {
	b, err := os.ReadFile("testdata/named.onnx")
	if err != nil {
		t.Fatal(err)
	}
	mi, err := ReadModelInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(mi.FeatureNames, ","); got != "age,income,tenure" {
		t.Fatalf("feature names %q", got)
	}
	if _, err := CheckContract(mi, 3, 1); err != nil {
		t.Fatal(err)
	}
	mi.FeatureNames = mi.FeatureNames[:2]
	if _, err := CheckContract(mi, 0, 1); err == nil || !strings.Contains(err.Error(), `metadata property feature_names names 2 features but input "x" has 3`) {
		t.Fatalf("a short list: %v", err)
	}
	for _, c := range []struct{ in, want, err string }{
		{`["a", "b c"]`, "a|b c", ""},
		{"a, b ,c", "a|b|c", ""},
		{"", "", ""},
		{`["a", 1]`, "", "want a JSON list of strings"},
		{"a,,b", "", "name 1 is empty"},
	} {
		got, err := parseFeatureNames(c.in)
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) || strings.Join(got, "|") != c.want {
			t.Errorf("%q: %q %v", c.in, got, err)
		}
	}
	if mi, err := ReadModelInfo(readFixture(t, "mlp")); err != nil || mi.FeatureNames != nil {
		t.Errorf("mlp: names %v, %v", mi.FeatureNames, err)
	}
}
