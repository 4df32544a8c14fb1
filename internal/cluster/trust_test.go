package cluster

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/testwait"
	"github.com/sluiceml/sluice/internal/workerpb"
)

func TestAdvance(t *testing.T) {
	cases := []struct {
		name                 string
		prev, reported, step int64
		want                 int64
	}{
		{"grows", 3, 5, 10, 5},
		{"same", 5, 5, 10, 5},
		{"drop ignored", 5, 0, 10, 5},
		{"negative ignored", 5, math.MinInt64, 10, 5},
		{"growth clamped", 5, math.MaxInt64, 10, 15},
		{"from zero clamped", 0, math.MaxInt64, maxCrashStep, maxCrashStep},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := advance(c.prev, c.reported, c.step); got != c.want {
				t.Errorf("advance(%d, %d, %d) = %d, want %d", c.prev, c.reported, c.step, got, c.want)
			}
		})
	}
}

func TestClampText(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"}, // é is 2 bytes: not cut in half
		{"", 0, ""},
	}
	for _, c := range cases {
		if got := clampText(c.in, c.n); got != c.want {
			t.Errorf("clampText(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestClampWorker(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 10_000)
	cases := []struct {
		name string
		in   *workerpb.WorkerStatus
		want *workerpb.WorkerStatus
	}{
		{"sane", &workerpb.WorkerStatus{RssBytes: 5, CacheBytes: 6, MemoryBudgetBytes: 7, StartedUnixMs: now.UnixMilli(), Build: "v1"},
			&workerpb.WorkerStatus{RssBytes: 5, CacheBytes: 6, MemoryBudgetBytes: 7, StartedUnixMs: now.UnixMilli(), Build: "v1"}},
		{"negative", &workerpb.WorkerStatus{RssBytes: -1, CacheBytes: math.MinInt64, MemoryBudgetBytes: -5, StartedUnixMs: math.MinInt64},
			&workerpb.WorkerStatus{}},
		{"huge", &workerpb.WorkerStatus{RssBytes: math.MaxInt64, CacheBytes: math.MaxInt64, MemoryBudgetBytes: math.MaxInt64, StartedUnixMs: math.MaxInt64},
			&workerpb.WorkerStatus{RssBytes: maxMemory, CacheBytes: maxMemory, MemoryBudgetBytes: maxMemory}},
		{"start 11 years ago", &workerpb.WorkerStatus{StartedUnixMs: now.Add(-11 * 365 * 24 * time.Hour).UnixMilli()}, &workerpb.WorkerStatus{}},
		{"texts", &workerpb.WorkerStatus{Build: long, MemoryBudgetSource: long},
			&workerpb.WorkerStatus{Build: long[:maxText], MemoryBudgetSource: long[:maxText]}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := c.in
			clampWorker(st, now)
			if st.RssBytes != c.want.RssBytes || st.CacheBytes != c.want.CacheBytes || st.MemoryBudgetBytes != c.want.MemoryBudgetBytes ||
				st.StartedUnixMs != c.want.StartedUnixMs || st.Build != c.want.Build || st.MemoryBudgetSource != c.want.MemoryBudgetSource {
				t.Errorf("got %+v, want %+v", st, c.want)
			}
		})
	}
}

func TestClampVersion(t *testing.T) {
	cases := []struct {
		name string
		in   *workerpb.VersionStatus
		want *workerpb.VersionStatus
	}{
		{"sane", &workerpb.VersionStatus{State: "ready", ReadyReplicas: 2, QueuedInstances: 5, MemoryBytes: 10, CostANs: 100, MaxBatch: 8},
			&workerpb.VersionStatus{State: "ready", ReadyReplicas: 2, QueuedInstances: 5, MemoryBytes: 10, CostANs: 100, MaxBatch: 8}},
		{"negative", &workerpb.VersionStatus{State: "failed", ReadyReplicas: -1, RestartingReplicas: -1, QueuedInstances: math.MinInt64,
			InflightBatches: -3, Batches: -1, Rows: -1, Crashes: math.MinInt64, ExpiredInQueue: -1, MemoryBytes: -1, ReplicaMemoryBytes: -1,
			CostANs: -1, CostBNs: -1, MaxBatch: -1},
			&workerpb.VersionStatus{State: "failed"}},
		{"huge", &workerpb.VersionStatus{State: "ready", ReadyReplicas: math.MaxInt32, QueuedInstances: math.MaxInt64, InflightBatches: math.MaxInt32,
			MemoryBytes: math.MaxInt64, CostANs: math.MaxInt64, CostBNs: math.MaxInt64, MaxBatch: math.MaxInt32},
			&workerpb.VersionStatus{State: "ready", ReadyReplicas: maxReplicas, QueuedInstances: maxQueued, InflightBatches: maxInflight,
				MemoryBytes: maxMemory, CostANs: maxCost, CostBNs: maxCost, MaxBatch: maxBatch}},
		{"unknown state", &workerpb.VersionStatus{State: strings.Repeat("r", 100)}, &workerpb.VersionStatus{State: "unknown"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := c.in
			clampVersion(vs)
			if got, want := fmt.Sprint(reportedOf(vs), vs.RestartingReplicas, vs.ReplicaMemoryBytes), fmt.Sprint(reportedOf(c.want), c.want.RestartingReplicas, c.want.ReplicaMemoryBytes); got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

// report sends a heartbeat of worker f (pid) listing versions.
func report(t *testing.T, p *Pool, f *fakeWorker, pid int64, versions ...*workerpb.VersionStatus) {
	t.Helper()
	if resp, err := p.testBeat(t.Context(), &workerpb.WorkerStatus{Id: f.id, Address: f.addr, Pid: pid, Versions: versions}); err != nil || !resp.Known {
		t.Fatalf("heartbeat of %s: %v %v", f.id, resp, err)
	}
}

func ready(model string) *workerpb.VersionStatus {
	return &workerpb.VersionStatus{Model: model, Version: 1, State: "ready", ReadyReplicas: 1}
}

// A heartbeat naming 50,000 versions the pool never placed there makes no
// slot and no map entry; what it says of them is only memory.
func TestUnplacedVersionsIgnored(t *testing.T) {
	p, v, a, _ := twoWorkers(t)
	for range 3 {
		junk := []*workerpb.VersionStatus{ready("m")} // the request is the pool's: a new one each beat
		for i := range 50_000 {
			junk = append(junk, &workerpb.VersionStatus{Model: fmt.Sprintf("junk%05d", i), Version: 1, State: "failed", Reason: "x", MemoryBytes: 1})
		}
		report(t, p, a, 1, junk...)
	}
	p.mu.Lock()
	w := p.workers["a"]
	sizes := []int{len(w.slots), len(w.ready), len(w.failed), len(w.busy), len(w.unloading), len(w.status.Versions)}
	foreign := w.foreign
	p.mu.Unlock()
	for i, n := range sizes {
		if n > 1 {
			t.Errorf("map %d of worker a holds %d entries after reports of 50,000 unplaced versions, want at most 1", i, n)
		}
	}
	if foreign != maxReportedVersions-1 {
		t.Errorf("foreign memory %d, want %d (the entries read, the rest ignored)", foreign, maxReportedVersions-1)
	}
	if len(routed(v)) != 2 {
		t.Errorf("m@1 routed to %v after the junk reports", routed(v))
	}
}

// Forged counters (MaxInt64, then 0, then MaxInt64 again) count a bounded
// number of crashes per beat, and a drop is never counted again.
func TestForgedCountersBounded(t *testing.T) {
	p := newTestPool(Config{Known: []string{"a"}, HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	a := startFake(t, "a")
	a.register(t, p, 1)
	obs := &countingObserver{}
	vs := testSpec(t)
	vs.Observer = obs
	if _, _, err := p.Start(t.Context(), vs); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		c := int64(math.MaxInt64)
		if i%2 == 1 {
			c = 0
		}
		report(t, p, a, 1, &workerpb.VersionStatus{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1, Crashes: c, ExpiredInQueue: c, Batches: c, Rows: c})
	}
	if c, e := obs.crashes.Load(), obs.expired.Load(); c != 5*maxCrashStep || e != 5*maxExpiredStep {
		t.Errorf("crashes %d expired %d after 5 forged rises, want %d and %d", c, e, 5*maxCrashStep, 5*maxExpiredStep)
	}
	ws := p.Workers()
	if got := ws[0].Versions[0]; got.Crashes != 5*maxCrashStep || got.Batches != 5*maxBatchesStep || got.Rows != 5*maxRowsStep {
		t.Errorf("listed %+v", got)
	}
}

// Out-of-range figures are clamped: a negative queue never wins the pick
// of two, a negative memory counts nothing, the start time is dropped.
func TestOutOfRangeFiguresClamped(t *testing.T) {
	p, v, a, b := twoWorkers(t)
	report(t, p, a, 1, &workerpb.VersionStatus{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1, QueuedInstances: math.MinInt64, MemoryBytes: -1 << 40})
	report(t, p, b, 2, &workerpb.VersionStatus{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1, QueuedInstances: 0})
	for _, c := range p.candidates(v, nil) {
		if c.queued < 0 || c.load < 0 {
			t.Errorf("worker %s: queued %d load %d", c.w.id, c.queued, c.load)
		}
	}
	if _, err := p.testBeat(t.Context(), &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1, StartedUnixMs: math.MinInt64, RssBytes: -1,
		Versions: []*workerpb.VersionStatus{ready("m")}}); err != nil {
		t.Fatal(err)
	}
	for _, w := range p.Workers() {
		if w.ID == "a" && (!w.Started.IsZero() || w.RSS != 0 || w.MemoryUsed < 0) {
			t.Errorf("worker a listed as %+v", w)
		}
	}
}

// A heartbeat cannot change a worker's budget: a forged budget of one
// byte evicts nothing.
func TestHeartbeatBudgetIgnored(t *testing.T) {
	const mib = 1 << 20
	p, a := oneWorker(t, 100*mib, Config{})
	start(t, p, specOf(t, "one", "warm", "10MiB"))
	if _, err := p.testBeat(t.Context(), &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1, MemoryBudgetBytes: 1,
		Versions: []*workerpb.VersionStatus{ready("one")}}); err != nil {
		t.Fatal(err)
	}
	if u := a.unloaded(); len(u) != 0 {
		t.Errorf("a heartbeat's budget of 1 byte unloaded %v", u)
	}
	if b := p.Workers()[0].Budget; b != 100*mib {
		t.Errorf("budget %d, want the registration's %d", b, 100*mib)
	}
}

// A copy the pool placed that its worker calls failed after its load
// answered is placed again on another worker; the worker keeps its other
// copies and the version keeps serving.
func TestFailedReportPlacedElsewhere(t *testing.T) {
	p := newTestPool(Config{Known: []string{"a", "b", "c"}, HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	fs := map[string]*fakeWorker{}
	for i, id := range []string{"a", "b", "c"} {
		fs[id] = startFake(t, id)
		fs[id].register(t, p, int64(i+1))
	}
	v := start(t, p, testSpec(t))
	testwait.Until(t, 10*time.Second, func() bool { return len(routed(v)) == 2 })
	holders := routed(v)
	bad := fs[holders[0]]
	pid := map[string]int64{"a": 1, "b": 2, "c": 3}
	report(t, p, bad, pid[bad.id], &workerpb.VersionStatus{Model: "m", Version: 1, State: "failed", Reason: "forged"})
	testwait.Until(t, 10*time.Second, func() bool {
		r := routed(v)
		return len(r) == 2 && r[0] != bad.id && r[1] != bad.id
	})
	if err := submit(v, 5*time.Second); err != nil {
		t.Errorf("submit after the failed report: %v", err)
	}
}

// A copy whose Unload came from elsewhere is gone from the worker's
// reports: after two of them the pool places it again.
func TestMissingCopyPlacedAgain(t *testing.T) {
	p, a := oneWorker(t, 0, Config{})
	v := start(t, p, testSpec(t))
	testwait.Until(t, 10*time.Second, func() bool { return len(routed(v)) == 1 })
	loads := a.loads.Load()
	report(t, p, a, 1, ready("m"))
	report(t, p, a, 1) // one report without it: maybe built before its load
	if a.loads.Load() != loads || len(routed(v)) != 1 {
		t.Fatalf("placed again after one report without it")
	}
	report(t, p, a, 1)
	testwait.Until(t, 10*time.Second, func() bool { return a.loads.Load() == loads+1 && len(routed(v)) == 1 })
	if err := submit(v, 5*time.Second); err != nil {
		t.Errorf("submit after the copy was placed again: %v", err)
	}
}

// Which entries of a report apply, and what they do: only the version
// the pool placed on the worker gets a slot; its state says whether it
// takes traffic; an unplaced one is memory only.
func TestWhichEntriesApply(t *testing.T) {
	cases := []struct {
		name       string
		entry      *workerpb.VersionStatus
		routed     bool // m@1 routed to a after the report
		slotOther  bool // a slot was made for other@1
		foreign    int64
		copyOfMAtA bool // the pool still counts m@1's copy on a
	}{
		{"placed, ready", &workerpb.VersionStatus{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1}, true, false, 0, true},
		{"placed, no ready replica", &workerpb.VersionStatus{Model: "m", Version: 1, State: "ready"}, false, false, 0, true},
		{"placed, unloading", &workerpb.VersionStatus{Model: "m", Version: 1, State: "unloading"}, false, false, 0, true},
		{"placed, unknown state", &workerpb.VersionStatus{Model: "m", Version: 1, State: "weird", ReadyReplicas: 1}, false, false, 0, true},
		{"placed, failed after its load", &workerpb.VersionStatus{Model: "m", Version: 1, State: "failed"}, false, false, 0, false},
		{"not placed", &workerpb.VersionStatus{Model: "other", Version: 1, State: "ready", ReadyReplicas: 1, MemoryBytes: 7}, true, false, 7, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, a := oneWorker(t, 0, Config{})
			v := start(t, p, testSpec(t))
			testwait.Until(t, 10*time.Second, func() bool { return len(routed(v)) == 1 })
			entries := []*workerpb.VersionStatus{c.entry}
			if c.entry.Model != "m" {
				entries = append(entries, ready("m"))
			}
			report(t, p, a, 1, entries...)
			p.mu.Lock()
			w := p.workers["a"]
			_, slot := w.slots["other@1"]
			foreign, held := w.foreign, v.on["a"] != nil
			p.mu.Unlock()
			if got := len(routed(v)) == 1; got != c.routed {
				t.Errorf("routed %v, want %v", got, c.routed)
			}
			if slot != c.slotOther || foreign != c.foreign {
				t.Errorf("slot for other@1 %v, foreign %d; want %v, %d", slot, foreign, c.slotOther, c.foreign)
			}
			if held != c.copyOfMAtA {
				t.Errorf("m@1's copy on a counted %v, want %v", held, c.copyOfMAtA)
			}
		})
	}
}
