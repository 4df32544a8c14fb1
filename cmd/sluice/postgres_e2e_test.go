package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
	"github.com/sluiceml/sluice/internal/testwait"
)

// calcDeployment reads GET /v1/deployments/calc: what this gateway routes
// by (ok false while it cannot be read).
func calcDeployment(t *testing.T, url string) (api.Deployment, bool) {
	t.Helper()
	resp, err := http.Get(url + "/v1/deployments/calc")
	if err != nil {
		return api.Deployment{}, false
	}
	defer resp.Body.Close()
	var d api.Deployment
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&d) != nil {
		return api.Deployment{}, false
	}
	return d, true
}

// fullTarget is the version taking 100 % in d (0 if none).
func fullTarget(d api.Deployment) int {
	for _, tg := range d.Targets {
		if !tg.Shadow && tg.Weight == 100 {
			return tg.Version
		}
	}
	return 0
}

// predictAs is the version that answered a predict call through url
// ("" and the error output when it failed).
func predictAs(t *testing.T, url string) (string, string) {
	t.Helper()
	out, stderr, err := sluice(t, "predict", "calc", `{"x":1,"z":2}`, "--server", url)
	if err != nil {
		return "", stderr
	}
	var p api.PredictResponse
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("predict output %q: %v", out, err)
	}
	return p.ModelVersion, ""
}

// pgScript runs scripts/start-postgres.sh or stop-postgres.sh on the
// server of make test-postgres (SLUICE_PG_DIR and SLUICE_PG_PORT).
func pgScript(t *testing.T, name string) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", name))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func droppedWriteFailed(t *testing.T, url string) int {
	t.Helper()
	v, _ := metricSample(t, url, `sluice_records_dropped_total{reason="write_failed"}`)
	return int(v)
}

// Two gateways on one PostgreSQL (separate --data folders; the artifacts
// folder shared through a symlink, as a shared volume would be): a push
// through A serves through B, a rollback through B reaches A's routing,
// both keep serving while PostgreSQL is stopped (changes are refused with
// 503 naming the store), and a deploy works again once it is back.
func TestPostgresTwoGateways(t *testing.T) {
	if os.Getenv("SLUICE_PG_DIR") == "" {
		pgtest.Server(t) // skips or fails with the message of the PostgreSQL tests
		if os.Getenv(pgtest.Env+"_REQUIRED") != "" {
			t.Fatal("SLUICE_PG_DIR is not set: this test stops and starts the server of make test-postgres, which sets it")
		}
		t.Skip("SLUICE_PG_DIR is not set: make test-postgres sets it so this test can stop and start the server")
	}
	base := pgtest.URL(t)
	// A password in the URL (ignored by the trust setup) must never reach
	// a log line.
	store := strings.Replace(base, "postgres://postgres@", "postgres://postgres:e2e-secret-pw@", 1)
	if store == base {
		t.Fatalf("cannot add a password to %s", base)
	}
	dataA, dataB, models, pkgs := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(dataA, "artifacts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dataA, "artifacts"), filepath.Join(dataB, "artifacts")); err != nil {
		t.Fatal(err)
	}
	a := startServer(t, "--data", dataA, "--models", models, "--store", store)
	b := startServer(t, "--data", dataB, "--models", models, "--store", store)
	defer func() {
		for _, p := range []*proc{a, b} {
			if strings.Contains(p.logs.String(), "e2e-secret-pw") {
				t.Errorf("a gateway logged the store's password:\n%s", p.logs)
			}
		}
	}()

	// Push through A, predict through B.
	v1 := writePackage(t, filepath.Join(pkgs, "v1"), []float64{1, 2}, 3.5)
	if out, stderr, err := sluice(t, "push", v1, "--server", a.url); err != nil || !strings.Contains(out, "calc@1 published") {
		t.Fatalf("push v1 through A: %v %q %q", err, out, stderr)
	}
	start := time.Now()
	testwait.Until(t, 30*time.Second, func() bool { v, _ := predictAs(t, b.url); return v == "calc@1" })
	t.Logf("calc@1 pushed through A answered through B after %s (B loads it itself)", time.Since(start).Round(time.Millisecond))

	v2 := writePackage(t, filepath.Join(pkgs, "v2"), []float64{2, 2}, 4.5)
	if out, stderr, err := sluice(t, "push", v2, "--server", a.url); err != nil || !strings.Contains(out, "calc@2 published") {
		t.Fatalf("push v2 through A: %v %q %q", err, out, stderr)
	}
	if out, stderr, err := sluice(t, "deploy", "calc@2", "--server", a.url); err != nil {
		t.Fatalf("deploy calc@2 through A: %v %q %q", err, out, stderr)
	}
	testwait.Until(t, 30*time.Second, func() bool { v, _ := predictAs(t, b.url); return v == "calc@2" })
	testwait.Until(t, 30*time.Second, func() bool { v, _ := predictAs(t, a.url); return v == "calc@2" })

	// Rollback through B: A's routing follows. A is polled from the moment
	// the rollback is sent; the time is logged, not asserted.
	before, _ := calcDeployment(t, a.url)
	seen := make(chan time.Duration, 1)
	start = time.Now()
	go func() {
		err := testwait.Poll(30*time.Second, func() error {
			if d, ok := calcDeployment(t, a.url); ok && d.PolicyVersion > before.PolicyVersion && fullTarget(d) == 1 {
				return nil
			}
			return errors.New("A shows the policy of before")
		})
		if err != nil {
			seen <- -1
			return
		}
		seen <- time.Since(start)
	}()
	out, stderr, err := sluice(t, "rollback", "calc", "--reason", "e2e", "--server", b.url)
	if err != nil || !targetRE("calc@1", "100%").MatchString(out) {
		t.Fatalf("rollback through B: %v %q %q", err, out, stderr)
	}
	answered := time.Since(start)
	if d := <-seen; d < 0 {
		t.Fatal("A's routing did not follow the rollback through B within 30s")
	} else {
		t.Logf("rollback through B: the CLI returned after %s; A's routing showed it %s after the CLI started", answered.Round(time.Millisecond), d.Round(time.Millisecond))
	}
	if v, _ := predictAs(t, a.url); v != "calc@1" {
		t.Fatalf("A answers with %s after the rollback through B, want calc@1", v)
	}

	// PostgreSQL stops: both keep serving on their last snapshot; changes
	// answer 503 naming the store.
	pgScript(t, "stop-postgres.sh")
	stopped := true
	defer func() {
		if stopped {
			pgScript(t, "start-postgres.sh")
		}
	}()
	for i := range 20 {
		for _, p := range []*proc{a, b} {
			if v, why := predictAs(t, p.url); v != "calc@1" {
				t.Fatalf("predict %d with PostgreSQL stopped: %q %s", i, v, why)
			}
		}
	}
	_, stderr, err = sluice(t, "traffic", "calc", "calc@2=100", "--server", b.url)
	if err == nil || !strings.Contains(stderr, "503") || !strings.Contains(stderr, "PostgreSQL") {
		t.Fatalf("traffic with PostgreSQL stopped: %v %q; want 503 naming PostgreSQL", err, stderr)
	}
	v3 := writePackage(t, filepath.Join(pkgs, "v3"), []float64{3, 2}, 5.5)
	_, stderr, err = sluice(t, "push", v3, "--server", a.url)
	if err == nil || !strings.Contains(stderr, "503") || !strings.Contains(stderr, "PostgreSQL") {
		t.Fatalf("push with PostgreSQL stopped: %v %q; want 503 naming PostgreSQL", err, stderr)
	}
	// The async records of those predictions are dropped and counted, and
	// the log says the store is unreachable.
	testwait.Until(t, 30*time.Second, func() bool { return droppedWriteFailed(t, a.url) > 0 })
	testwait.Until(t, 30*time.Second, func() bool { return strings.Contains(b.logs.String(), "metadata store unreachable") })

	// PostgreSQL is back: a deploy works again, without a restart, and
	// reaches the other gateway.
	pgScript(t, "start-postgres.sh")
	stopped = false
	start = time.Now()
	testwait.Until(t, 60*time.Second, func() bool {
		_, _, err := sluice(t, "traffic", "calc", "calc@2=100", "--reason", "back", "--server", b.url)
		return err == nil
	})
	t.Logf("a traffic change through B succeeded %s after PostgreSQL started again", time.Since(start).Round(time.Millisecond))
	testwait.Until(t, 30*time.Second, func() bool { v, _ := predictAs(t, a.url); return v == "calc@2" })
	if out, stderr, err := sluice(t, "push", v3, "--server", a.url); err != nil || !strings.Contains(out, "calc@3 published") {
		t.Fatalf("push after PostgreSQL is back: %v %q %q", err, out, stderr)
	}
	testwait.Until(t, 30*time.Second, func() bool {
		v, _ := predictAs(t, b.url)
		out, _, err := sluice(t, "models", "--server", b.url)
		return v == "calc@2" && err == nil && strings.Contains(out, "3:ready")
	})
	if out, stderr, err := sluice(t, "deploy", "calc@3", "--server", b.url); err != nil {
		t.Fatalf("deploy calc@3 through B after PostgreSQL is back: %v %q %q", err, out, stderr)
	}
	testwait.Until(t, 30*time.Second, func() bool { v, _ := predictAs(t, a.url); return v == "calc@3" })
	if !strings.Contains(b.logs.String(), "metadata store reachable again") {
		t.Errorf("B did not log that the store is back:\n%s", b.logs)
	}
	// Records written after the outage reach the shared store: B lists A's.
	testwait.Until(t, 30*time.Second, func() bool {
		out, _, err := sluice(t, "records", "--model", "calc", "--server", b.url)
		return err == nil && strings.Count(out, "calc") > 0
	})
	a.stop(t)
	b.stop(t)
}
