package server

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lab", "report.html")
	ts := newTestServer(t, Config{LabReport: path})
	get := func(p string) (int, string, http.Header) {
		resp, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	// No report yet: 404 saying how to make one.
	code, body, _ := get("/v1/lab/report")
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != 404 || e.Error.Code != "not_found" ||
		!strings.Contains(e.Error.Message, "sluice lab") || !strings.Contains(e.Error.Message, "--publish") || !strings.Contains(e.Error.Message, path) {
		t.Fatalf("without a report: %d %s", code, body)
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"report.html":          "<!doctype html><h1>lab</h1>",
		"report-batching.csv":  "config\n",
		"report.json":          `{"title":"x"}`,
		"secret.txt":           "not served",
		"report-secret.csv":    "not a lab part",
		"other-batching.csv":   "another report's",
		"../outside-batch.csv": "outside",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		path  string
		code  int
		ctype string
		body  string
	}{
		{"/v1/lab/report", 200, "text/html; charset=utf-8", files["report.html"]},
		{"/v1/lab/report-batching.csv", 200, "text/csv; charset=utf-8", "config\n"},
		{"/v1/lab/report.json", 200, "application/json", files["report.json"]},
		{"/v1/lab/report-overload.csv", 404, "", "beside the report"}, // a lab file, not written
		{"/v1/lab/secret.txt", 404, "", "no lab file"},
		{"/v1/lab/report-secret.csv", 404, "", "no lab file"},
		{"/v1/lab/other-batching.csv", 404, "", "no lab file"},
		{"/v1/lab/..%2Foutside-batch.csv", 404, "", ""},
		{"/v1/lab/report.html", 404, "", "no lab file"},
	} {
		code, body, h := get(c.path)
		if code != c.code || (c.ctype != "" && h.Get("Content-Type") != c.ctype) || !strings.Contains(body, c.body) {
			t.Errorf("GET %s: %d %s %q; want %d %s containing %q", c.path, code, h.Get("Content-Type"), body, c.code, c.ctype, c.body)
		}
		if code == 200 && !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("GET %s: no Content-Security-Policy keeping the page to itself", c.path)
		}
	}
	resp, err := http.Post(ts.URL+"/v1/lab/report", "text/html", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/lab/report: %d, want 405", resp.StatusCode)
	}
}
