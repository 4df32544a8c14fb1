package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/testwait"
)

// fieldOrderTestdata holds an XGBoost model trained on a pandas frame of
// age, income and tenure (so its feature_names say that order) and its
// own predictions (scripts/make_fieldorder_fixture.py).
const fieldOrderTestdata = "testdata/fieldorder/"

// TestFieldOrderThroughTheBinary: a package made by `sluice init` from an
// artifact that names its features passes check, push and predicts what
// XGBoost predicted; the same package with income and age swapped in
// model.yaml is refused by `sluice check`, by `sluice push` and by the
// server (an upload made without the client's check, and the load of a
// models folder), each naming both orders and the fix.
// An artifact without names is checked with a warning saying how to add
// them.
func TestFieldOrderThroughTheBinary(t *testing.T) {
	pkgs := t.TempDir()
	good := filepath.Join(pkgs, "credit")
	if out, stderr, err := sluice(t, "init", fieldOrderTestdata+"credit.json", "--out", good, "--name", "credit"); err != nil {
		t.Fatalf("init: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err := sluice(t, "check", good)
	if err != nil || !strings.Contains(out, "order     the schema's columns are the artifact's feature names, in order") || strings.Contains(stderr, "warning") {
		t.Fatalf("check of init's package: %v\n%s%s", err, out, stderr)
	}

	// The swapped package: income first, then age.
	man := string(mustRead(t, filepath.Join(good, "model.yaml")))
	const ageLine, incomeLine = "    - {name: age, type: float}\n", "    - {name: income, type: float}\n"
	if !strings.Contains(man, ageLine+incomeLine) {
		t.Fatalf("init's model.yaml does not list age then income:\n%s", man)
	}
	bad := filepath.Join(pkgs, "swapped")
	mkdir(t, bad)
	writeFile(t, filepath.Join(bad, "model.yaml"), []byte(strings.Replace(man, ageLine+incomeLine, incomeLine+ageLine, 1)))
	writeFile(t, filepath.Join(bad, "credit.json"), mustRead(t, fieldOrderTestdata+"credit.json"))
	wantErr := func(what, msg string) {
		t.Helper()
		for _, w := range []string{
			"the schema's field order is not the artifact's",
			"XGBoost feature_names [age, income, tenure]",
			"give [income, age, tenure]",
			"Fix: list input.fields in the artifact's order: age, income, tenure",
		} {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", what, msg, w)
			}
		}
	}
	out, stderr, err = sluice(t, "check", bad)
	if err == nil {
		t.Fatalf("check of the swapped package passed:\n%s", out)
	}
	wantErr("check", stderr)

	// push: refused; nothing of the swapped package serves.
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir())
	out, stderr, err = sluice(t, "push", bad, "--server", srv.url)
	if err == nil {
		t.Fatalf("push of the swapped package passed:\n%s", out)
	}
	wantErr("push", stderr)
	if !strings.Contains(stderr, "nothing was pushed") {
		t.Errorf("push: %q does not say nothing was pushed", stderr)
	}
	if v := getModelVersion(t, srv.url, "credit", 1); v != 404 {
		t.Errorf("after the refused push, credit@1 answers %d, want 404", v)
	}
	if _, stderr, err := sluice(t, "predict", "credit", `{"age":30,"income":150,"tenure":2}`, "--server", srv.url); err == nil {
		t.Fatalf("the swapped package serves: %s", stderr)
	}

	// The server checks again: the swapped archive uploaded by hand (no
	// client check) is refused before a version is stored.
	pkg, err := modelpkg.ReadDir(bad)
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := pkg.WriteTarGz(&archive); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(srv.url+"/v1/models/credit/versions", "application/gzip", &archive)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 422 {
		t.Errorf("upload of the swapped archive: %d %s, want 422", resp.StatusCode, body)
	}
	wantErr("upload", string(body))
	if v := getModelVersion(t, srv.url, "credit", 1); v != 404 {
		t.Errorf("after the refused upload, credit@1 answers %d, want 404", v)
	}

	// The right order serves what XGBoost predicted.
	if out, stderr, err := sluice(t, "push", good, "--server", srv.url); err != nil || !strings.Contains(out, "state=ready") {
		t.Fatalf("push of init's package: %v\n%s%s", err, out, stderr)
	}
	var e struct {
		Instances   []map[string]float64
		Probability []float64
	}
	if err := json.Unmarshal(mustRead(t, fieldOrderTestdata+"credit.expect.json"), &e); err != nil {
		t.Fatal(err)
	}
	for i, in := range e.Instances {
		b, _ := json.Marshal(in)
		p := predictModel(t, srv.url, "credit", string(b))
		if got := float32(p.Predictions[0]["probability"]); got != float32(e.Probability[i]) {
			t.Errorf("instance %s: probability %v, xgboost %v", b, got, float32(e.Probability[i]))
		}
	}

	// load: the swapped package in a models folder fails to load, with
	// the same message as its reason.
	models := t.TempDir()
	mkdir(t, filepath.Join(models, "swapped"))
	writeFile(t, filepath.Join(models, "swapped", "model.yaml"), mustRead(t, filepath.Join(bad, "model.yaml")))
	writeFile(t, filepath.Join(models, "swapped", "credit.json"), mustRead(t, fieldOrderTestdata+"credit.json"))
	srv2 := startProc(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--models", models)
	var v api.Version
	testwait.Until(t, 60*time.Second, func() bool {
		resp, err := http.Get(srv2.url + "/v1/models/credit/versions/1")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		v = api.Version{}
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&v) == nil && v.State == "failed"
	})
	wantErr("load", v.Reason)

	// An artifact without names: check passes with a warning naming how
	// to add them.
	unnamed := filepath.Join(pkgs, "fraud")
	if err := os.CopyFS(unnamed, os.DirFS("../../examples/fraud")); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = sluice(t, "check", unnamed)
	if err != nil || !strings.Contains(stderr, "warning: the artifact declares no feature names (XGBoost feature_names)") || !strings.Contains(stderr, "booster.feature_names = [...]") {
		t.Fatalf("check of an unnamed artifact: %v\n%s%s", err, out, stderr)
	}
}

// predictModel predicts one instance of model with the CLI.
func predictModel(t *testing.T, url, model, body string) api.PredictResponse {
	t.Helper()
	out, stderr, err := sluice(t, "predict", model, body, "--server", url)
	if err != nil {
		t.Fatalf("predict %s: %v %s", model, err, stderr)
	}
	var p api.PredictResponse
	if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Predictions) != 1 {
		t.Fatalf("predict %s output %q: %v", model, out, err)
	}
	return p
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// getModelVersion is the HTTP status of GET /v1/models/{model}/versions/{n}.
func getModelVersion(t *testing.T, url, model string, n int) int {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/v1/models/%s/versions/%d", url, model, n))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
