package records

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/schema"
)

func num(s string) schema.Value   { return schema.Value{Kind: schema.Number, Text: s} }
func str(s string) schema.Value   { return schema.Value{Kind: schema.String, Text: s} }
func boolean(b bool) schema.Value { return schema.Value{Kind: schema.Bool, Bool: b} }

func inst(kv ...any) schema.Instance {
	var in schema.Instance
	for i := 0; i < len(kv); i += 2 {
		in = append(in, schema.Member{Name: kv[i].(string), Value: kv[i+1].(schema.Value)})
	}
	return in
}

func TestCanonicalNumber(t *testing.T) {
	tests := []struct{ in, want string }{
		{"1", "1"}, {"1.0", "1"}, {"1e0", "1"}, {"10e-1", "1"}, {"1.00E+0", "1"}, {"0001", "1"},
		{"0", "0"}, {"-0", "0"}, {"0.0", "0"}, {"0e5", "0"},
		{"1500", "1.5e3"}, {"1.5e3", "1.5e3"}, {"0.015", "1.5e-2"}, {"-2.50", "-2.5"},
		{"9007199254740993", "9.007199254740993e15"}, {"9007199254740992", "9.007199254740992e15"},
		{"123.456", "1.23456e2"}, {"1E400", "1e400"},
		{"abc", `"number:abc"`}, {"1.", `"number:1."`}, {"", `"number:"`}, {"1e", `"number:1e"`},
	}
	for _, tc := range tests {
		if got := canonicalNumber(tc.in); got != tc.want {
			t.Errorf("canonicalNumber(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestInputHash(t *testing.T) {
	base := []schema.Instance{inst("amount", num("1"), "country", str("FR"), "new", boolean(true), "note", schema.Value{Kind: schema.Null})}
	tests := []struct {
		name  string
		insts []schema.Instance
		same  bool
	}{
		{"identical", []schema.Instance{inst("amount", num("1"), "country", str("FR"), "new", boolean(true), "note", schema.Value{})}, true},
		{"key order", []schema.Instance{inst("note", schema.Value{}, "new", boolean(true), "country", str("FR"), "amount", num("1"))}, true},
		{"1.0 vs 1", []schema.Instance{inst("amount", num("1.0"), "country", str("FR"), "new", boolean(true), "note", schema.Value{})}, true},
		{"1e0 vs 1", []schema.Instance{inst("amount", num("1e0"), "country", str("FR"), "new", boolean(true), "note", schema.Value{})}, true},
		{"other number", []schema.Instance{inst("amount", num("1.5"), "country", str("FR"), "new", boolean(true), "note", schema.Value{})}, false},
		{"number vs string", []schema.Instance{inst("amount", str("1"), "country", str("FR"), "new", boolean(true), "note", schema.Value{})}, false},
		{"other bool", []schema.Instance{inst("amount", num("1"), "country", str("FR"), "new", boolean(false), "note", schema.Value{})}, false},
		{"null vs missing", []schema.Instance{inst("amount", num("1"), "country", str("FR"), "new", boolean(true))}, false},
		{"two instances", append(base, base[0]), false},
		{"none", nil, false},
	}
	want := InputHash(base)
	if len(want) != 64 {
		t.Fatalf("hash %q is not 64 hex digits", want)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := InputHash(tc.insts)
			if (got == want) != tc.same {
				t.Errorf("same hash = %v, want %v (canonical %s vs %s)", got == want, tc.same, CanonicalJSON(tc.insts), CanonicalJSON(base))
			}
		})
	}
	if got, want := string(CanonicalJSON([]schema.Instance{inst("b", num("2.50"), "a", str(`q"<`), "c", schema.Value{Kind: schema.Composite})})), `[{"a":"q\"\u003c","b":2.5,"c":{}}]`; got != want {
		t.Errorf("canonical JSON = %s, want %s", got, want)
	}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is an injectable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newCache(window time.Duration, max int) (*Idempotency, *clock) {
	c := NewIdempotency(window, max, 0)
	clk := &clock{t: t0}
	c.Now = clk.Now
	return c, clk
}

func TestIdempotencySequences(t *testing.T) {
	type step struct {
		do     string // begin, complete, abort, advance
		tenant string
		id     string
		hash   string
		status int
		body   string
		d      time.Duration
		want   Kind   // begin
		replay string // begin Replay: the body
	}
	B := func(tenant, id, hash string, want Kind) step {
		return step{do: "begin", tenant: tenant, id: id, hash: hash, want: want}
	}
	R := func(tenant, id, hash, body string) step {
		return step{do: "begin", tenant: tenant, id: id, hash: hash, want: Replay, replay: body}
	}
	C := func(tenant, id string, status int, body string) step {
		return step{do: "complete", tenant: tenant, id: id, status: status, body: body}
	}
	A := func(tenant, id string) step { return step{do: "abort", tenant: tenant, id: id} }
	Adv := func(d time.Duration) step { return step{do: "advance", d: d} }
	tests := []struct {
		name  string
		max   int
		steps []step
	}{
		{"new then replay", 10, []step{B("acme", "1", "h", New), C("acme", "1", 200, "ok"), R("acme", "1", "h", "ok"), R("acme", "1", "h", "ok")}},
		{"in flight", 10, []step{B("acme", "1", "h", New), B("acme", "1", "h", InFlight)}},
		{"conflict on other input", 10, []step{B("acme", "1", "h", New), C("acme", "1", 200, "ok"), B("acme", "1", "other", Conflict)}},
		{"conflict while in flight", 10, []step{B("acme", "1", "h", New), B("acme", "1", "other", Conflict)}},
		{"tenants are isolated", 10, []step{B("acme", "1", "h", New), C("acme", "1", 200, "ok"), B("beta", "1", "h", New), B("beta", "1", "x", Conflict), R("acme", "1", "h", "ok")}},
		{"validation error replayed", 10, []step{B("acme", "1", "h", New), C("acme", "1", 400, "bad"), R("acme", "1", "h", "bad")}},
		{"refusal not cached", 10, []step{B("acme", "1", "h", New), C("acme", "1", 503, "full"), B("acme", "1", "h", New)}},
		{"quota refusal not cached", 10, []step{B("acme", "1", "h", New), C("acme", "1", 429, "slow"), B("acme", "1", "h", New)}},
		{"timeout not cached", 10, []step{B("acme", "1", "h", New), C("acme", "1", 504, "late"), B("acme", "1", "h", New)}},
		{"abort forgets", 10, []step{B("acme", "1", "h", New), A("acme", "1"), B("acme", "1", "h", New)}},
		{"expires after the window", 10, []step{B("acme", "1", "h", New), C("acme", "1", 200, "ok"), Adv(9 * time.Minute), R("acme", "1", "h", "ok"), Adv(time.Minute), B("acme", "1", "h", New)}},
		{"window counts from completion", 10, []step{B("acme", "1", "h", New), Adv(time.Hour), C("acme", "1", 200, "ok"), Adv(9 * time.Minute), R("acme", "1", "h", "ok")}},
		{"in flight never expires", 10, []step{B("acme", "1", "h", New), Adv(time.Hour), B("acme", "1", "h", InFlight)}},
		{"oldest answer evicted when full", 2, []step{
			B("acme", "1", "h", New), C("acme", "1", 200, "one"),
			B("acme", "2", "h", New), C("acme", "2", 200, "two"),
			B("acme", "3", "h", New), // evicts 1
			R("acme", "2", "h", "two"), B("acme", "1", "h", New)}},
		{"full of in-flight requests runs uncached", 1, []step{
			B("acme", "1", "h", New), B("acme", "2", "h", New), C("acme", "2", 200, "two"), B("acme", "2", "h", New), B("acme", "1", "h", InFlight)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, clk := newCache(10*time.Minute, tc.max)
			for i, s := range tc.steps {
				switch s.do {
				case "begin":
					o := c.Begin(s.tenant, s.id, s.hash)
					if o.Kind != s.want {
						t.Fatalf("step %d: Begin(%s, %s, %s) = %v, want %v", i, s.tenant, s.id, s.hash, o.Kind, s.want)
					}
					if s.want == Replay && string(o.Response.Body) != s.replay {
						t.Fatalf("step %d: replayed %q, want %q", i, o.Response.Body, s.replay)
					}
				case "complete":
					c.Complete(s.tenant, s.id, s.status, http.Header{"Content-Type": {"application/json"}}, []byte(s.body))
				case "abort":
					c.Abort(s.tenant, s.id)
				case "advance":
					clk.Advance(s.d)
				}
			}
		})
	}
}

func TestIdempotencyReplayKeepsStatusAndHeader(t *testing.T) {
	c, _ := newCache(0, 0)
	c.Begin("acme", "1", "h")
	h := http.Header{"Content-Type": {"application/json"}}
	c.Complete("acme", "1", 400, h, []byte(`{"error":{}}`))
	h.Set("Content-Type", "text/plain") // the cache copied the header
	o := c.Begin("acme", "1", "h")
	if o.Kind != Replay || o.Response.Status != 400 || o.Response.Header.Get("Content-Type") != "application/json" || string(o.Response.Body) != `{"error":{}}` {
		t.Errorf("replay = %+v", o)
	}
}

func TestIdempotencyWait(t *testing.T) {
	c, _ := newCache(0, 0)
	c.Begin("acme", "1", "h")
	o := c.Begin("acme", "1", "h")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := o.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a cancelled ctx: %v", err)
	}
	c.Abort("acme", "1")
	if _, err := o.Wait(context.Background()); !errors.Is(err, ErrAborted) {
		t.Errorf("Wait after Abort: %v, want ErrAborted", err)
	}
	c.Begin("acme", "1", "h")
	o = c.Begin("acme", "1", "h")
	c.Complete("acme", "1", 503, nil, nil)
	if _, err := o.Wait(context.Background()); !errors.Is(err, ErrAborted) {
		t.Errorf("Wait after an uncacheable answer: %v, want ErrAborted", err)
	}
	if _, err := (Outcome{Kind: New}).Wait(context.Background()); err == nil {
		t.Error("Wait on New: no error")
	}
}

func TestIdempotencyConcurrentBegin(t *testing.T) {
	c := NewIdempotency(time.Minute, 100, 0)
	const n = 16
	var mu sync.Mutex
	kinds := map[Kind]int{}
	bodies := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			o := c.Begin("acme", "same", "h")
			mu.Lock()
			kinds[o.Kind]++
			mu.Unlock()
			var body string
			switch o.Kind {
			case New:
				body = "computed"
				c.Complete("acme", "same", 200, nil, []byte(body))
			case InFlight:
				r, err := o.Wait(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				body = string(r.Body)
			case Replay:
				body = string(o.Response.Body)
			default:
				t.Errorf("unexpected %v", o.Kind)
			}
			mu.Lock()
			bodies[body]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if kinds[New] != 1 || kinds[New]+kinds[InFlight]+kinds[Replay] != n {
		t.Errorf("kinds %v, want exactly one New and the rest InFlight or Replay", kinds)
	}
	if bodies["computed"] != n {
		t.Errorf("bodies %v, want all %d to see the one computed answer", bodies, n)
	}
}

func TestCacheable(t *testing.T) {
	for status, want := range map[int]bool{200: true, 201: true, 400: true, 413: true, 415: true, 422: true,
		401: false, 403: false, 404: false, 408: false, 409: false, 429: false, 500: false, 503: false, 504: false} {
		if Cacheable(status) != want {
			t.Errorf("Cacheable(%d) = %v, want %v", status, !want, want)
		}
	}
}

// The canonical JSON of several instances is each one's own, joined: the
// sorted names written once are rewritten whenever the names change, for
// instances wider than the stack buffers too.
func TestCanonicalJSONReusesNames(t *testing.T) {
	wide := schema.Instance{}
	for j := 40; j > 0; j-- {
		wide = append(wide, schema.Member{Name: fmt.Sprintf("feature_with_a_long_name_%02d", j), Value: num(fmt.Sprint(j))})
	}
	insts := []schema.Instance{
		inst("b", num("1"), "a", str("x")),
		inst("b", num("2"), "a", str("y")),
		inst("x<", num("3"), "a", str("z")),
		inst("a", str("w"), "b", num("4")),
		wide, wide,
		inst("b", num("5")),
		inst("b", num("6"), "a", str("v")),
	}
	var parts []string
	for _, in := range insts {
		one := string(CanonicalJSON([]schema.Instance{in}))
		parts = append(parts, one[1:len(one)-1])
	}
	if got, want := string(CanonicalJSON(insts)), "["+strings.Join(parts, ",")+"]"; got != want {
		t.Errorf("canonical JSON\n%s\nwant\n%s", got, want)
	}
}
