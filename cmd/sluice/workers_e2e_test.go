package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/testwait"
)

// workers fetches GET /v1/workers.
func workers(t *testing.T, url string) api.WorkerList {
	t.Helper()
	resp, err := http.Get(url + "/v1/workers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var wl api.WorkerList
	if err := json.NewDecoder(resp.Body).Decode(&wl); err != nil {
		t.Fatal(err)
	}
	return wl
}

// readyEverywhere reports whether every worker is ready and holds each of
// ids ready with at least one replica.
func readyEverywhere(wl api.WorkerList, n int, ids ...string) bool {
	if len(wl.Workers) != n {
		return false
	}
	for _, w := range wl.Workers {
		if w.State != "ready" {
			return false
		}
		for _, id := range ids {
			ok := false
			for _, v := range w.Versions {
				ok = ok || (v.Version == id && v.State == "ready" && v.ReadyReplicas > 0)
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

func postJSON(url, body string) (int, []byte, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), err
}

// Every example is served by two worker processes with the same answers
// as in process, and `sluice workers` shows both workers and what they hold.
func TestWorkersServeEveryExample(t *testing.T) {
	if os.Getenv("SLUICE_ONNXRUNTIME_LIB") == "" {
		t.Fatal("SLUICE_ONNXRUNTIME_LIB is not set: run the tests with `make test`, which fetches ONNX Runtime (scripts/fetch-onnxruntime.sh)")
	}
	examples, _ := filepath.Abs("../../examples")
	requests := map[string]string{
		"fraud": `{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"},{"amount":12.5,"accountAgeDays":2000,"declines5m":0,"country":"DE"}]}`,
		"iris":  `{"instances":[{"sepalLength":6.7,"sepalWidth":3.1,"petalLength":5.6,"petalWidth":2.4}]}`,
	}
	// The other examples: their golden instances (from sluice check) stand in.
	pkgs, _ := filepath.Glob(filepath.Join(examples, "*", "model.yaml"))
	answers := map[string][]string{}
	for _, mode := range []string{"0", "2"} {
		srv := startServer(t, "--data", t.TempDir(), "--models", examples, "--workers", mode)
		ms, err := newClient(srv.url).Models(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != len(pkgs) || len(pkgs) < 5 {
			t.Fatalf("--workers %s: %d models, want the %d examples", mode, len(ms), len(pkgs))
		}
		var ids []string
		for _, m := range ms {
			if m.ServingVersion == nil {
				t.Fatalf("--workers %s: %s has no serving version: %+v", mode, m.Name, m)
			}
			ids = append(ids, fmt.Sprintf("%s@%d", m.Name, *m.ServingVersion))
			body, ok := requests[m.Name]
			if !ok {
				body = goldenRequest(t, filepath.Join(examples, m.Name))
			}
			status, out, err := postJSON(srv.url+"/v1/models/"+m.Name+":predict", body)
			if err != nil || status != 200 {
				t.Fatalf("--workers %s: predict %s: %d %v %s", mode, m.Name, status, err, out)
			}
			var p api.PredictResponse
			if err := json.Unmarshal(out, &p); err != nil {
				t.Fatal(err)
			}
			pred, _ := json.Marshal(p.Predictions)
			answers[m.Name] = append(answers[m.Name], p.ModelVersion+" "+string(pred))
		}
		if mode == "2" {
			testwait.Until(t, 10*time.Second, func() bool { return readyEverywhere(workers(t, srv.url), 2, ids...) })
			out, stderr, err := sluice(t, "workers", "--server", srv.url)
			if err != nil {
				t.Fatalf("sluice workers: %v %s", err, stderr)
			}
			// One short line per worker under an aligned header.
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], "WORKER") || !strings.Contains(out, "worker-1") || !strings.Contains(out, "worker-2") {
				t.Errorf("sluice workers:\n%s", out)
			}
			checkAligned(t, lines, columnStarts(t, lines[0], "WORKER", "STATE", "PID", "MEMORY", "RSS", "VERSIONS", "HEARTBEAT"))
			for _, l := range lines {
				if len(l) > 100 {
					t.Errorf("sluice workers prints a line of %d characters: %q", len(l), l)
				}
			}
			out, stderr, err = sluice(t, "workers", "--wide", "--server", srv.url)
			if err != nil {
				t.Fatalf("sluice workers --wide: %v %s", err, stderr)
			}
			for _, want := range append([]string{"worker-1", "worker-2", "ready", "LOAD TIME"}, ids...) {
				if !strings.Contains(out, want) {
					t.Errorf("sluice workers --wide does not show %q:\n%s", want, out)
				}
			}
		} else if wl := workers(t, srv.url); wl.Mode != "in-process" || len(wl.Workers) != 0 {
			t.Errorf("in process: %+v", wl)
		}
		srv.stop(t)
	}
	for m, a := range answers {
		if len(a) != 2 || a[0] != a[1] {
			t.Errorf("%s: in process and with workers differ:\n%s", m, strings.Join(a, "\n"))
		}
	}
}

// goldenRequest builds a predict body from a package's golden instances.
func goldenRequest(t *testing.T, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "model.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Golden []struct {
			Instance map[string]any `yaml:"instance"`
		} `yaml:"golden"`
	}
	if err := yaml.Unmarshal(raw, &m); err != nil || len(m.Golden) == 0 {
		t.Fatalf("%s/model.yaml: no golden instances (%v)", dir, err)
	}
	var insts []map[string]any
	for _, g := range m.Golden {
		insts = append(insts, g.Instance)
	}
	b, err := json.Marshal(map[string]any{"instances": insts})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// outcome is one request of the load below.
type outcome struct {
	status int
	err    error
	body   string
}

// openLoop sends body to url at rate per second until stop is closed and
// returns every outcome once all are answered.
func openLoop(url, body string, rate int, stop <-chan struct{}) []outcome {
	var mu sync.Mutex
	var out []outcome
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		select {
		case <-stop:
			wg.Wait()
			return out
		case <-tick.C:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := outcome{}
			resp, err := client.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				o.err = err
			} else {
				var b bytes.Buffer
				_, _ = b.ReadFrom(resp.Body)
				resp.Body.Close()
				o.status, o.body = resp.StatusCode, b.String()
			}
			mu.Lock()
			out = append(out, o)
			mu.Unlock()
		}()
	}
}

// kill -9 of a worker under open-loop load: no request whose deadline
// allowed a retry fails, the worker comes back and serves again.
func TestWorkerKilledUnderLoad(t *testing.T) {
	srv := startServer(t, "--data", t.TempDir(), "--workers", "2")
	testwait.Until(t, 10*time.Second, func() bool { return readyEverywhere(workers(t, srv.url), 2, "fraud@1", "iris@1", "churn@1") })
	victim := workers(t, srv.url).Workers[0]
	body := `{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"}],"deadlineMs":1000}`
	stop := make(chan struct{})
	done := make(chan []outcome)
	go func() { done <- openLoop(srv.url+"/v1/models/fraud:predict", body, 200, stop) }()
	time.Sleep(time.Second)
	if err := syscall.Kill(int(victim.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The worker comes back (a new process under the same id) with its versions.
	testwait.Until(t, 15*time.Second, func() bool {
		wl := workers(t, srv.url)
		for _, w := range wl.Workers {
			if w.ID == victim.ID && w.PID == victim.PID {
				return false
			}
		}
		return readyEverywhere(wl, 2, "fraud@1", "iris@1", "churn@1")
	})
	time.Sleep(time.Second) // load on the restarted pair
	close(stop)
	outs := <-done
	var failed []string
	for _, o := range outs {
		if o.err != nil || o.status != 200 {
			failed = append(failed, fmt.Sprintf("%d %v %s", o.status, o.err, o.body))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d requests failed around the kill, e.g. %v\n%s", len(failed), len(outs), failed[:min(5, len(failed))], srv.logs)
	}
	t.Logf("%d requests, all 200, across the kill of %s (pid %d)", len(outs), victim.ID, victim.PID)
	srv.stop(t)
}

// hogEnv, set in the environment of this test binary, makes it a CPU hog
// instead of running tests: two goroutines spinning per core until killed
// (startHog).
const hogEnv = "SLUICE_E2E_CPU_HOG"

func init() {
	if os.Getenv(hogEnv) == "" {
		return
	}
	n := runtime.NumCPU()
	runtime.GOMAXPROCS(n)
	for range 2*n - 1 { // two spinning threads per core
		go spin()
	}
	spin()
}

var spinSink atomic.Uint64

func spin() {
	x := uint64(1)
	for {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		spinSink.Store(x)
	}
}

// startHog re-executes the test binary as a CPU hog on every core; it is
// killed when the test ends.
func startHog(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), hogEnv+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// closedLoopRate is the rate (requests per second) that n clients sending
// body back to back get answered with 200 over d: the capacity as they see it.
func closedLoopRate(url, body string, n int, d time.Duration) float64 {
	var ok atomic.Int64
	client := &http.Client{Timeout: 10 * time.Second}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				resp, err := client.Post(url, "application/json", strings.NewReader(body))
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(ok.Load()) / d.Seconds()
}

// kill -9 of one of two workers at about half capacity while a CPU hog
// spins on every core: every request answers 200 with its prediction (the
// ones in flight on the dead worker are sent again to the other within
// their deadline), and the worker comes back with its versions.
func TestWorkerKilledUnderLoadWithCPUHog(t *testing.T) {
	srv := startServer(t, "--data", t.TempDir(), "--workers", "2")
	testwait.Until(t, 20*time.Second, func() bool { return readyEverywhere(workers(t, srv.url), 2, "fraud@1", "iris@1", "churn@1") })
	url := srv.url + "/v1/models/fraud:predict"
	body := `{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"}],"deadlineMs":1000}`
	// Half the capacity the server has alone, then the hog.
	capacity := closedLoopRate(url, body, 16, 3*time.Second)
	rate := max(int(capacity/2), 20)
	startHog(t)
	victim := workers(t, srv.url).Workers[0]
	stop := make(chan struct{})
	done := make(chan []outcome)
	loadStart := time.Now()
	go func() { done <- openLoop(url, body, rate, stop) }()
	time.Sleep(2 * time.Second)
	if err := syscall.Kill(int(victim.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var back time.Duration
	testwait.Until(t, 30*time.Second, func() bool {
		wl := workers(t, srv.url)
		for _, w := range wl.Workers {
			if w.ID == victim.ID && (w.PID == victim.PID || w.State != "ready") {
				return false
			}
		}
		back = time.Since(killed)
		return readyEverywhere(wl, 2, "fraud@1", "iris@1", "churn@1")
	})
	time.Sleep(5 * time.Second) // load on the restarted pair
	close(stop)
	outs := <-done
	sent := time.Since(loadStart)
	codes := map[int]int{}
	var failed []string
	for _, o := range outs {
		codes[o.status]++
		if o.err != nil || o.status != 200 || !strings.Contains(o.body, `"predictions"`) {
			failed = append(failed, fmt.Sprintf("%d %v %s", o.status, o.err, o.body))
		}
	}
	t.Logf("capacity alone %.0f/s; %d requests in %s (%.0f/s sent, %d/s asked), statuses %v; %s back with its versions %s after the kill",
		capacity, len(outs), sent.Round(time.Millisecond), float64(len(outs))/sent.Seconds(), rate, codes, victim.ID, back.Round(time.Millisecond))
	if len(failed) > 0 {
		t.Fatalf("%d of %d requests failed around the kill, e.g. %v", len(failed), len(outs), failed[:min(5, len(failed))])
	}
	// One record per logical request, retried or not; a retry shows in
	// its attempts.
	var recs []api.Record
	testwait.Until(t, 20*time.Second, func() bool {
		recs = fraudRecordsSince(t, srv.url, loadStart)
		return len(recs) >= len(outs)
	})
	retried := 0
	for _, r := range recs {
		if r.Outcome != "ok" || r.Attempts < 1 || r.Attempts > 2 {
			t.Errorf("record %+v: want outcome ok after at most one retry", r)
		}
		if r.Attempts == 2 {
			retried++
		}
	}
	if len(recs) != len(outs) {
		t.Errorf("%d records for %d requests", len(recs), len(outs))
	}
	t.Logf("%d records, %d of them answered by the second worker tried", len(recs), retried)
	srv.stop(t)
}

// fraudRecordsSince lists every fraud record created at or after since.
func fraudRecordsSince(t *testing.T, url string, since time.Time) []api.Record {
	t.Helper()
	var out []api.Record
	cursor := ""
	for {
		q := "model=fraud&limit=10000&since=" + since.UTC().Format(time.RFC3339Nano)
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		resp, err := http.Get(url + "/v1/records?" + q)
		if err != nil {
			t.Fatal(err)
		}
		var rs api.Records
		err = json.NewDecoder(resp.Body).Decode(&rs)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("records: %d %v", resp.StatusCode, err)
		}
		out = append(out, rs.Records...)
		if rs.NextCursor == "" || len(rs.Records) == 0 {
			return out
		}
		cursor = rs.NextCursor
	}
}

// holders counts the ready workers holding id ready.
func holders(wl api.WorkerList, id string) int {
	n := 0
	for _, w := range wl.Workers {
		for _, v := range w.Versions {
			if w.State == "ready" && v.Version == id && v.State == "ready" && v.ReadyReplicas > 0 {
				n++
			}
		}
	}
	return n
}

// A model whose calls kill their worker never takes the gateway down; the
// other models keep answering. With three workers and shards of two, the
// poison model can only take down its own shard; the other model's shard
// shares at most one worker with it, and calls that land there are tried
// again on the other.
func TestExitEveryModelLeavesGatewayUp(t *testing.T) {
	ids := []string{"worker-1", "worker-2", "worker-3"}
	synShard := cluster.Shard("syn", ids, 2)
	other := ""
	for i := 0; other == ""; i++ {
		name := fmt.Sprintf("calc%d", i)
		if s := cluster.Shard(name, ids, 2); !slices.Equal(s, synShard) && !slices.Equal(s, []string{synShard[1], synShard[0]}) {
			other = name
		}
	}
	models := t.TempDir()
	synPackage(t, filepath.Join(models, "syn"), `{"base":"100us","exitEvery":5}`, "serving: {warmupBatches: 0}\n")
	calc := writePackage(t, filepath.Join(models, other), []float64{1, 2}, 3.5)
	manifest, _ := os.ReadFile(filepath.Join(calc, "model.yaml"))
	if err := os.WriteFile(filepath.Join(calc, "model.yaml"), bytes.Replace(manifest, []byte("name: calc"), []byte("name: "+other), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--data", t.TempDir(), "--models", models, "--workers", "3")
	testwait.Until(t, 10*time.Second, func() bool {
		wl := workers(t, srv.url)
		return holders(wl, "syn@1") == 2 && holders(wl, other+"@1") == 2
	})
	// Each worker process seen in /v1/workers: a worker that exits comes
	// back under its id with a new pid.
	procs := map[string]bool{}
	seen := func() int {
		for _, w := range workers(t, srv.url).Workers {
			procs[fmt.Sprint(w.ID, "/", w.PID)] = true
		}
		return len(procs)
	}
	started := seen()
	var ok, failed int
	for i := 0; i < 40; i++ {
		seen()
		status, out, err := postJSON(srv.url+"/v1/models/syn:predict", `{"instances":[{"x":1}],"deadlineMs":2000}`)
		if err != nil {
			t.Fatalf("the gateway stopped answering after %d calls: %v\n%s", i, err, srv.logs)
		}
		if status == 200 {
			ok++
		} else {
			failed++
			if status < 500 {
				t.Fatalf("syn: %d %s", status, out)
			}
		}
		// The other model answers whatever syn does to its workers.
		status, out, err = postJSON(srv.url+"/v1/models/"+other+":predict", `{"instances":[{"x":1,"z":2}],"deadlineMs":2000}`)
		if err != nil || status != 200 {
			t.Fatalf("%s after %d syn calls: %d %v %s\n%s", other, i+1, status, err, out, srv.logs)
		}
	}
	// exitEvery 5 over 40 calls: several workers exited, and the
	// supervisor restarts them.
	testwait.UntilNil(t, 20*time.Second, func() error {
		if n := seen() - started; n < 2 {
			return fmt.Errorf("%d worker processes replaced in /v1/workers, expected several", n)
		}
		return nil
	})
	// After 3 exits in 5 minutes syn is quarantined: unloaded everywhere
	// and failed with the reason; its calls answer 503 not_ready naming
	// it, and no worker exits any more.
	const reason = "quarantined: made its worker exit 3 times in 5m"
	testwait.UntilNil(t, 20*time.Second, func() error {
		if v := getVersionOf(t, srv.url, "syn", 1); v.State == "failed" && strings.Contains(v.Reason, reason) {
			return nil
		}
		// Its workers come back; more calls make them exit again.
		if _, out, err := postJSON(srv.url+"/v1/models/syn:predict", `{"instances":[{"x":1}],"deadlineMs":2000}`); err != nil {
			t.Fatalf("the gateway stopped answering: %v %s\n%s", err, out, srv.logs)
		}
		seen()
		return fmt.Errorf("syn@1 is %+v, not failed %q", getVersionOf(t, srv.url, "syn", 1), reason)
	})
	if q, _ := metricSample(t, srv.url, `sluice_quarantines_total{model="syn",version="1"}`); q != 1 {
		t.Errorf("sluice_quarantines_total of syn@1 = %v, want 1", q)
	}
	// The workers it made exit come back, and then stay.
	testwait.Until(t, 20*time.Second, func() bool {
		wl := workers(t, srv.url)
		return readyEverywhere(wl, 3) && holders(wl, other+"@1") == 2
	})
	exits := seen() - started
	for i := 0; i < 20; i++ {
		status, out, err := postJSON(srv.url+"/v1/models/syn:predict", `{"instances":[{"x":1}],"deadlineMs":2000}`)
		if err != nil || status != 503 || !strings.Contains(string(out), "not_ready") || !strings.Contains(string(out), reason) {
			t.Fatalf("syn after its quarantine: %d %v %s", status, err, out)
		}
	}
	if n := seen() - started; n != exits || !readyEverywhere(workers(t, srv.url), 3) {
		t.Errorf("%d worker processes replaced after the quarantine, workers %+v", n-exits, workers(t, srv.url).Workers)
	}
	out, _, err := sluice(t, "models", "--server", srv.url)
	if err != nil || !regexp.MustCompile(`syn\s.*failed`).MatchString(out) || !strings.Contains(out, reason) {
		t.Errorf("sluice models after the quarantine (%v):\n%s", err, out)
	}
	t.Logf("syn (shard %v): %d answered, %d failed (5xx) while its workers died, then quarantined after %d exits; %s (shard %v) answered all 40",
		synShard, ok, failed, exits, other, cluster.Shard(other, ids, 2))
	srv.stop(t)
}

// A worker started on its own (`sluice worker --join`) attaches to a
// server that runs no local workers (`--control-addr`), loads the models
// and serves them; when it stops, the server answers 503 not_ready, not a
// hang, and serves again once a worker joins again.
func TestAttachedWorker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	hop := newHopFiles(t)
	startWorker := func(id string) *exec.Cmd {
		cmd := exec.Command(binary, append([]string{"worker", "--join", addr, "--id", id, "--cache-dir", t.TempDir()}, hop.workerArgs()...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		return cmd
	}
	w := startWorker("far-1") // it retries until the control plane listens
	srv := startServer(t, append([]string{"--data", t.TempDir(), "--control-addr", addr, "--workers", "0"}, hop.serverArgs()...)...)
	// Ready means the versions are ready on the worker; its next heartbeat
	// (every 250 ms) shows them.
	testwait.Until(t, 5*time.Second, func() bool { return holders(workers(t, srv.url), "fraud@1") == 1 })
	wl := workers(t, srv.url)
	if wl.Mode != "workers" || len(wl.Workers) != 1 || wl.Workers[0].ID != "far-1" || holders(wl, "fraud@1") != 1 {
		t.Fatalf("workers: %+v", wl)
	}
	body := `{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"}]}`
	if status, out, err := postJSON(srv.url+"/v1/models/fraud:predict", body); err != nil || status != 200 || !strings.Contains(string(out), `"modelVersion":"fraud@1"`) {
		t.Fatalf("predict through the attached worker: %d %v %s", status, err, out)
	}
	_ = w.Process.Signal(syscall.SIGTERM)
	_, _ = w.Process.Wait()
	testwait.Until(t, 10*time.Second, func() bool { return workers(t, srv.url).Workers[0].State == "down" })
	status, out, _ := postJSON(srv.url+"/v1/models/fraud:predict", body)
	if status != 503 || !strings.Contains(string(out), "not_ready") {
		t.Fatalf("with no worker: %d %s", status, out)
	}
	startWorker("far-2")
	testwait.Until(t, 10*time.Second, func() bool { return holders(workers(t, srv.url), "fraud@1") == 1 })
	if status, out, err := postJSON(srv.url+"/v1/models/fraud:predict", body); err != nil || status != 200 {
		t.Fatalf("after a new worker joined: %d %v %s", status, err, out)
	}
	srv.stop(t)
}

// --worker-nice and --worker-sched lower the local workers' CPU priority
// (Linux), on every thread of the worker, not only its main thread.
func TestWorkerPriority(t *testing.T) {
	for _, tc := range []struct {
		flags        []string
		nice, policy string // as /proc/PID/task/TID/stat shows them; SCHED_IDLE is 5
	}{
		{[]string{"--worker-nice", "7"}, "7", "0"},
		{[]string{"--worker-sched", "idle", "--worker-nice", "3"}, "3", "5"},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			srv := startServer(t, append([]string{"--data", t.TempDir(), "--workers", "1", "--shard-size", "1"}, tc.flags...)...)
			wl := workers(t, srv.url)
			if len(wl.Workers) != 1 {
				t.Fatalf("workers: %+v", wl)
			}
			// A prediction first, so that the worker's threads that serve
			// and compute exist.
			if status, out, err := postJSON(srv.url+"/v1/models/fraud:predict", `{"instances":[{"amount":800,"accountAgeDays":91,"declines5m":3,"country":"US"}]}`); err != nil || status != 200 {
				t.Fatalf("predict: %d %v %s", status, err, out)
			}
			dir := fmt.Sprintf("/proc/%d/task", wl.Workers[0].PID)
			tasks, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(tasks) < 2 {
				t.Fatalf("%s: %d threads", dir, len(tasks))
			}
			for _, task := range tasks {
				stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
				if err != nil {
					continue // the thread exited
				}
				// Fields after the command's closing parenthesis: state is
				// field 3, nice field 19, policy field 41.
				f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
				if len(f) < 39 || f[16] != tc.nice || f[38] != tc.policy {
					t.Errorf("thread %s: nice %v policy %v, want %s and %s", task.Name(), f[16:17], f[38:39], tc.nice, tc.policy)
				}
			}
			srv.stop(t)
		})
	}
	for _, tc := range []struct{ args, want string }{
		{"serve --addr 127.0.0.1:0 --workers 1 --worker-sched low", `--worker-sched "low": use normal or idle`},
		{"serve --addr 127.0.0.1:0 --workers 1 --worker-nice 20", "--worker-nice 20: use 0 (off) to 19"},
		{"worker --join 127.0.0.1:1 --sched fifo", `--sched "fifo": use normal or idle`},
	} {
		out, err := exec.Command(binary, append(strings.Fields(tc.args), "--data", t.TempDir())...).CombinedOutput()
		if tc.args[:6] == "worker" {
			out, err = exec.Command(binary, strings.Fields(tc.args)...).CombinedOutput()
		}
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("sluice %s: %v %s, want %q", tc.args, err, out, tc.want)
		}
	}
}

// threadPolicies counts a process's threads by scheduling policy (the
// policy field of /proc/PID/task/TID/stat; SCHED_IDLE is 5).
func threadPolicies(t *testing.T, pid int) map[string]int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
		if len(f) >= 39 {
			n[f[38]]++
		}
	}
	return n
}

// --model-sched idle: each replica computes on its own SCHED_IDLE thread,
// and only those threads are lowered: in the server's process in process
// mode, in the worker's with --workers (the worker itself stays normal).
func TestModelSchedIdle(t *testing.T) {
	body := `{"instances":[{"amount":800,"accountAgeDays":91,"declines5m":3,"country":"US"}]}`
	t.Run("in process", func(t *testing.T) {
		srv := startServer(t, "--data", t.TempDir(), "--workers", "0", "--model-sched", "idle")
		if status, out, err := postJSON(srv.url+"/v1/models/fraud:predict", body); err != nil || status != 200 {
			t.Fatalf("predict: %d %v %s", status, err, out)
		}
		// One replica loop per example version (fraud, mlp if ONNX
		// Runtime is there, …): at least one idle thread, and the rest
		// of the process normal.
		n := threadPolicies(t, srv.cmd.Process.Pid)
		if n["5"] < 1 || n["0"] < 2 {
			t.Errorf("server threads by policy %v: want replica threads at 5 (SCHED_IDLE) and the others at 0", n)
		}
		srv.stop(t)
	})
	t.Run("workers", func(t *testing.T) {
		srv := startServer(t, "--data", t.TempDir(), "--workers", "1", "--shard-size", "1", "--model-sched", "idle")
		if status, out, err := postJSON(srv.url+"/v1/models/fraud:predict", body); err != nil || status != 200 {
			t.Fatalf("predict: %d %v %s", status, err, out)
		}
		wl := workers(t, srv.url)
		if len(wl.Workers) != 1 {
			t.Fatalf("workers: %+v", wl)
		}
		if n := threadPolicies(t, int(wl.Workers[0].PID)); n["5"] < 1 || n["0"] < 2 {
			t.Errorf("worker threads by policy %v: want replica threads at 5 (SCHED_IDLE) and the others at 0", n)
		}
		if n := threadPolicies(t, srv.cmd.Process.Pid); n["5"] != 0 {
			t.Errorf("server threads by policy %v: the server hosts no replica, none should be idle", n)
		}
		srv.stop(t)
	})
	for _, tc := range []struct{ args, want string }{
		{"serve --addr 127.0.0.1:0 --model-sched lowest", `--model-sched "lowest": use normal or idle`},
		{"serve --addr 127.0.0.1:0 --model-sched idle --model-cpus 8", "--model-cpus 8 with --model-sched idle: use at most"},
	} {
		out, err := exec.Command(binary, append(strings.Fields(tc.args), "--data", t.TempDir())...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("sluice %s: %v %s, want %q", tc.args, err, out, tc.want)
		}
	}
}

// Replicas follow the traffic: a version whose placement allows up to 6
// replicas grows past its floor (one per worker) under a load two
// replicas cannot carry.
func TestAutoscaleUpWithWorkers(t *testing.T) {
	models := t.TempDir()
	synPackage(t, filepath.Join(models, "syn"), `{"base":"10ms","perInstance":"0ms","mode":"sleep"}`,
		"serving: {maxBatchSize: 1, defaultDeadline: 500ms, maxInstancesPerRequest: 10, maxQueueInstances: 200}\nplacement: {maxReplicas: 6}\n")
	srv := startServer(t, "--data", t.TempDir(), "--models", models, "--workers", "2")
	testwait.Until(t, 10*time.Second, func() bool { return holders(workers(t, srv.url), "syn@1") == 2 })
	replicas := func() int {
		n := 0
		for _, w := range workers(t, srv.url).Workers {
			for _, v := range w.Versions {
				if v.Version == "syn@1" {
					n += v.ReadyReplicas
				}
			}
		}
		return n
	}
	if n := replicas(); n != 2 {
		t.Fatalf("before the load: %d replicas, want 2 (one per worker)", n)
	}
	stop := make(chan struct{})
	done := make(chan []outcome)
	go func() {
		done <- openLoop(srv.url+"/v1/models/syn:predict", `{"instances":[{"x":1}],"deadlineMs":500}`, 300, stop)
	}()
	testwait.Until(t, 30*time.Second, func() bool { return replicas() >= 4 })
	close(stop)
	<-done
	t.Logf("syn@1 scaled to %d replicas under 300 req/s of a 10 ms model", replicas())
	if d, ok := metricSample(t, srv.url, `sluice_replicas_desired{model="syn",version="1"}`); !ok || d < 4 {
		t.Errorf("sluice_replicas_desired of syn@1 = %v (%v), want the autoscaler's 4 or more", d, ok)
	}
	srv.stop(t)
}

// Many models on two small workers: 100 synthetic models of 8 MiB each
// (a third of them cold) on two workers whose budgets hold about 11 each.
// Versions that do not fit are evicted (the least costly to reload first,
// none younger than --min-residency) and loaded again on demand; every
// model answers, some after a cold load; sluice workers shows the
// evictions; and the workers' RSS stays within the budget plus the
// process itself plus a slack for the allocator's lag. The process itself
// is mostly the binary's own pages (an idle `sluice worker` measured 52
// MiB VmRSS on 2026-12-02, of which 48 MiB file-backed: the binary, shared
// with the gateway; 60 MiB once the console, OpenAPI and the statistics
// were linked), so it is measured here, on an idle worker of this binary.
func TestManyModelsEvict(t *testing.T) {
	const n, budget, lag = 100, 96 << 20, 24 << 20
	idle := startServer(t, "--data", t.TempDir(), "--models", t.TempDir(), "--workers", "1")
	var self int64
	testwait.Until(t, 30*time.Second, func() bool {
		wl := workers(t, idle.url)
		if len(wl.Workers) == 1 && wl.Workers[0].RSSBytes > 0 {
			self = wl.Workers[0].RSSBytes
			return true
		}
		return false
	})
	idle.stop(t)
	slack := self + lag
	models := t.TempDir()
	for i := range n {
		tier := "warm"
		if i%3 == 2 {
			tier = "cold"
		}
		dir := filepath.Join(models, fmt.Sprintf("m%03d", i))
		synPackage(t, dir, `{"base":"100us","memory":"8MiB"}`, "serving: {warmupBatches: 0, memory: 8MiB}\nplacement: {tier: "+tier+"}\n")
		manifest, _ := os.ReadFile(filepath.Join(dir, "model.yaml"))
		if err := os.WriteFile(filepath.Join(dir, "model.yaml"), bytes.Replace(manifest, []byte("name: syn"), []byte(fmt.Sprintf("name: m%03d", i)), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	slow := filepath.Join(models, "slow")
	synPackage(t, slow, `{"base":"100us","loadTime":"1500ms"}`, "placement: {tier: cold}\n")
	manifest, _ := os.ReadFile(filepath.Join(slow, "model.yaml"))
	if err := os.WriteFile(filepath.Join(slow, "model.yaml"), bytes.Replace(manifest, []byte("name: syn"), []byte("name: slow"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--data", t.TempDir(), "--models", models, "--workers", "2", "--worker-memory", "96MiB", "--min-residency", "100ms")
	testwait.Until(t, 60*time.Second, func() bool { return readiness(t, srv.url).Ready })
	// A cold version whose load (1.5 s) is longer than the deadline: 503
	// cold_start at once, Retry-After ≈ the load time; the load goes on,
	// and a request with a long enough deadline waits for it.
	resp, err := http.Post(srv.url+"/v1/models/slow:predict", "application/json", strings.NewReader(`{"instances":[{"x":1}],"deadlineMs":300}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "cold_start") || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("slow, short deadline: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// Right after the start every copy may still be younger than the
	// minimum residency: then there is no room yet (cold_start naming
	// why), and a retry a moment later finds some.
	var slowStatus int
	var slowOut []byte
	for try := 0; try < 20; try++ {
		slowStatus, slowOut, err = postJSON(srv.url+"/v1/models/slow:predict", `{"instances":[{"x":1}],"deadlineMs":5000}`)
		if err != nil || slowStatus != 503 || !strings.Contains(string(slowOut), "cold_start") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || slowStatus != 200 {
		t.Fatalf("slow, long deadline: %d %v %s", slowStatus, err, slowOut)
	}
	cold := 0
	for round := range 2 {
		for i := range n {
			url := fmt.Sprintf("%s/v1/models/m%03d:predict", srv.url, i)
			var status int
			var out []byte
			var err error
			// cold_start: no room yet, because everything is younger than
			// the minimum residency, or because admission keeps residents
			// called as much (every model here is called alike): each
			// retry is demand that counts, so the model gets in.
			for try := 0; try < 200; try++ {
				status, out, err = postJSON(url, `{"instances":[{"x":1}],"deadlineMs":5000}`)
				if err != nil || status != 503 || !strings.Contains(string(out), "cold_start") {
					break
				}
				cold++
				time.Sleep(5 * time.Millisecond)
			}
			if err != nil || status != 200 {
				t.Fatalf("round %d: m%03d: %d %v %s\n%s", round, i, status, err, out, srv.logs)
			}
		}
		time.Sleep(200 * time.Millisecond) // past the minimum residency
	}
	wl := workers(t, srv.url)
	var evictions, loads int64
	for _, w := range wl.Workers {
		evictions += w.Evictions
		loads += w.Loads
		if w.MemoryBudgetBytes != budget {
			t.Errorf("%s: budget %d, want %d (--worker-memory passed through serve)", w.ID, w.MemoryBudgetBytes, budget)
		}
		if w.MemoryUsedBytes > budget {
			t.Errorf("%s: placement counts %d MiB used over a %d MiB budget", w.ID, w.MemoryUsedBytes>>20, budget>>20)
		}
		if w.RSSBytes > budget+slack {
			t.Errorf("%s: RSS %d MiB over the budget %d MiB + an idle worker's %d MiB + %d MiB", w.ID, w.RSSBytes>>20, budget>>20, self>>20, lag>>20)
		}
	}
	if evictions == 0 || loads <= n {
		t.Errorf("%d loads and %d evictions for %d models of 8 MiB on 2×96 MiB: expected evictions", loads, evictions, n)
	}
	// Every eviction's unload ends: a worker reports no version it holds
	// that the pool evicted (as many evictions as loads there).
	testwait.Until(t, 10*time.Second, func() bool {
		for _, w := range workers(t, srv.url).Workers {
			for _, v := range w.Versions {
				if v.Loads > 0 && v.Loads == v.Evictions {
					return false
				}
			}
		}
		return true
	})
	out, _, err := sluice(t, "workers", "-o", "wide", "--server", srv.url)
	if err != nil || !strings.Contains(out, "EVICTIONS") {
		t.Errorf("sluice workers: %v\n%s", err, out)
	}
	t.Logf("%d models, 2 rounds: %d loads, %d evictions, %d cold_start refusals retried\n%s", n, loads, evictions, cold, out)
	srv.stop(t)
}
