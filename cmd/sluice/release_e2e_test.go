package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/testwait"
)

// synPackage writes a synthetic-runtime package of model "syn".
func synPackage(t *testing.T, dir, cost, extra string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `name: syn
runtime: synthetic
artifact: cost.json
input:
  schema: syn-input@1
  fields: [{name: x, type: float}]
output:
  schema: syn-output@1
  fields: [{name: y}]
` + extra
	if err := os.WriteFile(filepath.Join(dir, "model.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cost.json"), []byte(cost), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// answer is one load request's outcome.
type answer struct {
	sent    time.Time
	status  int
	version string // X-Model-Version
	code    string
	err     error
}

// load sends requests open loop at rate until stop is closed (at most max).
type load struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	done    chan struct{}
}

func startLoad(t *testing.T, url, model string, rate float64, max int) *load {
	l := &load{stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	go func() {
		defer close(l.done)
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i := 0; i < max; i++ {
			select {
			case <-l.stop:
				wg.Wait()
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := answer{sent: time.Now()}
				body := fmt.Sprintf(`{"instances":[{"x":%d}],"deadlineMs":2000}`, i%7)
				req, _ := http.NewRequest(http.MethodPost, url+"/v1/models/"+model+":predict", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Routing-Key", fmt.Sprintf("user-%d", i))
				resp, err := client.Do(req)
				if err != nil {
					a.err = err
				} else {
					a.status = resp.StatusCode
					a.version = resp.Header.Get("X-Model-Version")
					var eb api.ErrorBody
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if a.status != 200 && json.Unmarshal(b, &eb) == nil {
						a.code = eb.Error.Code
					}
				}
				l.mu.Lock()
				l.answers = append(l.answers, a)
				l.mu.Unlock()
			}()
		}
		wg.Wait()
	}()
	return l
}

// count is how many answers so far satisfy f.
func (l *load) count(f func(answer) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.answers {
		if f(a) {
			n++
		}
	}
	return n
}

func (l *load) finish() []answer {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	sort.Slice(l.answers, func(i, j int) bool { return l.answers[i].sent.Before(l.answers[j].sent) })
	return l.answers
}

// failures lists the answers that are not 200 and not from an allowed version.
func failures(as []answer, allowed string) []answer {
	var out []answer
	for _, a := range as {
		if a.err != nil || (a.status != 200 && a.version != allowed) {
			out = append(out, a)
		}
	}
	return out
}

func rolloutOf(t *testing.T, url, model string) api.Rollout {
	t.Helper()
	resp, err := http.Get(url + "/v1/deployments/" + model + "/rollout")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r api.Rollout
	json.NewDecoder(resp.Body).Decode(&r)
	return r
}

func waitPhase(t *testing.T, url string, phases ...string) api.Rollout {
	t.Helper()
	var r api.Rollout
	testwait.Until(t, 60*time.Second, func() bool {
		r = rolloutOf(t, url, "syn")
		for _, p := range phases {
			if r.Phase == p {
				return true
			}
		}
		return false
	})
	return r
}

func deployment(t *testing.T, url, model string) api.Deployment {
	t.Helper()
	resp, err := http.Get(url + "/v1/deployments/" + model)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d api.Deployment
	json.NewDecoder(resp.Body).Decode(&d)
	return d
}

const fast = `{"base":"1ms","perInstance":"0.05ms","mode":"sleep"}`

// TestRolloutsUnderLoad releases good and bad versions while a client keeps
// calling: the good one goes shadow → canary → promoted with no failed
// request; each bad one fails or rolls back, and the baseline never fails.
func TestRolloutsUnderLoad(t *testing.T) {
	pkgs := t.TempDir()
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir())
	push := func(dir string) (string, error) {
		out, stderr, err := sluice(t, "push", dir, "--server", srv.url)
		return out + stderr, err
	}
	if out, err := push(synPackage(t, filepath.Join(pkgs, "v1"), fast, "")); err != nil {
		t.Fatalf("push v1: %v %s", err, out)
	}
	// A generous p99 gate: the slow candidate is ~40× slower, while a busy CI
	// machine can make two equal versions differ by a few times at p99.
	planFile := filepath.Join(pkgs, "plan.json")
	os.WriteFile(planFile, []byte(`{"gates":{"maxP99Ratio":8}}`), 0o644)
	plan := []string{"--plan", planFile, "--steps", "10,50,100", "--bake", "300ms", "--min-samples", "20", "--server", srv.url}

	t.Run("good version is promoted with zero failures", func(t *testing.T) {
		if out, err := push(synPackage(t, filepath.Join(pkgs, "v2"), fast, "description: same model, new build\n")); err != nil {
			t.Fatalf("push v2: %v %s", err, out)
		}
		l := startLoad(t, srv.url, "syn", 200, 20000)
		out, stderr, err := sluice(t, append([]string{"deploy", "syn@2", "--shadow", "30", "--reason", "new build"}, plan...)...)
		if err != nil {
			t.Fatalf("deploy: %v %s %s", err, out, stderr)
		}
		sawShadow, sawCanary := false, false
		testwait.Until(t, 60*time.Second, func() bool {
			r := rolloutOf(t, srv.url, "syn")
			sawShadow = sawShadow || r.Phase == "shadow"
			sawCanary = sawCanary || r.Phase == "canary"
			return r.Phase == "promoted" || r.Phase == "rolled_back"
		})
		as := l.finish()
		r := rolloutOf(t, srv.url, "syn")
		if r.Phase != "promoted" {
			t.Fatalf("rollout ended %s: %s", r.Phase, r.Reason)
		}
		if f := failures(as, ""); len(f) > 0 {
			t.Fatalf("%d of %d requests failed during a good rollout, first %+v", len(f), len(as), f[0])
		}
		if !sawCanary {
			t.Error("never observed the canary phase")
		}
		_ = sawShadow // the shadow phase may pass between two polls; the history below proves it
		out, _, _ = sluice(t, "history", "syn", "--server", srv.url)
		for _, want := range []string{"shadow for 30 requests", "canary step 1: 10%", "canary step 2: 50%", "promoted to 100%"} {
			if !strings.Contains(out, want) {
				t.Errorf("history lacks %q:\n%s", want, out)
			}
		}
	})

	bad := []struct {
		name, dir, cost, extra string
		version                int
		phase                  string
	}{
		// Refused by push's checks: no version is made, nothing to deploy.
		{"golden mismatch", "v3", fast, "golden: [{instance: {x: 0}, expect: {y: 0.9}}]\n", 0, "golden example 0"},
		{"corrupt artifact", "v4", `{"base": "1ms", "perInst`, "", 0, "load syn"},
		{"errors only under canary", "v5", `{"base":"1ms","perInstance":"0.05ms","mode":"sleep","failEvery":3}`, "serving: {warmupBatches: 0}\n", 3, "rolled_back"},
		{"slow only under canary", "v6", `{"base":"40ms","perInstance":"0.05ms","mode":"sleep"}`, "serving: {warmupBatches: 0, maxQueueInstances: 100000}\n", 4, "rolled_back"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			if b.version == 0 {
				out, err := push(synPackage(t, filepath.Join(pkgs, b.dir), b.cost, b.extra))
				if err == nil || !strings.Contains(out, b.phase) || !strings.Contains(out, "nothing was pushed") {
					t.Fatalf("push of a broken version succeeded: %v %s", err, out)
				}
				if d := deployment(t, srv.url, "syn"); len(d.Targets) != 1 || d.Targets[0].Version != 2 {
					t.Fatalf("after a refused push the deployment is %+v, want syn@2 100%%", d.Targets)
				}
				return
			}
			l := startLoad(t, srv.url, "syn", 200, 20000)
			if out, err := push(synPackage(t, filepath.Join(pkgs, b.dir), b.cost, b.extra)); err != nil {
				t.Fatalf("push: %v %s", err, out)
			}
			if _, stderr, err := sluice(t, append([]string{"deploy", fmt.Sprintf("syn@%d", b.version)}, plan...)...); err != nil {
				t.Fatalf("deploy: %v %s", err, stderr)
			}
			r := waitPhase(t, srv.url, "failed", "rolled_back", "promoted")
			as := l.finish()
			if r.Phase != b.phase {
				t.Fatalf("rollout ended %s (%s), want %s", r.Phase, r.Reason, b.phase)
			}
			t.Logf("%s: %s", r.Phase, r.Reason)
			candidate := fmt.Sprintf("syn@%d", b.version)
			if f := failures(as, candidate); len(f) > 0 {
				t.Fatalf("%d requests not served by the candidate failed, first %+v", len(f), f[0])
			}
			d := deployment(t, srv.url, "syn")
			if len(d.Targets) != 1 || d.Targets[0].Version != 2 || d.Targets[0].Weight != 100 {
				t.Fatalf("after a bad rollout the deployment is %+v, want syn@2 100%%", d.Targets)
			}
		})
	}

	t.Run("rollback under load", func(t *testing.T) {
		before := getVersionOf(t, srv.url, "syn", 1)
		l := startLoad(t, srv.url, "syn", 200, 20000)
		// Some traffic reaches syn@2 first.
		testwait.Until(t, 30*time.Second, func() bool { return l.count(func(a answer) bool { return a.version == "syn@2" }) >= 20 })
		out, stderr, err := sluice(t, "rollback", "syn", "--reason", "drill", "--server", srv.url)
		returned := time.Now()
		if err != nil || !targetRE("syn@1", "100%").MatchString(out) {
			t.Fatalf("rollback: %v %q %q", err, out, stderr)
		}
		// Requests sent after the rollback returned are answered.
		testwait.Until(t, 30*time.Second, func() bool {
			return l.count(func(a answer) bool { return a.sent.After(returned) }) >= 20
		})
		as := l.finish()
		if f := failures(as, ""); len(f) > 0 {
			t.Fatalf("%d requests failed around a rollback, first %+v", len(f), f[0])
		}
		after := 0
		for _, a := range as {
			if a.sent.After(returned) {
				after++
				if a.version != "syn@1" {
					t.Fatalf("a request sent after the rollback returned was answered by %s", a.version)
				}
			}
		}
		if after == 0 {
			t.Fatal("no request was sent after the rollback")
		}
		if now := getVersionOf(t, srv.url, "syn", 1); now.Timings.LoadMs != before.Timings.LoadMs {
			t.Errorf("syn@1 was reloaded by the rollback (load %v ms → %v ms)", before.Timings.LoadMs, now.Timings.LoadMs)
		}
		out, _, _ = sluice(t, "history", "syn", "--server", srv.url)
		if !strings.Contains(out, "rollback: drill") {
			t.Errorf("history lacks the rollback and its reason:\n%s", out)
		}
	})
	srv.stop(t)
}

func getVersionOf(t *testing.T, url, model string, n int) api.Version {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/v1/models/%s/versions/%d", url, model, n))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v api.Version
	json.NewDecoder(resp.Body).Decode(&v)
	return v
}

// linPackage writes a linear model "lin": y = sigmoid(x + bias).
func linPackage(t *testing.T, dir string, bias float64) string {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "model.json"), []byte(fmt.Sprintf(`{"weights":[[1]],"bias":[%v],"link":"logistic"}`, bias)), 0o644)
	os.WriteFile(filepath.Join(dir, "model.yaml"), []byte(`name: lin
runtime: linear
artifact: model.json
input: {schema: lin-input@1, fields: [{name: x, type: float}]}
output: {schema: lin-output@1, fields: [{name: p}]}
`), 0o644)
	return dir
}

// TestShadowFiguresMatchHandCount shadows y = sigmoid(x) with y = sigmoid(x−1):
// a row's label flips exactly when 0 <= x < 1.
func TestShadowFiguresMatchHandCount(t *testing.T) {
	pkgs := t.TempDir()
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir())
	for i, bias := range []float64{0, -1} {
		if out, stderr, err := sluice(t, "push", linPackage(t, filepath.Join(pkgs, fmt.Sprint(i)), bias), "--server", srv.url); err != nil {
			t.Fatalf("push: %v %s %s", err, out, stderr)
		}
	}
	if out, stderr, err := sluice(t, "shadow", "lin@2", "--server", srv.url); err != nil || !targetRE("lin@2", "shadow").MatchString(out) {
		t.Fatalf("shadow: %v %s %s", err, out, stderr)
	}
	xs := []float64{-2, -0.5, 0, 0.25, 0.5, 0.99, 1, 1.5, 3, 0.1}
	flips, sum, mx := 0, 0.0, 0.0
	sig := func(z float64) float64 { return float64(float32(1 / (1 + math.Exp(-z)))) }
	for _, x := range xs {
		if x >= 0 && x < 1 {
			flips++
		}
		d := math.Abs(sig(x) - sig(x-1))
		sum += d
		mx = math.Max(mx, d)
		if out, stderr, err := sluice(t, "predict", "lin", fmt.Sprintf(`{"x":%v}`, x), "--server", srv.url); err != nil || !strings.Contains(out, `"modelVersion":"lin@1"`) {
			t.Fatalf("predict: %v %s %s", err, out, stderr)
		}
	}
	var d api.Deployment
	testwait.Until(t, 30*time.Second, func() bool {
		d = deployment(t, srv.url, "lin")
		return len(d.Shadows) == 1 && d.Shadows[0].Requests == int64(len(xs))
	})
	s := d.Shadows[0]
	if s.Disagreements != int64(flips) || s.Rows != int64(len(xs)) || s.Errors != 0 {
		t.Errorf("shadow figures %+v; hand count: %d flips in %d rows", s, flips, len(xs))
	}
	if math.Abs(s.MeanAbsDiff-sum/float64(len(xs))) > 1e-6 || math.Abs(s.MaxAbsDiff-mx) > 1e-6 {
		t.Errorf("abs diff mean %v max %v; hand count mean %v max %v", s.MeanAbsDiff, s.MaxAbsDiff, sum/float64(len(xs)), mx)
	}
	out, _, _ := sluice(t, "traffic", "lin", "--server", srv.url)
	if !strings.Contains(out, fmt.Sprintf("disagreement %.2f%% (%d)", 100*float64(flips)/float64(len(xs)), flips)) {
		t.Errorf("CLI does not show the disagreement:\n%s", out)
	}
	srv.stop(t)
}

// TestSlowShadowLeavesPrimaryAlone compares primary latency without and
// with a shadow 20× slower than the primary.
func TestSlowShadowLeavesPrimaryAlone(t *testing.T) {
	pkgs := t.TempDir()
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir())
	sluice(t, "push", synPackage(t, filepath.Join(pkgs, "a"), `{"base":"2ms","perInstance":"0ms","mode":"sleep"}`, ""), "--server", srv.url)
	sluice(t, "push", synPackage(t, filepath.Join(pkgs, "b"), `{"base":"40ms","perInstance":"0ms","mode":"sleep"}`, "serving: {warmupBatches: 0}\n"), "--server", srv.url)
	client := &http.Client{}
	median := func() time.Duration {
		var ds []time.Duration
		for i := 0; i < 60; i++ {
			st := time.Now()
			req, _ := http.NewRequest(http.MethodPost, srv.url+"/v1/models/syn:predict", strings.NewReader(`{"instances":[{"x":1}]}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Model-Version") != "syn@1" {
				t.Fatalf("primary answered %d by %s", resp.StatusCode, resp.Header.Get("X-Model-Version"))
			}
			ds = append(ds, time.Since(st))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	without := median()
	if _, stderr, err := sluice(t, "shadow", "syn@2", "--server", srv.url); err != nil {
		t.Fatal(err, stderr)
	}
	with := median()
	t.Logf("primary median without shadow %v, with a 40 ms shadow %v", without, with)
	if with > without*3/2+5*time.Millisecond {
		t.Errorf("a slow shadow slowed the primary: median %v → %v", without, with)
	}
	d := deployment(t, srv.url, "syn")
	if len(d.Shadows) != 1 || d.Shadows[0].Requests+d.Shadows[0].Dropped == 0 {
		t.Errorf("the shadow saw no traffic: %+v", d.Shadows)
	}
	srv.stop(t)
}

// TestHistoryAt reproduces the policy in force at past times.
func TestHistoryAt(t *testing.T) {
	pkgs := t.TempDir()
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir())
	for i, bias := range []float64{0, 1, 2} {
		sluice(t, "push", linPackage(t, filepath.Join(pkgs, fmt.Sprint(i)), bias), "--server", srv.url)
	}
	var marks []time.Time
	var want []string
	steps := [][]string{{"lin@1=90", "lin@2=10"}, {"lin@1=50", "lin@2=50"}, {"lin@3=100"}}
	for _, st := range steps {
		args := append([]string{"traffic", "lin"}, st...)
		if _, stderr, err := sluice(t, append(args, "--reason", "step "+strings.Join(st, " "), "--server", srv.url)...); err != nil {
			t.Fatal(err, stderr)
		}
		marks = append(marks, time.Now())
		d := deployment(t, srv.url, "lin")
		b, _ := json.Marshal(d.Targets)
		want = append(want, string(b))
	}
	for i, at := range marks {
		resp, err := http.Get(srv.url + "/v1/deployments/lin/history?at=" + at.UTC().Format(time.RFC3339Nano))
		if err != nil {
			t.Fatal(err)
		}
		var p api.Policy
		json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		for j := range p.Targets {
			p.Targets[j].State = "ready"
		}
		got, _ := json.Marshal(p.Targets)
		if string(got) != want[i] || p.Reason != "step "+strings.Join(steps[i], " ") || p.Actor != "default" {
			t.Errorf("at mark %d: %s by %q (%q), want %s", i, got, p.Actor, p.Reason, want[i])
		}
	}
	out, _, _ := sluice(t, "history", "lin", "--server", srv.url)
	if !strings.Contains(out, "lin@1 90→50, lin@2 10→50") || !strings.Contains(out, "default") {
		t.Errorf("history:\n%s", out)
	}
	// A model nobody published has no history: the CLI fails naming it,
	// with and without --at, and writes nothing on stdout.
	for _, args := range [][]string{{"history", "nope"}, {"history", "nope", "--at", marks[0].UTC().Format(time.RFC3339Nano)}} {
		out, stderr, err := sluice(t, append(args, "--server", srv.url)...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(stderr, `model "nope" not found`) || out != "" {
			t.Errorf("sluice %s: %v, stdout %q, stderr %q; want a non-zero exit naming the model", strings.Join(args, " "), err, out, stderr)
		}
	}
	srv.stop(t)
}

// TestStoreOutage locks the metadata database: predictions go on, control
// calls answer 503, and the control plane catches up when the lock goes.
func TestStoreOutage(t *testing.T) {
	pkgs, data := t.TempDir(), t.TempDir()
	srv := startServer(t, "--data", data, "--models", t.TempDir())
	for i, bias := range []float64{0, 1} {
		sluice(t, "push", linPackage(t, filepath.Join(pkgs, fmt.Sprint(i)), bias), "--server", srv.url)
	}
	// A rollout that will want to move while the store is locked.
	planFile := filepath.Join(pkgs, "plan.json")
	os.WriteFile(planFile, []byte(`{"gates":{"maxP99Ratio":50}}`), 0o644) // this test is about the store, not latency
	if _, stderr, err := sluice(t, "deploy", "lin@2", "--plan", planFile, "--steps", "50,100", "--bake", "500ms", "--min-samples", "1", "--server", srv.url); err != nil {
		t.Fatal(err, stderr)
	}
	testwait.Until(t, 30*time.Second, func() bool { return rolloutOfModel(t, srv.url, "lin").Phase == "canary" })

	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "sluice.db")+"?_pragma=busy_timeout(100)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	l := startLoad(t, srv.url, "lin", 100, 10000)
	_, stderr, err := sluice(t, "push", linPackage(t, filepath.Join(pkgs, "2"), 5), "--server", srv.url)
	if err == nil || !strings.Contains(stderr, "503 unavailable") || !strings.Contains(stderr, "metadata store unavailable") {
		t.Fatalf("control call during the outage: %v %q", err, stderr)
	}
	// Past the bake, with its gates passing, the rollout wants to move but
	// cannot record it: it stays at its step (the controller retries).
	testwait.UntilNil(t, 30*time.Second, func() error {
		r := rolloutOfModel(t, srv.url, "lin")
		if r.Phase != "canary" || r.Percent != 50 {
			t.Fatalf("the rollout moved without recording it: %s at %d%%", r.Phase, r.Percent)
		}
		for _, g := range r.Gates {
			if !g.Ready || !g.Pass {
				return fmt.Errorf("gate %+v", g)
			}
		}
		if r.NextStepInMs > 0 || time.Since(locked) < time.Second {
			return fmt.Errorf("the bake has %.0f ms to go", r.NextStepInMs)
		}
		return nil
	})
	if r := rolloutOfModel(t, srv.url, "lin"); r.Phase != "canary" || r.Percent != 50 {
		t.Fatalf("the rollout moved without recording it: %s at %d%%", r.Phase, r.Percent)
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	outage := time.Since(locked)
	testwait.Until(t, 30*time.Second, func() bool {
		r := rolloutOfModel(t, srv.url, "lin")
		if r.Phase != "canary" && r.Phase != "promoted" {
			t.Fatalf("rollout %s: %s", r.Phase, r.Reason)
		}
		return r.Phase == "promoted"
	})
	as := l.finish()
	if f := failures(as, ""); len(f) > 0 {
		t.Fatalf("%d predictions failed during a %v store outage, first %+v", len(f), outage, f[0])
	}
	if out, stderr, err := sluice(t, "push", linPackage(t, filepath.Join(pkgs, "2"), 5), "--server", srv.url); err != nil || !strings.Contains(out, "lin@3 published") {
		t.Fatalf("control call after the outage: %v %s %s", err, out, stderr)
	}
	srv.stop(t)
}

func rolloutOfModel(t *testing.T, url, model string) api.Rollout { return rolloutOf(t, url, model) }

// targetRE matches a target line of `sluice traffic` output.
func targetRE(id, weight string) *regexp.Regexp {
	return regexp.MustCompile(regexp.QuoteMeta(id) + `\s+` + regexp.QuoteMeta(weight))
}
