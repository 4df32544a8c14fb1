package cluster

import (
	"context"
	"errors"
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
		slack     time.Duration
		want      errs.Code // "" admitted
	}{
		{"no deadline: never refused here", fitted, 1_000_000, 1, 0, time.Hour, ""},
		{"an empty queue fits", fitted, 0, 1, 50 * time.Millisecond, 0, ""},
		// 10,000 queued over 2 replicas in batches of 8: about 1,250 batches × 1.8 ms / 2 ≈ 1.1 s
		{"a deep queue cannot make 50 ms", fitted, 10_000, 1, 50 * time.Millisecond, 0, errs.DeadlineInfeasible},
		{"but makes 5 s", fitted, 10_000, 1, 5 * time.Second, 0, ""},
		{"no fitted cost model yet: the worker decides", servingState{maxBatch: 8, replicas: 2}, 10_000, 1, 50 * time.Millisecond, time.Hour, ""},
		{"no replica reported: the worker decides", servingState{cost: fitted.cost, maxBatch: 8}, 10_000, 1, 50 * time.Millisecond, time.Hour, ""},
		{"the queue bound is the worker's", fitted, 1 << 30, 1, 100 * time.Hour, 0, ""},
		// An empty queue is 1.1 ms of compute; 80 % of 50 ms is 40 ms.
		{"a hop slack that still fits", fitted, 0, 1, 50 * time.Millisecond, 38 * time.Millisecond, ""},
		{"a hop slack past the headroom: refused up front", fitted, 0, 1, 50 * time.Millisecond, 39 * time.Millisecond, errs.DeadlineInfeasible},
		{"the same slack fits a longer deadline", fitted, 0, 1, time.Second, 39 * time.Millisecond, ""},
	} {
		err := preAdmit(candidate{queued: c.queued, state: c.state}, c.n, 2*time.Millisecond, c.remaining, c.slack)
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
		if _, err := p.testBeat(t.Context(), st); err != nil {
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

func TestHopEstimate(t *testing.T) {
	fitted := servingState{cost: serving.CostModel{A: time.Millisecond, B: 100 * time.Microsecond}, maxBatch: 8, replicas: 2}
	for _, c := range []struct {
		name   string
		state  servingState
		queued int64
		n      int
		want   time.Duration
	}{
		{"empty queue: its own batch", fitted, 0, 1, 1100 * time.Microsecond},
		// 16 queued + 1: 3 batches, 2 ahead (2 × 1 ms + 16 × 0.1 ms over 2 replicas) + its own 1.1 ms
		{"behind a queue", fitted, 16, 1, 1800*time.Microsecond + 1100*time.Microsecond},
		{"no fitted cost model", servingState{maxBatch: 8, replicas: 2}, 16, 1, 0},
		{"no replica reported", servingState{cost: fitted.cost, maxBatch: 8}, 16, 1, 0},
	} {
		if got := hopEstimate(candidate{queued: c.queued, state: c.state}, c.n); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHopOutcome(t *testing.T) {
	for _, c := range []struct {
		name     string
		err      error
		fromPeer bool
		ctxErr   error
		want     hopOutcome
	}{
		{"answered", nil, true, nil, hopAnswered},
		{"the deadline passed at the gateway", errs.New(errs.DeadlineExceeded, "deadline passed waiting for the worker"), false, context.DeadlineExceeded, hopLate},
		{"the deadline passed in the worker's queue", errs.New(errs.ExpiredInQueue, "deadline passed while queued"), true, context.DeadlineExceeded, hopLate},
		{"the deadline passed during compute there", errs.New(errs.DeadlineExceeded, "deadline passed during compute"), true, nil, hopLate},
		{"the worker refused: a round trip with no work", errs.New(errs.QueueFull, "full"), true, nil, hopBounced},
		{"the worker refused it as infeasible", errs.New(errs.DeadlineInfeasible, "cannot"), true, nil, hopBounced},
		{"the worker failed it: a round trip", errs.New(errs.Internal, "model failed"), true, nil, hopAnswered},
		{"the caller went away", errs.New(errs.DeadlineExceeded, "call cancelled"), false, context.Canceled, hopFailed},
		{"the connection failed", errs.New(errs.Unavailable, "connection refused"), false, nil, hopFailed},
		{"wrapped cancel", errs.New(errs.DeadlineExceeded, "call cancelled"), false, errors.Join(context.Canceled), hopFailed},
	} {
		if got := hopOutcomeOf(c.err, c.fromPeer, c.ctxErr); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestHopLateness(t *testing.T) {
	for _, c := range []struct {
		name              string
		o                 hopOutcome
		elapsed, estimate time.Duration
		want              time.Duration
		folded            bool
	}{
		{"answered later than estimated", hopAnswered, 9 * time.Millisecond, time.Millisecond, 8 * time.Millisecond, true},
		{"answered sooner", hopAnswered, time.Millisecond, 2 * time.Millisecond, -time.Millisecond, true},
		{"late: the whole wait past the estimate", hopLate, 50 * time.Millisecond, time.Millisecond, 49 * time.Millisecond, true},
		{"refused there: the whole round trip, not against the estimate", hopBounced, 2 * time.Millisecond, 40 * time.Millisecond, 2 * time.Millisecond, true},
		{"refused here: evidence of nothing late", hopRefused, 0, 0, 0, true},
		{"failed connection: not folded", hopFailed, 50 * time.Millisecond, 0, 0, false},
	} {
		got, folded := hopLateness(c.o, c.elapsed, c.estimate)
		if got != c.want || folded != c.folded {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, folded, c.want, c.folded)
		}
	}
	var s hopSlack
	s.observe(hopLate, 50*time.Millisecond, 0)
	if got, want := s.get(), serving.UpdateSlack(0, 50*time.Millisecond); got != want {
		t.Fatalf("slack after one late call: %v, want %v", got, want)
	}
	s.observe(hopFailed, time.Hour, 0)
	if got, want := s.get(), serving.UpdateSlack(0, 50*time.Millisecond); got != want {
		t.Fatalf("a failed connection moved the slack: %v, want %v", got, want)
	}
	before := s.get()
	s.observe(hopRefused, 0, 0)
	if got := s.get(); got >= before {
		t.Fatalf("a refusal did not let the slack decay: %v → %v", before, got)
	}
}

// Calls that the worker answers past their deadline (its process never
// getting the CPU, as on a busy machine: the report shows an empty queue
// and a cost model of microseconds) teach the gateway the hop's slack:
// after a few 504s it refuses up front with deadline_infeasible (503 and
// Retry-After) and sends the worker nothing, instead of letting every
// request expire. Once the worker answers in time again, requests go
// through again.
func TestLateHopsRefusedUpFront(t *testing.T) {
	p, a := oneWorker(t, 1<<30, Config{})
	v := start(t, p, specOf(t, "m", "warm", "1MiB"))
	st := &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1, MemoryBudgetBytes: 1 << 30, Versions: []*workerpb.VersionStatus{{
		Model: "m", Version: 1, State: "ready", ReadyReplicas: 1,
		CostANs: int64(10 * time.Microsecond), CostBNs: int64(time.Microsecond), MaxBatch: 8}}}
	if _, err := p.testBeat(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.hang = make(chan struct{}) // never closed: every call waits for its deadline
	a.mu.Unlock()
	const deadline = 50 * time.Millisecond
	var late int
	var err error
	for range 10 {
		err = submit(v, deadline)
		if errs.CodeOf(err) != errs.DeadlineExceeded {
			break
		}
		late++
	}
	if errs.CodeOf(err) != errs.DeadlineInfeasible {
		t.Fatalf("after %d requests that expired at the worker: %v, want deadline_infeasible at the gateway", late, err)
	}
	if e := (*errs.Error)(nil); !errors.As(err, &e) || errs.RetryAfterHeader(e) == "" {
		t.Fatalf("the refusal has no Retry-After: %#v", err)
	}
	if got := a.calls.Load(); got != int64(late) {
		t.Fatalf("the worker got %d calls for %d late requests; the refused one must not reach it", got, late)
	}
	a.mu.Lock()
	a.hang = nil
	a.mu.Unlock()
	for i := 0; ; i++ {
		err := submit(v, deadline)
		if err == nil {
			break
		}
		if errs.CodeOf(err) != errs.DeadlineInfeasible || i == 200 {
			t.Fatalf("after the worker answers in time again, request %d: %v", i, err)
		}
	}
}
