package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/testwait"
)

// sluice plan through the real binary: a given figure, the server's cost
// model, and a short measurement.
func TestPlanCommand(t *testing.T) {
	models := t.TempDir()
	writePackage(t, filepath.Join(models, "calc"), []float64{1, 2}, 3.5)
	srv := startServer(t, "--data", t.TempDir(), "--models", models)

	out, stderr, err := sluice(t, "plan", "calc", "--peak", "700", "--slo", "50ms", "--per-replica", "100", "--workers-hint", "2", "--server", srv.url)
	if err != nil {
		t.Fatalf("plan --per-replica: %v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{"given with --per-replica", "2 (--workers-hint)", "10 replicas = ceil(700 / (100.0 × 0.7))",
		"20 replicas, 10 per worker over 2", "30 replicas = 20 serving + 10"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}

	// A large peak prints in digits, never as 1e+06.
	out, stderr, err = sluice(t, "plan", "calc", "--peak", "1000000", "--slo", "50ms", "--per-replica", "100000", "--workers-hint", "2", "--server", srv.url)
	if err != nil || !strings.Contains(out, "peak 1000000 instances/s") || !strings.Contains(out, "ceil(1000000 / (100000.0 × 0.7))") || strings.Contains(out, "e+") {
		t.Errorf("plan --peak 1000000: %v\n%s%s", err, out, stderr)
	}

	// The server's learned cost model (warmup batches fit it); with
	// workers, the one they report in their heartbeats, through the same
	// API.
	testwait.Until(t, 10*time.Second, func() bool {
		v := getVersion(t, srv.url, 1)
		return v.Config != nil && (v.Config.CostBaseMs > 0 || v.Config.CostPerInstanceMs > 0)
	})
	out, stderr, err = sluice(t, "plan", "calc", "--peak", "50000", "--slo", "50ms", "--json", "--server", srv.url)
	if err != nil {
		t.Fatalf("plan from the cost model: %v\n%s%s", err, out, stderr)
	}
	var o planOutput
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("plan --json: %v\n%s", err, out)
	}
	wantWorkers := 1
	if e2eWorkers != "" {
		wantWorkers = 2
	}
	if o.PerReplicaSource != "cost-model" || o.PerReplica <= 0 || o.Version != 1 || o.Workers != wantWorkers || o.Plan.AtPeak < 1 || o.Plan.FailureCovered != (wantWorkers > 1) {
		t.Fatalf("plan from the cost model: %+v", o)
	}

	// With workers, the replicas are counted from their heartbeats.
	testwait.Until(t, 10*time.Second, func() bool {
		v := getVersion(t, srv.url, 1)
		return v.Config != nil && v.Config.ReadyReplicas > 0
	})

	// A short measurement: whatever the machine sustains, the output says
	// it was measured and how; a machine too busy to send even the first
	// rate on schedule is told so.
	out, stderr, err = sluice(t, "plan", "calc", "--peak", "1000", "--slo", "100ms", "--measure", "--measure-start", "20",
		"--measure-duration", "300ms", "--measure-steps", "1", "--server", srv.url)
	switch {
	case err == nil:
		if !strings.Contains(out, "measured: open-loop bisection") || !strings.Contains(out, "judged by the server's answers") || !strings.Contains(stderr, "probe 20.0 requests/s") {
			t.Errorf("plan --measure output:\n%s%s", out, stderr)
		}
	case !strings.Contains(stderr, "not even 20.0 requests/s was sustained"):
		t.Fatalf("plan --measure: %v\n%s%s", err, out, stderr)
	}

	if _, stderr, err := sluice(t, "plan", "calc", "--peak", "100", "--server", srv.url); err == nil || !strings.Contains(stderr, "--slo is required") {
		t.Fatalf("plan without --slo: err %v, %s", err, stderr)
	}
}
