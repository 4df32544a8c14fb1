package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/testwait"
)

func readiness(t *testing.T, url string) api.Readiness {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rd api.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
		t.Fatal(err)
	}
	return rd
}

// --models accepts one package folder as well as a folder of packages, and
// warns when the folder holds none.
func TestServeModelsFolderShapes(t *testing.T) {
	single := writePackage(t, filepath.Join(t.TempDir(), "calc"), []float64{1, 2}, 3.5)
	srv := startServer(t, "--data", t.TempDir(), "--models", single)
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@1" {
		t.Fatalf("single package folder: served by %q", p.ModelVersion)
	}
	srv.stop(t)

	empty := t.TempDir()
	srv = startServer(t, "--data", t.TempDir(), "--models", empty)
	rd := readiness(t, srv.url)
	if !rd.Ready || len(rd.Warnings) != 1 || !strings.Contains(rd.Warnings[0], "models folder "+empty+" holds no model package") {
		t.Fatalf("empty folder readiness: %+v", rd)
	}
	if !strings.Contains(srv.logs.String(), "models folder holds no model package") {
		t.Fatalf("no warning in the log:\n%s", srv.logs)
	}
	srv.stop(t)
}

// A typo in one package does not stop the server: the others serve and the
// bad one is reported as failed with the parser's message, in readiness,
// GET /v1/models and `sluice models`. With --strict the server exits non-zero.
func TestServeInvalidPackage(t *testing.T) {
	models := t.TempDir()
	writePackage(t, filepath.Join(models, "calc"), []float64{1, 2}, 3.5)
	bad := writePackage(t, filepath.Join(models, "bad"), []float64{1, 2}, 3.5)
	manifest, err := os.ReadFile(filepath.Join(bad, "model.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest = []byte(strings.Replace(strings.Replace(string(manifest), "name: calc", "name: broken", 1), "golden:", "goldn:", 1))
	if err := os.WriteFile(filepath.Join(bad, "model.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(models, "bad", "model.yaml") + ":10: goldn"

	srv := startServer(t, "--data", t.TempDir(), "--models", models)
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@1" {
		t.Fatalf("good package: served by %q", p.ModelVersion)
	}
	if rd := readiness(t, srv.url); !rd.Ready || len(rd.Warnings) != 1 || !strings.Contains(rd.Warnings[0], "(model broken) is invalid") || !strings.Contains(rd.Warnings[0], want) {
		t.Fatalf("readiness: %+v (want %q)", rd, want)
	}
	out, stderr, err := sluice(t, "models", "--json", "--server", srv.url)
	if err != nil {
		t.Fatalf("models --json: %v %s", err, stderr)
	}
	var ms []api.Model
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, m := range ms {
		if m.Name == "broken" {
			found = m.InvalidPackage != nil && m.InvalidPackage.State == "failed" && strings.Contains(m.InvalidPackage.Error, want) && len(m.Versions) == 0
		}
	}
	if !found {
		t.Fatalf("GET /v1/models has no failed package broken: %s", out)
	}
	if out, _, err = sluice(t, "models", "--server", srv.url); err != nil || !strings.Contains(out, "package:failed") || !strings.Contains(out, "broken: package "+filepath.Join(models, "bad")+" is invalid") || !strings.Contains(out, want) {
		t.Fatalf("sluice models: %v\n%s", err, out)
	}
	srv.stop(t)

	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--models", models, "--strict")
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || !strings.Contains(string(b), "--strict: 1 invalid package(s)") || !strings.Contains(string(b), want) {
		t.Fatalf("--strict: %v\n%s", err, b)
	}
}

// sluice archive, load and delete through the binary, with their audit
// events, across a restart.
func TestArchiveLoadDeleteCLI(t *testing.T) {
	data, pkgs := t.TempDir(), t.TempDir()
	srv := startServer(t, "--data", data, "--models", t.TempDir(), "--delete-quiet", "0s")
	for i, w := range [][]float64{{1, 2}, {2, 2}} {
		dir := writePackage(t, filepath.Join(pkgs, string(rune('a'+i))), w, w[0]+w[1]+0.5)
		if out, stderr, err := sluice(t, "push", dir, "--server", srv.url); err != nil {
			t.Fatalf("push: %v %s %s", err, out, stderr)
		}
	}
	if _, stderr, err := sluice(t, "archive", "calc@1", "--server", srv.url); err == nil || !strings.Contains(stderr, "409 already_exists: calc@1 takes 100% of calc's traffic") {
		t.Fatalf("archive of the serving version: %v %q", err, stderr)
	}
	if out, stderr, err := sluice(t, "archive", "calc@2", "--reason", "superseded", "--server", srv.url); err != nil || !strings.Contains(out, "calc@2 archived (archived by default: superseded)") {
		t.Fatalf("archive: %v %q %q", err, out, stderr)
	}
	if out, _, err := sluice(t, "models", "--server", srv.url); err != nil || !strings.Contains(out, "1:ready 2:archived") {
		t.Fatalf("models after archive: %v\n%s", err, out)
	}
	if out, stderr, err := sluice(t, "load", "calc@2", "--server", srv.url); err != nil || !strings.Contains(out, "calc@2 ready") {
		t.Fatalf("load: %v %q %q", err, out, stderr)
	}
	if out, stderr, err := sluice(t, "delete", "calc", "--reason", "retired", "--server", srv.url); err != nil || !strings.Contains(out, "calc deleted: calc@1, calc@2 archived and hidden") {
		t.Fatalf("delete: %v %q %q", err, out, stderr)
	}
	out, _, err := sluice(t, "history", "calc", "--server", srv.url)
	for _, want := range []string{"archive", "superseded", "load", "delete", "retired"} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("history lacks %q: %v\n%s", want, err, out)
		}
	}
	srv.stop(t)

	srv = startServer(t, "--data", data, "--models", t.TempDir())
	if out, _, err := sluice(t, "models", "--server", srv.url); err != nil || strings.Contains(out, "calc") {
		t.Fatalf("deleted model listed after restart: %v\n%s", err, out)
	}
	if _, stderr, err := sluice(t, "predict", "calc", `{"x":1,"z":2}`, "--server", srv.url); err == nil || !strings.Contains(stderr, "404") {
		t.Fatalf("predict of a deleted model: %v %q", err, stderr)
	}
	srv.stop(t)
}

// --models-poll publishes a changed package as a new version that takes no
// traffic (it has no release: plan), and needs --models.
func TestServeModelsPoll(t *testing.T) {
	models := t.TempDir()
	writePackage(t, filepath.Join(models, "calc"), []float64{1, 2}, 3.5)
	srv := startServer(t, "--data", t.TempDir(), "--models", models, "--models-poll", "50ms")
	writePackage(t, filepath.Join(models, "calc"), []float64{2, 2}, 4.5)
	testwait.Until(t, 30*time.Second, func() bool {
		resp, err := http.Get(srv.url + "/v1/models/calc/versions/2")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var v api.Version
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&v) == nil && v.State == "ready"
	})
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@1" {
		t.Fatalf("a polled change moved traffic: served by %s", p.ModelVersion)
	}
	srv.stop(t) // the poll loop stops with the server

	out, err := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--models-poll", "5s", "--data", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "needs --models") {
		t.Fatalf("--models-poll without --models: %v %s", err, out)
	}
}
