package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/predcache"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/tenant"
	"github.com/sluiceml/sluice/internal/vstats"
)

// A call's Priority reaches the version's backend: transports leave it
// zero (online); an in-process caller submits batch work at BatchJob, with
// and without the prediction cache.
func TestCallPriorityReachesTheBackend(t *testing.T) {
	for _, cached := range []bool{false, true} {
		m := manifest
		if cached {
			m += "cache: {ttl: 1m, maxBytes: 1MiB}\n"
		}
		spec, err := modelpkg.Parse("add/model.yaml", []byte(m))
		if err != nil {
			t.Fatal(err)
		}
		be := &shadowBackend{out: []float32{1}, prio: make(chan serving.Priority, 4)}
		tg := &routing.Target{Model: "add", N: 1, ID: "add@1", Spec: spec, Server: be, Digest: "d1"}
		h := &routing.Holder{}
		h.Store(&routing.Table{Models: map[string]*routing.Entry{"add": {
			Routes: []routing.Route{{Range: routing.Range{Version: 1, Lo: 0, Hi: routing.Buckets}, Target: tg}}, Versions: map[int]*routing.Target{1: tg},
		}}})
		g := &Gateway{Table: h, Idem: records.NewIdempotency(time.Minute, 100, 0)}
		if cached {
			g.Caches = predcache.NewSet()
		}
		for i, want := range []serving.Priority{serving.Online, serving.BatchJob} {
			c := call(tenant.Default, HTTP, "r"+string(rune('a'+i)), inst(string(rune('1'+i)), "2"))
			c.Priority = want
			if a := g.Predict(context.Background(), c); a.Err != nil {
				t.Fatalf("cached %v: %+v", cached, a.Err)
			}
			if got := <-be.prio; got != want {
				t.Errorf("cached %v: the backend got priority %v, want %v", cached, got, want)
			}
		}
	}
}

// A shadow copy of batch work runs at the batch class, never above the
// work it copies; a copy of online work at Low.
func TestShadowOfBatchWorkStaysBatch(t *testing.T) {
	stats := &vstats.Set{}
	s := NewShadows(stats, discard(), 1, 4, time.Minute)
	defer s.Close()
	be := &shadowBackend{out: []float32{0.8}, prio: make(chan serving.Priority, 4)}
	tg := shadowTarget(t, be)
	for _, c := range []struct{ of, want serving.Priority }{{serving.Online, serving.Low}, {serving.BatchJob, serving.BatchJob}} {
		s.run(shadowJob{target: tg, rows: instanceRows{inst("1", "2")}, primary: []float32{0.8}, cols: 1, prio: c.of})
		if got := <-be.prio; got != c.want {
			t.Errorf("a copy of %v work ran at %v, want %v", c.of, got, c.want)
		}
	}
}
