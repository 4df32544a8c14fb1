package serving

import (
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

func TestAdmit(t *testing.T) {
	ms := time.Millisecond
	base := AdmitInput{Ready: true, Instances: 1, MaxQueue: 100, MaxBatch: 8, Replicas: 1,
		Cost: CostModel{A: 2 * ms, B: ms / 2}, CheckFeasibility: true}
	with := func(f func(*AdmitInput)) AdmitInput { in := base; f(&in); return in }
	cases := []struct {
		name string
		in   AdmitInput
		code errs.Code
	}{
		{"admitted", base, ""},
		{"closing", with(func(in *AdmitInput) { in.Closing = true }), errs.ShuttingDown},
		{"not ready", with(func(in *AdmitInput) { in.Ready = false }), errs.NotReady},
		{"no replicas", with(func(in *AdmitInput) { in.Replicas = 0 }), errs.NotReady},
		{"queue has room to the last instance", with(func(in *AdmitInput) { in.QueuedInstances = 99 }), ""},
		{"queue full by one instance", with(func(in *AdmitInput) { in.QueuedInstances = 100 }), errs.QueueFull},
		// Work is counted in instances: one big request weighs its size.
		{"big request does not fit", with(func(in *AdmitInput) { in.QueuedInstances = 50; in.Instances = 51 }), errs.QueueFull},
		{"big request fits", with(func(in *AdmitInput) { in.QueuedInstances = 50; in.Instances = 50; in.Remaining = time.Second }), ""},
		// Empty queue, 1 instance: 2ms + 0.5ms = 2.5ms.
		{"deadline just feasible", with(func(in *AdmitInput) { in.Remaining = 2500 * time.Microsecond }), ""},
		{"deadline just infeasible", with(func(in *AdmitInput) { in.Remaining = 2499 * time.Microsecond }), errs.DeadlineInfeasible},
		// 16 queued + 1: 3 batches; ahead = 2·2ms + 16·0.5ms = 12ms, own 2.5ms: 14.5ms.
		{"queued work makes it infeasible", with(func(in *AdmitInput) { in.QueuedInstances = 16; in.Remaining = 14 * ms }), errs.DeadlineInfeasible},
		{"queued work still feasible", with(func(in *AdmitInput) { in.QueuedInstances = 16; in.Remaining = 15 * ms }), ""},
		// Two replicas halve the work ahead: 6ms + 2.5ms.
		{"replicas share the work", with(func(in *AdmitInput) { in.QueuedInstances = 16; in.Replicas = 2; in.Remaining = 9 * ms }), ""},
		// Deadline-aware batching closes early, so the delay need not fit.
		{"batch delay is absorbed", with(func(in *AdmitInput) { in.MaxBatchDelay = 3 * ms; in.Remaining = 3 * ms }), ""},
		{"no deadline: no feasibility check", with(func(in *AdmitInput) { in.QueuedInstances = 90 }), ""},
		{"headroom keeps a share of the deadline free", with(func(in *AdmitInput) { in.Headroom = 0.2; in.Remaining = 3 * ms }), errs.DeadlineInfeasible},
		{"headroom satisfied", with(func(in *AdmitInput) { in.Headroom = 0.2; in.Remaining = 3125 * time.Microsecond }), ""},
		{"slack counts", with(func(in *AdmitInput) { in.Slack = time.Millisecond; in.Remaining = 3 * ms }), errs.DeadlineInfeasible},
		{"cost model not seeded", with(func(in *AdmitInput) { in.CheckFeasibility = false; in.Remaining = ms / 10 }), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Admit(c.in)
			if errs.CodeOf(err) != c.code {
				t.Fatalf("got %v, want code %q", err, c.code)
			}
			if err != nil && errs.As(err).RetryAfter < time.Second {
				t.Errorf("refusal without Retry-After: %v", err)
			}
		})
	}
}

func TestEstimateWait(t *testing.T) {
	ms := time.Millisecond
	in := AdmitInput{MaxBatch: 32, Replicas: 1, Cost: CostModel{A: 1700 * time.Microsecond, B: 320 * time.Microsecond}}
	cases := []struct {
		queued, n int
		want      time.Duration
	}{
		{0, 1, 2020 * time.Microsecond},                          // the seed's ≈2 ms for batch 1
		{0, 32, 1700*time.Microsecond + 32*320*time.Microsecond}, // ≈12 ms for batch 32
		{32, 1, 1700*time.Microsecond + 32*320*time.Microsecond + 2020*time.Microsecond},
		{0, 64, 1700*time.Microsecond + 64*320*time.Microsecond + 1700*time.Microsecond}, // split: 2 batches
	}
	for _, c := range cases {
		if got := EstimateWait(c.queued, c.n, in); got != c.want {
			t.Errorf("EstimateWait(%d, %d) = %v, want %v", c.queued, c.n, got, c.want)
		}
	}
	_ = ms
}

func TestCloseBatch(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	base := BatchInput{Now: t0, Rows: 1, FirstArrival: t0, MaxBatch: 8, MaxBatchDelay: 3 * ms, Cost: CostModel{A: ms}}
	with := func(f func(*BatchInput)) BatchInput { in := base; f(&in); return in }
	cases := []struct {
		name  string
		in    BatchInput
		now   bool
		until time.Time
	}{
		{"waits for the delay", base, false, t0.Add(3 * ms)},
		{"full batch runs at once", with(func(in *BatchInput) { in.Rows = 8 }), true, time.Time{}},
		{"opportunistic never waits", with(func(in *BatchInput) { in.MaxBatchDelay = 0 }), true, time.Time{}},
		{"delay elapsed", with(func(in *BatchInput) { in.Now = t0.Add(3 * ms) }), true, time.Time{}},
		{"delay counts from the first row", with(func(in *BatchInput) { in.Now = t0.Add(2 * ms) }), false, t0.Add(3 * ms)},
		// Earliest deadline 2.5ms away, a full batch costs 1ms: close by 1.5ms.
		{"deadline closes early", with(func(in *BatchInput) { in.EarliestDue = t0.Add(2500 * time.Microsecond) }), false, t0.Add(1500 * time.Microsecond)},
		{"deadline already forces it", with(func(in *BatchInput) { in.EarliestDue = t0.Add(ms / 2) }), true, time.Time{}},
		{"far deadline leaves the delay", with(func(in *BatchInput) { in.EarliestDue = t0.Add(time.Second) }), false, t0.Add(3 * ms)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now, until := CloseBatch(c.in)
			if now != c.now || !until.Equal(c.until) {
				t.Fatalf("got (%v, %v), want (%v, %v)", now, until, c.now, c.until)
			}
		})
	}
}

func TestFit(t *testing.T) {
	us := time.Microsecond
	var exact []sample
	for _, n := range []int{1, 2, 4, 8, 16, 32, 1, 8, 32} {
		exact = append(exact, sample{n, 1700*us + time.Duration(n)*320*us})
	}
	got := Fit(exact, CostModel{})
	if d := got.A - 1700*us; d < -us || d > us {
		t.Errorf("A = %v, want 1.7ms", got.A)
	}
	if d := got.B - 320*us; d < -us/10 || d > us/10 {
		t.Errorf("B = %v, want 0.32ms", got.B)
	}
	// All batches of one size: keep the prior slope, refit the intercept.
	var ones []sample
	for i := 0; i < 10; i++ {
		ones = append(ones, sample{1, 3 * time.Millisecond})
	}
	got = Fit(ones, CostModel{A: time.Millisecond, B: 500 * us})
	if got.B != 500*us || got.A != 2500*us {
		t.Errorf("single-size fit = %+v, want A 2.5ms B 0.5ms", got)
	}
}

func TestUpdateSlack(t *testing.T) {
	ms := time.Millisecond
	s := time.Duration(0)
	s = UpdateSlack(s, 10*ms) // late by 10ms: rises fast
	if s != 3*ms {
		t.Fatalf("after one late request slack = %v, want 3ms", s)
	}
	for i := 0; i < 10; i++ {
		s = UpdateSlack(s, 10*ms)
	}
	if s < 9*ms {
		t.Fatalf("slack %v does not approach a steady 10ms lateness", s)
	}
	high := s
	s = UpdateSlack(s, -ms) // early: decays slowly
	if s >= high || s < high*9/10 {
		t.Fatalf("slack after one early request %v (was %v): must decay slowly", s, high)
	}
	for i := 0; i < 2000; i++ {
		s = UpdateSlack(s, -ms)
	}
	if s != 0 {
		t.Fatalf("slack %v must not go below 0", s)
	}
}

func TestCheckRemove(t *testing.T) {
	cases := []struct {
		name string
		in   RemoveInput
		code errs.Code
	}{
		{"another replica stays", RemoveInput{Live: 2, Queued: 50}, ""},
		{"last replica, nothing queued", RemoveInput{Live: 1}, ""},
		{"last replica, work queued", RemoveInput{Live: 1, Queued: 1}, errs.Unavailable},
		{"last replica, work queued, closing", RemoveInput{Live: 1, Queued: 7, Closing: true}, ""},
		{"no replica", RemoveInput{}, errs.NotFound},
		{"no replica, closing", RemoveInput{Closing: true}, errs.NotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckRemove(c.in)
			if errs.CodeOf(err) != c.code {
				t.Fatalf("CheckRemove(%+v) = %v, want code %q", c.in, err, c.code)
			}
			if c.code == errs.Unavailable && errs.As(err).RetryAfter < time.Second {
				t.Errorf("refusal without Retry-After: %v", err)
			}
		})
	}
}

func TestPickRemoval(t *testing.T) {
	cases := []struct {
		working []bool
		want    int
	}{
		{[]bool{false}, 0},
		{[]bool{true}, 0},
		{[]bool{false, false, false}, 2}, // newest idle
		{[]bool{false, true, true}, 0},   // the only idle one, though oldest
		{[]bool{true, false, true}, 1},
		{[]bool{true, true}, 1}, // all busy: newest
	}
	for _, c := range cases {
		if got := PickRemoval(c.working); got != c.want {
			t.Errorf("PickRemoval(%v) = %d, want %d", c.working, got, c.want)
		}
	}
}
