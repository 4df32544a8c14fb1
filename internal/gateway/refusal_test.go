package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/tenant"
	"github.com/sluiceml/sluice/internal/vstats"
)

// failing is a backend that answers with err while it is set, else with
// the sum backend's answer.
type failing struct {
	sum
	err atomic.Pointer[errs.Error]
}

func (f *failing) Submit(ctx context.Context, w serving.Work) (serving.Result, error) {
	if e := f.err.Load(); e != nil {
		return serving.Result{}, e
	}
	return f.sum.Submit(ctx, w)
}

// quotaTenant is a tenant whose quota holds one instance and refills one
// in about 11 days: a second instance passes only if the first was refunded.
func quotaTenant(t *testing.T) *tenant.Tenant {
	t.Helper()
	key, hash := tenant.NewKey()
	set, err := tenant.Parse("tenants.yaml", []byte("tenants:\n  - name: acme\n    keys: [\""+hash+"\"]\n    models: [\"*\"]\n    quota: {instancesPerSecond: 0.000001, burst: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tn, err := set.Authenticate("Bearer " + key)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// counter reads one series of a counter from reg (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestColdStartRefundsAndCounts: a cold_start refusal (the version is
// loaded on no worker and the deadline is shorter than its load) computed
// nothing, so the tenant's quota is given back, and it is counted in
// sluice_refusals_total{reason="cold_start"}, pre-registered at 0.
func TestColdStartRefundsAndCounts(t *testing.T) {
	g, _ := newGateway(t)
	be := &failing{}
	g.Table.Load().Models["add"].Versions[1].Server = be
	reg := prometheus.NewRegistry()
	g.Metrics = telemetry.New(reg, telemetry.BuildInfo{})
	g.Metrics.InitVersion("add", "1")
	cold := map[string]string{"model": "add", "version": "1", "reason": "cold_start"}
	if n := counter(t, reg, "sluice_refusals_total", cold); n != 0 {
		t.Fatalf("cold_start refusals before any call = %v", n)
	}
	tn := quotaTenant(t)
	ctx := context.Background()
	be.err.Store(&errs.Error{Code: errs.ColdStart, Message: "add@1 is not loaded", RetryAfter: 300 * time.Millisecond})
	if a := g.Predict(ctx, call(tn, HTTP, "r1", inst("1", "2"))); a.Err == nil || a.Err.Code != errs.ColdStart {
		t.Fatalf("first call: %+v, want cold_start", a)
	}
	if n := counter(t, reg, "sluice_refusals_total", cold); n != 1 {
		t.Errorf("sluice_refusals_total{reason=\"cold_start\"} = %v, want 1", n)
	}
	be.err.Store(nil)
	a := g.Predict(ctx, call(tn, HTTP, "r2", inst("1", "2")))
	if a.Err != nil {
		t.Fatalf("after a cold_start refusal the tenant's one instance must be back: %v", a.Err)
	}
	if a := g.Predict(ctx, call(tn, HTTP, "r3", inst("1", "2"))); a.Err == nil || a.Err.Code != errs.QuotaExceeded {
		t.Fatalf("the quota holds one instance and r2 spent it; r3 got %+v", a)
	}
	if n := counter(t, reg, "sluice_refusals_total", map[string]string{"reason": "quota_exceeded"}); n != 1 {
		t.Errorf("quota_exceeded refusals = %v, want 1", n)
	}
	if n := counter(t, reg, "sluice_tenant_quota_refusals_total", map[string]string{"tenant": "acme"}); n != 1 {
		t.Errorf("tenant quota refusals = %v, want 1", n)
	}
}

// TestEveryCodeAsTheCatalogueSays: whatever code the version's backend
// answers, the gateway refunds the quota exactly when the catalogue says
// so, counts a refusal under its own reason exactly when the code is one,
// and a shadow copy is dropped (not an error) exactly for a capacity or
// closing refusal.
func TestEveryCodeAsTheCatalogueSays(t *testing.T) {
	for _, c := range errs.Codes() {
		t.Run(string(c), func(t *testing.T) {
			e := errs.Lookup(c)
			g, _ := newGateway(t)
			g.Log = discard()
			be := &failing{}
			g.Table.Load().Models["add"].Versions[1].Server = be
			reg := prometheus.NewRegistry()
			g.Metrics = telemetry.New(reg, telemetry.BuildInfo{})
			tn := quotaTenant(t)
			ctx := context.Background()
			be.err.Store(errs.New(c, "from the backend"))
			if a := g.Predict(ctx, call(tn, HTTP, "r1", inst("1", "2"))); a.Err == nil || a.Err.Code != c {
				t.Fatalf("answer %+v, want %s", a, c)
			}
			want := 0.0
			if e.Refusal != "" {
				want = 1
			}
			if n := counter(t, reg, "sluice_refusals_total", map[string]string{"model": "add", "reason": string(c)}); n != want {
				t.Errorf("refusals{reason=%s} = %v, want %v (catalogue refusal %q)", c, n, want, e.Refusal)
			}
			be.err.Store(nil)
			a := g.Predict(ctx, call(tn, HTTP, "r2", inst("1", "2")))
			if refunded := a.Err == nil; refunded != e.Refund {
				t.Errorf("refunded = %v (second call: %v), the catalogue says %v", refunded, a.Err, e.Refund)
			}

			stats := &vstats.Set{}
			s := NewShadows(stats, discard(), 1, 4, time.Minute)
			defer s.Close()
			tg := shadowTarget(t, &shadowBackend{err: errs.New(c, "from the shadow")})
			s.run(shadowJob{target: tg, rows: instanceRows{inst("1", "2")}, primary: []float32{3}, cols: 1})
			sh := stats.Get(tg.ID).Snapshot().Shadow
			dropped := e.Refusal == errs.RefusalCapacity || e.Refusal == errs.RefusalClosing
			if (sh.Dropped == 1) != dropped || (sh.Errors == 1) == dropped {
				t.Errorf("shadow copy refused with %s: dropped %d, errors %d; want dropped %v", c, sh.Dropped, sh.Errors, dropped)
			}
		})
	}
}

// An idempotency entry is kept for every answer except a failure before
// the rows reached a model; a call that claimed none settles none.
func TestSettle(t *testing.T) {
	for _, tc := range []struct {
		claimed, failed, reached bool
		want                     settlement
	}{
		{false, false, false, unclaimed},
		{false, true, true, unclaimed},
		{true, false, true, keep},
		{true, false, false, keep}, // a success always reached a model; kept all the same
		{true, true, true, keep},   // the model's error is the answer a retry gets
		{true, true, false, abort}, // routing, validation, quota: computed again
	} {
		if got := settle(tc.claimed, tc.failed, tc.reached); got != tc.want {
			t.Errorf("settle(claimed %v, failed %v, reached %v) = %v, want %v", tc.claimed, tc.failed, tc.reached, got, tc.want)
		}
	}
}
