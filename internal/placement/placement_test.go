package placement

import (
	"slices"
	"testing"
	"time"
)

const mib = 1 << 20

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// idle is an evictable resident: loaded an hour ago, unused for mins
// minutes, loadTime 1s, rate rps.
func idle(key string, mem int64, rps float64, mins int) Resident {
	return Resident{Key: key, Memory: mem, Replicas: 1, LoadedAt: t0.Add(-time.Hour),
		LastUsed: t0.Add(-time.Duration(mins) * time.Minute), LoadTime: time.Second, Rate: rps}
}

func with(r Resident, f func(*Resident)) Resident { f(&r); return r }

func TestReloadCost(t *testing.T) {
	if c := ReloadCost(Resident{LoadTime: 500 * time.Millisecond, Rate: 4}); c != 2 {
		t.Fatalf("ReloadCost = %v, want 2", c)
	}
	if c := ReloadCost(Resident{LoadTime: time.Second, Rate: -1}); c != 0 {
		t.Fatalf("negative rate: ReloadCost = %v, want 0", c)
	}
}

func TestVictims(t *testing.T) {
	tests := []struct {
		name   string
		loaded []Resident
		need   int64
		policy Policy
		want   []string
		freed  int64
		enough bool
	}{
		{name: "nothing needed", loaded: []Resident{idle("a@1", mib, 0, 1)}, need: 0, want: nil, enough: true},
		{name: "cheapest per byte first", need: 100 * mib, enough: true, freed: 100 * mib,
			// a: 10 req/s × 1s / 100 MiB; b: 1 req/s × 1s / 100 MiB (cheaper)
			loaded: []Resident{idle("a@1", 100*mib, 10, 1), idle("b@1", 100*mib, 1, 1)}, want: []string{"b@1"}},
		{name: "per byte, not per version", need: 50 * mib, enough: true, freed: 400 * mib,
			// big: 4 req/s over 400 MiB = 0.01/MiB; small: 1 req/s over 50 MiB = 0.02/MiB
			loaded: []Resident{idle("small@1", 50*mib, 1, 1), idle("big@1", 400*mib, 4, 1)}, want: []string{"big@1"}},
		{name: "slow loads cost more", need: 10 * mib, enough: true, freed: 10 * mib,
			loaded: []Resident{with(idle("slow@1", 10*mib, 1, 1), func(r *Resident) { r.LoadTime = 30 * time.Second }), idle("quick@1", 10*mib, 1, 1)},
			want:   []string{"quick@1"}},
		{name: "idle ties go least recently used first", need: 10 * mib, enough: true, freed: 10 * mib,
			loaded: []Resident{idle("recent@1", 10*mib, 0, 1), idle("old@1", 10*mib, 0, 30)}, want: []string{"old@1"}},
		{name: "several until enough", need: 25 * mib, enough: true, freed: 30 * mib,
			loaded: []Resident{idle("a@1", 10*mib, 0, 3), idle("b@1", 10*mib, 0, 2), idle("c@1", 10*mib, 0, 1), idle("d@1", 10*mib, 5, 1)},
			want:   []string{"a@1", "b@1", "c@1"}},
		{name: "no more than needed", need: 60 * mib, enough: true, freed: 60 * mib,
			// greedy takes a (cheapest per byte), then b; b alone suffices, so a stays
			loaded: []Resident{idle("a@1", 10*mib, 0, 9), idle("b@1", 60*mib, 0.1, 1)}, want: []string{"b@1"}},
		{name: "hot never", need: 10 * mib, freed: 0,
			loaded: []Resident{with(idle("hot@1", 100*mib, 0, 60), func(r *Resident) { r.Hot = true })}},
		{name: "busy never", need: 10 * mib, freed: 5 * mib,
			loaded: []Resident{with(idle("busy@1", 100*mib, 0, 60), func(r *Resident) { r.Busy = true }), idle("x@1", 5*mib, 0, 1)}},
		{name: "rollback target never", need: 10 * mib,
			loaded: []Resident{with(idle("prev@1", 100*mib, 0, 60), func(r *Resident) { r.RollbackTarget = true })}},
		{name: "young never (anti-thrash)", need: 10 * mib,
			loaded: []Resident{with(idle("new@1", 100*mib, 0, 0), func(r *Resident) { r.LoadedAt = t0.Add(-time.Minute) })}},
		{name: "young by a custom residency", need: 10 * mib, policy: Policy{MinResidency: 2 * time.Hour},
			loaded: []Resident{idle("a@1", 100*mib, 0, 0)}},
		{name: "old enough at the residency", need: 10 * mib, enough: true, freed: 100 * mib, want: []string{"a@1"},
			loaded: []Resident{with(idle("a@1", 100*mib, 0, 0), func(r *Resident) { r.LoadedAt = t0.Add(-DefaultMinResidency) })}},
		{name: "zero memory frees nothing", need: 1, loaded: []Resident{idle("z@1", 0, 0, 1)}},
		{name: "cannot free enough: nothing evicted", need: 30 * mib, freed: 20 * mib,
			loaded: []Resident{idle("a@1", 10*mib, 0, 1), idle("b@1", 10*mib, 0, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.policy.Victims(tt.loaded, tt.need, t0)
			if !slices.Equal(got.Victims, tt.want) || got.Freed != tt.freed || got.Enough != tt.enough {
				t.Fatalf("Victims = %+v, want victims %v freed %d enough %v", got, tt.want, tt.freed, tt.enough)
			}
		})
	}
}

func TestKeep(t *testing.T) {
	var p Policy
	r := idle("a@1", mib, 0, 1)
	for _, tt := range []struct {
		r    Resident
		want string
	}{
		{r, ""},
		{with(r, func(r *Resident) { r.Hot = true }), KeepHot},
		{with(r, func(r *Resident) { r.Busy = true }), KeepBusy},
		{with(r, func(r *Resident) { r.RollbackTarget = true }), KeepRollback},
		{with(r, func(r *Resident) { r.LoadedAt = t0 }), KeepYoung},
		// Ahead of traffic, a young copy stays whether it served or not.
		{with(r, func(r *Resident) { r.LoadedAt, r.LastUsed = t0, time.Time{} }), KeepYoung},
		{with(r, func(r *Resident) { r.Memory = 0 }), KeepEmpty},
	} {
		if got := p.Keep(tt.r, t0); got != tt.want {
			t.Errorf("Keep(%+v) = %q, want %q", tt.r, got, tt.want)
		}
	}
}

// For a request's load the residency protects only copies that serve.
func TestKeepForRequest(t *testing.T) {
	var p Policy
	start := Resident{Key: "a@1", Memory: mib, Replicas: 1, LoadedAt: t0.Add(-time.Second)} // placed at start, never called
	for _, tt := range []struct {
		name string
		r    Resident
		want string
	}{
		{"a young start copy nobody called may go", start, ""},
		{"a young copy that served stays", with(start, func(r *Resident) { r.LastUsed = t0 }), KeepYoung},
		{"a young copy loaded on demand stays before its first call", with(start, func(r *Resident) { r.OnDemand = true }), KeepYoung},
		{"hot still stays", with(start, func(r *Resident) { r.Hot = true }), KeepHot},
		{"a rollback target still stays", with(start, func(r *Resident) { r.RollbackTarget = true }), KeepRollback},
	} {
		if got := p.KeepFor(tt.r, t0, true); got != tt.want {
			t.Errorf("%s: KeepFor = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := p.KeepFor(start, t0, false); got != KeepYoung {
		t.Errorf("ahead of traffic: KeepFor = %q, want %q (start placements do not push each other out)", got, KeepYoung)
	}
}

func TestChoose(t *testing.T) {
	w := func(id string, budget, used int64, loaded ...Resident) Worker {
		return Worker{ID: id, Budget: budget, Used: used, Loaded: loaded}
	}
	ranked := []string{"w3", "w1", "w4", "w2"}
	tests := []struct {
		name     string
		req      Request
		workers  []Worker
		want     []Assignment
		size     int
		grown    []string
		unplaced int
	}{
		{name: "one replica: the freest of the shard",
			req:     Request{Key: "m@1", Memory: 10 * mib, Replicas: 1, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w3", 100*mib, 80*mib), w("w1", 100*mib, 10*mib), w("w4", 1000*mib, 0), w("w2", 1000*mib, 0)},
			want:    []Assignment{{Worker: "w1", Replicas: 1}}, size: 2},
		{name: "shard order breaks ties",
			req:     Request{Key: "m@1", Memory: 10 * mib, Replicas: 1, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w1", 100*mib, 0), w("w3", 100*mib, 0)},
			want:    []Assignment{{Worker: "w3", Replicas: 1}}, size: 2},
		{name: "replicas spread over the shard",
			req:     Request{Key: "m@1", Memory: 10 * mib, Replicas: 3, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w3", 100*mib, 0), w("w1", 100*mib, 0)},
			want:    []Assignment{{Worker: "w3", Replicas: 2}, {Worker: "w1", Replicas: 1}}, size: 2},
		{name: "existing replicas count in the spread",
			req: Request{Key: "m@1", Memory: 10 * mib, Replicas: 1, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w3", 100*mib, 10*mib, Resident{Key: "m@1", Memory: 10 * mib, Replicas: 1, LoadedAt: t0}),
				w("w1", 100*mib, 50*mib)},
			want: []Assignment{{Worker: "w1", Replicas: 1}}, size: 2},
		{name: "room without eviction beats spread",
			req: Request{Key: "m@1", Memory: 40 * mib, Replicas: 2, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w3", 100*mib, 0),
				w("w1", 100*mib, 90*mib, idle("x@1", 90*mib, 0, 10))},
			want: []Assignment{{Worker: "w3", Replicas: 2}}, size: 2},
		{name: "evict when no room, only the missing bytes",
			req: Request{Key: "m@1", Memory: 50 * mib, Replicas: 1, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w3", 100*mib, 90*mib, idle("a@1", 30*mib, 5, 1), idle("b@1", 30*mib, 0, 1), idle("c@1", 30*mib, 0, 20)),
				w("w1", 100*mib, 100*mib, with(idle("hot@1", 100*mib, 0, 1), func(r *Resident) { r.Hot = true }))},
			want: []Assignment{{Worker: "w3", Replicas: 1, Evict: []string{"c@1", "b@1"}}}, size: 2},
		{name: "the version itself is never a victim",
			req:     Request{Key: "m@1", Memory: 50 * mib, Replicas: 1, Ranked: ranked, ShardSize: 1},
			workers: []Worker{w("w3", 100*mib, 60*mib, idle("m@1", 60*mib, 0, 60)), w("w1", 100*mib, 0)},
			want:    []Assignment{{Worker: "w1", Replicas: 1}}, size: 2, grown: []string{"w1"}},
		{name: "grows only when the shard cannot hold it even after eviction",
			req: Request{Key: "m@1", Memory: 50 * mib, Replicas: 1, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w3", 100*mib, 100*mib, with(idle("busy@1", 100*mib, 0, 1), func(r *Resident) { r.Busy = true })),
				w("w1", 40*mib, 0), w("w4", 100*mib, 0), w("w2", 1000*mib, 0)},
			want: []Assignment{{Worker: "w4", Replicas: 1}}, size: 3, grown: []string{"w4"}},
		{name: "a down worker is skipped in the growth",
			req:     Request{Key: "m@1", Memory: 50 * mib, Replicas: 1, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w3", 10*mib, 0), w("w1", 10*mib, 0), w("w2", 100*mib, 0)},
			want:    []Assignment{{Worker: "w2", Replicas: 1}}, size: 4, grown: []string{"w4", "w2"}},
		{name: "nowhere at all",
			req:     Request{Key: "m@1", Memory: 500 * mib, Replicas: 2, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w3", 100*mib, 0), w("w1", 100*mib, 0), w("w4", 100*mib, 0), w("w2", 100*mib, 0)},
			size:    4, grown: []string{"w4", "w2"}, unplaced: 2},
		{name: "partly placed after growing",
			req:     Request{Key: "m@1", Memory: 60 * mib, Replicas: 3, Ranked: ranked, ShardSize: 1},
			workers: []Worker{w("w3", 100*mib, 0), w("w1", 100*mib, 0)},
			want:    []Assignment{{Worker: "w3", Replicas: 1}, {Worker: "w1", Replicas: 1}}, size: 4, grown: []string{"w1", "w4", "w2"}, unplaced: 1},
		{name: "an over-committed worker takes nothing without eviction",
			req:     Request{Key: "m@1", Memory: 10 * mib, Replicas: 1, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w3", 100*mib, 120*mib, idle("a@1", 40*mib, 0, 1)), w("w1", 100*mib, 95*mib, idle("b@1", 95*mib, 0, 1))},
			want:    []Assignment{{Worker: "w1", Replicas: 1, Evict: []string{"b@1"}}}, size: 2},
		{name: "where both must evict, the cheaper eviction",
			req:     Request{Key: "m@1", Memory: 10 * mib, Replicas: 1, Ranked: ranked, ShardSize: 2},
			workers: []Worker{w("w3", 100*mib, 120*mib, idle("a@1", 40*mib, 0, 1)), w("w1", 100*mib, 95*mib, idle("b@1", 95*mib, 3, 1))},
			want:    []Assignment{{Worker: "w3", Replicas: 1, Evict: []string{"a@1"}}}, size: 2},
		{name: "admission: a colder request does not displace a hotter resident",
			req:     Request{Key: "m@1", Memory: 30 * mib, Replicas: 1, Ranked: []string{"w1"}, ShardSize: 1, Rate: 2.5},
			workers: []Worker{w("w1", 30*mib, 30*mib, idle("a@1", 30*mib, 5, 1))},
			size:    1, unplaced: 1},
		{name: "admission: a hotter request displaces a colder resident",
			req:     Request{Key: "m@1", Memory: 30 * mib, Replicas: 1, Ranked: []string{"w1"}, ShardSize: 1, Rate: 10},
			workers: []Worker{w("w1", 30*mib, 30*mib, idle("a@1", 30*mib, 5, 1))},
			want:    []Assignment{{Worker: "w1", Replicas: 1, Evict: []string{"a@1"}}}, size: 1},
		{name: "admission: frequency, not size: a small rarely used request does not displace a big hot one",
			// per byte the small one is worth more (1 req/s over 4 MiB vs 5 over 300 MiB); it is called less
			req:     Request{Key: "m@1", Memory: 4 * mib, Replicas: 1, Ranked: []string{"w1"}, ShardSize: 1, Rate: 1},
			workers: []Worker{w("w1", 300*mib, 300*mib, idle("big@1", 300*mib, 5, 1))},
			size:    1, unplaced: 1},
		{name: "admission: among those it displaces, the cheapest to reload per byte go",
			req:     Request{Key: "m@1", Memory: 10 * mib, Replicas: 1, Ranked: []string{"w1"}, ShardSize: 1, Rate: 3},
			workers: []Worker{w("w1", 30*mib, 30*mib, idle("hotter@1", 10*mib, 4, 1), idle("warm@1", 10*mib, 2, 1), idle("cool@1", 10*mib, 1, 1))},
			want:    []Assignment{{Worker: "w1", Replicas: 1, Evict: []string{"cool@1"}}}, size: 1},
		{name: "admission: a little more is not enough (hysteresis, no ping-pong)",
			req:     Request{Key: "m@1", Memory: 30 * mib, Replicas: 1, Ranked: []string{"w1"}, ShardSize: 1, Rate: 7},
			workers: []Worker{w("w1", 30*mib, 30*mib, idle("a@1", 30*mib, 5, 1))},
			size:    1, unplaced: 1},
		{name: "admission: a priceless (hot) request displaces what may go",
			req:     Request{Key: "m@1", Memory: 30 * mib, Replicas: 1, Ranked: []string{"w1"}, ShardSize: 1, Rate: Priceless},
			workers: []Worker{w("w1", 30*mib, 30*mib, idle("a@1", 30*mib, 500, 1))},
			want:    []Assignment{{Worker: "w1", Replicas: 1, Evict: []string{"a@1"}}}, size: 1},
		{name: "zero replicas", req: Request{Key: "m@1", Memory: mib, Ranked: ranked, ShardSize: 2}, size: 2},
		{name: "shard larger than the fleet",
			req:     Request{Key: "m@1", Memory: mib, Replicas: 1, Ranked: []string{"w1"}, ShardSize: 3},
			workers: []Worker{w("w1", 100*mib, 0)},
			want:    []Assignment{{Worker: "w1", Replicas: 1}}, size: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Policy{}.Choose(tt.req, tt.workers, t0)
			if !equalAssignments(got.Assignments, tt.want) || got.ShardSize != tt.size || !slices.Equal(got.Grown, tt.grown) || got.Unplaced != tt.unplaced {
				t.Fatalf("Choose = %+v\nwant assignments %+v, shard size %d, grown %v, unplaced %d", got, tt.want, tt.size, tt.grown, tt.unplaced)
			}
		})
	}
}

func equalAssignments(a, b []Assignment) bool {
	return slices.EqualFunc(a, b, func(x, y Assignment) bool {
		return x.Worker == y.Worker && x.Replicas == y.Replicas && slices.Equal(x.Evict, y.Evict)
	})
}

func TestPoison(t *testing.T) {
	ago := func(d ...time.Duration) []time.Time {
		out := make([]time.Time, len(d))
		for i, x := range d {
			out[i] = t0.Add(-x)
		}
		return out
	}
	tests := []struct {
		name  string
		q     Quarantine
		exits []time.Time
		want  bool
		n     int
	}{
		{name: "none", want: false, n: 0},
		{name: "two is not yet", exits: ago(time.Minute, 2*time.Minute), n: 2},
		{name: "three in five minutes", exits: ago(0, time.Minute, 4*time.Minute), want: true, n: 3},
		{name: "order does not matter", exits: ago(4*time.Minute, 0, time.Minute), want: true, n: 3},
		{name: "old exits are forgotten", exits: ago(time.Minute, 2*time.Minute, 5*time.Minute, time.Hour), n: 2},
		{name: "the window is open at its old end", exits: ago(0, time.Second, 5*time.Minute), n: 2},
		{name: "future exits count as now", exits: []time.Time{t0.Add(time.Second), t0, t0.Add(-time.Second)}, want: true, n: 3},
		{name: "custom M and T", q: Quarantine{Exits: 2, Window: time.Minute}, exits: ago(10*time.Second, 50*time.Second), want: true, n: 2},
		{name: "custom T excludes", q: Quarantine{Exits: 2, Window: time.Minute}, exits: ago(10*time.Second, 70*time.Second), n: 1},
		{name: "one exit with M=1", q: Quarantine{Exits: 1}, exits: ago(0), want: true, n: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n := tt.q.Poison(tt.exits, t0)
			if got != tt.want || n != tt.n {
				t.Fatalf("Poison = %v, %d; want %v, %d", got, n, tt.want, tt.n)
			}
		})
	}
}

func TestEstimate(t *testing.T) {
	for _, tt := range []struct {
		runtime       string
		art, override int64
		want          int64
	}{
		{"xgboost", 1 << 20, 0, 3<<20 + 256<<10},
		{"sklearn", 1 << 20, 0, 1<<20 + 256<<10},
		{"onnx", 1 << 20, 0, 2<<20 + 2<<20},
		{"linear", 0, 0, 512 << 10},
		{"synthetic", 1 << 20, 0, 1 << 20},
		{"onnx", 1 << 30, 64 << 20, 64 << 20},
		{"unknown", -5, 0, 16 << 20},
	} {
		if got := Estimate(tt.runtime, tt.art, tt.override); got != tt.want {
			t.Errorf("Estimate(%s, %d, %d) = %d, want %d", tt.runtime, tt.art, tt.override, got, tt.want)
		}
	}
}

func TestRate(t *testing.T) {
	h := time.Minute
	var r Rate
	if got := r.PerSecond(t0, h); got != 0 {
		t.Fatalf("zero Rate: %v per second", got)
	}
	// 10 per second for 10 half-lives, folded in every 250 ms.
	now := t0
	for range 4 * 600 {
		now = now.Add(250 * time.Millisecond)
		r.Add(now, 2.5, h)
	}
	if got := r.PerSecond(now, h); got < 9.9 || got > 10.1 {
		t.Fatalf("steady 10/s reads %.3f/s", got)
	}
	// One half-life without requests halves it; the past does not come back.
	if got := r.PerSecond(now.Add(h), h); got < 4.95 || got > 5.05 {
		t.Fatalf("a half-life later: %.3f/s, want about 5", got)
	}
	before := r.PerSecond(now, h)
	r.Add(now.Add(-time.Hour), 0, h) // an earlier instant does not move the clock back
	if got := r.PerSecond(now, h); got != before {
		t.Fatalf("adding at an earlier instant changed the rate: %v → %v", before, got)
	}
	r.Add(now, -5, h)
	if got := r.PerSecond(now, h); got != before {
		t.Fatalf("a negative count changed the rate: %v → %v", before, got)
	}
}

func TestDisplaces(t *testing.T) {
	warm := idle("a@1", 10*mib, 2, 1) // 2 req/s per copy
	for _, c := range []struct {
		name string
		rate float64
		r    Resident
		want bool
	}{
		{"nobody calls it: anything displaces it", 0, idle("a@1", 10*mib, 0, 1), true},
		{"a request nobody calls does not displace a called one", 0, warm, false},
		{"called more than the margin", 3.5, warm, true},
		{"called more, within the margin", 2.9, warm, false},
		{"called as much", 2, warm, false},
		{"called less", 1, warm, false},
		{"priceless", Priceless, warm, true},
		// Its decayed rate remembers old traffic, but nobody called it
		// for the minimum residency: its memory serves nobody now.
		{"idle for the residency: any request displaces it", 0.01, idle("a@1", 10*mib, 2, 2), true},
		{"never called since its load", 0.01, with(warm, func(r *Resident) { r.LastUsed = time.Time{} }), true},
		{"idle but busy (queued work): the rates decide", 0.01, with(idle("a@1", 10*mib, 2, 5), func(r *Resident) { r.Busy = true }), false},
	} {
		if got := (Policy{}).Displaces(c.rate, c.r, t0); got != c.want {
			t.Errorf("%s: Displaces = %v, want %v", c.name, got, c.want)
		}
	}
}

// A cold request's load (one replica, its decayed rate) on a full worker:
// what placement evicts for it, or why it cannot.
func TestColdRequestEvicts(t *testing.T) {
	p := Policy{MinResidency: 2 * time.Minute}
	const rate = 0.02                        // one request a minute ago
	startCopy := func(key string) Resident { // placed at start 30 s ago, never called
		return Resident{Key: key, Memory: 48 * mib, Replicas: 1, LoadedAt: t0.Add(-30 * time.Second), LoadTime: 300 * time.Millisecond}
	}
	used := func(key string, rps float64, ago time.Duration) Resident {
		return Resident{Key: key, Memory: 48 * mib, Replicas: 1, LoadedAt: t0.Add(-time.Hour), LastUsed: t0.Add(-ago), LoadTime: 300 * time.Millisecond, Rate: rps}
	}
	for _, tt := range []struct {
		name   string
		loaded []Resident
		want   []string // nil: not placed
	}{
		{"idle start copies go, even young", []Resident{used("hot@1", 5, time.Second), startCopy("a@1")}, []string{"a@1"}},
		{"the cheapest to reload of the idle ones", []Resident{with(startCopy("slow@1"), func(r *Resident) { r.LoadTime = 5 * time.Second; r.Rate = 0.001 }), startCopy("quick@1")}, []string{"quick@1"}},
		{"idle for the residency, whatever its old rate", []Resident{used("hot@1", 5, time.Second), used("was-hot@1", 3, 3*time.Minute)}, []string{"was-hot@1"}},
		{"least recently used among equals", []Resident{used("b@1", 0, 10*time.Minute), used("c@1", 0, 20*time.Minute)}, []string{"c@1"}},
		{"a young copy loaded on demand stays", []Resident{with(startCopy("d@1"), func(r *Resident) { r.OnDemand = true })}, nil},
		{"a young copy that served stays", []Resident{with(startCopy("e@1"), func(r *Resident) { r.LastUsed = t0.Add(-time.Second) })}, nil},
		{"a rollback target stays", []Resident{with(startCopy("prev@1"), func(r *Resident) { r.RollbackTarget = true })}, nil},
		{"a hot version stays", []Resident{with(startCopy("h@1"), func(r *Resident) { r.Hot = true })}, nil},
		{"a version called more than the request stays", []Resident{used("warm@1", 1, time.Second), used("warm@2", 1, 2*time.Second)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var used int64
			for _, r := range tt.loaded {
				used += r.Memory
			}
			w := Worker{ID: "w1", Budget: used, Used: used, Loaded: tt.loaded}
			d := p.Choose(Request{Key: "cold@1", Memory: 48 * mib, Replicas: 1, Ranked: []string{"w1"}, ShardSize: 1, Rate: rate, ForRequest: true}, []Worker{w}, t0)
			if tt.want == nil {
				if len(d.Assignments) != 0 || d.Unplaced != 1 {
					t.Fatalf("Choose = %+v, want nothing placed", d)
				}
				return
			}
			if len(d.Assignments) != 1 || !slices.Equal(d.Assignments[0].Evict, tt.want) {
				t.Fatalf("Choose = %+v, want one copy evicting %v", d, tt.want)
			}
		})
	}
}

func TestTrim(t *testing.T) {
	young := func(key string, mem int64) Resident { // loaded 10 s ago, called since
		return Resident{Key: key, Memory: mem, Replicas: 1, LoadedAt: t0.Add(-10 * time.Second), LastUsed: t0, LoadTime: time.Second, Rate: 1}
	}
	for _, tt := range []struct {
		name   string
		loaded []Resident
		over   int64
		want   []string
		enough bool
	}{
		{"within the budget: nothing", []Resident{young("a@1", 10*mib)}, 0, nil, true},
		{"the residency does not hold a worker over its budget", []Resident{young("a@1", 10*mib)}, mib, []string{"a@1"}, true},
		{"cheapest per byte first", []Resident{young("a@1", 10*mib), with(young("b@1", 10*mib), func(r *Resident) { r.Rate = 0.1 })}, mib, []string{"b@1"}, true},
		{"idle before busy", []Resident{with(young("busy@1", 10*mib), func(r *Resident) { r.Busy = true; r.Rate = 0 }), young("a@1", 10*mib)}, mib, []string{"a@1"}, true},
		{"busy when the idle cannot free enough", []Resident{with(young("busy@1", 10*mib), func(r *Resident) { r.Busy = true }), young("a@1", mib)}, 5 * mib, []string{"busy@1"}, true},
		{"hot and rollback targets stay", []Resident{with(young("hot@1", 10*mib), func(r *Resident) { r.Hot = true }), with(young("prev@1", 10*mib), func(r *Resident) { r.RollbackTarget = true })}, mib, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := (Policy{}).Trim(tt.loaded, tt.over, t0)
			if !slices.Equal(got.Victims, tt.want) || got.Enough != tt.enough {
				t.Fatalf("Trim = %+v, want %v enough %v", got, tt.want, tt.enough)
			}
		})
	}
}
