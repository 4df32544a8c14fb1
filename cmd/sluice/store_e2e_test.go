package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/api"
)

// A store file truncated to nothing stops the server with a message naming
// the file and the fix; --init-store moves it aside and starts afresh.
func TestServeRefusesTruncatedStore(t *testing.T) {
	for _, file := range []string{"sluice.db", "records.db"} {
		t.Run(file, func(t *testing.T) {
			data := t.TempDir()
			models := t.TempDir()
			writePackage(t, filepath.Join(models, "calc"), []float64{1, 2}, 3.5)
			srv := startServer(t, "--data", data, "--models", models)
			if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@1" {
				t.Fatalf("predict: %+v", p)
			}
			srv.stop(t)
			path := filepath.Join(data, file)
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			_, stderr, err := sluice(t, "serve", "--addr", "127.0.0.1:0", "--data", data, "--models", models)
			if err == nil || !strings.Contains(stderr, path) || !strings.Contains(stderr, "--init-store") {
				t.Fatalf("serve on a truncated %s: %v; want a refusal naming %s and --init-store, got:\n%s", file, err, path, stderr)
			}
			srv = startServer(t, "--data", data, "--models", models, "--init-store")
			if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@1" {
				t.Errorf("predict after --init-store: %+v", p)
			}
			srv.stop(t)
			aside, _ := filepath.Glob(path + ".damaged-*")
			if len(aside) != 1 {
				t.Errorf("the damaged file was not kept beside %s: %v", path, aside)
			}
		})
	}
}

// The artifact of the version holding all the traffic disappears; after a
// restart /readyz stays 200 but names the model, the version and why, and
// calls answer 503 not_ready naming the version — never a server path.
func TestMissingArtifactIsReportedWithoutPaths(t *testing.T) {
	data := t.TempDir()
	models := t.TempDir()
	pkgs := t.TempDir()
	srv := startServer(t, "--data", data, "--models", models)
	for i, w := range [][]float64{{1, 2}, {2, 2}} {
		dir := writePackage(t, filepath.Join(pkgs, fmt.Sprint("v", i+1)), w, 0.5+w[0]+w[1])
		if out, stderr, err := sluice(t, "push", dir, "--server", srv.url); err != nil {
			t.Fatalf("push: %v %s %s", err, out, stderr)
		}
	}
	if out, _, err := sluice(t, "traffic", "calc", "calc@2=100", "--reason", "test", "--server", srv.url); err != nil {
		t.Fatalf("traffic: %v %s", err, out)
	}
	sha := getVersion(t, srv.url, 2).ArtifactSHA256
	srv.stop(t)
	if err := os.Remove(filepath.Join(data, "artifacts", "sha256", sha[:2], sha)); err != nil {
		t.Fatal(err)
	}
	srv = startServer(t, "--data", data, "--models", models)
	defer srv.stop(t)
	resp, err := http.Get(srv.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rd api.Readiness
	_ = json.Unmarshal(body, &rd)
	t.Logf("readyz: %s", body)
	var calc []string
	for _, w := range rd.Warnings {
		if strings.Contains(w, "calc") {
			calc = append(calc, w)
		}
	}
	if resp.StatusCode != 200 || len(calc) != 1 || !strings.Contains(calc[0], "calc@2") || !strings.Contains(calc[0], "missing") || strings.Contains(string(body), data) {
		t.Errorf("readyz: %d %s; want 200 and one warning naming calc@2 and the missing artifact, without %s", resp.StatusCode, body, data)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.url+"/v1/models/calc:predict", strings.NewReader(`{"instances":[{"x":1,"z":2}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("predict: %s", body)
	if resp.StatusCode != 503 || !strings.Contains(string(body), "not_ready") || !strings.Contains(string(body), "calc@2") || strings.Contains(string(body), data) || strings.Contains(string(body), "/sha256/") {
		t.Errorf("predict: %d %s; want 503 not_ready naming calc@2 without a server path", resp.StatusCode, body)
	}
	if !strings.Contains(srv.logs.String(), filepath.Join("sha256", sha[:2], sha)) {
		t.Errorf("the log lacks the missing file's path:\n%s", srv.logs)
	}
}
