package predcache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for TTL tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func key(version, tenant string, row ...float32) []byte {
	return AppendKey(nil, version, "", tenant, row, nil)
}

func TestGetPut(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	type step struct {
		op      string // get, put, wait (advance the clock)
		version string
		tenant  string
		row     float32
		out     float32
		d       time.Duration
		hit     bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"miss then hit", []step{
			{op: "get", version: "m@1", tenant: "a", row: 1},
			{op: "put", version: "m@1", tenant: "a", row: 1, out: 10},
			{op: "get", version: "m@1", tenant: "a", row: 1, out: 10, hit: true},
		}},
		{"another tenant misses", []step{
			{op: "put", version: "m@1", tenant: "a", row: 1, out: 10},
			{op: "get", version: "m@1", tenant: "b", row: 1},
		}},
		{"another version misses", []step{
			{op: "put", version: "m@1", tenant: "a", row: 1, out: 10},
			{op: "get", version: "m@2", tenant: "a", row: 1},
		}},
		{"another row misses", []step{
			{op: "put", version: "m@1", tenant: "a", row: 1, out: 10},
			{op: "get", version: "m@1", tenant: "a", row: 2},
		}},
		{"expired after the ttl", []step{
			{op: "put", version: "m@1", tenant: "a", row: 1, out: 10},
			{op: "wait", d: 59 * time.Second},
			{op: "get", version: "m@1", tenant: "a", row: 1, out: 10, hit: true},
			{op: "wait", d: time.Second},
			{op: "get", version: "m@1", tenant: "a", row: 1},
		}},
		{"put again replaces", []step{
			{op: "put", version: "m@1", tenant: "a", row: 1, out: 10},
			{op: "put", version: "m@1", tenant: "a", row: 1, out: 11},
			{op: "get", version: "m@1", tenant: "a", row: 1, out: 11, hit: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New("m", "1", Config{TTL: time.Minute, MaxBytes: 1 << 20, Now: clk.now})
			for i, s := range tc.steps {
				k := key(s.version, s.tenant, s.row)
				switch s.op {
				case "put":
					c.Put(k, []float32{s.out})
				case "wait":
					clk.add(s.d)
				case "get":
					out, f, lead := c.Get(k)
					if hit := out != nil; hit != s.hit || hit && out[0] != s.out {
						t.Fatalf("step %d: got %v (hit %v), want hit %v out %v", i, out, hit, s.hit, s.out)
					}
					if !s.hit {
						if f == nil || !lead {
							t.Fatalf("step %d: a miss without the lead of a flight", i)
						}
						f.Fail()
					}
				}
			}
		})
	}
}

// The cache never holds more than MaxBytes, whatever the inputs: unique
// rows evict the least recently used.
func TestBoundedInBytes(t *testing.T) {
	const max = 1 << 20
	c := New("m", "1", Config{TTL: time.Hour, MaxBytes: max})
	k0 := key("m@1", "a", -1)
	c.Put(k0, []float32{1, 2})
	per := entrySize(len(key("m@1", "a", 0)), 2)
	for i := 0; i < 100_000; i++ {
		c.Put(key("m@1", "a", float32(i)), []float32{1, 2})
		if i%1000 == 0 {
			if out, _, _ := c.Get(k0); out == nil { // kept recently used
				t.Fatalf("after %d puts: the recently used entry was evicted", i)
			}
		}
		if c.Bytes() > max {
			t.Fatalf("after %d puts: %d bytes, over %d", i, c.Bytes(), max)
		}
	}
	if n := c.Entries(); n < max/per/2 || n > max/per {
		t.Fatalf("%d entries of %d bytes in %d", n, per, max)
	}
	// An entry larger than a shard is not stored.
	big := make([]float32, max)
	c.Put(key("m@1", "a", 7), big)
	if out, f, _ := c.Get(key("m@1", "a", 7)); out != nil {
		t.Fatal("an entry larger than the cache was stored")
	} else if f != nil {
		f.Fail()
	}
}

func TestFlights(t *testing.T) {
	c := New("m", "1", Config{TTL: time.Hour, MaxBytes: 1 << 20})
	k := key("m@1", "a", 1)
	_, lead, isLead := c.Get(k)
	if !isLead {
		t.Fatal("first miss is not the leader")
	}
	const waiters = 8
	var wg sync.WaitGroup
	got := make([][]float32, waiters)
	for i := 0; i < waiters; i++ {
		_, f, isLead := c.Get(k)
		if isLead || f != lead {
			t.Fatalf("waiter %d: lead %v, same flight %v", i, isLead, f == lead)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got[i], _ = f.Wait(ctx)
		}()
	}
	lead.Done([]float32{42})
	lead.Done([]float32{43}) // a second end does nothing
	lead.Fail()
	wg.Wait()
	for i, o := range got {
		if len(o) != 1 || o[0] != 42 {
			t.Fatalf("waiter %d got %v", i, o)
		}
	}
	if out, _, _ := c.Get(k); len(out) != 1 || out[0] != 42 {
		t.Fatalf("after Done: %v", out)
	}

	// A failed flight: waiters are told to compute, nothing is stored.
	k2 := key("m@1", "a", 2)
	_, l2, _ := c.Get(k2)
	_, w2, _ := c.Get(k2)
	l2.Fail()
	if out, ok := w2.Wait(context.Background()); ok || out != nil {
		t.Fatalf("waiter of a failed flight: %v %v", out, ok)
	}
	if out, f, isLead := c.Get(k2); out != nil || !isLead {
		t.Fatal("after Fail: not a new flight")
	} else {
		f.Fail()
	}

	// A waiter's deadline ends its wait.
	k3 := key("m@1", "a", 3)
	_, l3, _ := c.Get(k3)
	_, w3, _ := c.Get(k3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := w3.Wait(ctx); ok {
		t.Fatal("a cancelled wait succeeded")
	}
	l3.Fail()
}

// Flights are bounded: past MaxFlightsPerShard a miss has no flight.
func TestFlightsBounded(t *testing.T) {
	c := New("m", "1", Config{TTL: time.Hour, MaxBytes: 1 << 16}) // one shard
	var leads []*Flight
	for i := 0; i < MaxFlightsPerShard; i++ {
		_, f, lead := c.Get(key("m@1", "a", float32(i)))
		if !lead {
			t.Fatalf("miss %d: no flight", i)
		}
		leads = append(leads, f)
	}
	if _, f, lead := c.Get(key("m@1", "a", -1)); f != nil || lead {
		t.Fatal("a flight past the bound")
	}
	for _, f := range leads {
		f.Fail()
	}
	if _, f, lead := c.Get(key("m@1", "a", -1)); !lead {
		t.Fatal("no flight after the others ended")
	} else {
		f.Fail()
	}
}

func TestSet(t *testing.T) {
	s := NewSet()
	cfg := Config{TTL: time.Hour, MaxBytes: 1 << 20}
	a := s.For("m", 1, "m@1", "d1", cfg)
	if s.For("m", 1, "m@1", "d1", cfg) != a {
		t.Fatal("For made a second cache")
	}
	k := a.Key(nil, "a", []float32{1}, nil)
	a.Put(k, []float32{1})
	if st := s.States(); len(st) != 1 || st[0].Entries != 1 || st[0].Bytes != entrySize(len(k), 1) || st[0].Model != "m" || st[0].Version != "1" {
		t.Fatalf("states %+v", st)
	}
	b := s.For("m", 1, "m@1", "d2", cfg)
	if b == a {
		t.Fatal("another digest shares the cache")
	}
	if kb := b.Key(nil, "a", []float32{1}, nil); bytes.Equal(kb, k) {
		t.Fatal("another digest makes the same key")
	}
	s.Drop("m@1")
	if st := s.States(); len(st) != 0 {
		t.Fatalf("after Drop: %+v", st)
	}
	if c := s.For("m", 1, "m@1", "d1", cfg); c == a {
		t.Fatal("a dropped cache came back")
	} else if out, f, _ := c.Get(k); out != nil {
		t.Fatal("a dropped version's entry was served")
	} else {
		f.Fail()
	}
}

// Goal row 7 of issue 19: 10,000 requests across tenants and versions,
// with tenants and version ids chosen to collide if the key were a plain
// concatenation, 0 answers served across tenants or versions. The
// "model" answers each row with (version, tenant, row) encoded, so a
// cross hit is seen.
func TestFuzzNoCrossHits(t *testing.T) {
	versions := []string{"m@1", "m@12", "m@1\x001", "m@2", "n@1"}
	tenants := []string{"a", "ab", "b", "", "a\x00", "\x00a", "acme", "acm"}
	s := NewSet()
	cfg := Config{TTL: time.Hour, MaxBytes: 1 << 16} // small: evictions too
	rng := rand.New(rand.NewPCG(1, 19))
	answer := func(vi, ti int, row []float32) []float32 {
		out := []float32{float32(vi), float32(ti)}
		return append(out, row...)
	}
	hits, misses, cross := 0, 0, 0
	for req := 0; req < 10_000; req++ {
		vi, ti := rng.IntN(len(versions)), rng.IntN(len(tenants))
		c := s.For("m", vi, versions[vi], "d", cfg)
		n := 1 + rng.IntN(8)
		for i := 0; i < n; i++ {
			// Rows from a small domain so that the same row recurs for
			// every tenant and version; lengths vary too.
			row := make([]float32, 1+rng.IntN(2))
			for j := range row {
				row[j] = float32(rng.IntN(4))
			}
			k := c.Key(nil, tenants[ti], row, nil)
			want := answer(vi, ti, row)
			out, f, lead := c.Get(k)
			switch {
			case out != nil:
				hits++
				if !equal(out, want) {
					cross++
					t.Errorf("request %d: %s/%q row %v answered %v", req, versions[vi], tenants[ti], row, out)
				}
			case lead:
				misses++
				f.Done(want)
			default:
				misses++
				c.Put(k, want)
			}
		}
		if req%97 == 0 {
			s.Drop(versions[rng.IntN(len(versions))])
		}
	}
	if cross != 0 || hits < 1000 || misses < 100 {
		t.Fatalf("%d cross hits, %d hits, %d misses", cross, hits, misses)
	}
	t.Logf("%d hits, %d misses, 0 across tenants or versions", hits, misses)
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Two different (version, tenant, row) triples never make the same key.
func FuzzAppendKey(f *testing.F) {
	f.Add("m@1", "d", "a", []byte{1, 2, 3, 4}, "m@1", "d", "ab", []byte{2, 3, 4}, false)
	f.Add("m@1", "", "", []byte{}, "m@1", "", "", []byte{}, true)
	f.Fuzz(func(t *testing.T, v1, d1, t1 string, r1 []byte, v2, d2, t2 string, r2 []byte, tokens bool) {
		row := func(b []byte) ([]float32, []int64) {
			fs := make([]float32, len(b)/4)
			ts := make([]int64, len(b)/8)
			for i := range fs {
				fs[i] = float32(b[4*i]) + float32(b[4*i+1])/256
			}
			for i := range ts {
				ts[i] = int64(b[8*i]) << 8
			}
			return fs, ts
		}
		f1, k1 := row(r1)
		f2, k2 := row(r2)
		var a, b []byte
		same := v1 == v2 && d1 == d2 && t1 == t2
		if tokens {
			a, b = AppendKey(nil, v1, d1, t1, nil, k1), AppendKey(nil, v2, d2, t2, nil, k2)
			same = same && fmt.Sprint(k1) == fmt.Sprint(k2)
		} else {
			a, b = AppendKey(nil, v1, d1, t1, f1, nil), AppendKey(nil, v2, d2, t2, f2, nil)
			same = same && equal(f1, f2)
		}
		if bytes.Equal(a, b) != same {
			t.Fatalf("keys equal %v, triples equal %v", bytes.Equal(a, b), same)
		}
	})
}

// Cache.Key is AppendKey with the cache's version id and digest.
func TestKeyIsAppendKey(t *testing.T) {
	c := NewSet().For("m", 3, "m@3", "abc", Config{TTL: time.Minute, MaxBytes: 1 << 20})
	row := []float32{1, 2.5}
	if !bytes.Equal(c.Key(nil, "acme", row, nil), AppendKey(nil, "m@3", "abc", "acme", row, nil)) {
		t.Fatal("Key differs from AppendKey")
	}
}
