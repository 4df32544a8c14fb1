package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// Records keep the answer the caller got.
	rec, err := http.NewRequest(http.MethodGet, srv.url+"/v1/records?model=calc&limit=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.Header.Set("Authorization", "Bearer acme-key")
	testwait.Until(t, 10*time.Second, func() bool {
		resp, err := http.DefaultClient.Do(rec)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var rs api.Records
		json.NewDecoder(resp.Body).Decode(&rs)
		return len(rs.Records) == 1 && string(rs.Records[0].Outputs) == `[{"y":5.5},{"y":6.5}]`
	})
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

// writeModel writes a linear model package named name: y = w·(x, z) + 0.5.
func writeModel(t *testing.T, dir, name string, w []float64) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	art, _ := json.Marshal(map[string]any{"weights": [][]float64{w}, "bias": []float64{0.5}, "link": "identity"})
	manifest := fmt.Sprintf(`name: %s
runtime: linear
artifact: model.json
input:
  schema: %s-input@1
  fields: [{name: x, type: float}, {name: z, type: float}]
output:
  schema: %s-output@1
  fields: [{name: y}]
golden:
  - instance: {x: 1, z: 1}
    expect: {y: %v}
`, name, name, name, w[0]+w[1]+0.5)
	os.WriteFile(filepath.Join(dir, "model.json"), art, 0o644)
	os.WriteFile(filepath.Join(dir, "model.yaml"), []byte(manifest), 0o644)
	return dir
}

// pushTwo publishes two versions of model name on srv.
func pushTwo(t *testing.T, srv *proc, name string) {
	t.Helper()
	pkgs := t.TempDir()
	for i, w := range [][]float64{{1, 2}, {2, 1.5}} {
		out, stderr, err := sluice(t, "push", writeModel(t, filepath.Join(pkgs, fmt.Sprint(i)), name, w), "--server", srv.url)
		if err != nil || !strings.Contains(out, fmt.Sprintf("%s@%d published", name, i+1)) {
			t.Fatalf("push %s v%d: %v %s %s", name, i+1, err, out, stderr)
		}
	}
}

// simulate sends units predictions of model (routing key u-i), each unit
// one request, plus pinned extra requests to version pinB (none when
// pinB is 0), and posts one outcome per answer: 1 with probability p[v]
// for the version v that answered. It returns the answers per version.
func simulate(t *testing.T, srv *proc, model string, units int, p map[int]float64, pinB, extra int, seed uint64) map[int]int {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	type call struct {
		id, path, body string
	}
	var calls []call
	for i := range units {
		calls = append(calls, call{fmt.Sprintf("%s-%d-%d", model, seed, i), "/v1/models/" + model + ":predict", fmt.Sprintf(`{"instances":[{"x":%d,"z":1}],"routingKey":"u-%d"}`, i%7, i)})
	}
	for i := range extra {
		calls = append(calls, call{fmt.Sprintf("%s-%d-pin-%d", model, seed, i), fmt.Sprintf("/v1/models/%s/versions/%d:predict", model, pinB), fmt.Sprintf(`{"instances":[{"x":1,"z":1}],"routingKey":"pin-%d"}`, i)})
	}
	answered := make([]int, len(calls))
	ys := make([]float64, len(calls))
	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				a, err := postRaw(t, srv.url+calls[i].path, calls[i].body, map[string]string{"X-Request-Id": calls[i].id})
				if err != nil || a.status != 200 {
					failed.Store(fmt.Sprintf("%s: %v %d %s", calls[i].path, err, a.status, a.body))
					continue
				}
				var pr api.PredictResponse
				json.Unmarshal(a.body, &pr)
				_, v, _ := strings.Cut(pr.ModelVersion, "@")
				answered[i], _ = strconv.Atoi(v)
				if len(pr.Predictions) == 1 {
					ys[i] = pr.Predictions[0]["y"]
				}
			}
		}()
	}
	for i := range calls {
		work <- i
	}
	close(work)
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatalf("predict: %s", f)
	}
	per := map[int]int{}
	var lines strings.Builder
	for i, c := range calls {
		v := answered[i]
		per[v]++
		val := 0
		if rng.Float64() < p[v] {
			val = 1
		}
		fmt.Fprintf(&lines, `{"requestId":%q,"name":"converted","value":%d}`+"\n", c.id, val)
		// A label: the true value, which version 2 misses by 1 and
		// version 1 by 0.25 (model quality per arm: MAE 1 against 0.25).
		miss := 0.25
		if v == 2 {
			miss = 1
		}
		fmt.Fprintf(&lines, `{"requestId":%q,"name":"label","value":%g}`+"\n", c.id, ys[i]+miss)
	}
	f := filepath.Join(t.TempDir(), "outcomes.jsonl")
	os.WriteFile(f, []byte(lines.String()), 0o644)
	// The last joins are written within 200 ms of their answers: post
	// until none is unknown (the accepted ones come back as duplicates).
	testwait.Until(t, 20*time.Second, func() bool {
		out, _, err := sluice(t, "outcomes", "post", f, "--server", srv.url)
		return err == nil && strings.Contains(out, "unknown 0\n")
	})
	return per
}

// abStatus polls sluice ab status --json until ok holds.
func abStatus(t *testing.T, srv *proc, model string, ok func(api.Experiment) bool) api.Experiment {
	t.Helper()
	var ex api.Experiment
	testwait.Until(t, 30*time.Second, func() bool {
		out, _, err := sluice(t, "ab", "status", model, "--json", "--server", srv.url)
		if err != nil || json.Unmarshal([]byte(out), &ex) != nil {
			return false
		}
		return ok(ex)
	})
	return ex
}

// TestABExperimentsE2E runs simulated experiments through the binary: an
// A/B with a known lift found (b_better, its interval covering the true
// lift), an A/A found equal (no_difference, not significant), and a broken
// split (a client pinning extra calls to B) flagged by the sample-ratio
// check. Figures come from the refresh loop (--experiments-every 1s),
// read with sluice ab status; history is kept; sluice ab stop ends one.
func TestABExperimentsE2E(t *testing.T) {
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir(), "--experiments-every", "1s")
	defer srv.stop(t)
	for _, m := range []string{"lift", "same", "broken"} {
		pushTwo(t, srv, m)
	}
	start := func(model string, args ...string) {
		t.Helper()
		out, stderr, err := sluice(t, append([]string{"ab", "start", model, "--a", "1", "--b", "2", "--split", "50", "--metric", "converted", "--server", srv.url}, args...)...)
		if err != nil || !strings.Contains(out, "experiment") {
			t.Fatalf("ab start %s: %v %s %s", model, err, out, stderr)
		}
	}

	t.Run("KnownLift", func(t *testing.T) {
		start("lift", "--min-effect", "0.05", "--label", "label")
		// A second experiment on the model is refused while one runs.
		if _, stderr, err := sluice(t, "ab", "start", "lift", "--a", "1", "--b", "2", "--metric", "converted", "--server", srv.url); err == nil || !strings.Contains(stderr, "running") {
			t.Errorf("second start: %v %s", err, stderr)
		}
		per := simulate(t, srv, "lift", 4000, map[int]float64{1: 0.20, 2: 0.30}, 0, 0, 1)
		t.Logf("answers per version: %v", per)
		ex := abStatus(t, srv, "lift", func(ex api.Experiment) bool { return ex.A.Outcomes+ex.B.Outcomes == 4000 })
		if ex.Decision != "b_better" || !ex.Significant || ex.SRM {
			t.Fatalf("lift: decision %s significant %v srm %v p %v, want b_better: %+v", ex.Decision, ex.Significant, ex.SRM, ex.PValue, ex)
		}
		// Model quality per arm from the label outcomes (a regressor's
		// labels: MAE and RMSE).
		if qa, qb := ex.A.Quality["mae"], ex.B.Quality["mae"]; math.Abs(qa.Value-0.25) > 1e-3 || math.Abs(qb.Value-1) > 1e-3 || ex.B.Quality["rmse"].N != int(ex.B.Outcomes) {
			t.Errorf("model quality: A %+v B %+v, want MAE 0.25 and 1 over every label", ex.A.Quality, ex.B.Quality)
		}
		if ex.A.Units+ex.B.Units != 4000 || ex.A.Units < 1800 || ex.B.Units < 1800 {
			t.Errorf("units %d / %d: want about 2000 each of 4000", ex.A.Units, ex.B.Units)
		}
		if ex.SeqRelLow > 0.5 || ex.SeqRelHigh < 0.5 {
			t.Errorf("the always-valid interval of the relative lift [%v, %v] misses the true 50 %%", ex.SeqRelLow, ex.SeqRelHigh)
		}
		out, _, err := sluice(t, "ab", "status", "lift", "--server", srv.url)
		if err != nil || !strings.Contains(out, "decision: b_better") || !strings.Contains(out, "lift@2") || !strings.Contains(out, "history (newest first):") {
			t.Errorf("ab status: %v\n%s", err, out)
		}
		// GET /v1/experiments lists it with the same figures.
		out, _, err = sluice(t, "ab", "list", "--json", "--server", srv.url)
		var l api.ExperimentList
		if err != nil || json.Unmarshal([]byte(out), &l) != nil {
			t.Fatalf("ab list: %v %s", err, out)
		}
		found := false
		for _, e := range l.Experiments {
			if e.Model == "lift" {
				found = e.State == "running" && e.Decision == "b_better" && e.B.ID == "lift@2"
			}
		}
		if !found {
			t.Errorf("ab list lacks the running lift experiment: %s", out)
		}
		m := getBody(t, srv.url+"/metrics")
		if !strings.Contains(m, `sluice_experiment_units{model="lift",version="2"}`) || !strings.Contains(m, `sluice_experiment_mean{model="lift",version="1"} 0.`) {
			t.Errorf("metrics lack the arms:\n%s", grepLines(m, "sluice_experiment"))
		}
		out, _, err = sluice(t, "ab", "stop", "lift", "--server", srv.url)
		if err != nil || !strings.Contains(out, "(stopped)") {
			t.Errorf("ab stop: %v %s", err, out)
		}
	})

	t.Run("AAEqual", func(t *testing.T) {
		start("same", "--min-effect", "0.5")
		simulate(t, srv, "same", 4000, map[int]float64{1: 0.2, 2: 0.2}, 0, 0, 2)
		ex := abStatus(t, srv, "same", func(ex api.Experiment) bool { return ex.A.Outcomes+ex.B.Outcomes == 4000 })
		if ex.Decision != "no_difference" || ex.Significant || ex.SRM {
			t.Fatalf("A/A: decision %s significant %v srm %v p %v, want no_difference: %+v", ex.Decision, ex.Significant, ex.SRM, ex.PValue, ex)
		}
	})

	t.Run("BrokenSplit", func(t *testing.T) {
		start("broken")
		simulate(t, srv, "broken", 3000, map[int]float64{1: 0.2, 2: 0.2}, 2, 600, 3)
		ex := abStatus(t, srv, "broken", func(ex api.Experiment) bool { return ex.A.Outcomes+ex.B.Outcomes == 3600 })
		if !ex.SRM || ex.SRMPValue >= 0.001 {
			t.Fatalf("broken split: srm %v p %v with units %d / %d, want flagged", ex.SRM, ex.SRMPValue, ex.A.Units, ex.B.Units)
		}
		out, _, _ := sluice(t, "ab", "status", "broken", "--server", srv.url)
		if !strings.Contains(out, "MISMATCH") {
			t.Errorf("ab status does not flag the split:\n%s", out)
		}
	})
}

// TestRolloutOutcomeGateE2E: a rollout gated on an outcome (release
// gates.metric) rolls back a candidate that converts worse: traffic back
// to the baseline, the numbers in the audit trail.
func TestRolloutOutcomeGateE2E(t *testing.T) {
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir(), "--experiments-every", "1s")
	defer srv.stop(t)
	pushTwo(t, srv, "gate")
	planFile := filepath.Join(t.TempDir(), "plan.yaml")
	os.WriteFile(planFile, []byte("steps: [50, 100]\nbake: 0s\nminSamples: 10\ngates:\n  metric: converted\n  minSamples: 300\n"), 0o644)
	if out, stderr, err := sluice(t, "deploy", "gate@2", "--plan", planFile, "--server", srv.url); err != nil {
		t.Fatalf("deploy: %v %s %s", err, out, stderr)
	}
	// At its first step (50 %) the rollout waits: the last step needs the
	// outcome gate to say promote.
	rollout := func() api.Rollout {
		var ro api.Rollout
		r, err := http.Get(srv.url + "/v1/deployments/gate/rollout")
		if err == nil {
			json.NewDecoder(r.Body).Decode(&ro)
			r.Body.Close()
		}
		return ro
	}
	testwait.Until(t, 30*time.Second, func() bool { ro := rollout(); return ro.Phase == "canary" && ro.Percent == 50 })
	per := simulate(t, srv, "gate", 2000, map[int]float64{1: 0.30, 2: 0.15}, 0, 0, 4)
	t.Logf("answers per version: %v", per)
	testwait.Until(t, 30*time.Second, func() bool { return rollout().Phase == "rolled_back" })
	ro := rollout()
	if !strings.Contains(ro.Reason, "converted: the candidate is significantly worse") {
		t.Errorf("reason %q", ro.Reason)
	}
	d, _, err := sluice(t, "history", "gate", "--server", srv.url)
	if err != nil || !strings.Contains(d, "significantly worse") || !strings.Contains(d, "p =") {
		t.Errorf("the audit trail lacks the gate's numbers: %v\n%s", err, d)
	}
	if p := predictAt(t, srv, "gate"); p != "gate@1" {
		t.Errorf("after the rollback %s answered, want gate@1", p)
	}
}

// predictAt is the version that answers one call to model.
func predictAt(t *testing.T, srv *proc, model string) string {
	t.Helper()
	a, err := postRaw(t, srv.url+"/v1/models/"+model+":predict", `{"instances":[{"x":1,"z":1}],"routingKey":"someone"}`, nil)
	if err != nil || a.status != 200 {
		t.Fatalf("predict: %v %d %s", err, a.status, a.body)
	}
	var pr api.PredictResponse
	json.Unmarshal(a.body, &pr)
	return pr.ModelVersion
}
