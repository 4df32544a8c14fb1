package features

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		name     string
		deadline time.Duration
		has      bool
		timeout  time.Duration
		want     time.Duration
	}{
		{"no deadline: the timeout", 0, false, 10 * time.Millisecond, 10 * time.Millisecond},
		{"deadline further than the timeout", time.Second, true, 10 * time.Millisecond, 10 * time.Millisecond},
		{"deadline nearer than the timeout", 3 * time.Millisecond, true, 10 * time.Millisecond, 3 * time.Millisecond},
		{"deadline passed", -time.Millisecond, true, 10 * time.Millisecond, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Budget(now, now.Add(c.deadline), c.has, c.timeout); got != c.want {
				t.Errorf("Budget = %s, want %s", got, c.want)
			}
		})
	}
}

func TestBreakerState(t *testing.T) {
	for _, c := range []struct {
		name string
		from breakerState
		ok   bool
		want breakerState
	}{
		{"success keeps it closed", breakerState{}, true, breakerState{}},
		{"a failure counts", breakerState{Fails: 1}, false, breakerState{Fails: 2}},
		{"the threshold-th failure opens", breakerState{Fails: 2}, false, breakerState{Open: true, Fails: 3}},
		{"a failure while open keeps it open", breakerState{Open: true, Fails: 3}, false, breakerState{Open: true, Fails: 4}},
		{"a success (a probe) closes and clears", breakerState{Open: true, Fails: 9}, true, breakerState{}},
		{"a success clears the count", breakerState{Fails: 2}, true, breakerState{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.from.after(c.ok, 3); got != c.want {
				t.Errorf("after(%v) = %+v, want %+v", c.ok, got, c.want)
			}
		})
	}
}

// The breaker's loop: it opens after Threshold failures, probes every
// ProbeEvery while the store is down, and closes at the first probe after
// the store is back.
func TestBreakerLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		up, probes := false, 0
		var changes []bool
		b := NewBreaker("redis", BreakerConfig{Threshold: 3, ProbeEvery: 250 * time.Millisecond, ProbeTimeout: 100 * time.Millisecond},
			func(ctx context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				probes++
				if !up {
					return errors.New("down")
				}
				return nil
			}, func(_ string, open bool) { mu.Lock(); changes = append(changes, open); mu.Unlock() })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { b.Run(ctx); close(done) }()
		for range 3 {
			if !b.Allow() {
				t.Fatal("open before the threshold")
			}
			b.Done(false)
		}
		if b.Allow() {
			t.Fatal("closed after 3 failures")
		}
		time.Sleep(time.Second) // fake time: 4 probes, all failing
		synctest.Wait()
		mu.Lock()
		if probes != 4 {
			t.Errorf("probes in 1s = %d, want 4", probes)
		}
		up = true
		mu.Unlock()
		if b.Allow() {
			t.Fatal("closed without a probe")
		}
		start := time.Now()
		for !b.Allow() {
			time.Sleep(10 * time.Millisecond)
		}
		if took := time.Since(start); took > 350*time.Millisecond {
			t.Errorf("closed %s after the store came back, want within one probe interval and timeout", took)
		}
		mu.Lock()
		if fmt.Sprint(changes) != "[true false]" {
			t.Errorf("changes %v", changes)
		}
		n := probes
		mu.Unlock()
		time.Sleep(time.Second) // closed: no probes
		synctest.Wait()
		mu.Lock()
		if probes != n {
			t.Errorf("probed while closed: %d -> %d", n, probes)
		}
		mu.Unlock()
		cancel()
		<-done
	})
}

func TestMemoryBytesBound(t *testing.T) {
	m := newMemory(10_000, time.Minute)
	now := time.Unix(1, 0)
	for i := range 1000 {
		m.put(fmt.Sprintf("card:%d", i), Row{Found: true, Values: make([]float64, 10)}, now)
		if used, _ := m.bytes(); used > 10_000 {
			t.Fatalf("after %d puts the tier holds %d bytes, bound 10000", i+1, used)
		}
	}
	used, n := m.bytes()
	if n == 0 || n > 10_000/int(entrySize("card:999", 10)) {
		t.Fatalf("%d entries in %d bytes", n, used)
	}
	var r Row
	r.Values = make([]float64, 10)
	if !m.get("card:999", now, &r) {
		t.Error("the most recent entry was evicted")
	}
	if m.get("card:0", now, &r) {
		t.Error("the oldest entry is still there")
	}
	if m.get("card:999", now.Add(time.Minute), &r) {
		t.Error("an entry past its ttl was served")
	}
	m.put("huge", Row{Values: make([]float64, 100_000)}, now)
	if used, _ := m.bytes(); used > 10_000 {
		t.Errorf("an entry larger than the bound was kept: %d bytes", used)
	}
}

// fakeSource is a Source (and Filler, Pinger) in memory; block makes
// Lookup wait for ctx.
type fakeSource struct {
	mu    sync.Mutex
	rows  map[string]Row
	calls int
	block bool
	fail  bool
	fills int
}

func (f *fakeSource) Lookup(ctx context.Context, v *View, ents []string, out []Row) error {
	f.mu.Lock()
	f.calls++
	block, fail := f.block, f.fail
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	if fail {
		return errors.New("store down")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, e := range ents {
		r, ok := f.rows[v.Name+":"+e]
		out[i].Found, out[i].At = ok, r.At
		for k := range out[i].Values {
			out[i].Values[k] = math.NaN()
			if ok && k < len(r.Values) {
				out[i].Values[k] = r.Values[k]
			}
		}
	}
	return nil
}

func (f *fakeSource) Fill(ctx context.Context, v *View, ents []string, rows []Row) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fills++
	for i, e := range ents {
		f.rows[v.Name+":"+e] = rows[i]
	}
	return nil
}

func (f *fakeSource) Ping(ctx context.Context) error { return nil }

func (f *fakeSource) count() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

func viewConfig() ViewConfig {
	return ViewConfig{View: View{Name: "card_stats", Entity: "cardId", Fields: []string{"a", "b"}}, Defaults: []float64{-1, -2},
		MaxAge: time.Hour, Timeout: 10 * time.Millisecond, MemoryBytes: 1 << 20, MemoryTTL: time.Second}
}

func origins(r Result) string { return fmt.Sprint(r.Origins) }

func TestChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		redis := &fakeSource{rows: map[string]Row{"card_stats:r": {Found: true, Values: []float64{1, math.NaN()}, At: now}}}
		db := &fakeSource{rows: map[string]Row{
			"card_stats:d":   {Found: true, Values: []float64{3, 4}, At: now},
			"card_stats:old": {Found: true, Values: []float64{5, 6}, At: now.Add(-2 * time.Hour)},
		}}
		s := NewSet(Config{Stores: []Store{{Tier: Redis, Source: redis}, {Tier: Database, Source: db}}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		e := s.Enricher(viewConfig())
		if s.Enricher(viewConfig()) != e {
			t.Error("the same view config made a second enricher")
		}
		out := make([]Result, 5)
		e.Lookup(t.Context(), []string{"r", "d", "old", "nobody", "d"}, out)
		want := []string{"[redis default]", "[database database]", "[stale stale]", "[default default]", "[database database]"}
		for i, w := range want {
			if origins(out[i]) != w {
				t.Errorf("entity %d: origins %s, want %s", i, origins(out[i]), w)
			}
		}
		if out[0].Values[0] != 1 || out[0].Values[1] != -2 || out[1].Values[1] != 4 || out[3].Values[0] != -1 {
			t.Errorf("values %v", out)
		}
		if redis.count() != 1 || db.count() != 1 {
			t.Errorf("round trips: redis %d, db %d, want 1 each (duplicates looked up once)", redis.count(), db.count())
		}
		synctest.Wait() // the read-through write
		redis.mu.Lock()
		_, filled := redis.rows["card_stats:d"]
		redis.mu.Unlock()
		if !filled {
			t.Error("a database hit did not fill redis")
		}
		// Again: every entity from memory, the unknown one included.
		e.Lookup(t.Context(), []string{"r", "d", "nobody"}, out[:3])
		if origins(out[0]) != "[memory default]" || origins(out[1]) != "[memory memory]" || origins(out[2]) != "[default default]" {
			t.Errorf("second lookup %v", out[:3])
		}
		if redis.count() != 1 || db.count() != 1 {
			t.Errorf("memory hits asked a store: redis %d, db %d", redis.count(), db.count())
		}
		// After the memory ttl, the filled redis answers.
		time.Sleep(time.Second)
		e.Lookup(t.Context(), []string{"d"}, out[:1])
		if origins(out[0]) != "[redis redis]" {
			t.Errorf("after the ttl: %v", out[0])
		}
		cancel()
		<-done
	})
}

// A stalled Redis costs at most half the budget; the database answers in
// the rest; after Threshold stalls the breaker skips Redis.
func TestChainStalledStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		redis := &fakeSource{rows: map[string]Row{}, block: true}
		db := &fakeSource{rows: map[string]Row{"card_stats:d": {Found: true, Values: []float64{3, 4}}}}
		s := NewSet(Config{Stores: []Store{{Tier: Redis, Source: redis}, {Tier: Database, Source: db}}, Breaker: BreakerConfig{Threshold: 2}})
		cfg := viewConfig()
		cfg.MemoryTTL = time.Nanosecond
		e := s.Enricher(cfg)
		out := make([]Result, 1)
		for i := range 3 {
			start := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			e.Lookup(ctx, []string{"d"}, out)
			cancel()
			took := time.Since(start)
			if took > 10*time.Millisecond {
				t.Errorf("lookup %d took %s, budget 10ms", i, took)
			}
			if origins(out[0]) != "[database database]" {
				t.Errorf("lookup %d: %v", i, out[0])
			}
			time.Sleep(time.Millisecond)
		}
		if redis.count() != 2 {
			t.Errorf("redis asked %d times, want 2 (then the breaker is open)", redis.count())
		}
		// The deadline leaves 2ms: the budget is 2ms, whatever the timeout.
		db.mu.Lock()
		db.block = true
		db.mu.Unlock()
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Millisecond)
		e.Lookup(ctx, []string{"d"}, out)
		cancel()
		if took := time.Since(start); took > 2*time.Millisecond {
			t.Errorf("took %s with 2ms left", took)
		}
		if origins(out[0]) != "[default default]" {
			t.Errorf("with both stores stalled: %v", out[0])
		}
	})
}

// A store that misses a budget too short to blame it for (under
// MinBlame) keeps its breaker closed.
func TestShortBudgetsDoNotOpenTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		redis := &fakeSource{rows: map[string]Row{}, block: true}
		db := &fakeSource{rows: map[string]Row{}}
		s := NewSet(Config{Stores: []Store{{Tier: Redis, Source: redis}, {Tier: Database, Source: db}}, Breaker: BreakerConfig{Threshold: 2}})
		e := s.Enricher(viewConfig())
		out := make([]Result, 1)
		for range 5 {
			ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Microsecond) // redis gets 0.75ms
			e.Lookup(ctx, []string{"x"}, out)
			cancel()
		}
		if s.Breaker(Redis).Open() || redis.count() != 5 {
			t.Errorf("after 5 lookups with 0.75ms for redis: open %v, calls %d", s.Breaker(Redis).Open(), redis.count())
		}
	})
}
