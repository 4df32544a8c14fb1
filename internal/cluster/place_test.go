package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/placement"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/testwait"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// specOf is a linear version name@1 of tier whose replicas take mem.
func specOf(t *testing.T, name, tier, mem string) VersionSpec {
	t.Helper()
	y := "name: " + name + "\nruntime: linear\nartifact: a.json\ninput:\n  schema: i@1\n  fields: [{name: x, type: float}, {name: z, type: float}]\noutput:\n  schema: o@1\n  fields: [{name: y}]\n" +
		"serving: {memory: " + mem + "}\nplacement: {tier: " + tier + "}\n"
	spec, err := modelpkg.Parse("model.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return VersionSpec{Model: name, N: 1, Manifest: []byte(y), ArtifactSHA: "00", Spec: spec}
}

// registerWith registers f with a memory budget.
func (f *fakeWorker) registerWith(t *testing.T, p *Pool, pid, budget int64) {
	t.Helper()
	if _, err := p.testRegister(t.Context(), &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: f.id, Address: f.addr, Pid: pid, MemoryBudgetBytes: budget}}); err != nil {
		t.Fatal(err)
	}
}

// clock is a placement clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// oneWorker is a pool over one fake worker with budget.
func oneWorker(t *testing.T, budget int64, cfg Config) (*Pool, *fakeWorker) {
	t.Helper()
	cfg.Known, cfg.ShardSize, cfg.HeartbeatInterval = []string{"a"}, 1, time.Hour
	if cfg.Placement.MinResidency == 0 {
		cfg.Placement.MinResidency = time.Nanosecond
	}
	p := newTestPool(cfg)
	t.Cleanup(p.Close)
	a := startFake(t, "a")
	a.registerWith(t, p, 1, budget)
	return p, a
}

func start(t *testing.T, p *Pool, vs VersionSpec) *Version {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	v, _, err := p.Start(ctx, vs)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func submit(v *Version, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := v.Submit(ctx, rows(1))
	return err
}

// A load that needs room evicts the version cheapest to reload: the
// idle one, not the one that takes calls; never a hot one.
func TestEvictionOrder(t *testing.T) {
	const mib = 1 << 20
	ev := &countingMetrics{}
	clk := newClock()
	p, a := oneWorker(t, 35*mib, Config{Metrics: ev, Now: clk.now, Placement: placement.Policy{MinResidency: time.Minute}})
	start(t, p, specOf(t, "hot", "hot", "10MiB"))
	start(t, p, specOf(t, "idle", "warm", "10MiB"))
	busy := start(t, p, specOf(t, "used", "warm", "10MiB"))
	for range 5 {
		if err := submit(busy, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(time.Minute) // past the minimum residency: the three may go
	fresh := start(t, p, specOf(t, "new", "warm", "10MiB"))
	if got := a.unloaded(); !slices.Equal(got, []string{"idle@1"}) {
		t.Fatalf("unloaded %v, want [idle@1]", got)
	}
	// Called once: a copy that serves, protected by the minimum
	// residency (one nobody called would be displaced by any request).
	if err := submit(fresh, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	wi := p.Workers()[0]
	if wi.Evictions != 1 || wi.Loads != 4 || ev.evicted.Load() != 1 {
		t.Fatalf("worker: %d evictions, %d loads; metrics %d evictions", wi.Evictions, wi.Loads, ev.evicted.Load())
	}
	// A request for the evicted version whose deadline does not cover its
	// load (1 s) waits for nothing: it may not displace a version called
	// more than it (admission), so 503 cold_start naming why. One whose
	// deadline covers the load displaces by cost: "used" goes (the
	// cheapest evictable); never the hot one, nor "new", younger than the
	// residency and serving.
	idle := p.versions["idle@1"]
	p.mu.Lock()
	idle.lastLoad = time.Second
	p.mu.Unlock()
	if err := submit(idle, 200*time.Millisecond); errs.CodeOf(err) != errs.ColdStart || !strings.Contains(err.Error(), "called less") {
		t.Fatalf("evicted version, a deadline under its load time: %v, want cold_start (called less than the residents)", err)
	}
	if got := a.unloaded(); !slices.Equal(got, []string{"idle@1"}) {
		t.Fatalf("unloaded %v after a refusal: nothing more evicted", got)
	}
	if err := submit(idle, 5*time.Second); err != nil {
		t.Fatalf("evicted version, a deadline that covers its load: %v", err)
	}
	if got := a.unloaded(); !slices.Equal(got, []string{"idle@1", "used@1"}) {
		t.Fatalf("unloaded %v, want [idle@1 used@1]: the hot version and the young one stay", got)
	}
}

// Requests for a cold version share one load and wait for it.
func TestColdLoadShared(t *testing.T) {
	ev := &countingMetrics{}
	p, a := oneWorker(t, 1<<30, Config{Metrics: ev})
	gate := make(chan struct{})
	a.mu.Lock()
	a.gate = gate
	a.mu.Unlock()
	v := start(t, p, specOf(t, "c", "cold", "1MiB"))
	if a.loads.Load() != 0 {
		t.Fatal("a cold version was loaded at start")
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errc <- submit(v, 10*time.Second) })
	}
	testwait.Until(t, 10*time.Second, func() bool { return ev.waited.Load() == 8 }) // all of them wait
	close(gate)
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := a.loads.Load(); n != 1 {
		t.Fatalf("%d loads for 8 concurrent requests, want 1", n)
	}
}

// A request whose deadline is shorter than the load time is refused at
// once with cold_start and a Retry-After of the load time; the load goes on.
func TestColdStartRefused(t *testing.T) {
	ev := &countingMetrics{}
	p, a := oneWorker(t, 1<<30, Config{Metrics: ev})
	a.mu.Lock()
	a.gate = make(chan struct{}) // never ends within the test
	a.mu.Unlock()
	vs := specOf(t, "c", "cold", "1MiB")
	vs.LoadTime = 10 * time.Second
	v := start(t, p, vs)
	began := time.Now()
	err := submit(v, 200*time.Millisecond)
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != errs.ColdStart || e.RetryAfter != 10*time.Second {
		t.Fatalf("Submit = %v, want cold_start with Retry-After 10s", err)
	}
	if d := time.Since(began); d > 150*time.Millisecond {
		t.Fatalf("refused after %s: it must not wait", d)
	}
	testwait.Until(t, 10*time.Second, func() bool { return a.loads.Load() == 1 })
	if ev.refused.Load() != 1 {
		t.Fatalf("cold starts refused: %d", ev.refused.Load())
	}
}

// A failed load is remembered: requests get its reason, not a new load,
// until FailureMemory has passed.
func TestFailedLoadNotRetried(t *testing.T) {
	clk := newClock()
	p, a := oneWorker(t, 1<<30, Config{FailureMemory: 30 * time.Second, Now: clk.now})
	a.mu.Lock()
	a.loadErr = errs.New(errs.Internal, "load c@1: broken artifact")
	a.mu.Unlock()
	v := start(t, p, specOf(t, "c", "cold", "1MiB"))
	if err := submit(v, 5*time.Second); err == nil || !strings.Contains(err.Error(), "broken artifact") {
		t.Fatalf("first request: %v", err)
	}
	for range 20 {
		if err := submit(v, 5*time.Second); errs.CodeOf(err) != errs.NotReady || !strings.Contains(err.Error(), "broken artifact") {
			t.Fatalf("later request: %v", err)
		}
	}
	if n := a.loads.Load(); n != 1 {
		t.Fatalf("%d loads, want 1: a failed load is not retried in a loop", n)
	}
	a.mu.Lock()
	a.loadErr = nil
	a.mu.Unlock()
	clk.advance(29 * time.Second)
	if err := submit(v, 5*time.Second); errs.CodeOf(err) != errs.NotReady {
		t.Fatalf("inside the failure memory: %v", err)
	}
	clk.advance(time.Second)
	if err := submit(v, 5*time.Second); err != nil {
		t.Fatalf("after the failure memory: %v", err)
	}
}

// A version whose calls were in flight when its worker's process exited
// three times is quarantined: unloaded, refused with the reason, and the
// controller told.
func TestQuarantineAfterThreeExits(t *testing.T) {
	var got atomic.Value
	told := make(chan struct{})
	ev := &countingMetrics{}
	p, a := oneWorker(t, 1<<30, Config{Metrics: ev, OnQuarantine: func(model string, n int, why string) {
		got.Store(fmt.Sprintf("%s@%d: %s", model, n, why))
		close(told)
	}})
	v := start(t, p, specOf(t, "poison", "warm", "1MiB"))
	for exit := 1; exit <= 3; exit++ {
		hang := make(chan struct{})
		a.mu.Lock()
		a.hang = hang
		a.mu.Unlock()
		done := make(chan error, 1)
		go func() { done <- submit(v, 5*time.Second) }()
		testwait.Until(t, 10*time.Second, func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			cp := v.on["a"]
			return cp != nil && cp.inflight.Load() > 0
		})
		p.MarkDead("a", "process exited (test)")
		p.MarkDead("a", "process exited (test)") // once per session
		close(hang)
		<-done
		a.mu.Lock()
		a.hang = nil
		a.mu.Unlock()
		if exit < 3 {
			a.registerWith(t, p, int64(1+exit), 1<<30) // the restarted process: a new session
			testwait.Until(t, 10*time.Second, func() bool { return len(p.candidates(v, nil)) == 1 })
		}
	}
	select {
	case <-told:
	case <-time.After(5 * time.Second):
		t.Fatal("OnQuarantine not called")
	}
	want := "poison@1: quarantined: made its worker exit 3 times in 5m"
	if got.Load() != want {
		t.Fatalf("OnQuarantine got %q, want %q", got.Load(), want)
	}
	// The unload goes to the process that held it (here still reachable);
	// wait for it before the next registration replaces the connection.
	testwait.Until(t, 10*time.Second, func() bool { return slices.Contains(a.unloaded(), "poison@1") })
	a.registerWith(t, p, 9, 1<<30)
	err := submit(v, time.Second)
	if errs.CodeOf(err) != errs.NotReady || !strings.Contains(err.Error(), "quarantined") {
		t.Fatalf("after the quarantine: %v", err)
	}
	if n := a.loads.Load(); n != 3 {
		t.Fatalf("%d loads: a quarantined version is not loaded again", n)
	}
	if ev.quarantined.Load() != 1 {
		t.Fatalf("quarantines counted: %d", ev.quarantined.Load())
	}
}

// Nothing fits: a version too big for every worker fails with the reason.
func TestNoRoomFails(t *testing.T) {
	p, _ := oneWorker(t, 64<<20, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, _, err := p.Start(ctx, specOf(t, "big", "warm", "2GiB"))
	want := placement.NoRoom("big@1", []string{"a"}, 2<<30, 64<<20)
	if err == nil || err.Error() != want {
		t.Fatalf("Start = %v, want %q", err, want)
	}
}

type countingMetrics struct {
	loaded, evicted, waited, refused, quarantined atomic.Int64
	mu                                            sync.Mutex
	forgotten                                     []string
}

func (m *countingMetrics) VersionLoaded(string, string)  { m.loaded.Add(1) }
func (m *countingMetrics) VersionEvicted(string, string) { m.evicted.Add(1) }
func (m *countingMetrics) ColdStart(_, _, outcome string) {
	if outcome == "waited" {
		m.waited.Add(1)
	} else {
		m.refused.Add(1)
	}
}
func (m *countingMetrics) VersionQuarantined(string, string) { m.quarantined.Add(1) }
func (m *countingMetrics) WorkerMemory(string, int64, int64) {}
func (m *countingMetrics) ForgetWorker(id string) {
	m.mu.Lock()
	m.forgotten = append(m.forgotten, id)
	m.mu.Unlock()
}

// A report built before an eviction's unload ended still lists the
// victim: its memory left the accounting when the eviction was decided
// and is not counted again (seen in CI as 103 MiB "used" of 96).
func TestStaleReportNotCountedTwice(t *testing.T) {
	const mib = 1 << 20
	clk := newClock()
	p, a := oneWorker(t, 20*mib, Config{Now: clk.now, Placement: placement.Policy{MinResidency: time.Minute}})
	start(t, p, specOf(t, "one", "warm", "10MiB"))
	start(t, p, specOf(t, "two", "warm", "10MiB"))
	clk.advance(time.Minute)
	start(t, p, specOf(t, "three", "warm", "10MiB"))
	got := a.unloaded()
	if len(got) != 1 {
		t.Fatalf("unloaded %v, want one victim", got)
	}
	stale := &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1, MemoryBudgetBytes: 20 * mib}
	for _, m := range []string{"one", "two"} {
		stale.Versions = append(stale.Versions, &workerpb.VersionStatus{Model: m, Version: 1, State: "ready", ReadyReplicas: 1, MemoryBytes: 10 * mib})
	}
	if _, err := p.testBeat(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	if used := p.Workers()[0].MemoryUsed; used != 20*mib {
		t.Fatalf("used %d MiB after a stale report, want 20 (the victim %v counted once, not twice)", used>>20, got)
	}
	// A later report without the victim ends the exclusion; one that
	// lists a version the pool did not place counts it.
	var held []*workerpb.VersionStatus
	for _, m := range []string{"one", "two", "three"} {
		if m+"@1" != got[0] {
			held = append(held, &workerpb.VersionStatus{Model: m, Version: 1, State: "ready", ReadyReplicas: 1, MemoryBytes: 10 * mib})
		}
	}
	fresh := &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1, MemoryBudgetBytes: 20 * mib, Versions: slices.Clone(held)}
	if _, err := p.testBeat(t.Context(), fresh); err != nil {
		t.Fatal(err)
	}
	// Room for it (a budget is the registration's: the same process
	// registers again with a larger one): nothing is trimmed.
	if _, err := p.testRegister(t.Context(), &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1,
		MemoryBudgetBytes: 30 * mib, Versions: slices.Clone(held)}}); err != nil {
		t.Fatal(err)
	}
	fresh = &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1, Versions: append(slices.Clone(held),
		&workerpb.VersionStatus{Model: "other", Version: 1, State: "ready", MemoryBytes: 3 * mib})}
	if _, err := p.testBeat(t.Context(), fresh); err != nil {
		t.Fatal(err)
	}
	if used := p.Workers()[0].MemoryUsed; used != 23*mib {
		t.Fatalf("used %d MiB, want 23 (a version the pool did not place counts)", used>>20)
	}
}

// A load measured larger than its reservation that takes the worker over
// its budget evicts what may go for the excess.
func TestTrimAfterLargerMeasure(t *testing.T) {
	const mib = 1 << 20
	clk := newClock()
	p, a := oneWorker(t, 20*mib, Config{Now: clk.now, Placement: placement.Policy{MinResidency: time.Minute}})
	a.mu.Lock()
	a.measured = map[string]int64{"big": 15 * mib}
	a.mu.Unlock()
	start(t, p, specOf(t, "small", "warm", "10MiB"))
	clk.advance(time.Minute)
	start(t, p, specOf(t, "big", "warm", "10MiB")) // reserved 10, measured 15
	if used := p.Workers()[0].MemoryUsed; used > 20*mib {
		t.Fatalf("used %d MiB over the 20 MiB budget after the larger measure", used>>20)
	}
	testwait.UntilNil(t, 10*time.Second, func() error {
		if u := a.unloaded(); !slices.Equal(u, []string{"small@1"}) {
			return fmt.Errorf("unloaded %v, want [small@1]", u)
		}
		return nil
	})
}

// A cold request on a worker full of copies placed at start that nobody
// called gets room: placement evicts one (young as they are: no request
// paid for their loads) and loads the cold version; no cold_start.
func TestColdRequestEvictsIdleStartCopies(t *testing.T) {
	const mib = 1 << 20
	ev := &countingMetrics{}
	p, a := oneWorker(t, 30*mib, Config{Metrics: ev, Placement: placement.Policy{MinResidency: time.Hour}})
	for _, m := range []string{"w1", "w2", "w3"} {
		start(t, p, specOf(t, m, "warm", "10MiB"))
	}
	used := p.versions["w2@1"]
	if err := submit(used, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	cold := start(t, p, specOf(t, "cold", "cold", "10MiB"))
	if err := submit(cold, 5*time.Second); err != nil {
		t.Fatalf("cold request on a worker full of idle start copies: %v", err)
	}
	got := a.unloaded()
	if len(got) != 1 || got[0] == "w2@1" {
		t.Fatalf("unloaded %v, want one start copy nobody called (not w2@1, which served)", got)
	}
	if ev.refused.Load() != 0 || ev.evicted.Load() != 1 {
		t.Fatalf("%d cold_start refusals, %d evictions; want 0 and 1", ev.refused.Load(), ev.evicted.Load())
	}
	// The copy loaded on demand is now protected by the residency: the
	// next cold version evicts another start copy, not it.
	cold2 := start(t, p, specOf(t, "cold2", "cold", "10MiB"))
	if err := submit(cold2, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := a.unloaded(); len(got) != 2 || slices.Contains(got, "cold@1") || slices.Contains(got, "w2@1") {
		t.Fatalf("unloaded %v: the on-demand copy and the one that served stay", got)
	}
	if used := p.Workers()[0].MemoryUsed; used > 30*mib {
		t.Fatalf("used %d MiB of 30", used>>20)
	}
}

// A cold version whose load time nobody knows (no load measured, no hint,
// no load of its runtime yet) is not refused on an assumed figure: the
// request waits for as long as its deadline allows. Once one load was
// measured, that figure is the version's, and other versions of the
// runtime are estimated from their artifact size at its speed.
func TestColdLoadTimeMeasuredNotAssumed(t *testing.T) {
	ev := &countingMetrics{}
	p, a := oneWorker(t, 1<<30, Config{Metrics: ev})
	gate := make(chan struct{})
	a.mu.Lock()
	a.gate = gate
	a.mu.Unlock()
	vs := specOf(t, "c", "cold", "1MiB")
	vs.ArtifactBytes = 1000
	v := start(t, p, vs)
	p.mu.Lock()
	lt, src := p.loadTimeLocked(v)
	p.mu.Unlock()
	if src != placement.LoadUnknown || lt != 0 {
		t.Fatalf("before any load: %v (%s), want unknown", lt, src)
	}
	errc := make(chan error, 1)
	go func() { errc <- submit(v, 300*time.Millisecond) }()
	testwait.Until(t, 10*time.Second, func() bool { return ev.waited.Load() == 1 }) // it waits, not refused
	close(gate)
	if err := <-errc; err != nil {
		t.Fatalf("a 300 ms deadline for a load of unknown time: %v", err)
	}
	if ev.refused.Load() != 0 {
		t.Fatalf("%d refusals", ev.refused.Load())
	}
	p.mu.Lock()
	lt, src = p.loadTimeLocked(v)
	p.mu.Unlock()
	if src != placement.LoadMeasured || lt != time.Microsecond {
		t.Fatalf("after its load: %v (%s), want the measured 1µs", lt, src)
	}
	other := specOf(t, "d", "cold", "1MiB")
	other.ArtifactBytes = 3000
	w := start(t, p, other)
	p.mu.Lock()
	lt, src = p.loadTimeLocked(w)
	p.mu.Unlock()
	if src != placement.LoadEstimated || lt != time.Millisecond { // 3 µs at 1000 B/µs, at least 1 ms
		t.Fatalf("another version of the runtime: %v (%s), want estimated from its size", lt, src)
	}
}

// A worker that refuses a load for its budget (it measured more than the
// pool's accounting said) does not fail the version: the pool counts the
// worker full, evicts what may go there and places the load again, and
// the waiting request is served.
func TestLoadRefusedForBudgetPlacedAgain(t *testing.T) {
	const mib = 1 << 20
	p, a := oneWorker(t, 20*mib, Config{Placement: placement.Policy{MinResidency: time.Hour}})
	start(t, p, specOf(t, "idle", "warm", "10MiB"))
	a.mu.Lock()
	a.refuse = 1
	a.mu.Unlock()
	cold := start(t, p, specOf(t, "cold", "cold", "10MiB"))
	if err := submit(cold, 5*time.Second); err != nil {
		t.Fatalf("cold request whose first load was refused for the budget: %v", err)
	}
	if got := a.unloaded(); !slices.Equal(got, []string{"idle@1"}) {
		t.Fatalf("unloaded %v, want [idle@1]: evicted for the load placed again", got)
	}
	p.mu.Lock()
	failed := cold.failed
	p.mu.Unlock()
	if failed != "" {
		t.Fatalf("the refusal was taken for the version's failure: %q", failed)
	}
}

// A version's stats carry the cost model its workers report (the one
// fitted on the most batches), as the in-process stats do: sluice plan
// reads it through the same API.
func TestStatsCarryTheWorkersCostModel(t *testing.T) {
	p, a := oneWorker(t, 1<<30, Config{})
	v := start(t, p, specOf(t, "m", "warm", "1MiB"))
	if c := v.Stats().Cost; c != (serving.CostModel{}) {
		t.Fatalf("before any report: cost %+v", c)
	}
	st := &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1, MemoryBudgetBytes: 1 << 30, Versions: []*workerpb.VersionStatus{
		{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1, Batches: 40, CostANs: 2e6, CostBNs: 3e5, MaxBatch: 8},
	}}
	if _, err := p.testBeat(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	got := v.Stats()
	if got.Cost != (serving.CostModel{A: 2 * time.Millisecond, B: 300 * time.Microsecond}) || got.Batches != 40 {
		t.Fatalf("stats %+v, want the reported cost 2ms + 0.3ms·n over 40 batches", got)
	}
}
