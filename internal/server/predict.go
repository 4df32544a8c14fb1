package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/tenant"
)

// predict serves one predict call. Every call ends in exactly one
// response and one prediction record; a retry with the same X-Request-Id
// within the idempotency window replays the first answer byte for byte.
func (s *Server) predict(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string, version int) error {
	start := time.Now()
	id := requestID(r)
	// A span per predict call (a no-op unless --otlp-endpoint is set); a
	// caller's traceparent makes it a child of the caller's span.
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := telemetry.Tracer().Start(ctx, "predict", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("sluice.model", model), attribute.String("sluice.request_id", id), attribute.String("sluice.tenant", tn.Name)))
	defer span.End()
	r = r.WithContext(ctx)
	rec := records.Record{RequestID: id, Tenant: tn.Name, Model: model, Version: version, CreatedAt: start.UTC(), Attempts: 1,
		Retryable: s.idem != nil && r.Header.Get("X-Request-Id") != ""}
	// finish writes the response, completes the idempotency entry and
	// records the outcome.
	var idemKey bool
	finish := func(status int, body []byte, err error) error {
		if err != nil {
			status, body = s.renderError(w, r, id, err)
			rec.Outcome = string(errs.As(err).Code)
		} else {
			rec.Outcome = "ok"
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(body)
		}
		if idemKey {
			s.idem.Complete(tn.Name, id, status, replayHeaders(w.Header()), body)
		}
		rec.LatencyMs = ms(time.Since(start))
		span.SetAttributes(attribute.Int("sluice.version", rec.Version), attribute.String("sluice.outcome", rec.Outcome), attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, rec.Outcome)
		}
		s.addRecord(rec)
		s.logRequest(r, rec, status)
		return nil
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		return finish(0, nil, errs.New(errs.UnsupportedMedia, "Content-Type must be application/json, got %q", ct))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return finish(0, nil, errs.New(errs.PayloadTooLarge, "request body exceeds %d bytes (server flag --max-body-bytes)", s.cfg.MaxBodyBytes))
		}
		return finish(0, nil, errs.Wrap(errs.InvalidArgument, err, "read request body"))
	}
	req, err := decodePredict(body, s.cfg.MaxDeadline)
	if err != nil {
		return finish(0, nil, err)
	}
	rec.InputHash = records.InputHash(req.Instances)
	if s.idem != nil && r.Header.Get("X-Request-Id") != "" {
		key := fmt.Sprintf("%s@%d|%s", model, version, rec.InputHash)
		for {
			o := s.idem.Begin(tn.Name, id, key)
			switch o.Kind {
			case records.Replay:
				return s.replay(w, tn, id, o.Response)
			case records.Conflict:
				rec.Outcome = string(errs.IdempotencyConflict)
				s.renderError(w, r, id, errs.Field(errs.IdempotencyConflict, "X-Request-Id", "request id %q was used with a different request within the idempotency window (%s); use a new id", id, s.cfg.IdempotencyWindow))
				return nil // the original request's record stands; a conflicting one is not another attempt
			case records.InFlight:
				resp, err := o.Wait(r.Context())
				if err == nil {
					return s.replay(w, tn, id, resp)
				}
				if !errors.Is(err, records.ErrAborted) {
					return finish(0, nil, errs.New(errs.DeadlineExceeded, "gave up waiting for the first attempt of request %q", id))
				}
				continue // the first attempt's answer is not replayable: run this one
			}
			idemKey = true
			break
		}
	}
	rk := req.RoutingKey
	if h := r.Header.Get("X-Routing-Key"); h != "" {
		if len(h) > 256 {
			return finish(0, nil, errs.Field(errs.InvalidArgument, "X-Routing-Key", "must be at most 256 characters, got %d", len(h)))
		}
		rk = h
	}
	if rk == "" {
		rk = id
	}
	res, err := s.gw.Predict(r.Context(), gateway.Request{Tenant: tn, Model: model, Version: version, RoutingKey: rk, Instances: req.Instances, Deadline: req.Deadline, Received: start})
	if res != nil && res.Target != nil {
		w.Header().Set("X-Model-Version", res.Target.ID)
		rec.Version = res.Target.N
		rec.Input = sampleInput(res.Target.Spec.Manifest.Logging, req.Instances)
	}
	if err != nil {
		return finish(0, nil, err)
	}
	span.SetAttributes(attribute.Int("sluice.instances", len(req.Instances)),
		attribute.Float64("sluice.preprocess_ms", ms(res.Preprocess)), attribute.Float64("sluice.queue_ms", ms(res.Timing.Queue)),
		attribute.Float64("sluice.batch_wait_ms", ms(res.Timing.BatchWait)), attribute.Float64("sluice.compute_ms", ms(res.Timing.Compute)))
	out := encodePrediction(res, id)
	w.Header().Set("Server-Timing", fmt.Sprintf("preprocess;dur=%.3f, queue;dur=%.3f, batch_wait;dur=%.3f, compute;dur=%.3f, total;dur=%.3f",
		ms(res.Preprocess), ms(res.Timing.Queue), ms(res.Timing.BatchWait), ms(res.Timing.Compute), ms(time.Since(start))))
	return finish(http.StatusOK, out, nil)
}

// replayHeaders keeps the headers a replay repeats.
func replayHeaders(h http.Header) http.Header {
	out := http.Header{}
	for _, k := range []string{"Content-Type", "X-Model-Version", "Retry-After"} {
		if v := h.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	return out
}

// replay answers a retry with the first attempt's response and counts the
// attempt on the original record.
func (s *Server) replay(w http.ResponseWriter, tn *tenant.Tenant, id string, resp records.Response) error {
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.Header().Set("Idempotent-Replay", "true")
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
	if s.cfg.Records != nil {
		s.cfg.Records.Bump(tn.Name, id)
	}
	return nil
}

func (s *Server) addRecord(r records.Record) {
	if s.cfg.Records != nil {
		s.cfg.Records.Add(r) // never blocks; overflow is counted by the writer
	}
}

// sampleInput returns the named fields of the instances as canonical JSON
// for a sampled request of a model that opted in, else nil.
func sampleInput(lg *modelpkg.Logging, insts []schema.Instance) []byte {
	if lg == nil || lg.SampleRate <= 0 || rand.Float64() >= lg.SampleRate {
		return nil
	}
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

// encodePrediction writes the response by hand: outputs as float32 in their
// shortest form, keys in output order.
func encodePrediction(res *gateway.Response, id string) []byte {
	names := res.Target.Spec.OutputNames
	quoted := make([][]byte, len(names))
	for i, n := range names {
		quoted[i], _ = json.Marshal(n)
	}
	b := make([]byte, 0, 64+res.Out.Rows*res.Out.Cols*24)
	b = append(b, `{"predictions":[`...)
	for i := 0; i < res.Out.Rows; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		for j, v := range res.Out.Row(i) {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, quoted[j]...)
			b = append(b, ':')
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				b = append(b, "null"...)
			} else {
				b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
			}
		}
		b = append(b, '}')
	}
	b = append(b, `],"modelVersion":`...)
	b = strconv.AppendQuote(b, res.Target.ID)
	b = append(b, `,"schemaVersion":`...)
	b = strconv.AppendQuote(b, res.Target.Spec.Manifest.Input.Schema)
	b = append(b, `,"requestId":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, "}\n"...)
	return b
}

// logRequest logs one predict call with the fixed keys: at debug level when
// it succeeded or the client erred, at warn when the server failed it.
func (s *Server) logRequest(r *http.Request, rec records.Record, status int) {
	// Refusals and deadline misses are expected under load (and counted in
	// metrics): one warn line each would cost the most when the server is
	// busiest. Only a server fault is a warning.
	level := slog.LevelDebug
	if rec.Outcome == string(errs.Internal) || rec.Outcome == string(errs.Unavailable) {
		level = slog.LevelWarn
	}
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	attrs := []slog.Attr{slog.String("request_id", rec.RequestID), slog.String("tenant", rec.Tenant),
		slog.String("model", rec.Model), slog.Int("version", rec.Version), slog.Int("status", status),
		slog.String("outcome", rec.Outcome), slog.Float64("latency_ms", rec.LatencyMs)}
	if sc := trace.SpanContextFromContext(r.Context()); sc.HasTraceID() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	} else if t := traceID(r); t != "" {
		attrs = append(attrs, slog.String("trace_id", t))
	}
	s.log.LogAttrs(r.Context(), level, "predict", attrs...)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
