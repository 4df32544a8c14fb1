package cluster

import (
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/workerpb"
)

func TestPreAdmit(t *testing.T) {
	fitted := servingState{cost: serving.CostModel{A: time.Millisecond, B: 100 * time.Microsecond}, maxBatch: 8, replicas: 2}
	for _, c := range []struct {
		name      string
		state     servingState
		queued    int64
		n         int
		remaining time.Duration
		want      errs.Code // "" admitted
	}{
		{"no deadline: never refused here", fitted, 1_000_000, 1, 0, ""},
		{"an empty queue fits", fitted, 0, 1, 50 * time.Millisecond, ""},
		// 10,000 queued over 2 replicas in batches of 8: about 1,250 batches × 1.8 ms / 2 ≈ 1.1 s
		{"a deep queue cannot make 50 ms", fitted, 10_000, 1, 50 * time.Millisecond, errs.DeadlineInfeasible},
		{"but makes 5 s", fitted, 10_000, 1, 5 * time.Second, ""},
		{"no fitted cost model yet: the worker decides", servingState{maxBatch: 8, replicas: 2}, 10_000, 1, 50 * time.Millisecond, ""},
		{"no replica reported: the worker decides", servingState{cost: fitted.cost, maxBatch: 8}, 10_000, 1, 50 * time.Millisecond, ""},
		{"the queue bound is the worker's", fitted, 1 << 30, 1, 100 * time.Hour, ""},
	} {
		err := preAdmit(candidate{queued: c.queued, state: c.state}, c.n, 2*time.Millisecond, c.remaining)
		if got := errs.CodeOf(err); got != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// A worker that reports a queue it cannot clear within a request's
// deadline is not sent the request: the gateway refuses it at once
// (deadline_infeasible), and the worker sees no call.
func TestRefusedAtTheGatewayFromTheReport(t *testing.T) {
	p, a := oneWorker(t, 1<<30, Config{})
	v := start(t, p, specOf(t, "m", "warm", "1MiB"))
	report := func(queued int64) {
		t.Helper()
		st := &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1, MemoryBudgetBytes: 1 << 30, Versions: []*workerpb.VersionStatus{{
			Model: "m", Version: 1, State: "ready", ReadyReplicas: 1, QueuedInstances: queued,
			CostANs: int64(time.Millisecond), CostBNs: int64(100 * time.Microsecond), MaxBatch: 8}}}
		if _, err := p.Heartbeat(t.Context(), st); err != nil {
			t.Fatal(err)
		}
	}
	report(10_000)
	before := a.calls.Load()
	if err := submit(v, 50*time.Millisecond); errs.CodeOf(err) != errs.DeadlineInfeasible {
		t.Fatalf("with 10,000 instances queued: %v, want deadline_infeasible at the gateway", err)
	}
	if got := a.calls.Load(); got != before {
		t.Fatalf("the worker got %d calls; a request refused at the gateway must not reach it", got-before)
	}
	report(0)
	if err := submit(v, 5*time.Second); err != nil {
		t.Fatalf("with an empty queue: %v", err)
	}
	if got := a.calls.Load(); got != before+1 {
		t.Fatalf("the worker got %d calls, want 1", got-before)
	}
}
