package server

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/oip"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/tenant"
)

// Open Inference Protocol v2 REST: /v2 routes. Errors are the protocol's
// {"error": "..."} body with the status of the one error table.

// wrapV2 is wrap for /v2 routes: the request id, and errors rendered as
// OIP error bodies.
func (s *Server) wrapV2(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.wrap(func(w http.ResponseWriter, r *http.Request) error {
			if err := h(w, r); err != nil {
				s.renderOIPError(w, r, requestID(w), errs.As(err))
			}
			return nil
		})(w, r)
	}
}

func (s *Server) renderOIPError(w http.ResponseWriter, r *http.Request, id string, e *errs.Error) {
	if e.Code == errs.Internal {
		s.log.Error("request failed", "request_id", id, "path", r.URL.Path, "err", e)
	}
	if ra := errs.RetryAfterHeader(e); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	closeUnauthenticated(w, r, e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(errs.HTTPStatus(e.Code))
	_, _ = w.Write(oip.EncodeError(e))
}

// ServerMetadata is GET /v2's answer.
type serverMetadata struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Extensions []string `json:"extensions"`
}

func (s *Server) routeV2(w http.ResponseWriter, r *http.Request) error {
	path := strings.TrimSuffix(r.URL.Path, "/")
	get := func() error {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			return errs.New(errs.MethodNotAllowed, "%s %s is not allowed; use GET", r.Method, r.URL.Path)
		}
		return nil
	}
	switch path {
	case "/v2":
		if err := get(); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, serverMetadata{Name: "sluice", Version: s.cfg.Version, Extensions: []string{"binary_tensor_data"}})
		return nil
	case "/v2/health/live":
		if err := get(); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]bool{"live": true})
		return nil
	case "/v2/health/ready":
		if err := get(); err != nil {
			return err
		}
		status := http.StatusOK
		ready := s.Ready()
		if !ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, map[string]bool{"ready": ready})
		return nil
	}
	rest, ok := strings.CutPrefix(path, "/v2/models/")
	if !ok || rest == "" {
		return errs.New(errs.NotFound, "no route for %s %s (see docs/api.md)", r.Method, r.URL.Path)
	}
	parts := strings.Split(rest, "/")
	model, version, tail := parts[0], 0, parts[1:]
	if len(tail) >= 2 && tail[0] == "versions" {
		n, err := oip.ParseVersion(tail[1])
		if err != nil {
			return err
		}
		version, tail = n, tail[2:]
	}
	if len(tail) > 1 {
		return errs.New(errs.NotFound, "no route for %s %s (see docs/api.md)", r.Method, r.URL.Path)
	}
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	if err := checkModelName(model); err != nil {
		return err
	}
	if err := tn.Check(model); err != nil {
		return err
	}
	switch {
	case len(tail) == 0:
		if err := get(); err != nil {
			return err
		}
		md, err := s.OIPMetadata(model, version)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, md)
		return nil
	case tail[0] == "ready":
		if err := get(); err != nil {
			return err
		}
		ready, err := s.OIPModelReady(model, version)
		if err != nil {
			return err
		}
		status := http.StatusOK
		if !ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, struct {
			Name  string `json:"name"`
			Ready bool   `json:"ready"`
		}{model, ready})
		return nil
	case tail[0] == "infer":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			return errs.New(errs.MethodNotAllowed, "%s %s is not allowed; use POST", r.Method, r.URL.Path)
		}
		s.oipInfer(w, r, tn, model, version)
		return nil
	}
	return errs.New(errs.NotFound, "no route for %s %s (see docs/api.md)", r.Method, r.URL.Path)
}

// oipInfer serves POST /v2/models/{m}[/versions/{v}]/infer through the
// gateway. The request id is X-Request-Id, else the idempotency_key
// parameter, else minted; either one the caller chose makes retries
// replay. The body's "id" is echoed in the answer and is never an
// idempotency key (clients number their requests from 1).
func (s *Server) oipInfer(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string, version int) {
	start := time.Now()
	id := requestID(w)
	idempotent := r.Header.Get("X-Request-Id") != ""
	req, derr := s.readOIPInfer(w, r)
	if derr == nil {
		derr = checkOIPTarget(req, model, version)
	}
	respID := id
	priority := serving.Online
	if derr == nil {
		if req.ID != "" {
			respID = req.ID
		}
		if !idempotent && req.IdempotencyKey != "" {
			id, idempotent = req.IdempotencyKey, true
			w.Header().Set("X-Request-Id", id)
		}
		if req.Batch {
			priority = serving.BatchJob
		}
	}
	var outputs []string
	a := s.gw.Predict(r.Context(), gateway.Call{
		Transport: gateway.OIPREST, Tenant: tn, RequestID: id, Idempotent: idempotent, IDField: idField(r),
		Model: model, Version: version, Carrier: propagation.HeaderCarrier(r.Header), Received: start, Priority: priority,
		Decode: func() (gateway.Input, error) {
			if derr != nil {
				return gateway.Input{}, derr
			}
			in, err := oip.Input(s.gw, req, model, version, id, r.Header.Get("X-Routing-Key"))
			outputs = req.Outputs
			return in, err
		},
	})
	var cols []int
	if a.Err == nil {
		var err error
		if cols, err = oip.SelectOutputs(a.Prediction.Outputs, outputs); err != nil {
			// The version that answered lacks a requested output (its spec
			// was not known when decoding): refuse rather than guess.
			a = &gateway.Answer{RequestID: a.RequestID, ModelVersion: a.ModelVersion, Err: errs.As(err)}
		}
	}
	if a.ModelVersion != "" {
		w.Header().Set("X-Model-Version", a.ModelVersion)
	}
	if a.Replay {
		w.Header().Set("Idempotent-Replay", "true")
	}
	if v := xCache(a); v != nil {
		w.Header()["X-Cache"] = v
	}
	if a.Err != nil {
		s.renderOIPError(w, r, a.RequestID, a.Err)
		return
	}
	bp := answerBufs.Get().(*[]byte)
	var b []byte
	if bin := oip.BinaryOutputs(req, a.Prediction.Outputs, cols); slices.Contains(bin, true) {
		var h int
		b, h = oip.AppendBinary((*bp)[:0], a.Prediction, respID, cols, bin)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set(oip.HeaderLength, strconv.Itoa(h))
	} else {
		b = oip.AppendJSON((*bp)[:0], a.Prediction, respID, cols)
		w.Header().Set("Content-Type", "application/json")
	}
	setWriteDeadline(w, len(b))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	putAnswerBuf(bp, b)
}

// readOIPInfer reads and decodes an OIP REST infer body: decompressed
// (Content-Encoding gzip or deflate, within the same --max-body-bytes as
// the body it came in), then the binary tensor data extension when
// Inference-Header-Content-Length is set, else JSON. A missing
// Content-Type is JSON (Triton's client sends none).
func (s *Server) readOIPInfer(w http.ResponseWriter, r *http.Request) (*oip.Request, error) {
	hl := r.Header.Get(oip.HeaderLength)
	ct := r.Header.Get("Content-Type")
	switch {
	case hl != "" && !isBinary(ct):
		return nil, errs.New(errs.UnsupportedMedia, "Content-Type of a binary request (%s) must be application/octet-stream, application/json or absent, got %q", oip.HeaderLength, errs.Clip(ct))
	case hl == "" && ct != "" && !isJSON(ct):
		return nil, errs.New(errs.UnsupportedMedia, "Content-Type must be application/json (or absent), got %q", errs.Clip(ct))
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	if body, err = decodeContent(r.Header.Values("Content-Encoding"), body, s.cfg.MaxBodyBytes); err != nil {
		return nil, err
	}
	if hl != "" {
		return oip.DecodeBinary(body, hl, s.cfg.MaxDeadline)
	}
	return oip.DecodeJSON(body, s.cfg.MaxDeadline)
}

// checkOIPTarget checks a body's model_name and model_version (KServe's
// client sends them) against the path the request was sent to.
func checkOIPTarget(req *oip.Request, model string, version int) error {
	if req.ModelName != "" && req.ModelName != model {
		return errs.Field(errs.InvalidArgument, "model_name", "%q differs from the model of the path, %q: send one name (or leave model_name out)", errs.Clip(req.ModelName), model)
	}
	if req.ModelVersion != "" {
		n, err := oip.ParseVersion(req.ModelVersion)
		if err != nil {
			return errs.Field(errs.InvalidArgument, "model_version", "%q is not a version number (1, 2, …)", errs.Clip(req.ModelVersion))
		}
		if n != version {
			return errs.Field(errs.InvalidArgument, "model_version", "%q differs from the path's version (%s): pin a version in the path, /v2/models/%s/versions/%d/infer", errs.Clip(req.ModelVersion), pathVersion(version), model, n)
		}
	}
	return nil
}

func pathVersion(v int) string {
	if v == 0 {
		return "none: the deployment picks"
	}
	return strconv.Itoa(v)
}

// idField names where a REST call's idempotency key came from, for the
// conflict message.
func idField(r *http.Request) string {
	if r.Header.Get("X-Request-Id") != "" {
		return "X-Request-Id"
	}
	return "parameters.idempotency_key"
}

// Ready is the server's readiness (/readyz, /v2/health/ready, gRPC
// ServerReady and health).
func (s *Server) Ready() bool {
	ready, _, _ := s.ctl.Readiness()
	return ready && !s.draining.Load()
}

// OIPMetadata is a model's (version 0) or a version's OIP metadata.
func (s *Server) OIPMetadata(model string, version int) (oip.Metadata, error) {
	var versions []int
	var spec *modelpkg.Spec
	serving := s.ctl.Table.Load().Serving(model)
	for _, st := range s.ctl.Versions() { // sorted by model, then version
		v := st.Version
		if v.Model != model || (version > 0 && v.N != version) {
			continue
		}
		versions = append(versions, v.N)
		sp := st.Spec
		if sp == nil {
			if p, err := modelpkg.Parse(v.ID()+"/model.yaml", v.Manifest); err == nil {
				sp = p
			}
		}
		if version > 0 || v.N == serving || (serving == 0 && sp != nil) {
			spec = sp // the version asked for, else the serving one, else the newest
		}
	}
	if len(versions) == 0 {
		if version > 0 {
			return oip.Metadata{}, errs.New(errs.NotFound, "model version %s@%d not found", model, version)
		}
		return oip.Metadata{}, errs.New(errs.NotFound, "model %q not found", model)
	}
	return oip.MetadataOf(model, versions, spec), nil
}

// OIPModelReady reports whether a model (version 0: its deployment) or a
// version can take predictions; an unknown one is not found.
func (s *Server) OIPModelReady(model string, version int) (bool, error) {
	if _, err := s.OIPMetadata(model, version); err != nil {
		return false, err
	}
	t := s.ctl.Table.Load()
	var tg *routing.Target
	var err error
	if version > 0 {
		tg, err = t.Pinned(model, version)
	} else {
		tg, _, err = t.Pick(model, "")
	}
	return err == nil && tg != nil, nil
}
