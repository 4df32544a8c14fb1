package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/tenant"
)

// predict serves one /v1 predict call: it decodes, hands the call to the
// gateway (idempotency, records, tracing, routing, …) and encodes the
// answer. A retry with the same X-Request-Id within the idempotency window
// gets the first answer byte for byte, with Idempotent-Replay: true.
func (s *Server) predict(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string, version int) error {
	start := time.Now()
	id := requestID(r)
	a := s.gw.Predict(r.Context(), gateway.Call{
		Transport: gateway.HTTP, Tenant: tn, RequestID: id, Idempotent: r.Header.Get("X-Request-Id") != "", IDField: "X-Request-Id",
		Model: model, Version: version, Carrier: propagation.HeaderCarrier(r.Header), Received: start,
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
	s.writeAnswer(w, r, a, start, func(p *gateway.Prediction) []byte { return encodePrediction(p, a.RequestID) })
	return nil
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errs.New(errs.PayloadTooLarge, "request body exceeds %d bytes (server flag --max-body-bytes)", s.cfg.MaxBodyBytes)
		}
		return nil, errs.Wrap(errs.InvalidArgument, err, "read request body")
	}
	return body, nil
}

// writeAnswer renders a gateway answer: the error body, or the body encode
// makes of the prediction. Both renderings are deterministic, so a replay
// is byte for byte the first answer. Server-Timing is for fresh answers.
func (s *Server) writeAnswer(w http.ResponseWriter, r *http.Request, a *gateway.Answer, start time.Time, encode func(*gateway.Prediction) []byte) {
	if a.ModelVersion != "" {
		w.Header().Set("X-Model-Version", a.ModelVersion)
	}
	if a.Replay {
		w.Header().Set("Idempotent-Replay", "true")
	}
	if a.Err != nil {
		s.renderError(w, r, a.RequestID, a.Err)
		return
	}
	if !a.Replay {
		t := a.Timing
		w.Header().Set("Server-Timing", fmt.Sprintf("preprocess;dur=%.3f, queue;dur=%.3f, batch_wait;dur=%.3f, compute;dur=%.3f, total;dur=%.3f",
			ms(t.Preprocess), ms(t.Queue), ms(t.BatchWait), ms(t.Compute), ms(time.Since(start))))
	}
	b := encode(a.Prediction)
	w.Header().Set("Content-Type", "application/json")
	setWriteDeadline(w, len(b))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// encodePrediction writes the response by hand: outputs as float32 in their
// shortest form, keys in output order.
func encodePrediction(res *gateway.Prediction, id string) []byte {
	names := res.Outputs
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
