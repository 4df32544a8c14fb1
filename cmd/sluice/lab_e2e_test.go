package main

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLab runs a tiny `sluice lab` (short points, 20 models, one worker)
// against the real binary, which starts its own `sluice serve --workers`
// processes, and checks the report's shape — three sections, each with
// its charts, findings and raw numbers beside it — not its numbers (they
// are this machine's). Then a server with --data where --publish put the
// report serves it at GET /v1/lab/report, and one without says how to
// make one.
func TestLab(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers and offers load for about a minute")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out", "lab.html")
	data := filepath.Join(dir, "data")
	stdout, stderr, err := sluice(t, "lab", "--quick", "--point", "1s", "--rates", "50,150", "--models", "20",
		"--many-duration", "12s", "--workers", "1", "--out", out, "--publish", data, "--scratch", filepath.Join(dir, "scratch"))
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(dir, "scratch", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, b)
		}
		t.Fatalf("sluice lab: %v\n%s", err, stderr)
	}
	if strings.TrimSpace(stdout) != out {
		t.Errorf("stdout %q, want the report's path %q", stdout, out)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	checkLabPage(t, string(page))
	for _, f := range []string{"lab-batching.csv", "lab-overload.csv", "lab-many.csv"} {
		fh, err := os.Open(filepath.Join(dir, "out", f))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(fh).ReadAll()
		fh.Close()
		if err != nil || len(rows) < 2 {
			t.Errorf("%s: %d rows (%v), want a header and numbers", f, len(rows), err)
		}
	}
	var r struct {
		Machine  struct{ Cores int }
		Batching struct{ Points []json.RawMessage }
		Overload struct{ Points []json.RawMessage }
		Many     struct{ Windows []json.RawMessage }
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", "lab.json"))
	if err != nil || json.Unmarshal(b, &r) != nil {
		t.Fatalf("lab.json: %v %s", err, b)
	}
	if r.Machine.Cores < 1 || len(r.Batching.Points) == 0 || len(r.Overload.Points) != 8 || len(r.Many.Windows) == 0 {
		t.Errorf("lab.json: %d cores, %d batching points, %d overload points (want 8: 4 loads × admission on, off), %d windows",
			r.Machine.Cores, len(r.Batching.Points), len(r.Overload.Points), len(r.Many.Windows))
	}

	// --publish put it where a server with --data DATA serves it.
	srv := startServer(t, "--data", data)
	get := func(base, path string) (int, string, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
	}
	code, ctype, body := get(srv.url, "/v1/lab/report")
	if code != 200 || !strings.HasPrefix(ctype, "text/html") {
		t.Fatalf("GET /v1/lab/report: %d %s", code, ctype)
	}
	checkLabPage(t, body)
	// The page's links to its raw numbers resolve under /v1/lab/.
	for _, m := range regexp.MustCompile(`href="(report[^"#/]*\.(?:csv|json))"`).FindAllStringSubmatch(body, -1) {
		if code, _, b := get(srv.url, "/v1/lab/"+m[1]); code != 200 || len(b) == 0 {
			t.Errorf("GET /v1/lab/%s (linked from the report): %d", m[1], code)
		}
	}

	empty := startServer(t, "--data", filepath.Join(dir, "empty"))
	code, _, body = get(empty.url, "/v1/lab/report")
	if code != 404 || !strings.Contains(body, "sluice lab") || !strings.Contains(body, "--publish") {
		t.Errorf("GET /v1/lab/report without a report: %d %s, want 404 saying how to make one", code, body)
	}
}

// checkLabPage checks the report's shape: three sections with their
// charts and findings, and nothing that would leave the page.
func checkLabPage(t *testing.T, page string) {
	t.Helper()
	for _, s := range []string{"batching", "overload", "many", "machine"} {
		i := strings.Index(page, `<section id="`+s+`"`)
		if i < 0 {
			t.Errorf("the report has no %s section", s)
			continue
		}
		sec := page[i:]
		if j := strings.Index(sec[1:], "<section "); j >= 0 {
			sec = sec[:j+1]
		}
		if s != "machine" && (!strings.Contains(sec, "<svg ") || !strings.Contains(sec, `class="findings"`) || !strings.Contains(sec, ".csv")) {
			t.Errorf("section %s lacks a chart, its findings or its CSV", s)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "NaN") {
		t.Error("the report holds a script or a NaN")
	}
}
