package gateway

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/runtime"
	_ "github.com/sluiceml/sluice/internal/runtime/linear" // the manifest's runtime must be registered
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/tenant"
)

// sum is a fake backend: one output, the sum of a row's features.
type sum struct{ calls atomic.Int64 }

func (s *sum) Submit(ctx context.Context, w serving.Work) (serving.Result, error) {
	s.calls.Add(1)
	out := runtime.Output{Rows: w.Rows.Rows, Cols: 1, Data: make([]float32, w.Rows.Rows)}
	for i := 0; i < w.Rows.Rows; i++ {
		for _, v := range w.Rows.Row(i) {
			out.Data[i] += v
		}
	}
	return serving.Result{Out: out}, nil
}

const manifest = `name: add
runtime: linear
artifact: model.json
input:
  schema: add-input@1
  fields:
    - {name: a, type: float}
    - {name: b, type: float}
output:
  schema: add-output@1
  fields: [{name: total}]
`

func newGateway(t *testing.T) (*Gateway, *sum) {
	t.Helper()
	spec, err := modelpkg.Parse("add/model.yaml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	be := &sum{}
	tg := &routing.Target{Model: "add", N: 1, ID: "add@1", Spec: spec, Server: be}
	h := &routing.Holder{}
	h.Store(&routing.Table{Models: map[string]*routing.Entry{"add": {
		Routes: []routing.Route{{Range: routing.Range{Version: 1, Lo: 0, Hi: routing.Buckets}, Target: tg}}, Versions: map[int]*routing.Target{1: tg},
	}}})
	return &Gateway{Table: h, Idem: records.NewIdempotency(time.Minute, 100, 0)}, be
}

func call(tn *tenant.Tenant, tr Transport, id string, insts ...schema.Instance) Call {
	return Call{Transport: tr, Tenant: tn, RequestID: id, Idempotent: true, Model: "add",
		Decode: func() (Input, error) { return Input{Instances: insts}, nil }}
}

func inst(a, b string) schema.Instance {
	return schema.Instance{{Name: "a", Value: schema.Value{Kind: schema.Number, Text: a}}, {Name: "b", Value: schema.Value{Kind: schema.Number, Text: b}}}
}

// TestNoImplicitTenant: a call without a tenant is an internal error, never
// the default (admin) tenant.
func TestNoImplicitTenant(t *testing.T) {
	g, be := newGateway(t)
	a := g.Predict(context.Background(), call(nil, HTTP, "r1", inst("1", "2")))
	if a.Err == nil || a.Err.Code != errs.Internal || a.Err.Message != "no tenant" || a.Prediction != nil {
		t.Fatalf("answer %+v", a)
	}
	if be.calls.Load() != 0 {
		t.Fatal("a call without a tenant reached the backend")
	}
	if _, err := g.run(context.Background(), Request{Model: "add", Rows: instanceRows{inst("1", "2")}}); errs.CodeOf(err) != errs.Internal {
		t.Fatalf("run without a tenant: %v", err)
	}
}

// TestReplayAcrossTransports: the cache keeps the transport-neutral answer,
// so a retry over another transport is a replay of the same computation.
func TestReplayAcrossTransports(t *testing.T) {
	g, be := newGateway(t)
	ctx := context.Background()
	first := g.Predict(ctx, call(tenant.Default, HTTP, "r1", inst("1", "2")))
	if first.Err != nil || first.Replay || first.ModelVersion != "add@1" || first.Prediction.Out.Data[0] != 3 {
		t.Fatalf("first: %+v", first)
	}
	for _, tr := range []Transport{HTTP, OIPREST, OIPGRPC} {
		again := g.Predict(ctx, call(tenant.Default, tr, "r1", inst("1.0", "2e0")))
		if again.Err != nil || !again.Replay || again.Prediction.Out.Data[0] != 3 || again.Prediction.ID != "add@1" {
			t.Fatalf("%s retry: %+v", tr, again)
		}
	}
	if n := be.calls.Load(); n != 1 {
		t.Fatalf("%d computations, want 1", n)
	}
	c := g.Predict(ctx, call(tenant.Default, OIPGRPC, "r1", inst("5", "2")))
	if c.Err == nil || c.Err.Code != errs.IdempotencyConflict {
		t.Fatalf("conflict: %+v", c)
	}
}

// TestErrorsBeforeTheModelAreNotKept: a validation error never reached a
// model, so the cache keeps nothing for it (a 400 quotes the input: 300 of
// them with a 1 MB literal held 270 MB); the retry gets the same answer
// computed again, with its field.
func TestErrorsBeforeTheModelAreNotKept(t *testing.T) {
	g, be := newGateway(t)
	ctx := context.Background()
	huge := strings.Repeat("9", 1<<20)
	for i := 0; i < 2; i++ {
		bad := g.Predict(ctx, call(tenant.Default, OIPREST, "r2", schema.Instance{{Name: "a", Value: schema.Value{Kind: schema.String, Text: huge}}}))
		if bad.Err == nil || bad.Err.Code != errs.InvalidArgument || bad.Err.Field != "instances[0].a" || bad.ModelVersion != "add@1" || bad.Replay {
			t.Fatalf("attempt %d: %+v", i, bad)
		}
		if n := g.Idem.Len(); n != 0 {
			t.Fatalf("attempt %d: the cache holds %d ids after a validation error, want 0", i, n)
		}
	}
	if be.calls.Load() != 0 {
		t.Fatal("an invalid instance reached the backend")
	}
	if ok := g.Predict(ctx, call(tenant.Default, HTTP, "r3", inst("1", "2"))); ok.Err != nil {
		t.Fatal(ok.Err)
	}
	if n, b := g.Idem.Len(), g.Idem.Bytes(); n != 1 || b <= 0 || b > 4096 {
		t.Fatalf("after one answer: %d ids, %d bytes", n, b)
	}
}

// The deadline a request gets: its own, else the version's default capped
// by --max-deadline.
func TestDeadline(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct{ asked, def, max, want time.Duration }{
		{0, 2 * s, 0, 2 * s},
		{0, 2 * s, 5 * s, 2 * s},
		{0, 10 * s, 5 * s, 5 * s},
		{300 * time.Millisecond, 10 * s, 5 * s, 300 * time.Millisecond},
		{7 * s, 2 * s, 0, 7 * s},
	} {
		if got := deadline(tc.asked, tc.def, tc.max); got != tc.want {
			t.Errorf("deadline(asked %s, default %s, max %s) = %s, want %s", tc.asked, tc.def, tc.max, got, tc.want)
		}
	}
}
