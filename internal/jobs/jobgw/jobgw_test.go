package jobgw

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/runtime"
	_ "github.com/sluiceml/sluice/internal/runtime/linear" // the manifest's runtime must be registered
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/tenant"
)

// backend sums a row's features; it records each call's priority and
// size, and refuses the first queueFull calls with queue_full.
type backend struct {
	mu        sync.Mutex
	sizes     []int
	classes   []serving.Priority
	queueFull int
}

func (b *backend) Submit(_ context.Context, w serving.Work) (serving.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queueFull > 0 {
		b.queueFull--
		return serving.Result{}, &errs.Error{Code: errs.QueueFull, Message: "batch work queue is full"}
	}
	b.sizes = append(b.sizes, w.Rows.Rows)
	b.classes = append(b.classes, w.Priority)
	out := runtime.Output{Rows: w.Rows.Rows, Cols: 1, Data: make([]float32, w.Rows.Rows)}
	for i := range w.Rows.Rows {
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
    - {name: a, type: float, min: 0}
    - {name: b, type: float}
    - {name: c, type: category, values: [x, y], default: x}
preprocess:
  - {op: ordinal, field: c}
output:
  schema: add-output@1
  fields: [{name: total}]
serving:
  maxInstancesPerRequest: 8
  maxQueueInstances: 16
`

func newPredictor(t *testing.T, tenants *tenant.Set) (*Predictor, *backend) {
	t.Helper()
	spec, err := modelpkg.Parse("add/model.yaml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	be := &backend{}
	tg := &routing.Target{Model: "add", N: 2, ID: "add@2", Spec: spec, Server: be}
	h := &routing.Holder{}
	h.Store(&routing.Table{Models: map[string]*routing.Entry{"add": {
		Routes: []routing.Route{{Range: routing.Range{Version: 2, Lo: 0, Hi: routing.Buckets}, Target: tg}}, Versions: map[int]*routing.Target{2: tg},
	}}})
	return &Predictor{Gateway: &gateway.Gateway{Table: h}, Tenants: tenants}, be
}

func TestVersion(t *testing.T) {
	p, _ := newPredictor(t, nil)
	info, err := p.Version(context.Background(), "default", "add", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []jobio.Field{{Name: "a", Kind: jobio.Number}, {Name: "b", Kind: jobio.Number}, {Name: "c", Kind: jobio.String}}
	if info.VersionID != "add@2" || len(info.Fields) != 3 || info.Fields[0] != want[0] || info.Fields[2] != want[2] || strings.Join(info.Outputs, ",") != "total" {
		t.Fatalf("info %+v", info)
	}
	if _, err := p.Version(context.Background(), "default", "add", 7); errs.CodeOf(err) != errs.NotReady {
		t.Errorf("an unknown version: %v; want not_ready", err)
	}
	if _, err := p.Version(context.Background(), "acme", "add", 2); errs.CodeOf(err) != errs.PermissionDenied {
		t.Errorf("an unknown tenant: %v; want permission_denied", err)
	}
	set, err := tenant.Parse("t.yaml", []byte("tenants:\n  - {name: acme, keys: [\"sha256:"+strings.Repeat("a", 64)+"\"], models: [\"other-*\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := newPredictor(t, set)
	if _, err := p2.Version(context.Background(), "acme", "add", 2); errs.CodeOf(err) != errs.PermissionDenied {
		t.Errorf("a tenant not allowed on the model: %v; want permission_denied", err)
	}
}

// Rows the schema refuses are their own errors; the others are scored at
// the batch class, in calls within the version's bounds, through a full
// batch queue.
func TestPredict(t *testing.T) {
	p, be := newPredictor(t, nil)
	be.queueFull = 2
	var rows []jobio.Row
	for i := range 20 {
		rows = append(rows, jobio.Row{"a": float64(i), "b": 1.5})
	}
	rows[3] = jobio.Row{"a": -1.0, "b": 1.0}         // below min
	rows[7] = jobio.Row{"b": 1.0}                    // a missing
	rows[9] = jobio.Row{"a": 1.0, "b": 2.0, "z": 3.} // unknown field
	rows[11] = jobio.Row{"a": 1.0, "b": 2.0, "c": "q"}
	ctx := jobs.WithChunk(context.Background(), "j1", 4)
	res, err := p.Predict(ctx, "default", "add", 2, rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 20 {
		t.Fatalf("%d results", len(res))
	}
	for i, r := range res {
		switch i {
		case 3, 7, 9, 11:
			if r.Err == nil || r.Outputs != nil {
				t.Errorf("row %d: %+v; want its error", i, r)
			}
		default:
			if r.Err != nil || r.Outputs["total"] != float64(i)+1.5 {
				t.Errorf("row %d: %+v; want total %g", i, r, float64(i)+1.5)
			}
		}
	}
	if e := res[3].Err; e.Field != "a" || !strings.Contains(e.Message, "0") {
		t.Errorf("row 3's error %+v; want field a and its bound", e)
	}
	if e := res[7].Err; e.Field != "a" || !strings.Contains(e.Message, "missing") {
		t.Errorf("row 7's error %+v", e)
	}
	if e := res[9].Err; e.Field != "z" {
		t.Errorf("row 9's error %+v", e)
	}
	// 16 good rows; a call holds at most min(8, bound(16)/2 = 2) ... the
	// batch queue bound of 16 is 4, half of it 2.
	total := 0
	for i, n := range be.sizes {
		total += n
		if n > 2 || be.classes[i] != serving.BatchJob {
			t.Errorf("call %d: %d rows at class %v; want at most 2 at the batch class", i, n, be.classes[i])
		}
	}
	if total != 16 {
		t.Errorf("%d rows scored; want 16", total)
	}
}

func TestInstanceValues(t *testing.T) {
	p, _ := newPredictor(t, nil)
	sp := p.Gateway.Spec("add", 2, "")
	inst := Instance(sp.Schema, jobio.Row{"b": 2.5, "a": int64(3), "c": "x", "extra": true})
	var names []string
	for _, m := range inst {
		names = append(names, m.Name)
	}
	if strings.Join(names, ",") != "a,b,c,extra" || inst[0].Value.Text != "3" || inst[1].Value.Text != "2.5" {
		t.Fatalf("instance %+v", inst)
	}
}
