package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
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
	start := time.Now()
	if c.Received.IsZero() {
		c.Received = start
	}
	if c.Carrier != nil {
		// A caller's traceparent makes the span a child of the caller's
		// (a no-op unless tracing is on).
		ctx = otel.GetTextMapPropagator().Extract(ctx, c.Carrier)
	}
	tname := ""
	if c.Tenant != nil {
		tname = c.Tenant.Name
	}
	span := telemetry.NoSpan()
	if telemetry.Tracing() {
		ctx, span = telemetry.Tracer().Start(ctx, "predict", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("sluice.model", c.Model), attribute.String("sluice.request_id", c.RequestID),
				attribute.String("sluice.tenant", tname), attribute.String("sluice.transport", string(c.Transport))))
		defer span.End()
	}
	a := &Answer{RequestID: c.RequestID}
	if c.Tenant == nil {
		a.Err = errs.New(errs.Internal, "no tenant")
		g.log().Error("predict call without a tenant", "request_id", c.RequestID, "model", c.Model, "transport", string(c.Transport))
		span.SetStatus(codes.Error, string(errs.Internal))
		return a
	}
	tn := c.Tenant
	var reached bool // the rows reached a model: an error answer is worth replaying
	rec := records.Record{RequestID: c.RequestID, Tenant: tn.Name, Model: c.Model, Version: c.Version, CreatedAt: c.Received.UTC(), Attempts: 1,
		Retryable: g.Idem != nil && c.Idempotent}
	var idemKey bool
	var key string // the idempotency key: model, pinned version, input hash
	// finish completes the idempotency entry, records the outcome and
	// logs the call.
	finish := func(err error) *Answer {
		if err != nil {
			a.Err = errs.As(err)
			a.Prediction = nil
			rec.Outcome = string(a.Err.Code)
		} else {
			rec.Outcome = "ok"
		}
		rec.LatencyMs = ms(time.Since(c.Received))
		if idemKey && g.Saved != nil && records.Cacheable(a.Status()) {
			// Saved with the record, so that a retry after a restart is
			// answered from the store.
			kept := *a
			kept.Timing = Timing{}
			rec.Saved = &records.Saved{Key: key, Status: a.Status(), Answer: encodeAnswer(&kept), Until: time.Now().Add(g.Idem.Window())}
		}
		if g.Records != nil {
			// Async: never blocks (a drop is counted by the writer). Durable:
			// waits for the commit, and an answer without its record is not
			// sent: 503, and nothing is kept for replay.
			if cerr := g.Records.Commit(ctx, rec); cerr != nil {
				a.Err = errs.Wrap(errs.Unavailable, cerr, "the prediction record of request %q could not be written, so its answer is withheld: retry", c.RequestID)
				a.Err.RetryAfter = time.Second
				a.Prediction = nil
				rec.Outcome = string(a.Err.Code)
			}
		}
		status := a.Status()
		switch {
		case !idemKey:
		case a.Err != nil && !reached:
			// Routing, validation and quota answers are what a retry
			// computes again: keeping them would only hold memory (a 400
			// quotes the input).
			g.Idem.Abort(tn.Name, c.RequestID)
		default:
			kept := *a
			kept.Timing = Timing{}
			g.Idem.Keep(tn.Name, c.RequestID, records.Response{Status: status, Value: &kept, Size: kept.size()})
		}
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("sluice.version", rec.Version), attribute.String("sluice.outcome", rec.Outcome))
			if c.Transport == OIPGRPC {
				span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(errs.GRPCCode(errs.CodeOf(err)))))
			} else {
				span.SetAttributes(attribute.Int("http.response.status_code", status))
			}
			if status >= 500 {
				span.SetStatus(codes.Error, rec.Outcome)
			}
		}
		g.logCall(ctx, c, rec, status)
		return a
	}
	if c.Decode == nil {
		return finish(errs.New(errs.Internal, "no decoder"))
	}
	in, err := c.Decode()
	if err != nil {
		return finish(err)
	}
	rows := in.rows()
	rec.InputHash = rows.Hash()
	if g.Idem != nil && c.Idempotent {
		key = fmt.Sprintf("%s@%d|%s", c.Model, c.Version, rec.InputHash)
	begin:
		for {
			o := g.Idem.Begin(tn.Name, c.RequestID, key)
			switch o.Kind {
			case records.Replay:
				return g.replay(ctx, tn, c.RequestID, o.Response, 0)
			case records.Conflict:
				// The original request's record stands; a conflicting one is
				// not another attempt.
				return g.conflict(c)
			case records.InFlight:
				resp, err := o.Wait(ctx)
				if err == nil {
					return g.replay(ctx, tn, c.RequestID, resp, 0)
				}
				if !errors.Is(err, records.ErrAborted) {
					return finish(errs.New(errs.DeadlineExceeded, "gave up waiting for the first attempt of request %q", c.RequestID))
				}
				continue // the first attempt's answer is not replayable: run this one
			}
			idemKey = true
			if g.Saved != nil && g.Idem.MayHaveForgotten(time.Now()) {
				// The cache may have forgotten this id (a restart, or an
				// eviction): the records store decides before computing.
				if sa, done := g.fromStore(ctx, tn, c, key); done {
					return sa
				}
			}
			break begin
		}
	}
	rk := in.RoutingKey
	if rk == "" {
		rk = c.RequestID
	}
	res, err := g.run(ctx, Request{Tenant: tn, Model: c.Model, Version: c.Version, RoutingKey: rk, Rows: rows, Deadline: in.Deadline, Received: c.Received})
	if res != nil && res.Attempts > 1 {
		// A worker died or refused and another computed it: the record
		// counts every attempt of this logical request.
		rec.Attempts += res.Attempts - 1
	}
	reached = res != nil && res.Submitted
	if res != nil && res.Target != nil {
		tg := res.Target
		a.ModelVersion = tg.ID
		rec.Version = tg.N
		rec.Input = sampleInput(tg.Spec.Manifest.Logging, rows)
	}
	if err != nil {
		return finish(err)
	}
	tg := res.Target
	m := tg.Spec.Manifest
	a.Prediction = &Prediction{Model: tg.Model, Version: tg.N, ID: tg.ID, InputSchema: m.Input.Schema, OutputSchema: m.Output.Schema,
		Outputs: tg.Spec.OutputNames, Out: res.Out}
	a.Timing = Timing{Preprocess: res.Preprocess, Queue: res.Timing.Queue, BatchWait: res.Timing.BatchWait, Compute: res.Timing.Compute}
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("sluice.instances", rows.Len()),
			attribute.Float64("sluice.preprocess_ms", ms(res.Preprocess)), attribute.Float64("sluice.queue_ms", ms(res.Timing.Queue)),
			attribute.Float64("sluice.batch_wait_ms", ms(res.Timing.BatchWait)), attribute.Float64("sluice.compute_ms", ms(res.Timing.Compute)))
	}
	return finish(nil)
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
