// Package gateway runs one predict call end to end, the same for every
// transport (HTTP /v1, OIP v2 REST, OIP v2 gRPC): the call's span,
// idempotency (replay, conflict, waiting for an attempt in flight), picking
// the target version from the routing snapshot, the version's limits,
// validation and preprocessing of every instance with its schema, quota,
// submitting the rows to the version's backend, shadow copies, metrics, the
// prediction record and the log line. Transports decode, authenticate and
// encode; they call Predict and render its Answer. It knows no transport's
// wire format.
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/outcomes"
	"github.com/sluiceml/sluice/internal/predcache"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/tenant"
	"github.com/sluiceml/sluice/internal/vstats"
)

// Gateway serves predict calls from the current routing snapshot.
type Gateway struct {
	Table       *routing.Holder
	MaxDeadline time.Duration // caps a version's defaultDeadline; 0: no cap
	Stats       *vstats.Set   // per-version outcomes for rollout gates (may be nil)
	Shadows     *Shadows      // runs shadow copies (nil: shadows are skipped)
	Metrics     *telemetry.Metrics
	Records     *records.Writer      // prediction records (nil: off)
	Idem        *records.Idempotency // replays by request id (nil: off)
	// Saved finds answers saved with their records when Idem does not know
	// an id (after a restart); nil: only Idem replays. Needs Records.
	Saved SavedAnswers
	Log   *slog.Logger // nil: slog.Default()
	// Caches holds the prediction caches of versions that declare
	// cache: (nil: nothing is cached).
	Caches *predcache.Set
	// Features enriches the versions that declare features: (nil: no
	// feature store; such a version is refused at load, see app).
	Features FeatureSet
	// Joins takes the join of every answered prediction, so outcomes
	// posted later find its version, policy and unit (nil: off).
	Joins *outcomes.Joiner
}

// Request is one routed predict call (after decoding and idempotency).
type Request struct {
	Tenant     *tenant.Tenant // required
	Model      string
	Version    int           // 0: the deployment picks by RoutingKey
	RoutingKey string        // sticky routing: the same key keeps its version
	Rows       Rows          // the instances (Input.rows)
	Deadline   time.Duration // 0: the version's default
	Received   time.Time     // when the transport received it (zero: now)
	// Priority is the serving class of the rows (serving.Online, the zero
	// value, for every transport). Only callers inside the process set
	// another: the batch-jobs runner submits at serving.BatchJob, which
	// takes only the capacity online work leaves. No API route sets it.
	Priority serving.Priority
}

// Response is a predict call's result.
type Response struct {
	Target *routing.Target
	// Out is the answer's outputs: the model's, after the version's
	// postprocess: (Spec.OutputNames).
	Out        runtime.Output
	Timing     serving.Timing
	Preprocess time.Duration
	// Attempts is how many workers computed (or were tried for) the
	// request when a backend retried it elsewhere (0 or 1: one attempt).
	Attempts int
	// Submitted: the rows reached the version's server (an error came
	// from the model's side, not from routing, validation or quota).
	Submitted bool
	// Cache is how the call used the version's prediction cache.
	Cache CacheUse
	// Features is what enrichment filled (nil: the version has no
	// features:).
	Features *Enriched
	// Policy is the deployment policy version that routed the call (0:
	// none, or a pinned version).
	Policy int
	// raw is the model's outputs before postprocess: (Out), what
	// shadow copies are compared with.
	raw runtime.Output
	// enriched is the rows the primary computed (after enrichment):
	// what shadow copies are given, so a shadow sees the features the
	// primary saw.
	enriched Rows
}

// run routes and runs req. On error, a non-nil Response names the version
// that was picked (Target only). The context's deadline is set from
// req.Deadline (or the version's default) before anything is queued.
func (g *Gateway) run(ctx context.Context, req Request) (*Response, error) {
	tn := req.Tenant
	if tn == nil {
		return nil, errs.New(errs.Internal, "no tenant")
	}
	if err := tn.Check(req.Model); err != nil {
		return nil, err
	}
	t := g.Table.Load()
	var tg *routing.Target
	var shadows []*routing.Target
	var err error
	if req.Version > 0 {
		tg, err = t.Pinned(req.Model, req.Version)
		if e := errs.Of(err); e.Refusal != "" && g.Metrics != nil && req.Priority != serving.BatchJob {
			g.Metrics.Refused(req.Model, strconv.Itoa(req.Version), e.Code)
		}
	} else {
		tg, shadows, err = t.Pick(req.Model, req.RoutingKey)
	}
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if req.Received.IsZero() {
		req.Received = start
	}
	res, err := g.predict(ctx, tn, tg, req)
	if err == nil && req.Version == 0 {
		if e := t.Models[req.Model]; e != nil {
			res.Policy = e.Policy
		}
	}
	if err != nil {
		attempts, submitted := 0, false
		var feat *Enriched
		if res != nil {
			attempts, submitted, feat = res.Attempts, res.Submitted, res.Features
		}
		res = &Response{Target: tg, Attempts: attempts, Submitted: submitted, Features: feat} // the caller may still name the version that refused
	}
	g.observe(tn, tg, req, res, err)
	if g.Stats != nil && req.Priority != serving.BatchJob {
		// The version's figures (canary analysis, rollouts) are online
		// traffic's: batch work waits by design, and is refused queue_full
		// as back-pressure.
		code := errs.CodeOf(err)
		g.Stats.Get(tg.ID).Record(time.Since(start), err == nil, err != nil && errs.HTTPStatus(code) >= 500)
	}
	if err == nil && g.Shadows != nil {
		for _, sh := range shadows {
			if sh != tg {
				// A shadow that reads the features as the primary did is
				// given the primary's enriched rows; one with features
				// of its own enriches the caller's rows itself.
				// Shadows compare the models' own outputs, before
				// either version's postprocess:.
				job := shadowJob{target: sh, rows: req.Rows, primary: res.raw.Data, cols: res.raw.Cols, prio: req.Priority}
				switch sf, pf := sh.Spec.Manifest.Features, tg.Spec.Manifest.Features; {
				case sf != nil && !sameFeatures(sf, pf):
					job.enrich = g.enrich
				case res.enriched != nil:
					job.rows = res.enriched
				}
				g.Shadows.offer(job)
			}
		}
	}
	return res, err
}

func (g *Gateway) predict(ctx context.Context, tn *tenant.Tenant, tg *routing.Target, req Request) (*Response, error) {
	sv := tg.Spec.Manifest.Serving
	n := req.Rows.Len()
	if n == 0 {
		return nil, errs.Field(errs.InvalidArgument, "instances", "at least one instance is required")
	}
	if n > sv.MaxInstancesPerRequest {
		return nil, errs.Field(errs.TooManyInstances, "instances", "%d instances, %s accepts at most %d per request", n, tg.ID, sv.MaxInstancesPerRequest)
	}
	d := deadline(req.Deadline, sv.DefaultDeadline.Duration, g.MaxDeadline)
	// The deadline counts from when the request arrived, not from when
	// this goroutine got to run: time spent waiting for a CPU is spent.
	ctx, cancel := context.WithDeadline(ctx, req.Received.Add(d))
	defer cancel()

	t0 := time.Now()
	sch := tg.Spec.Schema
	in, enriched, err := g.enrich(ctx, tg.Spec, req.Rows)
	if err != nil {
		return nil, err
	}
	var missing func(row []float32)
	if g.Metrics != nil {
		missing = func(row []float32) {
			sch.Missing(row, func(f string) { g.Metrics.MissingFeature(tg.Model, strconv.Itoa(tg.N), f) })
		}
	}
	rows, err := in.Build(sch, missing)
	if err != nil {
		if g.Metrics != nil {
			e := errs.As(err)
			field, reason := sch.FieldName(e.Field), e.Reason
			if reason == schema.ReasonUnknown || field == "" {
				field = telemetry.UnknownField
			}
			if reason == "" {
				reason = schema.ReasonOther
			}
			g.Metrics.SchemaViolation(tg.Model, strconv.Itoa(tg.N), field, reason)
		}
		return nil, err
	}
	pre := time.Since(t0)
	if err := tn.Take(n, time.Now()); err != nil {
		return nil, err
	}
	var res serving.Result
	var use CacheUse
	// The prediction cache keys on the rows as built above: after the
	// Enricher filled the instances (issue 19), validation and
	// preprocessing, so it must stay after both.
	if cr := g.lookupCache(tg, tn.Name, rows); cr != nil {
		res, use, err = cr.run(ctx, tg.Server, rows, req.Priority) // only the rows the cache did not answer reach admission
	} else {
		res, err = tg.Server.Submit(ctx, serving.Work{Rows: rows, Priority: req.Priority})
	}
	if err != nil {
		if errs.Of(err).Refund {
			tn.Refund(n) // refused before computing: the catalogue's refund column
		}
		if e := errs.As(err); e.Code == errs.DeadlineExceeded || e.Code == errs.ExpiredInQueue {
			e.Message = fmt.Sprintf("%s (deadline %s)", e.Message, d)
		}
		return &Response{Target: tg, Attempts: res.Attempts, Submitted: true, Features: enriched}, err
	}
	if tg.Drift != nil && rows.Tokens == nil {
		for i := 0; i < n; i++ {
			tg.Drift.Observe(rows.Row(i), res.Out.Row(i))
		}
	}
	if dl, _ := ctx.Deadline(); !time.Now().Before(dl) {
		// Finished, but too late to be useful: never answer 200 after the deadline.
		return &Response{Target: tg, Attempts: res.Attempts, Submitted: true}, errs.New(errs.DeadlineExceeded, "deadline %s passed as the result arrived", d)
	}
	// postprocess: runs here, on the model's outputs wherever they were
	// computed (in process or on a worker: the hop carries the model's
	// FP32 columns), so every transport, record and batch job answers
	// the same post-processed outputs.
	out := tg.Spec.Post.Apply(res.Out)
	return &Response{Target: tg, Out: out, raw: res.Out, Timing: res.Timing, Preprocess: pre, Attempts: res.Attempts, Cache: use, Features: enriched, enriched: in}, nil
}

// deadline is a request's deadline: the one it asked for, else the
// version's default capped at max (0: no cap). An asked-for deadline was
// checked against max by the transport.
func deadline(asked, versionDefault, max time.Duration) time.Duration {
	if asked != 0 {
		return asked
	}
	if max > 0 && versionDefault > max {
		return max
	}
	return versionDefault
}

// BuildRows is buildRows, for a Rows implementation that falls back on
// instances.
func BuildRows(sch *schema.Schema, insts []schema.Instance, missing func(row []float32)) (runtime.Batch, error) {
	return buildRows(sch, insts, missing)
}

// buildRows validates the instances with the schema and builds the batch:
// float rows (calling missing, if set, on each), or for a sequence schema
// one row of token ids per instance. Errors name the instance and field.
func buildRows(sch *schema.Schema, insts []schema.Instance, missing func(row []float32)) (runtime.Batch, error) {
	n := len(insts)
	if _, _, ok := sch.Sequence(); ok {
		rows := runtime.Batch{Rows: n, Tokens: make([][]int64, n)}
		for i, inst := range insts {
			toks, err := sch.Tokens(fmt.Sprintf("instances[%d]", i), inst)
			if err != nil {
				return runtime.Batch{}, err
			}
			rows.Tokens[i] = toks
		}
		return rows, nil
	}
	w := sch.Width()
	rows := runtime.Batch{Rows: n, Cols: w, Data: make([]float32, n*w)}
	for i, inst := range insts {
		row := rows.Data[i*w : (i+1)*w]
		if err := sch.RowAt(schema.Path{Prefix: "instances", Index: i}, inst, row); err != nil {
			return runtime.Batch{}, err
		}
		if missing != nil {
			missing(row)
		}
	}
	return rows, nil
}

// observe records a predict call's metrics.
func (g *Gateway) observe(tn *tenant.Tenant, tg *routing.Target, req Request, res *Response, err error) {
	m := g.Metrics
	if m == nil {
		return
	}
	model, version := tg.Model, strconv.Itoa(tg.N)
	code := telemetry.CodeOf(err)
	m.TenantRequest(tn.Name, code)
	if req.Priority == serving.BatchJob {
		// Batch work's figures are its own (sluice_class_served_instances_total
		// and the runner's): the request metrics, latency and refusals stay
		// online traffic's, so a job's effect on it is what they show.
		return
	}
	st := telemetry.Stages{Preprocess: res.Preprocess, Queue: res.Timing.Queue, BatchWait: res.Timing.BatchWait, Compute: res.Timing.Compute, Total: time.Since(req.Received)}
	m.ObserveRequest(model, version, code, req.Rows.Len(), st)
	if u := res.Cache; err == nil && u.On {
		m.CacheRequests(model, version, u.Hits, u.Misses)
	}
	switch e := errs.Of(err); {
	case e.Refusal != "": // the catalogue's refusals, each its own reason
		m.Refused(model, version, e.Code)
		if e.Refusal == errs.RefusalQuota {
			m.QuotaRefused(tn.Name)
		}
	case e.Code == errs.DeadlineExceeded:
		m.DeadlineExceeded(model, version)
	}
}

// Spec is the spec of the version a call would reach now (nil if none is
// ready): a transport that needs the schema to decode (OIP tensors) asks
// for it. The gateway validates again with the version that answers, so a
// snapshot swapped in between costs nothing but a clearer message.
func (g *Gateway) Spec(model string, version int, routingKey string) *modelpkg.Spec {
	t := g.Table.Load()
	var tg *routing.Target
	var err error
	if version > 0 {
		tg, err = t.Pinned(model, version)
	} else {
		tg, _, err = t.Pick(model, routingKey)
	}
	if err != nil || tg == nil {
		return nil
	}
	return tg.Spec
}
