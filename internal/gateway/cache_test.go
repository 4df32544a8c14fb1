package gateway

import (
	"context"
	"strconv"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/predcache"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/tenant"
)

// counting is a fake backend that sums each row and counts the rows it
// was given; gate, when set, holds every call until it is closed.
type counting struct {
	mu      sync.Mutex
	calls   int
	rows    int
	entered chan struct{}
	gate    chan struct{}
}

func (s *counting) Submit(ctx context.Context, w serving.Work) (serving.Result, error) {
	s.mu.Lock()
	s.calls++
	s.rows += w.Rows.Rows
	s.mu.Unlock()
	if s.gate != nil {
		s.entered <- struct{}{}
		<-s.gate
	}
	out := runtime.Output{Rows: w.Rows.Rows, Cols: 1, Data: make([]float32, w.Rows.Rows)}
	for i := 0; i < w.Rows.Rows; i++ {
		for _, v := range w.Rows.Row(i) {
			out.Data[i] += v
		}
	}
	return serving.Result{Out: out}, nil
}

func (s *counting) figures() (calls, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.rows
}

// newCachedGateway serves add@1 with cache: and add@2 without.
func newCachedGateway(t *testing.T) (*Gateway, *counting, *counting, *telemetry.Metrics, func(result string) float64) {
	t.Helper()
	spec1, err := modelpkg.Parse("add/model.yaml", []byte(manifest+"cache: {ttl: 1m, maxBytes: 1MiB}\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec2, err := modelpkg.Parse("add/model.yaml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	be1, be2 := &counting{}, &counting{}
	t1 := &routing.Target{Model: "add", N: 1, ID: "add@1", Spec: spec1, Server: be1, Digest: "d1"}
	t2 := &routing.Target{Model: "add", N: 2, ID: "add@2", Spec: spec2, Server: be2, Digest: "d2"}
	h := &routing.Holder{}
	h.Store(&routing.Table{Models: map[string]*routing.Entry{"add": {
		Routes:   []routing.Route{{Range: routing.Range{Version: 1, Lo: 0, Hi: routing.Buckets}, Target: t1}},
		Versions: map[int]*routing.Target{1: t1, 2: t2},
	}}})
	reg := telemetry.NewRegistry()
	m := telemetry.New(reg, telemetry.BuildInfo{})
	count := func(result string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, mf := range mfs {
			if mf.GetName() != "sluice_cache_requests_total" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				if label(mt, "result") == result && label(mt, "version") == "1" {
					total += mt.GetCounter().GetValue()
				}
			}
		}
		return total
	}
	return &Gateway{Table: h, Caches: predcache.NewSet(), Metrics: m}, be1, be2, m, count
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func rowsFrom(lo, hi int) []schema.Instance {
	var out []schema.Instance
	for i := lo; i < hi; i++ {
		out = append(out, inst(strconv.Itoa(i), "0.5"))
	}
	return out
}

func predictPinned(g *Gateway, tn *tenant.Tenant, version int, insts []schema.Instance) *Answer {
	c := call(tn, HTTP, "", insts...)
	c.Idempotent, c.Version = false, version
	return g.Predict(context.Background(), c)
}

func TestCachePerInstance(t *testing.T) {
	g, be, _, _, count := newCachedGateway(t)
	check := func(a *Answer, want string, lo, hi int) {
		t.Helper()
		if a.Err != nil {
			t.Fatal(a.Err)
		}
		if a.Cache != want {
			t.Fatalf("X-Cache %q, want %q", a.Cache, want)
		}
		out := a.Prediction.Out
		if out.Rows != hi-lo || out.Cols != 1 {
			t.Fatalf("output %d×%d", out.Rows, out.Cols)
		}
		for i := 0; i < out.Rows; i++ {
			if w := float32(lo+i) + 0.5; out.Data[i] != w {
				t.Fatalf("row %d: %v, want %v (merged out of order?)", i, out.Data[i], w)
			}
		}
	}
	// 90 rows computed, then a request of 100 with those 90 inside: only
	// 10 reach the backend, the answer is in order.
	check(predictPinned(g, tenant.Default, 1, rowsFrom(0, 90)), CacheMiss, 0, 90)
	if calls, rows := be.figures(); calls != 1 || rows != 90 {
		t.Fatalf("first: %d calls, %d rows", calls, rows)
	}
	check(predictPinned(g, tenant.Default, 1, rowsFrom(0, 100)), CachePartial, 0, 100)
	if calls, rows := be.figures(); calls != 2 || rows != 100 {
		t.Fatalf("partial: %d calls, %d rows in all, want 2 and 100 (only the 10 misses)", calls, rows)
	}
	check(predictPinned(g, tenant.Default, 1, rowsFrom(5, 60)), CacheHit, 5, 60)
	if calls, _ := be.figures(); calls != 2 {
		t.Fatal("a request of cached rows reached the backend")
	}
	// hit + miss is every instance answered.
	if h, m := count("hit"), count("miss"); h != 90+55 || m != 90+10 {
		t.Fatalf("cache requests: %v hits, %v misses", h, m)
	}

	// Another tenant with the same rows: misses, never the first's.
	other := *tenant.Default
	other.Name = "other"
	check(predictPinned(g, &other, 1, rowsFrom(0, 10)), CacheMiss, 0, 10)
	// A version without cache: computes, no X-Cache, nothing counted.
	a := predictPinned(g, tenant.Default, 2, rowsFrom(0, 10))
	if a.Err != nil || a.Cache != "" {
		t.Fatalf("uncached version: %+v", a)
	}
	// The same row twice in one request: computed once, both answered.
	rows := append(rowsFrom(200, 201), rowsFrom(200, 201)...)
	_, before := be.figures()
	check2 := predictPinned(g, tenant.Default, 1, rows)
	if check2.Err != nil || check2.Prediction.Out.Data[0] != 200.5 || check2.Prediction.Out.Data[1] != 200.5 || check2.Cache != CachePartial {
		t.Fatalf("duplicate rows: %+v", check2)
	}
	if _, after := be.figures(); after-before != 1 {
		t.Fatalf("duplicate rows: %d computed, want 1", after-before)
	}
	// Dropped with the version.
	g.Caches.Drop("add@1")
	check(predictPinned(g, tenant.Default, 1, rowsFrom(0, 10)), CacheMiss, 0, 10)
}

// Concurrent identical misses compute once.
func TestCacheConcurrentMissesComputeOnce(t *testing.T) {
	g, be, _, _, _ := newCachedGateway(t)
	be.entered, be.gate = make(chan struct{}, 8), make(chan struct{})
	const callers = 4
	answers := make(chan *Answer, callers)
	go func() { answers <- predictPinned(g, tenant.Default, 1, rowsFrom(7, 8)) }()
	<-be.entered // the first is computing: the others find its flight (or its answer)
	var wg sync.WaitGroup
	for i := 1; i < callers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); answers <- predictPinned(g, tenant.Default, 1, rowsFrom(7, 8)) }()
	}
	close(be.gate)
	wg.Wait()
	for i := 0; i < callers; i++ {
		a := <-answers
		if a.Err != nil || a.Prediction.Out.Data[0] != 7.5 {
			t.Fatalf("answer %+v", a)
		}
	}
	if calls, rows := be.figures(); calls != 1 || rows != 1 {
		t.Fatalf("%d calls, %d rows: identical misses computed more than once", calls, rows)
	}
}
