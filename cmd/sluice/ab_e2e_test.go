package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/testwait"
)

// TestOutcomesE2E posts outcomes of real predictions through the binary:
// joined to the version that answered, stored once per (request id,
// instance, name), unknown ids counted, another tenant's predictions
// unknown to a caller not allowed on their model, the CLI's file posted in
// batches, bad input refused naming the field.
func TestOutcomesE2E(t *testing.T) {
	data, models := t.TempDir(), t.TempDir()
	writePackage(t, filepath.Join(models, "calc"), []float64{1, 2}, 3.5)
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	os.WriteFile(tenants, []byte(fmt.Sprintf(`tenants:
  - {name: acme, keys: ["sha256:%s"], models: ["calc"]}
  - {name: globex, keys: ["sha256:%s"], models: ["other"]}
`, sha("acme-key"), sha("globex-key"))), 0o644)
	srv := startServer(t, "--data", data, "--models", models, "--tenants", tenants)
	defer srv.stop(t)
	for i := range 20 {
		a, err := postRaw(t, srv.url+"/v1/models/calc:predict", `{"instances":[{"x":1,"z":2},{"x":2,"z":2}],"routingKey":"user-`+fmt.Sprint(i)+`"}`,
			map[string]string{"Authorization": "Bearer acme-key", "X-Request-Id": fmt.Sprintf("req-%d", i)})
		if err != nil || a.status != 200 {
			t.Fatalf("predict %d: %v %d %s", i, err, a.status, a.body)
		}
	}
	post := func(key string, body string) (int, api.OutcomeResult, string) {
		t.Helper()
		a, err := postRaw(t, srv.url+"/v1/outcomes", body, map[string]string{"Authorization": "Bearer " + key})
		if err != nil {
			t.Fatal(err)
		}
		var r api.OutcomeResult
		json.Unmarshal(a.body, &r)
		return a.status, r, string(a.body)
	}
	// The joins are written within a fraction of a second of the answers.
	testwait.Until(t, 10*time.Second, func() bool {
		_, r, _ := post("acme-key", `{"outcomes":[{"requestId":"req-19","instance":1,"name":"probe","value":1}]}`)
		return r.Accepted+r.Duplicates == 1
	})
	status, r, body := post("acme-key", `{"outcomes":[
	  {"requestId":"req-0","name":"converted","value":1},
	  {"requestId":"req-0","instance":1,"name":"converted","value":0},
	  {"requestId":"req-1","name":"converted","value":1,"at":"2026-12-01T10:00:00Z"},
	  {"requestId":"nope","name":"converted","value":1}]}`)
	if status != 200 || r.Accepted != 3 || r.Unknown != 1 || len(r.UnknownIDs) != 1 || r.UnknownIDs[0] != "nope" {
		t.Fatalf("first batch: %d %s", status, body)
	}
	// Again: duplicates, nothing changed.
	if status, r, body = post("acme-key", `{"outcomes":[{"requestId":"req-0","name":"converted","value":5}]}`); status != 200 || r.Duplicates != 1 || r.Accepted != 0 {
		t.Fatalf("repeat: %d %s", status, body)
	}
	// globex may not use calc: acme's predictions are unknown to it.
	if status, r, body = post("globex-key", `{"outcomes":[{"requestId":"req-2","name":"converted","value":1}]}`); status != 200 || r.Unknown != 1 || r.Accepted != 0 {
		t.Fatalf("globex: %d %s", status, body)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"outcomes":[{"requestId":"req-3","name":"converted"}]}`, "outcomes[0].value"},
		{`{"outcomes":[{"requestId":"req-3","name":"a b","value":1}]}`, "outcomes[0].name"},
		{`{"outcomes":[{"requestId":"","name":"c","value":1}]}`, "outcomes[0].requestId"},
		{`{"outcomes":[{"requestId":"req-3","name":"c","value":1,"extra":1}]}`, "outcomes[0].extra"},
	} {
		if status, _, body = post("acme-key", tc.body); status != 400 || !strings.Contains(body, tc.field) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body, status, body, tc.field)
		}
	}
	if status, _, body = post("", `{"outcomes":[]}`); status != 401 {
		t.Errorf("no key: %d %s, want 401", status, body)
	}
	// The CLI posts a file of JSON lines in batches.
	var lines strings.Builder
	for i := 2; i < 20; i++ {
		fmt.Fprintf(&lines, `{"requestId":"req-%d","name":"converted","value":%d}`+"\n", i, i%2)
	}
	lines.WriteString(`{"requestId":"gone","name":"converted","value":1}` + "\n")
	f := filepath.Join(t.TempDir(), "outcomes.jsonl")
	os.WriteFile(f, []byte(lines.String()), 0o644)
	cmd := exec.Command(binary, "outcomes", "post", f, "--batch", "5", "--server", srv.url)
	cmd.Env = append(os.Environ(), "SLUICE_API_KEY=acme-key")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "accepted 18, duplicates 0, unknown 1") || !strings.Contains(string(out), "gone") {
		t.Fatalf("sluice outcomes post: %v %s", err, out)
	}
	// Counted in the metrics (the probes above count as unknown until
	// the joins were written).
	m := getBody(t, srv.url+"/metrics")
	if !strings.Contains(m, `sluice_outcomes_total{model="calc",result="accepted",version="1"} 22`) || !strings.Contains(m, `sluice_outcomes_total{model="",result="unknown",version=""} `) {
		t.Errorf("metrics lack the outcomes' counts:\n%s", grepLines(m, "sluice_outcomes_total"))
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
