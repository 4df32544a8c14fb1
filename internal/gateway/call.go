package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/outcomes"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/tenant"
)

// Transport names the protocol a call arrived on (a span attribute and a
// log key; it decides which status column of the error table the span and
// the log line carry).
type Transport string

// The transports.
const (
	HTTP    Transport = "http"     // /v1 JSON
	OIPREST Transport = "oip_rest" // Open Inference Protocol v2 over HTTP
	OIPGRPC Transport = "oip_grpc" // Open Inference Protocol v2 over gRPC
)

// Call is one predict call as a transport hands it over: who calls, what
// it names, and how to read its rows. The transport has authenticated the
// caller; everything after decoding happens here, the same for every
// transport.
type Call struct {
	Transport Transport
	Tenant    *tenant.Tenant // required: nil is an internal error (there is no implicit tenant)
	RequestID string         // always set: the transport mints one when the caller sent none
	// Idempotent: the caller chose RequestID, so a retry within the
	// idempotency window replays the first answer.
	Idempotent bool
	IDField    string // where the caller put the id, for the conflict error ("X-Request-Id")
	Model      string
	Version    int                        // 0: the deployment picks
	Carrier    propagation.TextMapCarrier // the caller's trace context (traceparent); nil: none
	Received   time.Time                  // when the transport received it (zero: now)
	// Priority is the rows' serving class (Request.Priority). Transports
	// leave it zero, serving.Online, except HTTP /v1 with the request
	// header Sluice-Priority: batch (the remote runner of `sluice job
	// run`), which sets serving.BatchJob, as the in-process batch-jobs
	// runner does.
	Priority serving.Priority
	// Decode reads the request's rows and options. It runs once, inside the
	// call's span and before the idempotency check; its error is the call's
	// answer (recorded, never cached).
	Decode func() (Input, error)
}

// Input is a decoded request: its instances, or Rows standing for them.
type Input struct {
	Instances []schema.Instance
	// Rows, when set, replaces Instances: the request's rows in a form the
	// batch is built from without an Instance per row (OIP binary tensors).
	Rows       Rows
	Deadline   time.Duration // 0: the version's default
	RoutingKey string        // "": the request id
}

// Rows is a request's instances held as columns (OIP tensors) rather than
// as Instances, so that their values go straight into the batch's float32
// rows. Every method stands for the same method on the instances it
// represents: the same count, the same input hash, the same rows and the
// same errors as buildRows on those instances.
type Rows interface {
	Len() int
	// Hash is records.InputHash of the instances.
	Hash() string
	// Build validates and preprocesses the rows with sch (the schema of
	// the version that answers or shadows), as buildRows does.
	Build(sch *schema.Schema, missing func(row []float32)) (runtime.Batch, error)
	// Instances is the instances themselves (built on demand: sampled
	// record inputs).
	Instances() []schema.Instance
}

// instanceRows is Rows over decoded instances (every transport's JSON).
type instanceRows []schema.Instance

func (r instanceRows) Len() int     { return len(r) }
func (r instanceRows) Hash() string { return records.InputHash(r) }
func (r instanceRows) Build(sch *schema.Schema, missing func(row []float32)) (runtime.Batch, error) {
	return buildRows(sch, r, missing)
}
func (r instanceRows) Instances() []schema.Instance { return r }

// rows is in's rows, whichever form they came in.
func (in Input) rows() Rows {
	if in.Rows != nil {
		return in.Rows
	}
	return instanceRows(in.Instances)
}

// Answer is a call's outcome in transport-neutral form; each transport
// renders it with its own deterministic encoder.
//
// Idempotency keeps Answers, not encoded bytes: the stored answer is the
// same whichever transport asks again, so a retry over /v1, OIP REST or
// OIP gRPC gets the first computation, and a retry over the same transport
// gets the same bytes because its encoder is a pure function of the answer
// and the request id. Caching bytes per transport would make an id used
// across transports either a conflict or a second computation, and put
// transport knowledge (headers, status lines) in the gateway.
type Answer struct {
	RequestID    string
	Replay       bool   // answered from the idempotency cache
	ModelVersion string // the version that answered or refused ("fraud@3"); "" if none was picked
	Prediction   *Prediction
	Err          *errs.Error // nil on success
	Timing       Timing      // fresh answers only (zero on replay)
	// Cache is the X-Cache value of a prediction of a version with a
	// prediction cache: CacheHit, CacheMiss or CachePartial ("": the
	// version has no cache:, or the call failed).
	Cache string
}

// Prediction is a successful answer: the version that answered and its
// outputs, one row per instance.
type Prediction struct {
	Model        string
	Version      int
	ID           string   // "fraud@3"
	InputSchema  string   // model.yaml input.schema, e.g. "fraud-input@3"
	OutputSchema string   // model.yaml output.schema
	Outputs      []string // output field names, in column order
	Out          runtime.Output
	// Labels holds, per output column, the labels of a labelled column
	// (a postprocess: threshold, topk or map: the column holds the index
	// of its label, NaN for none) and nil for a number; nil when no
	// column is labelled.
	Labels [][]string
	// Features is what enrichment filled, per instance, and where each
	// value came from (nil: the version has no features:).
	Features *Enriched
}

// Timing is where a fresh answer's time went.
type Timing struct {
	Preprocess, Queue, BatchWait, Compute time.Duration
}

// Status is the answer's HTTP status from the one error table (200 on
// success). Idempotency keys its cacheability on it whatever the transport.
func (a *Answer) Status() int {
	if a.Err == nil {
		return http.StatusOK
	}
	return errs.HTTPStatus(a.Err.Code)
}

// Predict runs one call end to end: span, decode, idempotency (replay,
// conflict, wait for an attempt in flight), routing, validation, quota,
// submit, shadows, metrics, the prediction record and the log line. Every
// call ends in exactly one Answer and at most one record (a conflicting
// retry and a replay add none: a replay bumps the original's attempts).
func (g *Gateway) Predict(ctx context.Context, c Call) *Answer {
	if c.Received.IsZero() {
		c.Received = time.Now()
	}
	if err := CheckModelName("model", c.Model); err != nil {
		// Refused before the span, the record and the log line: a name
		// no model can have is never kept (issue 18, finding 12: a
		// 900 KB gRPC model_name went into a record).
		return &Answer{RequestID: c.RequestID, Err: errs.As(err)}
	}
	ctx, span := startSpan(ctx, c)
	defer span.End()
	if c.Tenant == nil {
		g.log().Error("predict call without a tenant", "request_id", c.RequestID, "model", c.Model, "transport", string(c.Transport))
		span.SetStatus(codes.Error, string(errs.Internal))
		return &Answer{RequestID: c.RequestID, Err: errs.New(errs.Internal, "no tenant")}
	}
	p := g.newPredictCall(ctx, c, span)
	if c.Decode == nil {
		return p.finish(errs.New(errs.Internal, "no decoder"))
	}
	in, err := c.Decode()
	if err != nil {
		return p.finish(err)
	}
	rows := in.rows()
	p.rec.InputHash = rows.Hash()
	if g.Idem != nil && c.Idempotent {
		if a, answered := p.claim(); answered {
			return a
		}
	}
	p.routingKey = routingKey(in, c)
	res, err := g.run(ctx, Request{Tenant: p.tn, Model: c.Model, Version: c.Version, RoutingKey: p.routingKey, Rows: rows, Deadline: in.Deadline, Received: c.Received, Priority: c.Priority})
	p.ran(res, rows)
	if err != nil {
		return p.finish(err)
	}
	p.succeeded(res, rows.Len())
	return p.finish(nil)
}

// CheckModelName refuses a caller's model name that no model can have
// (model.yaml's rule, modelpkg.ValidName: lowercase letters, digits and
// '-', at most 63 characters), naming field, before the name is looked
// up, quoted in full, logged or recorded. Every transport checks with it,
// and Predict again.
func CheckModelName(field, name string) error {
	if name == "" {
		return errs.Field(errs.InvalidArgument, field, "a model name is required")
	}
	if !modelpkg.ValidName(name) {
		return errs.Field(errs.InvalidArgument, field, "%q is not a model name (lowercase letters, digits and '-', starting with a letter or digit, at most %d characters)", errs.Clip(name), MaxModelName)
	}
	return nil
}

// MaxModelName is the longest model name (model.yaml's rule).
const MaxModelName = 63

// startSpan starts the call's span (a no-op span unless tracing is on), a
// child of the caller's when it sent a traceparent.
func startSpan(ctx context.Context, c Call) (context.Context, trace.Span) {
	if c.Carrier != nil {
		ctx = otel.GetTextMapPropagator().Extract(ctx, c.Carrier)
	}
	if !telemetry.Tracing() {
		return ctx, telemetry.NoSpan()
	}
	tname := ""
	if c.Tenant != nil {
		tname = c.Tenant.Name
	}
	return telemetry.Tracer().Start(ctx, "predict", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("sluice.model", c.Model), attribute.String("sluice.request_id", c.RequestID),
			attribute.String("sluice.tenant", tname), attribute.String("sluice.transport", string(c.Transport))))
}

// routingKey is what sticky routing hashes: the request's routingKey, else
// its request id.
func routingKey(in Input, c Call) string {
	if in.RoutingKey != "" {
		return in.RoutingKey
	}
	return c.RequestID
}

// predictCall is one Predict call's state on its way to its one Answer
// and its one record.
type predictCall struct {
	g    *Gateway
	ctx  context.Context
	c    Call
	tn   *tenant.Tenant
	span trace.Span
	a    *Answer
	rec  records.Record
	// claimed: the call holds its request id in the idempotency cache
	// (under key: model, pinned version, input hash) and must settle it.
	claimed bool
	key     string
	// reached: the rows reached a model, so an error answer is worth
	// replaying.
	reached bool
	// routingKey is what routing hashed; policy the policy that routed.
	routingKey string
	policy     int
}

func (g *Gateway) newPredictCall(ctx context.Context, c Call, span trace.Span) *predictCall {
	return &predictCall{g: g, ctx: ctx, c: c, tn: c.Tenant, span: span, a: &Answer{RequestID: c.RequestID},
		rec: records.Record{RequestID: c.RequestID, Tenant: c.Tenant.Name, Model: c.Model, Version: c.Version, CreatedAt: c.Received.UTC(), Attempts: 1,
			Retryable: g.Idem != nil && c.Idempotent}}
}

// claim runs the idempotency check of a call that chose its request id.
// answered: the call is answered without computing — a replay of the first
// attempt, a conflict, an answer saved in the records store, or giving up
// waiting for an attempt in flight; otherwise the call holds the id.
func (p *predictCall) claim() (a *Answer, answered bool) {
	g, c := p.g, p.c
	p.key = fmt.Sprintf("%s@%d|%s", c.Model, c.Version, p.rec.InputHash)
	for {
		o := g.Idem.Begin(p.tn.Name, c.RequestID, p.key)
		switch o.Kind {
		case records.Replay:
			return g.replay(p.ctx, p.tn, c.RequestID, o.Response, 0), true
		case records.Conflict:
			// The original request's record stands; a conflicting one is
			// not another attempt.
			return g.conflict(c), true
		case records.InFlight:
			resp, err := o.Wait(p.ctx)
			if err == nil {
				return g.replay(p.ctx, p.tn, c.RequestID, resp, 0), true
			}
			if !errors.Is(err, records.ErrAborted) {
				return p.finish(errs.New(errs.DeadlineExceeded, "gave up waiting for the first attempt of request %q", c.RequestID)), true
			}
			continue // the first attempt's answer is not replayable: run this one
		}
		p.claimed = true
		if g.Saved != nil && g.Idem.MayHaveForgotten(time.Now()) {
			// The cache may have forgotten this id (a restart, or an
			// eviction): the records store decides before computing.
			if sa, done := g.fromStore(p.ctx, p.tn, c, p.key); done {
				return sa, true
			}
		}
		return nil, false
	}
}

// ran folds what run reports, answer or error, into the record and the
// answer: every attempt, whether the rows reached a model, and the version
// that answered or refused.
func (p *predictCall) ran(res *Response, rows Rows) {
	if res == nil {
		return
	}
	if res.Attempts > 1 {
		// A worker died or refused and another computed it: the record
		// counts every attempt of this logical request.
		p.rec.Attempts += res.Attempts - 1
	}
	p.reached = res.Submitted
	if tg := res.Target; tg != nil {
		p.a.ModelVersion = tg.ID
		p.rec.Version = tg.N
		p.rec.Input = sampleInput(tg.Spec.Manifest.Logging, rows)
	}
	if res.Features != nil {
		p.rec.Features = res.Features.record()
	}
}

// succeeded makes the answer a prediction of res (n instances).
func (p *predictCall) succeeded(res *Response, n int) {
	tg := res.Target
	m := tg.Spec.Manifest
	p.a.Prediction = &Prediction{Model: tg.Model, Version: tg.N, ID: tg.ID, InputSchema: m.Input.Schema, OutputSchema: m.Output.Schema,
		Outputs: tg.Spec.OutputNames, Out: res.Out, Labels: Labels(tg.Spec), Features: res.Features}
	p.a.Timing = Timing{Preprocess: res.Preprocess, Queue: res.Timing.Queue, BatchWait: res.Timing.BatchWait, Compute: res.Timing.Compute}
	p.a.Cache = res.Cache.header()
	p.rec.Cached = res.Cache.Hits
	p.policy = res.Policy
	if lg := m.Logging; lg == nil || lg.Outputs == nil || *lg.Outputs {
		p.rec.Outputs = p.a.Prediction.recordOutputs()
	}
	if p.span.IsRecording() {
		p.span.SetAttributes(attribute.Int("sluice.instances", n),
			attribute.Float64("sluice.preprocess_ms", ms(res.Preprocess)), attribute.Float64("sluice.queue_ms", ms(res.Timing.Queue)),
			attribute.Float64("sluice.batch_wait_ms", ms(res.Timing.BatchWait)), attribute.Float64("sluice.compute_ms", ms(res.Timing.Compute)))
	}
}

// finish ends the call with err (nil: the prediction): the outcome, the
// record (with the answer saved in it for replay after a restart), the
// idempotency entry, the span and the log line.
func (p *predictCall) finish(err error) *Answer {
	a, rec := p.a, &p.rec
	if err != nil {
		a.Err = errs.As(err)
		a.Prediction = nil
		a.Cache = ""
		rec.Outcome = string(a.Err.Code)
	} else {
		rec.Outcome = "ok"
	}
	rec.LatencyMs = ms(time.Since(p.c.Received))
	if p.claimed && p.g.Saved != nil && records.Cacheable(a.Status()) {
		// Saved with the record, so that a retry after a restart is
		// answered from the store.
		rec.Saved = &records.Saved{Key: p.key, Status: a.Status(), Answer: encodeAnswer(a.kept()), Until: time.Now().Add(p.g.Idem.Window())}
	}
	p.commit()
	if p.g.Joins != nil && a.Err == nil && a.Prediction != nil && p.c.Priority != serving.BatchJob {
		p.join()
	}
	status := a.Status()
	switch settle(p.claimed, a.Err != nil, p.reached) {
	case abort:
		p.g.Idem.Abort(p.tn.Name, p.c.RequestID)
	case keep:
		kept := a.kept()
		p.g.Idem.Keep(p.tn.Name, p.c.RequestID, records.Response{Status: status, Value: kept, Size: kept.size()})
	}
	p.annotate(err, status)
	p.g.logCall(p.ctx, p.c, *rec, status)
	return a
}

// commit writes the record. Async: never blocks (a drop is counted by the
// writer). Durable: waits for the commit, and an answer without its record
// is not sent: 503, and nothing is kept for replay.
func (p *predictCall) commit() {
	if p.g.Records == nil {
		return
	}
	if cerr := p.g.Records.Commit(p.ctx, p.rec); cerr != nil {
		p.a.Err = errs.Wrap(errs.Unavailable, cerr, "the prediction record of request %q could not be written, so its answer is withheld: retry", p.c.RequestID)
		p.a.Err.RetryAfter = time.Second
		p.a.Prediction = nil
		p.rec.Outcome = string(p.a.Err.Code)
	}
}

// recordOutputs is the answer as a record keeps it: per instance the
// outputs by name, a labelled one as its label, canonical JSON; nil over
// records.MaxOutputBytes.
func (p *Prediction) recordOutputs() []byte {
	out, cols := p.Out, p.Out.Cols
	if cols == 0 || len(p.Outputs) != cols {
		return nil
	}
	b := make([]byte, 0, 32*len(out.Data)+2)
	b = append(b, '[')
	for i := 0; i < len(out.Data)/cols; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		for j, name := range p.Outputs {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, name)
			b = append(b, ':')
			if l, ok := p.Label(i, j); ok {
				b = strconv.AppendQuote(b, l)
			} else if v := float64(out.Data[i*cols+j]); math.IsNaN(v) || math.IsInf(v, 0) {
				b = append(b, "null"...)
			} else {
				b = strconv.AppendFloat(b, v, 'g', -1, 32)
			}
		}
		b = append(b, '}')
		if len(b) > records.MaxOutputBytes {
			return nil
		}
	}
	return append(b, ']')
}

// join leaves the answered call's join for its outcomes: the version,
// policy and routing unit, and each instance's last output column (a
// binary classifier's probability of its positive class, a regressor's
// value): the score model-quality metrics read.
func (p *predictCall) join() {
	pr := p.a.Prediction
	var scores []float32
	if c := pr.Out.Cols; c > 0 && len(pr.Out.Data) >= c {
		n := len(pr.Out.Data) / c
		scores = make([]float32, n)
		for i := range n {
			scores[i] = pr.Out.Data[i*c+c-1]
		}
	}
	p.g.Joins.Add(outcomes.Join{RequestID: p.c.RequestID, Tenant: p.rec.Tenant, Model: pr.Model, Version: pr.Version, Policy: p.policy,
		Unit: outcomes.Unit(p.routingKey), Created: p.rec.CreatedAt, Scores: scores})
}

// annotate sets the span's outcome attributes (err: the call's own error,
// status: the answer's HTTP status).
func (p *predictCall) annotate(err error, status int) {
	if !p.span.IsRecording() {
		return
	}
	p.span.SetAttributes(attribute.Int("sluice.version", p.rec.Version), attribute.String("sluice.outcome", p.rec.Outcome))
	if p.c.Transport == OIPGRPC {
		p.span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(errs.GRPCCode(errs.CodeOf(err)))))
	} else {
		p.span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if status >= 500 {
		p.span.SetStatus(codes.Error, p.rec.Outcome)
	}
}

// kept is a copy of a to keep for replay (a replay carries no timing).
func (a *Answer) kept() *Answer {
	k := *a
	k.Timing = Timing{}
	return &k
}

// settlement is what happens to a call's idempotency entry at its end.
type settlement int

const (
	unclaimed settlement = iota // the call holds no entry
	abort                       // forget the id: a retry computes again
	keep                        // keep the answer for replay
)

// settle decides a claimed entry's fate: routing, validation and quota
// answers (failed before the rows reached a model) are what a retry
// computes again, and keeping them would only hold memory (a 400 quotes
// the input); every other answer is kept.
func settle(claimed, failed, reached bool) settlement {
	switch {
	case !claimed:
		return unclaimed
	case failed && !reached:
		return abort
	}
	return keep
}

// size is how many bytes a kept answer holds: its outputs and its strings
// (what the idempotency cache counts against --idempotency-max-bytes).
func (a *Answer) size() int {
	n := 128 + len(a.RequestID) + len(a.ModelVersion)
	if p := a.Prediction; p != nil {
		n += 96 + len(p.Model) + len(p.ID) + len(p.InputSchema) + len(p.OutputSchema) + 4*len(p.Out.Data)
		for _, o := range p.Outputs {
			n += 16 + len(o)
		}
		if f := p.Features; f != nil {
			n += 64 + len(f.Origins)*(48+len(f.Fields)*9) + len(f.Fields)*24
			for _, e := range f.Entities {
				n += len(e)
			}
		}
	}
	if e := a.Err; e != nil {
		n += 64 + len(e.Message) + len(e.Field) + len(e.Reason)
	}
	return n
}

// replay answers a retry with the first attempt's answer and counts the
// attempt on the original record (row, when known: the store's row of it).
// In durable mode the count is committed before the replay is sent, or
// the retry is answered 503 (try again: nothing was counted).
func (g *Gateway) replay(ctx context.Context, tn *tenant.Tenant, id string, resp records.Response, row int64) *Answer {
	kept, ok := resp.Value.(*Answer)
	if !ok {
		return &Answer{RequestID: id, Err: errs.New(errs.Internal, "idempotency cache holds no answer for %q", id)}
	}
	if g.Records != nil {
		if err := g.Records.CommitBump(ctx, tn.Name, id, row); err != nil {
			e := errs.Wrap(errs.Unavailable, err, "the retry of request %q could not be counted on its prediction record, so its replay is withheld: retry", id)
			e.RetryAfter = time.Second
			return &Answer{RequestID: id, ModelVersion: kept.ModelVersion, Err: e}
		}
	}
	a := *kept
	a.Replay = true
	return &a
}

func (g *Gateway) log() *slog.Logger {
	if g.Log == nil {
		return slog.Default()
	}
	return g.Log
}

// logCall logs one predict call with the fixed keys: at debug level when
// it succeeded or the client erred, at warn when the server failed it.
// status is the HTTP column of the error table whatever the transport.
func (g *Gateway) logCall(ctx context.Context, c Call, rec records.Record, status int) {
	// Refusals and deadline misses are expected under load (and counted in
	// metrics): one warn line each would cost the most when the server is
	// busiest. Only a server fault is a warning.
	level := slog.LevelDebug
	if rec.Outcome == string(errs.Internal) || rec.Outcome == string(errs.Unavailable) {
		level = slog.LevelWarn
	}
	log := g.log()
	if !log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("request_id", rec.RequestID), slog.String("tenant", rec.Tenant),
		slog.String("model", rec.Model), slog.Int("version", rec.Version), slog.String("transport", string(c.Transport)),
		slog.Int("status", status), slog.String("outcome", rec.Outcome), slog.Float64("latency_ms", rec.LatencyMs)}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	} else if c.Carrier != nil {
		if t, ok := telemetry.ParseTraceparent(c.Carrier.Get("traceparent")); ok {
			attrs = append(attrs, slog.String("trace_id", t))
		}
	}
	log.LogAttrs(ctx, level, "predict", attrs...)
}

// sampleInput returns the named fields of the instances as canonical JSON
// for a sampled request of a model that opted in, else nil.
func sampleInput(lg *modelpkg.Logging, rows Rows) []byte {
	if lg == nil || lg.SampleRate <= 0 || rand.Float64() >= lg.SampleRate {
		return nil
	}
	insts := rows.Instances()
	keep := map[string]bool{}
	for _, f := range lg.Fields {
		keep[f] = true
	}
	out := make([]schema.Instance, len(insts))
	for i, inst := range insts {
		for _, m := range inst {
			if keep[m.Name] {
				out[i] = append(out[i], m)
			}
		}
	}
	return records.CanonicalJSON(out)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Labels is Prediction.Labels of a version's answers: per output column,
// its labels (nil: a number); nil when no column is labelled.
func Labels(spec *modelpkg.Spec) [][]string {
	cols := spec.Post.Columns()
	var out [][]string
	for j, c := range cols {
		if c.Labels == nil {
			continue
		}
		if out == nil {
			out = make([][]string, len(cols))
		}
		out[j] = c.Labels
	}
	return out
}

// Label is the label of output column j of row i ("" and false: a number,
// or no label).
func (p *Prediction) Label(i, j int) (string, bool) {
	if p.Labels == nil || p.Labels[j] == nil {
		return "", false
	}
	v := p.Out.Data[i*p.Out.Cols+j]
	l := p.Labels[j]
	if v != v || v < 0 || int(v) >= len(l) {
		return "", false
	}
	return l[int(v)], true
}
