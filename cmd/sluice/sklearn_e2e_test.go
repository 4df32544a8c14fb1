package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sklTestdata is the sklearn runtime's fixtures: pipelines fitted by
// Debian's python3-sklearn, exported, with scikit-learn's own outputs
// (scripts/make_sklearn_fixtures.py).
const sklTestdata = "../../internal/runtime/sklearn/testdata/"

// TestSklearnPipelinesThroughTheBinary: fitted scikit-learn pipelines (a
// ColumnTransformer with StandardScaler and OneHotEncoder in front of a
// GradientBoostingClassifier; imputer, scalers and one-hot in front of a
// LogisticRegression; OrdinalEncoder in front of a categorical
// HistGradientBoostingRegressor; MinMaxScaler and one-hot in front of a
// RandomForestClassifier) go from `sluice export-sklearn` (the user's
// Python runs the exporter on the joblib file) to `sluice push` to
// `sluice predict` through the real server, and answer what the
// pipeline's own predict and predict_proba answered on the raw rows,
// within 1e-6 (the label exactly). Without a Python that has scikit-learn
// the export step is the committed artifact given to `sluice init`, which
// is what export-sklearn does after the Python step.
func TestSklearnPipelinesThroughTheBinary(t *testing.T) {
	python := "/usr/bin/python3"
	haveSklearn := exec.Command(python, "-c", "import sklearn, joblib, pandas").Run() == nil
	if !haveSklearn && os.Getenv("SLUICE_SKLEARN_REQUIRED") != "" {
		t.Fatalf("SLUICE_SKLEARN_REQUIRED is set but %s cannot import sklearn, joblib and pandas (apt-get install python3-sklearn python3-pandas python3-joblib)", python)
	}
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir())
	pkgs := t.TempDir()
	for _, name := range []string{"pipe_tree", "pipe_linear", "pipe_hgb", "pipe_rf"} {
		t.Run(name, func(t *testing.T) {
			model := strings.ReplaceAll(name, "_", "-")
			dir := filepath.Join(pkgs, model)
			args := []string{"export-sklearn", sklTestdata + name + ".joblib", "--out", dir, "--rows", sklTestdata + name + ".csv", "--python", python}
			if !haveSklearn {
				t.Logf("%s has no scikit-learn: sluice init of the committed export instead", python)
				args = []string{"init", sklTestdata + name + ".json", "--out", dir}
			}
			out, stderr, err := sluice(t, args...)
			if err != nil || !strings.Contains(out, "runtime sklearn") {
				t.Fatalf("%s: %v\n%s%s", args[0], err, out, stderr)
			}
			yml := string(mustRead(t, filepath.Join(dir, "model.yaml")))
			if !strings.Contains(yml, "golden:") || !strings.Contains(yml, "preprocess:") {
				t.Fatalf("model.yaml lacks golden examples or steps:\n%s", yml)
			}
			if name == "pipe_tree" {
				// The export names the columns the estimator reads: a
				// package with two fields swapped is refused.
				swapped := filepath.Join(pkgs, "swapped")
				lines := strings.Split(yml, "\n")
				ia, ii := -1, -1
				for i, l := range lines {
					switch {
					case strings.HasPrefix(l, "    - {name: age,"):
						ia = i
					case strings.HasPrefix(l, "    - {name: income,"):
						ii = i
					}
				}
				if ia < 0 || ii < 0 {
					t.Fatalf("no age and income fields:\n%s", yml)
				}
				lines[ia], lines[ii] = lines[ii], lines[ia]
				y := strings.Join(lines, "\n")
				if err := os.MkdirAll(swapped, 0o755); err != nil {
					t.Fatal(err)
				}
				// The package's files as they are (the export names its
				// artifact model.json, init of a committed export keeps
				// the file's name), with the swapped model.yaml.
				files, err := os.ReadDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range files {
					b := mustRead(t, filepath.Join(dir, f.Name()))
					if f.Name() == "model.yaml" {
						b = []byte(y)
					}
					if err := os.WriteFile(filepath.Join(swapped, f.Name()), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if _, stderr, err := sluice(t, "check", swapped); err == nil || !strings.Contains(stderr, "the schema's field order is not the artifact's") {
					t.Fatalf("a swapped package: %v %s", err, stderr)
				}
			}
			out, stderr, err = sluice(t, "push", dir, "--server", srv.url)
			if err != nil || !strings.Contains(out, model+"@1 published") || !strings.Contains(out, "state=ready") {
				t.Fatalf("push: %v %q %q\n%s", err, out, stderr, yml)
			}
			var want struct {
				Instances []map[string]any `json:"instances"`
				Outputs   [][]float64      `json:"outputs"`
			}
			if err := json.Unmarshal(mustRead(t, sklTestdata+name+".pipeline.json"), &want); err != nil {
				t.Fatal(err)
			}
			body, err := json.Marshal(map[string]any{"instances": want.Instances})
			if err != nil {
				t.Fatal(err)
			}
			out, stderr, err = sluice(t, "predict", model, string(body), "--server", srv.url)
			if err != nil {
				t.Fatalf("predict: %v %s", err, stderr)
			}
			var p struct {
				ModelVersion string
				Predictions  []map[string]float64
			}
			if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Predictions) != len(want.Instances) || p.ModelVersion != model+"@1" {
				t.Fatalf("predict: %v %s", err, out)
			}
			var outputs struct {
				Outputs []string `json:"outputs"`
			}
			if err := json.Unmarshal(mustRead(t, sklTestdata+name+".json"), &outputs); err != nil {
				t.Fatal(err)
			}
			for i, pr := range p.Predictions {
				for k, o := range outputs.Outputs {
					tol := 1e-6
					if o == "label" {
						tol = 0
					}
					if got, w := pr[o], want.Outputs[i][k]; math.Abs(got-w) > tol {
						t.Errorf("instance %d %v: %s = %v, scikit-learn %v", i, want.Instances[i], o, got, w)
					}
				}
			}
		})
	}
}

// TestExportSklearnRefusals: what the exporter cannot express, a Python
// without scikit-learn, a Python that does not run and an existing
// model.yaml are refused with a message naming the step or the flag, and
// nothing is written.
func TestExportSklearnRefusals(t *testing.T) {
	python := "/usr/bin/python3"
	if exec.Command(python, "-c", "import sklearn, joblib, pandas").Run() != nil {
		t.Skipf("%s has no scikit-learn", python)
	}
	cases := []struct {
		name, model, python, want string
	}{
		{"estimator", "refuse_knn.joblib", python, "sklearn.neighbors._classification.KNeighborsClassifier is not supported (supported: RandomForest*"},
		{"step", "refuse_drop.joblib", python, "prep/cat: OneHotEncoder(drop='first') has no Sluice step (onehot keeps every column); refit with drop=None"},
		{"no python", "pipe_tree.joblib", "/nonexistent/python3", "cannot run the exporter with --python /nonexistent/python3"},
		{"calibrated ensemble", "refuse_calibrated_ensemble.joblib", python, "holds 3 calibrated classifiers (ensemble=True averages them, which one calibration step cannot express): refit it with ensemble=False"},
	}
	if p, err := exec.LookPath("python3"); err == nil && exec.Command(p, "-c", "import sklearn").Run() != nil {
		cases = append(cases, struct{ name, model, python, want string }{"python without sklearn", "pipe_tree.joblib", p, "has no scikit-learn"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pkg")
			_, stderr, err := sluice(t, "export-sklearn", sklTestdata+c.model, "--out", dir, "--python", c.python)
			if err == nil || !strings.Contains(stderr, c.want) {
				t.Fatalf("err %v, stderr %q; want %q", err, stderr, c.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("%s was written: %v", dir, err)
			}
		})
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model.yaml"), []byte("name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := sluice(t, "export-sklearn", sklTestdata+"pipe_tree.joblib", "--out", dir, "--python", python); err == nil || !strings.Contains(stderr, "model.yaml exists; sluice export-sklearn never overwrites it") {
		t.Fatalf("an existing model.yaml: %v %s", err, stderr)
	}
}

// TestSklearnCalibratedThroughTheBinary: binary CalibratedClassifierCV
// models (sigmoid on a LogisticRegression pipeline with string classes;
// isotonic around a whole prefit RandomForest pipeline; isotonic on a
// categorical HistGradientBoosting) go from export-sklearn to push to
// predict and answer what scikit-learn's calibrated model answers on the
// raw rows: predict_proba[:, 1] as probability and predict as
// calibratedLabel, made by the postprocess: steps the export wrote (the
// calibrator on the base's decision_function or predict_proba, then a
// threshold), on /v1 and on OIP REST.
func TestSklearnCalibratedThroughTheBinary(t *testing.T) {
	python := "/usr/bin/python3"
	haveSklearn := exec.Command(python, "-c", "import sklearn, joblib, pandas").Run() == nil
	if !haveSklearn && os.Getenv("SLUICE_SKLEARN_REQUIRED") != "" {
		t.Fatalf("SLUICE_SKLEARN_REQUIRED is set but %s cannot import sklearn, joblib and pandas", python)
	}
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir())
	pkgs := t.TempDir()
	for _, name := range []string{"cal_sigmoid_lr", "cal_isotonic_rf", "cal_isotonic_hgb"} {
		t.Run(name, func(t *testing.T) {
			model := strings.ReplaceAll(name, "_", "-")
			dir := filepath.Join(pkgs, model)
			args := []string{"export-sklearn", sklTestdata + name + ".joblib", "--out", dir, "--rows", sklTestdata + name + ".csv", "--python", python}
			if !haveSklearn {
				t.Logf("%s has no scikit-learn: sluice init of the committed export instead", python)
				args = []string{"init", sklTestdata + name + ".json", "--out", dir}
			}
			if out, stderr, err := sluice(t, args...); err != nil {
				t.Fatalf("%s: %v\n%s%s", args[0], err, out, stderr)
			}
			yml := string(mustRead(t, filepath.Join(dir, "model.yaml")))
			if !strings.Contains(yml, "postprocess:\n  - {op: calibrate") || !strings.Contains(yml, "as: calibratedLabel") {
				t.Fatalf("model.yaml has no calibration steps:\n%s", yml)
			}
			if out, stderr, err := sluice(t, "push", dir, "--server", srv.url); err != nil || !strings.Contains(out, "state=ready") {
				t.Fatalf("push: %v %q %q\n%s", err, out, stderr, yml)
			}
			var want struct {
				Instances       []map[string]any `json:"instances"`
				Probability     []float64        `json:"probability"`
				CalibratedLabel []string         `json:"calibratedLabel"`
			}
			if err := json.Unmarshal(mustRead(t, sklTestdata+name+".calibrated.json"), &want); err != nil {
				t.Fatal(err)
			}
			body, err := json.Marshal(map[string]any{"instances": want.Instances})
			if err != nil {
				t.Fatal(err)
			}
			out, stderr, err := sluice(t, "predict", model, string(body), "--server", srv.url)
			if err != nil {
				t.Fatalf("predict: %v %s", err, stderr)
			}
			var p struct {
				Predictions []map[string]float64
				Labels      []map[string]*string
			}
			if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Predictions) != len(want.Instances) || len(p.Labels) != len(want.Instances) {
				t.Fatalf("predict: %v %s", err, out)
			}
			// The model reads float32 rows and answers float32 scores: the
			// calibrated probability is scikit-learn's within 1e-5 (an
			// isotonic table is steep in places), the label exactly.
			for i := range want.Instances {
				if got, w := p.Predictions[i]["probability"], want.Probability[i]; math.Abs(got-w) > 1e-5 {
					t.Errorf("instance %d: probability %v, scikit-learn %v", i, got, w)
				}
				if l := p.Labels[i]["calibratedLabel"]; l == nil || *l != want.CalibratedLabel[i] {
					t.Errorf("instance %d: calibratedLabel %v, scikit-learn %q", i, l, want.CalibratedLabel[i])
				}
			}
			// OIP REST: the label is a BYTES tensor, the probability FP32.
			oip, err := postRaw(t, srv.url+"/v2/models/"+model+"/infer", oipBody(t, dir, want.Instances[:2]), nil)
			if err != nil || oip.status != 200 {
				t.Fatalf("OIP infer: %v %d %s", err, oip.status, oip.body)
			}
			var ans struct {
				Outputs []struct {
					Name     string `json:"name"`
					Datatype string `json:"datatype"`
					Data     []any  `json:"data"`
				} `json:"outputs"`
			}
			if err := json.Unmarshal(oip.body, &ans); err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, o := range ans.Outputs {
				switch o.Name {
				case "calibratedLabel":
					seen++
					if o.Datatype != "BYTES" || len(o.Data) != 2 || o.Data[0] != want.CalibratedLabel[0] || o.Data[1] != want.CalibratedLabel[1] {
						t.Errorf("OIP calibratedLabel: %+v, want %v", o, want.CalibratedLabel[:2])
					}
				case "probability":
					seen++
					if len(o.Data) != 2 || math.Abs(o.Data[0].(float64)-want.Probability[0]) > 1e-5 {
						t.Errorf("OIP probability: %+v, want %v", o, want.Probability[:2])
					}
				}
			}
			if seen != 2 {
				t.Errorf("OIP answer lacks probability or calibratedLabel: %s", oip.body)
			}
		})
	}
}

// oipBody is an OIP REST infer body of the instances, one tensor per
// field of the package's model.yaml (as `sluice init` wrote it: one line
// "    - {name: N, type: T, ...}" per field).
func oipBody(t *testing.T, dir string, insts []map[string]any) string {
	t.Helper()
	var inputs []map[string]any
	for _, l := range strings.Split(string(mustRead(t, filepath.Join(dir, "model.yaml"))), "\n") {
		rest, ok := strings.CutPrefix(l, "    - {name: ")
		if !ok || !strings.Contains(l, "type: ") {
			continue
		}
		name := rest[:strings.IndexByte(rest, ',')]
		typ := strings.TrimSpace(strings.SplitN(strings.SplitN(l, "type: ", 2)[1], ",", 2)[0])
		typ = strings.TrimSuffix(typ, "}")
		dt := map[string]string{"float": "FP64", "int": "INT64", "category": "BYTES", "bool": "BOOL"}[typ]
		data := make([]any, len(insts))
		for i, in := range insts {
			data[i] = in[name]
		}
		inputs = append(inputs, map[string]any{"name": name, "shape": []int{len(insts)}, "datatype": dt, "data": data})
	}
	b, err := json.Marshal(map[string]any{"inputs": inputs})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
