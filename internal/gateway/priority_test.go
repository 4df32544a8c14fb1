package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/predcache"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/telemetry"
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

// prioBackend answers online work and refuses batch work queue_full (the
// back-pressure a batch caller meets).
type prioBackend struct{ sum }

func (b *prioBackend) Submit(ctx context.Context, w serving.Work) (serving.Result, error) {
	if w.Priority == serving.BatchJob {
		return serving.Result{}, &errs.Error{Code: errs.QueueFull, Message: "batch work queue is full", RetryAfter: time.Second}
	}
	return b.sum.Submit(ctx, w)
}

// Batch work stays out of the version's online figures: the request
// metrics and refusals, and the stats canary analysis reads.
func TestBatchWorkStaysOutOfOnlineFigures(t *testing.T) {
	g, _ := newGateway(t)
	be := &prioBackend{}
	tg := g.Table.Load().Models["add"].Versions[1]
	tg.Server = be
	reg := telemetry.NewRegistry()
	g.Metrics = telemetry.New(reg, telemetry.BuildInfo{})
	g.Stats = &vstats.Set{}
	ctx := context.Background()
	if a := g.Predict(ctx, call(tenant.Default, HTTP, "on", inst("1", "2"))); a.Err != nil {
		t.Fatal(a.Err)
	}
	c := call(tenant.Default, HTTP, "batch", inst("1", "3"))
	c.Priority = serving.BatchJob
	if a := g.Predict(ctx, c); a.Err == nil || a.Err.Code != errs.QueueFull {
		t.Fatalf("batch: %+v, want queue_full", a.Err)
	}
	if sn := g.Stats.Get(tg.ID).Snapshot(); sn.Requests != 1 || sn.Errors != 0 {
		t.Errorf("version stats %+v, want the online request only", sn)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "sluice_requests_total":
			total := 0.0
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
			if total != 1 {
				t.Errorf("sluice_requests_total %v, want 1 (the online request)", total)
			}
		case "sluice_refusals_total":
			t.Errorf("a batch refusal was counted in sluice_refusals_total: %v", mf.GetMetric())
		}
	}
}
