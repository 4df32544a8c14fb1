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
	base := BatchInput{Now: t0, Rows: 1, OldestArrival: t0, MaxBatch: 8, MaxBatchDelay: 3 * ms, Cost: CostModel{A: ms}}
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
		{"delay counts from the oldest row", with(func(in *BatchInput) { in.Now = t0.Add(2 * ms) }), false, t0.Add(3 * ms)},
		// Earliest deadline 2.5ms away, a full batch costs 1ms: close by 1.5ms.
		{"deadline closes early", with(func(in *BatchInput) { in.EarliestDue = t0.Add(2500 * time.Microsecond) }), false, t0.Add(1500 * time.Microsecond)},
		{"deadline already forces it", with(func(in *BatchInput) { in.EarliestDue = t0.Add(ms / 2) }), true, time.Time{}},
		{"far deadline leaves the delay", with(func(in *BatchInput) { in.EarliestDue = t0.Add(time.Second) }), false, t0.Add(3 * ms)},
		// Work it cannot take (another bucket's rows) waits: run now.
		{"queued work it cannot take", with(func(in *BatchInput) { in.QueuedMore = true }), true, time.Time{}},
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

// The batcher closes a batch at the earlier of (its oldest request's
// arrival + maxBatchDelay) and the latest start its tightest deadline
// allows, whatever order its pieces were taken in. The first piece is not
// always the oldest: online work is taken before older low-priority work
// and retried pieces before both ("newer piece first" closed 15 ms late
// when the batcher timed the delay from the first piece).
func TestCloseBatchOverPieces(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	cfg := Config{MaxBatchSize: 8, MaxBatchDelay: 20 * ms}
	cost := CostModel{A: 2 * ms} // a full batch: 2 ms
	at := func(arrived, due time.Duration) piece {
		it := &item{enq: t0.Add(arrived)}
		if due > 0 {
			it.due = t0.Add(due)
		}
		return piece{it: it, lo: 0, hi: 1}
	}
	cases := []struct {
		name  string
		now   time.Duration
		batch []piece
		run   bool
		until time.Duration // when !run
	}{
		{"one request waits the delay", 0, []piece{at(0, 0)}, false, 20 * ms},
		{"in arrival order", 10 * ms, []piece{at(0, 0), at(10*ms, 0)}, false, 20 * ms},
		{"newer piece first: the delay counts from the older", 10 * ms, []piece{at(5*ms, 0), at(0, 0)}, false, 20 * ms},
		{"newer piece first, the older's delay over: now", 35 * ms, []piece{at(30*ms, 0), at(10*ms, 0)}, true, 0},
		{"a retried piece of an old request: now", 30 * ms, []piece{at(-50*ms, 0), at(30*ms, 0)}, true, 0},
		{"the tightest deadline in a later piece", 0, []piece{at(0, 100*ms), at(0, 10*ms)}, false, 8 * ms},
		{"the tightest deadline in the first piece", 0, []piece{at(0, 10*ms), at(0, 100*ms)}, false, 8 * ms},
		{"no deadline beside one", 0, []piece{at(0, 0), at(0, 12*ms), at(0, 0)}, false, 10 * ms},
		{"deadline and delay: the delay of the older is earlier", 10 * ms, []piece{at(8*ms, 40*ms), at(1*ms, 0)}, false, 21 * ms},
		{"a deadline that leaves no time: now", 5 * ms, []piece{at(5*ms, 0), at(0, 6*ms)}, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows := len(c.batch)
			run, until := CloseBatch(closeInput(t0.Add(c.now), c.batch, rows, cfg, cost))
			want := time.Time{}
			if !c.run {
				want = t0.Add(c.until)
			}
			if run != c.run || !until.Equal(want) {
				t.Fatalf("got (%v, %v), want (%v, %v)", run, until.Sub(t0), c.run, c.until)
			}
		})
	}
}

// A batch's model call runs until the latest deadline among its requests,
// and without one when any request has none, in whatever order its pieces
// were taken ([none, 10ms] ended at 10 ms, cutting the request without a
// deadline, when the answer depended on the order).
func TestBatchDeadline(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	p := func(due time.Duration) piece {
		it := &item{}
		if due > 0 {
			it.due = t0.Add(due)
		}
		return piece{it: it}
	}
	for _, c := range []struct {
		name string
		dues []time.Duration // 0: no deadline
		want time.Duration   // 0: none
	}{
		{"one deadline", []time.Duration{10 * ms}, 10 * ms},
		{"the latest", []time.Duration{10 * ms, 30 * ms, 20 * ms}, 30 * ms},
		{"none", []time.Duration{0}, 0},
		{"none first", []time.Duration{0, 10 * ms}, 0},
		{"none last", []time.Duration{10 * ms, 0}, 0},
		{"none between", []time.Duration{10 * ms, 0, 20 * ms}, 0},
	} {
		var live []piece
		for _, d := range c.dues {
			live = append(live, p(d))
		}
		want := time.Time{}
		if c.want > 0 {
			want = t0.Add(c.want)
		}
		if got := batchDeadline(live); !got.Equal(want) {
			t.Errorf("%s: %v, want %v", c.name, got, want)
		}
	}
}

// A piece of a crashed batch is queued again once, and only when its
// deadline leaves more than its estimated compute.
func TestRetryCrashed(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	cost := CostModel{A: 2 * ms, B: ms} // a 3-row piece: 5 ms
	for _, c := range []struct {
		name    string
		retried bool
		due     time.Duration // from now; 0: none
		want    bool
	}{
		{"no deadline", false, 0, true},
		{"room left", false, 6 * ms, true},
		{"exactly its cost left", false, 5 * ms, false},
		{"too little left", false, 4 * ms, false},
		{"already retried", true, 0, false},
		{"already retried, room left", true, time.Second, false},
	} {
		it := &item{}
		if c.due > 0 {
			it.due = t0.Add(c.due)
		}
		if got := retryCrashed(piece{it: it, lo: 2, hi: 5, retried: c.retried}, t0, cost); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// The cost model is fitted on a busy replica's whole cycle, unless the
// cycle is implausibly long next to the call.
func TestBatchCost(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name    string
		elapsed time.Duration
		busy    bool
		last    time.Duration // lastEnd before now; 0: none yet
		want    time.Duration
	}{
		{"idle before: the call", 4 * ms, false, 6 * ms, 4 * ms},
		{"first batch: the call", 4 * ms, true, 0, 4 * ms},
		{"busy: the cycle", 4 * ms, true, 6 * ms, 6 * ms},
		{"cycle shorter than the call: the call", 4 * ms, true, 3 * ms, 4 * ms},
		{"cycle over 4× the call + 1 ms: the call", 4 * ms, true, 17 * ms, 4 * ms},
		{"cycle just under the bound", 4 * ms, true, 16*ms + 999*time.Microsecond, 16*ms + 999*time.Microsecond},
	} {
		last := time.Time{}
		if c.last > 0 {
			last = t0.Add(-c.last)
		}
		if got := batchCost(c.elapsed, c.busy, last, t0); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
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
