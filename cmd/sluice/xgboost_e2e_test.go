package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// xgbTestdata is the xgboost runtime's fixtures: models saved by Debian's
// python3-xgboost with its own predictions (scripts/make_xgboost_fixtures.py).
const xgbTestdata = "../../internal/runtime/xgboost/testdata/"

// TestXGBoostDartAndCategoricalThroughTheBinary: a dart model (UBJSON) and
// a model trained on a pandas frame with category columns (JSON, with
// XGBoost's NaN tokens) go from `sluice init` to `sluice push` to `sluice
// predict` through the real server, and answer what XGBoost's own predict
// answered, float32 for float32. The categorical package is made by init
// with --categories naming the frame's categories, and asked with the
// category names; absent optional fields are XGBoost's missing values.
func TestXGBoostDartAndCategoricalThroughTheBinary(t *testing.T) {
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir())
	pkgs := t.TempDir()

	type expect struct {
		Pred         [][]uint32       `json:"pred"`
		Instances    []map[string]any `json:"instances"`
		InstancePred [][]uint32       `json:"instancePred"`
	}
	readExpect := func(name string) expect {
		var e expect
		if err := json.Unmarshal(mustRead(t, xgbTestdata+name+".expect.json"), &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	// initPush runs init (with extra flags), marks every field optional
	// (what a user does for fields that may be absent), and pushes.
	initPush := func(name, artifact string, flags ...string) {
		t.Helper()
		dir := filepath.Join(pkgs, name)
		args := append([]string{"init", xgbTestdata + artifact, "--out", dir, "--name", name}, flags...)
		if out, stderr, err := sluice(t, args...); err != nil {
			t.Fatalf("init %s: %v\n%s%s", artifact, err, out, stderr)
		}
		man := filepath.Join(dir, "model.yaml")
		y := regexp.MustCompile(`(?m)^(    - \{name: [^}]*, type: [^}]*)\}`).ReplaceAllString(string(mustRead(t, man)), "$1, optional: true}")
		if err := os.WriteFile(man, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, err := sluice(t, "push", dir, "--server", srv.url)
		if err != nil || !strings.Contains(out, name+"@1 published") || !strings.Contains(out, "state=ready") {
			t.Fatalf("push %s: %v %q %q\n%s", name, err, out, stderr, y)
		}
	}
	// check predicts the instances in one request and compares the one
	// output with XGBoost's predictions (float32 bit patterns).
	check := func(model, output string, instances []string, want [][]uint32) {
		t.Helper()
		out, stderr, err := sluice(t, "predict", model, `{"instances":[`+strings.Join(instances, ",")+`]}`, "--server", srv.url)
		if err != nil {
			t.Fatalf("predict %s: %v %s", model, err, stderr)
		}
		var p struct {
			ModelVersion string
			Predictions  []map[string]float64
		}
		if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Predictions) != len(instances) || p.ModelVersion != model+"@1" {
			t.Fatalf("predict %s: %v %s", model, err, out)
		}
		for i, pr := range p.Predictions {
			if got, w := float32(pr[output]), math.Float32frombits(want[i][0]); got != w {
				t.Errorf("%s instance %d %s: %s = %v, xgboost %v", model, i, instances[i], output, got, w)
			}
		}
	}

	// dart: the shared test rows, NaN as an absent field.
	initPush("dartm", "dart_binary.ubj")
	var rows struct{ Rows [][]uint32 }
	if err := json.Unmarshal(mustRead(t, xgbTestdata+"rows.json"), &rows); err != nil {
		t.Fatal(err)
	}
	var insts []string
	missing := 0
	for _, r := range rows.Rows[:16] {
		var kv []string
		for j, u := range r {
			v := math.Float32frombits(u)
			if v != v {
				missing++
				continue
			}
			kv = append(kv, fmt.Sprintf(`"f%d":%s`, j, strconv.FormatFloat(float64(v), 'g', -1, 32)))
		}
		insts = append(insts, "{"+strings.Join(kv, ",")+"}")
	}
	if missing == 0 {
		t.Fatal("the rows have no missing values")
	}
	check("dartm", "probability", insts, readExpect("dart_binary").Pred)

	// categorical: init names the frame's categories, the caller sends them.
	initPush("shop", "cat_binary.json",
		"--categories", "color=blue,gray,green,red,white",
		"--categories", "city=Austin,Berlin,Cairo,Delhi,Lima,Lyon,Oslo,Paris,Porto,Quito,Rome,Seoul,Tokyo,Zurich")
	e := readExpect("cat_binary")
	insts = insts[:0]
	for _, in := range e.Instances {
		b, _ := json.Marshal(in)
		insts = append(insts, string(b))
	}
	if len(insts) < 4 {
		t.Fatalf("%d instances in cat_binary.expect.json", len(insts))
	}
	check("shop", "probability", insts, e.InstancePred)
	if _, stderr, err := sluice(t, "predict", "shop", `{"color":"pink","city":"Rome"}`, "--server", srv.url); err == nil || !strings.Contains(stderr, `unknown category "pink" (expected one of blue, gray, green, red, white)`) {
		t.Fatalf("an unknown category: %v %s", err, stderr)
	}
}
