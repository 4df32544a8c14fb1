package server

import (
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/tenant"
)

// predict serves one /v1 predict call: it decodes, hands the call to the
// gateway (idempotency, records, tracing, routing, …) and encodes the
// answer. A retry with the same X-Request-Id within the idempotency window
// gets the first answer byte for byte, with Idempotent-Replay: true.
func (s *Server) predict(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string, version int) error {
	start := time.Now()
	id := requestID(w)
	prio, err := priorityHeader(r.Header)
	if err != nil {
		return err
	}
	a := s.gw.Predict(r.Context(), gateway.Call{
		Transport: gateway.HTTP, Tenant: tn, RequestID: id, Idempotent: r.Header.Get("X-Request-Id") != "", IDField: "X-Request-Id",
		Model: model, Version: version, Carrier: propagation.HeaderCarrier(r.Header), Received: start, Priority: prio,
		Decode: func() (gateway.Input, error) {
			body, err := s.readJSONBody(w, r)
			if err != nil {
				return gateway.Input{}, err
			}
			req, err := decodePredict(body, s.cfg.MaxDeadline)
			if err != nil {
				return gateway.Input{}, err
			}
			in := gateway.Input{Instances: req.Instances, Deadline: req.Deadline, RoutingKey: req.RoutingKey}
			if h := r.Header.Get("X-Routing-Key"); h != "" {
				if n := utf8.RuneCountInString(h); n > maxRoutingKey {
					return gateway.Input{}, errs.Field(errs.InvalidArgument, "X-Routing-Key", "must be at most %d characters, got %d", maxRoutingKey, n)
				}
				in.RoutingKey = h
			}
			return in, nil
		},
	})
	s.writeAnswer(w, r, a, start)
	return nil
}

// PriorityHeader is the request header that lowers a /v1 predict call's
// serving class: "batch" submits its rows at serving.BatchJob, the class
// the batcher fills last with what online work leaves idle (the remote
// runner of `sluice job run` sends it). A caller may only lower its own
// priority, so there is no value that raises it.
const PriorityHeader = "Sluice-Priority"

// priorityHeader reads Sluice-Priority: absent is online, "batch" is
// serving.BatchJob, anything else a 400 naming the header.
func priorityHeader(h http.Header) (serving.Priority, error) {
	v := h["Sluice-Priority"] // (the key is canonical)
	switch {
	case len(v) == 0:
		return serving.Online, nil
	case len(v) == 1 && v[0] == "batch":
		return serving.BatchJob, nil
	}
	return serving.Online, errs.Field(errs.InvalidArgument, PriorityHeader, "must be \"batch\" (or absent for online priority), got %q", errs.Clip(strings.Join(v, ", ")))
}

// readJSONBody checks the Content-Type and reads the body within
// --max-body-bytes.
func (s *Server) readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		return nil, errs.New(errs.UnsupportedMedia, "Content-Type must be application/json, got %q", ct)
	}
	return s.readBody(w, r)
}

// readBody reads a predict body, bounded by --max-body-bytes.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := readAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), r.ContentLength, s.cfg.MaxBodyBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errs.New(errs.PayloadTooLarge, "request body exceeds %d bytes (server flag --max-body-bytes)", s.cfg.MaxBodyBytes)
		}
		return nil, errs.Wrap(errs.InvalidArgument, err, "read request body")
	}
	return body, nil
}

// readAll is io.ReadAll that uses the declared length n (Content-Length,
// when known and within limit) to size its steps, never its memory: the
// buffer starts at min(n, firstRead) and doubles as bytes arrive, up to n,
// so a body is copied a few times at most (io.ReadAll grows from 512
// bytes, copying a large body a dozen times) and a client that declares
// 1 MiB and sends 10 bytes holds 8 KiB, not 1 MiB (issue 18, finding 13:
// 3,000 trickling bodies pinned 3.3 GB). Bytes past n, which net/http
// does not let through, would still be read, and a body shorter than n is
// an error (io.ErrUnexpectedEOF, as net/http's body reports it).
func readAll(r io.Reader, n, limit int64) ([]byte, error) {
	if n <= 0 || n > limit {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, min(n, firstRead))
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, int(min(int64(cap(b)), n-int64(len(b))))) // double, up to n
		}
		k, err := r.Read(b[len(b):min(int64(cap(b)), n)])
		b = b[:len(b)+k]
		if err == io.EOF {
			if len(b) == 0 {
				return b, nil // an empty body, as io.ReadAll reads it
			}
			if int64(len(b)) < n {
				return b, io.ErrUnexpectedEOF
			}
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	// The declared length was read: the body should be at EOF. Check with
	// a one-byte read rather than io.ReadAll, which allocates 512 bytes
	// for the nothing that follows.
	var probe [1]byte
	for {
		m, err := r.Read(probe[:])
		if m > 0 {
			b = append(b, probe[0])
			rest, err := io.ReadAll(r)
			return append(b, rest...), err
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// firstRead is the most readAll allocates before a body's bytes arrive.
const firstRead = 8 << 10

// writeAnswer renders a /v1 gateway answer: the error body, or the
// prediction's body. Both renderings are deterministic, so a replay is byte
// for byte the first answer. Server-Timing is for fresh answers.
func (s *Server) writeAnswer(w http.ResponseWriter, r *http.Request, a *gateway.Answer, start time.Time) {
	h := w.Header()
	// The two per-call values share one slice's array (the keys are
	// canonical, so they are set directly).
	hv := make([]string, 2)
	if a.ModelVersion != "" {
		hv[0] = a.ModelVersion
		h["X-Model-Version"] = hv[0:1:1]
	}
	if a.Replay {
		w.Header().Set("Idempotent-Replay", "true")
	}
	if v := xCache(a); v != nil {
		h["X-Cache"] = v
	}
	if a.Err != nil {
		s.renderError(w, r, a.RequestID, a.Err)
		return
	}
	if !a.Replay {
		now := time.Now()
		hv[1] = serverTiming(a.Timing, now.Sub(start))
		h["Server-Timing"] = hv[1:2:2]
		h["Date"] = httpDate(now)
	}
	bp := answerBufs.Get().(*[]byte)
	b := appendPrediction((*bp)[:0], a.Prediction, a.RequestID)
	h["Content-Type"] = jsonContentType
	setWriteDeadline(w, len(b))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	putAnswerBuf(bp, b)
}

// httpDate is the Date header value for now, formatted once a second
// (net/http formats it for every answer that lacks one: 1.7 % of a 1-row
// call's CPU).
func httpDate(now time.Time) []string {
	sec := now.Unix()
	if d := lastDate.Load(); d != nil && d.sec == sec {
		return d.v
	}
	d := &dateValue{sec: sec, v: []string{now.UTC().Format(http.TimeFormat)}}
	lastDate.Store(d)
	return d.v
}

type dateValue struct {
	sec int64
	v   []string
}

var lastDate atomic.Pointer[dateValue]

// jsonContentType is the Content-Type header value of JSON answers, shared:
// net/http only reads header values, and an append to a full slice copies.
var jsonContentType = []string{"application/json"}

// serverTiming is the Server-Timing header of an answer:
// "preprocess;dur=0.012, queue;dur=…, batch_wait;dur=…, compute;dur=…,
// total;dur=…" in milliseconds with three decimals (appended by hand:
// fmt.Sprintf of five floats cost more than the model on a 1-row call).
func serverTiming(t gateway.Timing, total time.Duration) string {
	var buf [160]byte
	b := buf[:0]
	for i, st := range [...]struct {
		name string
		d    time.Duration
	}{{"preprocess", t.Preprocess}, {"queue", t.Queue}, {"batch_wait", t.BatchWait}, {"compute", t.Compute}, {"total", total}} {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(append(b, st.name...), ";dur="...)
		b = appendMillis(b, st.d)
	}
	return string(b)
}

// appendMillis appends d in milliseconds with three decimals, rounded to
// the nearest microsecond (half away from zero), by integer arithmetic:
// five strconv.AppendFloat calls were 1.4 % of a 1-row call's CPU.
func appendMillis(b []byte, d time.Duration) []byte {
	if d < 0 {
		b = append(b, '-')
		d = -d
	}
	us := (d + 500) / time.Microsecond
	b = strconv.AppendInt(b, int64(us/1000), 10)
	f := us % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

// answerBufs reuses the buffers answers are encoded into: an answer is
// written (http.ResponseWriter.Write does not keep it) and its buffer goes
// back, so a call costs no answer-sized allocation once the pool is warm.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// putAnswerBuf returns a buffer that held b, unless it grew past 1 MiB
// (a rare huge answer is not kept alive).
func putAnswerBuf(bp *[]byte, b []byte) {
	if cap(b) <= 1<<20 {
		*bp = b[:0]
		answerBufs.Put(bp)
	}
}

// encodePrediction is appendPrediction into a new buffer.
func encodePrediction(res *gateway.Prediction, id string) []byte {
	return appendPrediction(make([]byte, 0, 64+res.Out.Rows*res.Out.Cols*24), res, id)
}

// appendPrediction appends the response, written by hand: outputs as
// float32 in their shortest form, keys in output order (escaped as
// encoding/json escapes them), nothing allocated per row.
func appendPrediction(b []byte, res *gateway.Prediction, id string) []byte {
	names := res.Outputs
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
			b = records.AppendCanonicalString(b, names[j])
			b = append(b, ':')
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				b = append(b, "null"...)
			} else {
				b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
			}
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if res.Labels != nil {
		// The labelled outputs (postprocess: threshold, topk, map) by
		// their labels; predictions holds their indices.
		b = append(b, `,"labels":[`...)
		for i := 0; i < res.Out.Rows; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			k := 0
			for j, l := range res.Labels {
				if l == nil {
					continue
				}
				if k > 0 {
					b = append(b, ',')
				}
				k++
				b = records.AppendCanonicalString(b, names[j])
				b = append(b, ':')
				if s, ok := res.Label(i, j); ok {
					b = records.AppendCanonicalString(b, s)
				} else {
					b = append(b, "null"...)
				}
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if res.Features != nil {
		b = append(b, `,"featureSources":`...)
		b = res.Features.AppendSources(b)
	}
	b = append(b, `,"modelVersion":`...)
	b = strconv.AppendQuote(b, res.ID)
	b = append(b, `,"schemaVersion":`...)
	b = strconv.AppendQuote(b, res.InputSchema)
	b = append(b, `,"requestId":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, "}\n"...)
	return b
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func isJSON(ct string) bool {
	if ct == "application/json" {
		return true // as most clients send it, without a parse that allocates
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// isBinary reports whether ct may carry an OIP binary body: clients send
// application/octet-stream, application/json or none (the
// Inference-Header-Content-Length header already says what the body is).
func isBinary(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/octet-stream" || mt == "application/json")
}
