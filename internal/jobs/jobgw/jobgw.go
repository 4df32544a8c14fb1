// Package jobgw is the in-process jobs.Predictor: a batch job's rows
// scored through gateway.Predict at the batch class (serving.BatchJob),
// as the job's submitter, with the version pinned at submit.
//
// Each row is checked against the version's schema first, so a row the
// schema refuses is that row's error (field and message) and the rest of
// the chunk is scored: the gateway refuses a whole call for one bad
// instance. The good rows go in calls of at most the version's
// serving.maxInstancesPerRequest, half its batch queue bound
// (serving.BatchQueueBound: two chunks in flight fit in it) and the
// tenant's quota burst. A call the batch queue or the quota refuses is
// retried here after a short wait (batch work is expected to find the
// queue full whenever online work is busy: that is the point of its
// class), so the chunk's earlier calls are not computed again; any other
// error is the chunk's, for the runner to retry or fail the job on.
package jobgw

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/tenant"
)

// Transport names a job's calls in the gateway's spans, records and logs.
const Transport gateway.Transport = "job"

// Predictor scores job rows through a gateway.
type Predictor struct {
	Gateway *gateway.Gateway
	// Tenants finds a job's submitter by name (nil: no tenants file, the
	// one tenant is tenant.Default).
	Tenants *tenant.Set
	// Deadline of each call (0: DefaultDeadline): batch work waits for
	// idle capacity, longer than an online request would.
	Deadline time.Duration
	// CallsInFlight is how many of one chunk's gateway calls are open at
	// once (0: DefaultCallsInFlight). Each call holds at most half the
	// batch queue's bound, so two keep the batch class's queue fed while
	// one computes: one chunk in flight keeps the replicas busy, and a
	// crash redoes at most that chunk.
	CallsInFlight int
}

// DefaultDeadline is a batch call's deadline.
const DefaultDeadline = 2 * time.Minute

// DefaultCallsInFlight is Predictor.CallsInFlight's default.
const DefaultCallsInFlight = 2

var _ jobs.Predictor = (*Predictor)(nil)

func (p *Predictor) tenant(name string) (*tenant.Tenant, error) {
	t, ok := p.Tenants.Lookup(name)
	if !ok {
		return nil, errs.New(errs.PermissionDenied, "tenant %q is not in the tenants file any more; the job cannot run as its submitter", name)
	}
	return t, nil
}

func (p *Predictor) spec(model string, version int) (*modelpkg.Spec, error) {
	sp := p.Gateway.Spec(model, version, "")
	if sp == nil {
		e := errs.New(errs.NotReady, "%s@%d is not loaded (not deployed, or not ready yet)", model, version)
		e.RetryAfter = time.Second
		return nil, e
	}
	return sp, nil
}

// Version describes the pinned version: its input fields as a reader
// types them, its outputs. The tenant must be allowed on the model.
func (p *Predictor) Version(_ context.Context, tenantName, model string, version int) (jobs.VersionInfo, error) {
	t, err := p.tenant(tenantName)
	if err != nil {
		return jobs.VersionInfo{}, err
	}
	if err := t.Check(model); err != nil {
		return jobs.VersionInfo{}, err
	}
	sp, err := p.spec(model, version)
	if err != nil {
		return jobs.VersionInfo{}, err
	}
	return jobs.VersionInfo{VersionID: fmt.Sprintf("%s@%d", model, version), Fields: Fields(sp.Schema), Outputs: append([]string(nil), sp.OutputNames...)}, nil
}

// Fields is a schema's fields as job readers type them: numbers for
// float and int, booleans, strings for categories (and for sequences,
// which only JSONL inputs can carry).
func Fields(sch *schema.Schema) []jobio.Field {
	out := make([]jobio.Field, sch.NumFields())
	for i := range out {
		f := sch.Field(i)
		k := jobio.String
		switch f.Type {
		case schema.TypeFloat, schema.TypeInt:
			k = jobio.Number
		case schema.TypeBool:
			k = jobio.Bool
		}
		out[i] = jobio.Field{Name: f.Name, Kind: k}
	}
	return out
}

// Predict scores rows: one result per row. A row the schema refuses is
// its result's error; the call's error is what is not the rows' fault.
func (p *Predictor) Predict(ctx context.Context, tenantName, model string, version int, rows []jobio.Row) ([]jobs.RowResult, error) {
	t, err := p.tenant(tenantName)
	if err != nil {
		return nil, err
	}
	sp, err := p.spec(model, version)
	if err != nil {
		return nil, err
	}
	c := check(sp, rows)
	out := make([]jobs.RowResult, len(rows))
	for i, e := range c.refused {
		if e != nil {
			out[i].Err = e
		}
	}
	size := callSize(sp, t)
	job, chunk, _ := jobs.ChunkOf(ctx)
	n := len(c.index)
	inFlight := p.CallsInFlight
	if inFlight <= 0 {
		inFlight = DefaultCallsInFlight
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(inFlight)
	for part, lo := 0, 0; lo < n; part, lo = part+1, lo+size {
		hi := min(lo+size, n)
		id := fmt.Sprintf("job-%s-chunk-%d", job, chunk)
		if n > size {
			id += "-" + strconv.Itoa(part)
		}
		idx := append([]int(nil), c.index[lo:hi]...)
		// Each call writes only out[i] of its own rows i: the calls share
		// no element of out.
		g.Go(func() error { return p.call(gctx, t, model, version, id, c, idx, out) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// checked is a chunk's rows checked against the version's schema.
type checked struct {
	sch     *schema.Schema
	rows    []jobio.Row
	refused []*jobio.OutError // per row: the schema's refusal
	index   []int             // the rows to score
	// width and data: each row to score preprocessed (row i at
	// data[i*width:]), when the schema reads columns and nothing enriches
	// them; nil: the gateway builds the rows from the instances.
	width int
	data  []float32
	insts []schema.Instance // per row, built when needed (nil entries until then)
}

// check validates each row: FastRow on the row's values where it can
// (no number through text), the schema's Row for the refusal's message.
// A version with features: is judged by the gateway (enrichment fills
// fields first).
func check(sp *modelpkg.Spec, rows []jobio.Row) *checked {
	sch := sp.Schema
	c := &checked{sch: sch, rows: rows, refused: make([]*jobio.OutError, len(rows)), insts: make([]schema.Instance, len(rows))}
	if sp.Manifest.Features != nil {
		for i := range rows {
			c.index = append(c.index, i)
		}
		return c
	}
	if !sch.Columns() {
		for i := range rows {
			if _, err := sch.Tokens("", c.instance(i)); err != nil {
				c.refused[i] = jobs.RowErr(err)
				continue
			}
			c.index = append(c.index, i)
		}
		return c
	}
	c.width = sch.Width()
	c.data = make([]float32, len(rows)*c.width)
	cells := make([]schema.Cell, sch.NumFields())
	for i, r := range rows {
		dst := c.data[i*c.width : (i+1)*c.width]
		if !(fillCells(sch, r, cells) && sch.FastRow(cells, dst)) {
			if err := sch.Row("", c.instance(i), dst); err != nil {
				c.refused[i] = jobs.RowErr(err)
				continue
			}
		}
		c.index = append(c.index, i)
	}
	return c
}

// fillCells reads r's values into cells (false: r holds a key or a value
// FastRow cannot take; Row then judges it).
func fillCells(sch *schema.Schema, r jobio.Row, cells []schema.Cell) bool {
	found := 0
	for i := range cells {
		v, ok := r[sch.Field(i).Name]
		if !ok {
			cells[i] = schema.Cell{Kind: schema.Null}
			continue
		}
		found++
		switch x := v.(type) {
		case nil:
			cells[i] = schema.Cell{Kind: schema.Null}
		case float64:
			cells[i] = schema.Cell{Kind: schema.Number, X: x}
		case int64:
			if x > 1<<53 || x < -(1<<53) {
				return false
			}
			cells[i] = schema.Cell{Kind: schema.Number, X: float64(x)}
		case bool:
			b := 0.0
			if x {
				b = 1
			}
			cells[i] = schema.Cell{Kind: schema.Bool, X: b}
		case string:
			cells[i] = schema.Cell{Kind: schema.String, Text: x}
		default:
			return false
		}
	}
	return found == len(r)
}

func (c *checked) instance(i int) schema.Instance {
	if c.insts[i] == nil {
		c.insts[i] = Instance(c.sch, c.rows[i])
	}
	return c.insts[i]
}

// callRows is one call's rows for the gateway (gateway.Rows): the
// preprocessed rows check wrote when the answering version's schema is
// the pinned one, the instances otherwise (a shadow with another schema)
// and for the input hash of the call's record.
type callRows struct {
	c   *checked
	idx []int
}

func (r *callRows) Len() int     { return len(r.idx) }
func (r *callRows) Hash() string { return records.InputHash(r.Instances()) }

func (r *callRows) Instances() []schema.Instance {
	out := make([]schema.Instance, len(r.idx))
	for k, i := range r.idx {
		out[k] = r.c.instance(i)
	}
	return out
}

func (r *callRows) Build(sch *schema.Schema, missing func(row []float32)) (runtime.Batch, error) {
	c := r.c
	if sch != c.sch || c.data == nil {
		return gateway.BuildRows(sch, r.Instances(), missing)
	}
	w := c.width
	b := runtime.Batch{Rows: len(r.idx), Cols: w, Data: make([]float32, len(r.idx)*w)}
	for k, i := range r.idx {
		row := b.Data[k*w : (k+1)*w]
		copy(row, c.data[i*w:(i+1)*w])
		if missing != nil {
			missing(row)
		}
	}
	return b, nil
}

// callSize is how many rows one gateway call holds.
func callSize(sp *modelpkg.Spec, t *tenant.Tenant) int {
	sv := sp.Manifest.Serving
	n := max(serving.BatchQueueBound(sv.MaxQueueInstances, 0)/2, 1)
	if sv.MaxInstancesPerRequest > 0 {
		n = min(n, sv.MaxInstancesPerRequest)
	}
	if b, ok := t.Burst(); ok {
		n = min(n, max(int(math.Floor(b)), 1))
	}
	return n
}

// call scores the rows idx of c in one gateway call, retrying a full
// batch queue or an empty quota; a row the gateway refuses (a field
// enrichment filled, say) is that row's error and the others are sent
// again.
func (p *Predictor) call(ctx context.Context, t *tenant.Tenant, model string, version int, id string, c *checked, idx []int, out []jobs.RowResult) error {
	deadline := p.Deadline
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	for attempt := 1; len(idx) > 0; {
		rows := &callRows{c: c, idx: idx}
		a := p.Gateway.Predict(ctx, gateway.Call{Transport: Transport, Tenant: t, RequestID: id, Model: model, Version: version,
			Priority: serving.BatchJob, Decode: func() (gateway.Input, error) {
				return gateway.Input{Rows: rows, Deadline: deadline}, nil
			}})
		if a.Err == nil {
			pr := a.Prediction
			if pr.Out.Rows != len(idx) {
				return errs.New(errs.Internal, "%s answered %d rows for %d", a.ModelVersion, pr.Out.Rows, len(idx))
			}
			for k, i := range idx {
				row := pr.Out.Row(k)
				m := make(map[string]any, len(pr.Outputs))
				for col, name := range pr.Outputs {
					if col >= len(row) {
						continue
					}
					if pr.Labels != nil && pr.Labels[col] != nil {
						// A postprocess: label is written as its label,
						// as /v1's labels and OIP's BYTES tensors say it.
						if l, ok := pr.Label(k, col); ok {
							m[name] = l
						} else {
							m[name] = nil
						}
						continue
					}
					m[name] = float32Value(row[col])
				}
				out[i].Outputs = m
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e := a.Err
		if k, ok := jobs.InstanceOf(e.Field); ok && k < len(idx) && e.Code == errs.InvalidArgument {
			out[idx[k]].Err = jobs.RowErr(e)
			idx = append(idx[:k:k], idx[k+1:]...)
			continue
		}
		if e.Code != errs.QueueFull && e.Code != errs.QuotaExceeded {
			return e
		}
		wait := jobs.CallRetryWait(attempt, e)
		attempt++
		tm := time.NewTimer(wait)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
	return nil
}

// Instance is a job row as the schema reads it: the schema's fields
// first, in its order (the fast path of validation), then the row's
// other keys in sorted order (the schema refuses them by name).
func Instance(sch *schema.Schema, r jobio.Row) schema.Instance {
	inst := make(schema.Instance, 0, len(r))
	seen := 0
	for i := range sch.NumFields() {
		name := sch.Field(i).Name
		if v, ok := r[name]; ok {
			inst = append(inst, schema.Member{Name: name, Value: value(v)})
			seen++
		}
	}
	if seen == len(r) {
		return inst
	}
	var extra []string
	for k := range r {
		if _, ok := sch.FieldIndex(k); !ok {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	for _, k := range extra {
		inst = append(inst, schema.Member{Name: k, Value: value(r[k])})
	}
	return inst
}

// value is a decoded row value as a schema.Value.
func value(v any) schema.Value {
	switch x := v.(type) {
	case nil:
		return schema.Value{Kind: schema.Null}
	case bool:
		return schema.Value{Kind: schema.Bool, Bool: x}
	case string:
		return schema.Value{Kind: schema.String, Text: x}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return schema.Value{Kind: schema.Composite}
		}
		return schema.Value{Kind: schema.Number, Text: strconv.FormatFloat(x, 'g', -1, 64)}
	case float32:
		return value(float64(x))
	case int64:
		return schema.Value{Kind: schema.Number, Text: strconv.FormatInt(x, 10)}
	case int32:
		return schema.Value{Kind: schema.Number, Text: strconv.FormatInt(int64(x), 10)}
	case int:
		return schema.Value{Kind: schema.Number, Text: strconv.Itoa(x)}
	case json.Number:
		return schema.Value{Kind: schema.Number, Text: x.String()}
	case []any:
		arr := schema.Value{Kind: schema.Array, Items: make([]string, 0, len(x))}
		for _, e := range x {
			ev := value(e)
			if ev.Kind != schema.Number {
				return schema.Value{Kind: schema.Composite}
			}
			arr.Items = append(arr.Items, ev.Text)
		}
		return arr
	}
	return schema.Value{Kind: schema.Composite}
}

// float32Value is f as the float64 of its shortest decimal (0.8, not
// 0.800000011920929): what the model computed, written as /v1 writes it.
func float32Value(f float32) float64 {
	x, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil {
		return float64(f)
	}
	return x
}
