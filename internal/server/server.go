// Package server is Sluice's HTTP transport: routes, request limits,
// request ids, authentication (later), and the one place errors are
// rendered. Handlers return errors; writeError maps codes to statuses with
// the table in internal/errs. It holds no prediction logic: predict calls go
// to the gateway, control calls to the controller.
package server

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/events"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/outcomes"
	"github.com/sluiceml/sluice/internal/predcache"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/tenant"
)

// Config configures the HTTP server.
type Config struct {
	MaxBodyBytes   int64         // predict body limit (default 1 MiB)
	MaxUploadBytes int64         // package upload limit, compressed and inflated (default 512 MiB)
	MaxDeadline    time.Duration // largest deadlineMs accepted (default 60s)
	Tenants        *tenant.Set   // nil: no authentication, one default tenant
	Logger         *slog.Logger
	Metrics        *telemetry.Metrics // nil: no /metrics, no request metrics
	Records        *records.Writer    // nil: prediction records off
	RecordStore    records.Store      // for GET /v1/records (nil: 404)
	Features       gateway.FeatureSet // the feature stores (nil: none; app refuses versions with features: then)
	// IdempotencyWindow is how long a request id's answer is replayed
	// (0: 10 minutes; negative: idempotency off).
	IdempotencyWindow time.Duration
	// IdempotencyMaxBytes bounds what the kept answers hold (0: 64 MiB);
	// the oldest go first.
	IdempotencyMaxBytes int64
	// Workers lists worker processes for GET /v1/workers (nil: replicas
	// run in this process).
	Workers WorkerLister
	// Demand, when set, adds each version's demand on the workers to GET
	// /v1/workers.
	Demand  DemandSource
	Version string // the build's version (GET /v2 and gRPC ServerMetadata)
	// UploadDir holds an upload's artifact while it is published
	// (default: the system's temporary folder). Put it on a disk, not a
	// tmpfs: an artifact may be as large as MaxUploadBytes.
	UploadDir string
	// HTTPMaxConns and GRPCMaxConns bound the connections each listener
	// holds open at once (--http-max-conns, --grpc-max-conns; 0: the
	// defaults); a connection past the limit is closed at once.
	HTTPMaxConns int
	GRPCMaxConns int
	// RecordsPageBytes bounds a GET /v1/records page in bytes (0:
	// records.MaxPageBytes, 8 MiB).
	RecordsPageBytes int64
	// TLS, when set, makes both listeners (HTTP, with HTTP/2 and
	// HTTP/1.1 by ALPN, and gRPC) speak TLS with it: certs.ServerConfig,
	// which reloads the certificate and verifies client certificates.
	// nil: plain HTTP and plaintext gRPC.
	TLS *tls.Config
	// Caches holds the prediction caches of the versions that declare
	// cache: (nil: a set of the server's own; app passes the one whose
	// Drop the controller calls when a version leaves the routing).
	Caches *predcache.Set
	// Jobs serves the batch jobs' routes (/v1/jobs…); nil: every one
	// answers jobs_off (503).
	Jobs jobs.Service
	// Outcomes serves POST /v1/outcomes (nil: outcomes_off, 503); Joins
	// takes every answered prediction's join for it.
	Outcomes *outcomes.Service
	Joins    *outcomes.Joiner
	// LabReport is the `sluice lab` report GET /v1/lab/report serves
	// (--lab-report; app's default: <--data>/lab/report.html), its CSV and
	// JSON files beside it ("": none, 404).
	LabReport string
	// Events is the change feed GET /v1/events streams (nil: that route
	// answers 404). Its streams end when the server starts draining.
	Events *events.Hub
	// Lab runs the experiments of /v1/deployments/{model}/experiment and
	// PUT /v1/deployments/{model} with "experiment" (nil: outcomes_off).
	Lab *outcomes.Lab
}

// Server serves the public API.
type Server struct {
	cfg      Config
	ctl      *control.Controller
	gw       *gateway.Gateway
	log      *slog.Logger
	draining atomic.Bool
	drainc   chan struct{} // closed by SetDraining: event streams end
	drainOne sync.Once
	mux      *http.ServeMux
	routes   []Route      // what mux serves, and who may call it
	handler  http.Handler // what the listener serves: mux (tests may wrap it)
}

// New builds the HTTP server.
func New(cfg Config, ctl *control.Controller) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 512 << 20
	}
	if cfg.MaxDeadline <= 0 {
		cfg.MaxDeadline = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.IdempotencyWindow == 0 {
		cfg.IdempotencyWindow = 10 * time.Minute
	}
	if cfg.HTTPMaxConns <= 0 {
		cfg.HTTPMaxConns = DefaultHTTPMaxConns
	}
	if cfg.GRPCMaxConns <= 0 {
		cfg.GRPCMaxConns = DefaultGRPCMaxConns
	}
	if cfg.Caches == nil {
		cfg.Caches = predcache.NewSet()
	}
	s := &Server{cfg: cfg, ctl: ctl, gw: &gateway.Gateway{Table: ctl.Table, MaxDeadline: cfg.MaxDeadline, Stats: ctl.Stats,
		Shadows: gateway.NewShadows(ctl.Stats, cfg.Logger, 2, 256, 2*time.Second), Metrics: cfg.Metrics,
		Records: cfg.Records, Log: cfg.Logger, Caches: cfg.Caches, Features: cfg.Features, Joins: cfg.Joins}, log: cfg.Logger, mux: http.NewServeMux(), drainc: make(chan struct{})}
	if cfg.Metrics != nil {
		cfg.Metrics.SetCacheSource(cacheStates(cfg.Caches))
	}
	s.handler = s.mux
	s.gw.Shadows.Metrics = cfg.Metrics
	if cfg.IdempotencyWindow > 0 {
		s.gw.Idem = records.NewIdempotency(cfg.IdempotencyWindow, records.DefaultMaxEntries, cfg.IdempotencyMaxBytes)
		if cfg.Records != nil && cfg.RecordStore != nil {
			s.gw.Saved = cfg.RecordStore // retries after a restart replay from the records store
		}
	}
	if cfg.Metrics != nil {
		s.handle("GET /metrics", Public, cfg.Metrics.Handler())
	}
	s.handle("/v1/records", Key, s.wrap(onlyGet(s.listRecords)))
	s.handle("/healthz", Public, s.wrap(onlyGet(s.healthz)))
	s.handle("/readyz", Public, s.wrap(onlyGet(s.readyz)))
	s.handle("/openapi.json", Public, s.wrap(onlyGet(s.openAPI)))
	s.handle("/v1/models", Key, s.wrap(onlyGet(s.listModels)))
	s.handle("/v1/events", Key, s.wrap(onlyGet(s.streamEvents)))
	s.handle("/v1/workers", Admin, s.wrap(onlyGet(s.listWorkers)))
	s.handle("/v1/models/", Key, s.wrap(s.models))
	s.handle("/v1/deployments", Key, s.wrap(onlyGet(s.listDeployments)))
	s.handle("/v1/deployments/", Key, s.wrap(s.deployments))
	s.handle("/v1/jobs", Key, s.wrap(s.jobsRoot))
	s.handle("/v1/jobs/", Key, s.wrap(s.jobsOne))
	s.handle("/v1/outcomes", Key, s.wrap(s.postOutcomes))
	s.handle("/v1/experiments", Key, s.wrap(onlyGet(s.listExperiments)))
	s.handle("/v1/lab/", Key, s.wrap(onlyGet(s.labFile)))
	// /v2 and /v2/health/*: OIP's server metadata and health, public as
	// /healthz; /v2/models/… needs a key (routeV2).
	s.handle("/v2", Public, s.wrapV2(s.routeV2))
	s.handle("/v2/health/", Public, s.wrapV2(s.routeV2))
	s.handle("/v2/", Key, s.wrapV2(s.routeV2))
	// The web console (package web): its files need no key; what it
	// shows comes from the routes above with the caller's key.
	ui := consoleHandler()
	s.handle("/ui", Public, ui)
	s.handle("/ui/", Public, ui)
	s.handle("/", Public, s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return errs.New(errs.NotFound, "no route for %s %s (see docs/api.md)", r.Method, r.URL.Path)
	}))
	return s
}

// Access says who may call a route when a tenants file is set (without
// one every caller is the default tenant, an admin).
type Access string

// The accesses of the routes (docs/api.md "Authentication").
const (
	Public Access = "public" // no key: health, readiness, metrics, OIP server metadata, no-route 404s
	Key    Access = "key"    // any tenant's key (401 without one); some calls need admin: true, each on the tenant's models only
	Admin  Access = "admin"  // a key of an admin tenant (401 without a key, 403 with another)
)

// Route is one pattern of the server's mux and who may call it.
type Route struct {
	Pattern string
	Access  Access
}

// handle registers h on pattern and notes its access.
func (s *Server) handle(pattern string, a Access, h http.Handler) {
	s.routes = append(s.routes, Route{Pattern: pattern, Access: a})
	s.mux.Handle(pattern, h)
}

// Routes lists the mux's patterns and their accesses, in registration
// order.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// onlyGet refuses other methods with 405 and an Allow header.
func onlyGet(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			return errs.New(errs.MethodNotAllowed, "%s %s is not allowed; use GET", r.Method, r.URL.Path)
		}
		return h(w, r)
	}
}

// Handler returns the root handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Close stops the shadow workers: after the listeners stopped.
func (s *Server) Close() { s.gw.Shadows.Close() }

// SetDraining marks the server not ready (readyz 503) ahead of shutdown.
// Event streams end at once, so that the listeners' drain does not wait
// for them.
func (s *Server) SetDraining() {
	s.draining.Store(true)
	s.drainOne.Do(func() { close(s.drainc) })
}

// HTTPServer wraps the handler with timeouts so a slow client cannot pin a
// connection forever: a connection that sends no request line and headers
// within 5 s is closed, a request whose body is not read within
// bodyTimeout too (uploads get uploadTimeout), an idle keep-alive one
// after 2 minutes, headers past 64 KiB are refused (431), and an HTTP/2
// connection (over TLS) has at most 100 requests open at once. The
// connection limit is the listener's (Listeners).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       s.bodyTimeout(),
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 100},
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnContext:       withConn, // an event stream bounds its connection's send buffer (events.go)
	}
}

// uploadTimeout is how long a package upload's body may take to arrive.
const uploadTimeout = 5 * time.Minute

// bodyTimeout is how long any other request (headers and body) may take
// to arrive: --max-deadline, at least 10 s. A predict call's deadline runs
// from its receipt, so a body slower than that could not be answered in
// time anyway; a trickling body holds its connection no longer.
func (s *Server) bodyTimeout() time.Duration { return max(s.cfg.MaxDeadline, 10*time.Second) }

type handler func(w http.ResponseWriter, r *http.Request) error

// wrap assigns the request id and renders a returned error.
func (s *Server) wrap(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" {
			id = newRequestID()
		} else if !validRequestID(id) {
			w.Header().Set("X-Request-Id", "")
			s.writeError(w, r, "", errs.Field(errs.InvalidArgument, "X-Request-Id", "must be 1 to 128 printable ASCII characters without spaces"))
			return
		}
		w.Header()["X-Request-Id"] = []string{id} // (the key is canonical)
		if err := h(w, r); err != nil {
			s.writeError(w, r, id, err)
		}
	}
}

// requestID is the call's request id, which wrap put in the answer's
// headers (not in the request's context: that cost a copy of the request).
func requestID(w http.ResponseWriter) string {
	if v := w.Header()["X-Request-Id"]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func newRequestID() string {
	var b [12]byte
	_, _ = crand.Read(b[:])
	var x [24]byte
	hex.Encode(x[:], b[:])
	return string(x[:])
}

func validRequestID(id string) bool {
	if len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, id string, err error) {
	s.renderError(w, r, id, err)
}

// renderError writes err as the error body and returns what it wrote.
func (s *Server) renderError(w http.ResponseWriter, r *http.Request, id string, err error) (int, []byte) {
	e := errs.Bounded(errs.As(err))
	status := errs.HTTPStatus(e.Code)
	switch {
	case e.Code == errs.Internal:
		s.log.Error("request failed", "request_id", id, "path", r.URL.Path, "err", err)
	case status >= 500 && e.Err != nil && !strings.Contains(e.Message, e.Err.Error()):
		// The client's message leaves the cause out (it names server
		// paths): the log has it.
		s.log.Warn("request failed", "request_id", id, "path", r.URL.Path, "code", string(e.Code), "err", e.Message, "cause", e.Err.Error())
	}
	if ra := errs.RetryAfterHeader(e); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	closeUnauthenticated(w, r, e)
	msg := e.Message
	if e.Field != "" && strings.HasPrefix(msg, e.Field+": ") {
		msg = strings.TrimPrefix(msg, e.Field+": ")
	}
	b, _ := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: string(e.Code), Message: msg, Field: e.Field, RequestID: id}})
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	setWriteDeadline(w, len(b))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return status, b
}

// closeUnauthenticated ends the connection after a 401 to a request with
// a body: net/http would otherwise read up to 256 KiB of the unread body
// after the answer to keep the connection, which a caller without a key
// could trickle to hold a connection slot (--http-max-conns) until the
// read deadline. The answer is written first; the read deadline in the
// past ends that read at once.
func closeUnauthenticated(w http.ResponseWriter, r *http.Request, e *errs.Error) {
	if e.Code == errs.Unauthenticated && r.ContentLength != 0 && r.ProtoMajor == 1 { // (HTTP/2 reads no body after the answer)
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"encode response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	setWriteDeadline(w, len(b)+1)
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ready, problems, warnings := s.ctl.Readiness()
	if s.cfg.Records != nil {
		if w := s.cfg.Records.Warning(); w != "" {
			warnings = append(warnings, w) // records lost: still ready, predictions answer
		}
	}
	if s.draining.Load() {
		ready, problems = false, []string{"shutting down"}
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, api.Readiness{Ready: ready, Problems: problems, Warnings: warnings})
	return nil
}

// authenticate resolves the caller's tenant from the Authorization header.
// Without a tenants file every caller is tenant.Default, passed on
// explicitly: the gateway has no implicit tenant.
func (s *Server) authenticate(r *http.Request) (*tenant.Tenant, error) {
	if s.cfg.Tenants == nil {
		return tenant.Default, nil
	}
	return s.cfg.Tenants.Authenticate(r.Header.Get("Authorization"))
}

// Gateway is the gateway the server's predict calls go through; other
// transports (OIP gRPC) serve with the same one.
func (s *Server) Gateway() *gateway.Gateway { return s.gw }

// models routes everything under /v1/models/.
func (s *Server) models(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	rest := strings.TrimPrefix(r.URL.Path, "/v1/models/")
	var one [1]string
	parts := one[:]
	if strings.Contains(rest, "/") {
		parts = strings.Split(rest, "/")
	} else {
		one[0] = rest // the predict path: no slice to allocate
	}
	if err := checkModelName(strings.TrimSuffix(parts[0], ":predict")); err != nil {
		return err
	}
	method := func(m string) error {
		if r.Method != m {
			w.Header().Set("Allow", m)
			return errs.New(errs.MethodNotAllowed, "%s %s is not allowed; use %s", r.Method, r.URL.Path, m)
		}
		return nil
	}
	switch len(parts) {
	case 1:
		if name, ok := strings.CutSuffix(parts[0], ":predict"); ok {
			if err := method(http.MethodPost); err != nil {
				return err
			}
			return s.predict(w, r, tn, name, 0)
		}
		if r.Method == http.MethodDelete {
			if err := tn.Check(parts[0]); err != nil {
				return err
			}
			return s.deleteModel(w, r, tn, parts[0])
		}
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET, DELETE")
			return errs.New(errs.MethodNotAllowed, "%s %s is not allowed; use GET or DELETE", r.Method, r.URL.Path)
		}
		if err := tn.Check(parts[0]); err != nil {
			return err
		}
		return s.getModel(w, r, parts[0])
	case 2:
		if parts[1] == "stats" {
			if err := method(http.MethodGet); err != nil {
				return err
			}
			if err := tn.Check(parts[0]); err != nil {
				return err
			}
			return s.modelStats(w, r, parts[0], time.Now())
		}
		if parts[1] == "versions" {
			if err := method(http.MethodPost); err != nil {
				return err
			}
			if !tn.Admin {
				return errs.New(errs.PermissionDenied, "tenant %q may not publish versions (needs admin: true in the tenants file)", tn.Name)
			}
			if err := tn.CheckControl("publish", parts[0]); err != nil {
				return err
			}
			return s.upload(w, r, tn, parts[0])
		}
	case 4:
		if parts[1] != "versions" || parts[3] != "drift" {
			break
		}
		n, err := strconv.Atoi(parts[2])
		if err != nil || n <= 0 {
			return errs.Field(errs.InvalidArgument, "version", "%q is not a version number (1, 2, …)", parts[2])
		}
		if err := method(http.MethodGet); err != nil {
			return err
		}
		if err := tn.Check(parts[0]); err != nil {
			return err
		}
		if _, ok := s.status(parts[0], n); !ok {
			return errs.New(errs.NotFound, "model version %s@%d not found", parts[0], n)
		}
		rep, ok := s.ctl.DriftReport(parts[0], n)
		if !ok {
			return errs.New(errs.NotFound, "%s@%d has no drift monitor: add drift: {reference: FILE} to its model.yaml (docs/model-yaml.md)", parts[0], n)
		}
		writeJSON(w, http.StatusOK, rep)
		return nil
	case 3:
		if parts[1] != "versions" {
			break
		}
		vs, verb, _ := strings.Cut(parts[2], ":")
		n, err := strconv.Atoi(vs)
		if err != nil || n <= 0 {
			return errs.Field(errs.InvalidArgument, "version", "%q is not a version number (1, 2, …)", vs)
		}
		switch verb {
		case "predict":
			if err := method(http.MethodPost); err != nil {
				return err
			}
			return s.predict(w, r, tn, parts[0], n)
		case "archive", "load":
			if err := method(http.MethodPost); err != nil {
				return err
			}
			if err := tn.Check(parts[0]); err != nil {
				return err
			}
			return s.versionAction(w, r, tn, parts[0], n, verb)
		case "":
		default:
			return errs.New(errs.NotFound, "no route for %s %s: a version takes :predict, :archive or :load (see docs/api.md)", r.Method, r.URL.Path)
		}
		if r.Method == http.MethodDelete {
			if err := tn.Check(parts[0]); err != nil {
				return err
			}
			return s.deleteVersion(w, r, tn, parts[0], n)
		}
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET, DELETE")
			return errs.New(errs.MethodNotAllowed, "%s %s is not allowed; use GET or DELETE", r.Method, r.URL.Path)
		}
		if err := method(http.MethodGet); err != nil {
			return err
		}
		if err := tn.Check(parts[0]); err != nil {
			return err
		}
		return s.getVersion(w, r, parts[0], n)
	}
	return errs.New(errs.NotFound, "no route for %s %s (see docs/api.md)", r.Method, r.URL.Path)
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string) error {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/gzip", "application/x-gzip", "application/x-tar+gzip", "application/octet-stream":
	default:
		return errs.New(errs.UnsupportedMedia, "upload a package as a .tar.gz with Content-Type application/gzip, got %q", r.Header.Get("Content-Type"))
	}
	var wait time.Duration
	if q := r.URL.Query().Get("wait"); q != "" {
		d, err := time.ParseDuration(q)
		if err != nil || d < 0 || d > 10*time.Minute {
			return errs.Field(errs.InvalidArgument, "wait", "must be a duration between 0 and 10m, like \"30s\"")
		}
		wait = d
	}
	// An upload may take longer to arrive than other bodies.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadTimeout))
	pkg, err := modelpkg.ReadTarGz(http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes), modelpkg.Limits{MaxBytes: s.cfg.MaxUploadBytes}, s.cfg.UploadDir)
	if err != nil {
		return uploadErr(err, s.cfg.MaxUploadBytes)
	}
	defer pkg.Close() // the temporary files: the artifact store has its own copy now
	if pkg.Spec.Manifest.Name != model {
		return errs.Field(errs.InvalidArgument, "name", "the package is model %q but was uploaded to /v1/models/%s/versions", pkg.Spec.Manifest.Name, model)
	}
	v, created, err := s.ctl.Publish(r.Context(), pkg, tn.Name)
	if err != nil {
		return err
	}
	if wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		s.ctl.Wait(ctx, v.Model, v.N)
		cancel()
	}
	st, ok := s.status(v.Model, v.N)
	if !ok {
		return errs.New(errs.Internal, "published %s but cannot find it", v.ID())
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("Location", fmt.Sprintf("/v1/models/%s/versions/%d", v.Model, v.N))
	writeJSON(w, status, api.PublishResponse{Created: created, Version: s.versionJSON(st, s.servingVersions()[v.Model] == v.N)})
	return nil
}

// uploadErr is the answer to an archive ReadTarGz refused: 413 for the
// size limits (the body, the inflated total, the compression ratio), 422
// for a malformed archive or package, a coded error (a full disk) as is.
func uploadErr(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errs.New(errs.PayloadTooLarge, "package exceeds %d bytes (server flag --max-upload-bytes)", limit)
	}
	if errors.Is(err, modelpkg.ErrTooLarge) {
		return errs.New(errs.PayloadTooLarge, "%v (server flag --max-upload-bytes: %d)", err, limit)
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	return errs.Wrap(errs.InvalidPackage, nil, "%v", err)
}

func (s *Server) status(model string, n int) (control.Status, bool) {
	for _, st := range s.ctl.Versions() {
		if st.Version.Model == model && st.Version.N == n {
			return st, true
		}
	}
	return control.Status{}, false
}

func (s *Server) versionJSON(st control.Status, serving bool) api.Version {
	v := st.Version
	out := api.Version{
		Model: v.Model, Version: v.N, ID: v.ID(), State: string(st.State), Reason: st.Reason, Serving: serving,
		Runtime: v.Runtime, ArtifactSHA256: v.ArtifactSHA, ArtifactBytes: v.ArtifactBytes, Digest: v.Digest,
		CreatedAt: v.CreatedAt,
		Timings:   api.Timings{LoadMs: ms(st.Timings.Load), GoldenMs: ms(st.Timings.Golden), WarmupMs: ms(st.Timings.Warmup)},
	}
	spec := st.Spec
	if spec == nil {
		if p, err := modelpkg.Parse(v.ID()+"/model.yaml", v.Manifest); err == nil {
			spec = p
		}
	}
	if spec != nil {
		m := spec.Manifest
		out.Description = m.Description
		out.Input, out.Output = contract(spec)
		sv := m.Serving
		out.Config = &api.Serving{
			MaxInstancesPerRequest: sv.MaxInstancesPerRequest, DefaultDeadlineMs: ms(sv.DefaultDeadline.Duration),
			Replicas: sv.Replicas, MaxBatchSize: sv.MaxBatchSize, MaxBatchDelayMs: ms(sv.MaxBatchDelay.Duration),
			MaxQueueInstances: sv.MaxQueueInstances,
		}
		if st.Stats != nil {
			out.Config.ReadyReplicas = st.Stats.ReadyReplicas
			out.Config.QueuedInstances = st.Stats.QueuedInstances
			out.Config.Batches = st.Stats.Batches
			out.Config.ExpiredInQueue = st.Stats.ExpiredInQueue
			out.Config.ReplicaCrashes = st.Stats.Crashes
			out.Config.CostBaseMs = ms(st.Stats.Cost.A)
			out.Config.CostPerInstanceMs = ms(st.Stats.Cost.B)
		}
	}
	return out
}

func contract(spec *modelpkg.Spec) (*api.Input, *api.Output) {
	m := spec.Manifest
	in := &api.Input{Schema: m.Input.Schema, Features: spec.Schema.Features()}
	for _, f := range m.Input.Fields {
		in.Fields = append(in.Fields, api.Field{Name: f.Name, Type: f.Type, Min: f.Min, Max: f.Max, Optional: f.Optional, Default: f.Default, Values: f.Values, MaxLength: f.MaxLength, DType: f.DType, Mask: f.Mask})
	}
	if f := m.Features; f != nil {
		en := &api.Enrichment{Entity: f.Entity, EntityType: f.EntityType, View: f.View, Fields: f.FieldNames(), Defaults: map[string]float64{}, Timeout: f.Timeout.String()}
		for _, ff := range f.Fields {
			if ff.Default != nil {
				en.Defaults[ff.Name] = *ff.Default
			}
		}
		if f.MaxAge.Duration > 0 {
			en.MaxAge = f.MaxAge.String()
		}
		in.Enrichment = en
	}
	return in, &api.Output{Schema: m.Output.Schema, Fields: spec.OutputNames}
}

func (s *Server) servingVersions() map[string]int {
	out := map[string]int{}
	t := s.ctl.Table.Load()
	for name := range t.Models {
		if n := t.Serving(name); n > 0 {
			out[name] = n
		}
	}
	return out
}

func (s *Server) modelsJSON() []api.Model {
	serving := s.servingVersions()
	var out []api.Model
	idx := map[string]int{}
	specs := map[string]*modelpkg.Spec{}
	for _, st := range s.ctl.Versions() { // sorted by model, then version
		v := st.Version
		if st.State == registry.Deleted {
			continue // its model was deleted: hidden from listings
		}
		i, ok := idx[v.Model]
		if !ok {
			i = len(out)
			idx[v.Model] = i
			out = append(out, api.Model{Name: v.Model})
		}
		m := &out[i]
		m.Versions = append(m.Versions, api.VersionSummary{Version: v.N, State: string(st.State), Reason: st.Reason})
		n, serves := serving[v.Model]
		switch {
		case serves && n == v.N:
			m.ServingVersion = &n
			specs[v.Model] = st.Spec
		case !serves && st.Spec != nil:
			specs[v.Model] = st.Spec // the newest parsed version while none serves
		}
	}
	for i := range out {
		if sp := specs[out[i].Name]; sp != nil {
			out[i].Input, out[i].Output = contract(sp)
		}
	}
	for _, p := range s.ctl.InvalidPackages() {
		i, ok := idx[p.Model]
		if !ok {
			i = len(out)
			idx[p.Model] = i
			out = append(out, api.Model{Name: p.Model, Versions: []api.VersionSummary{}})
		}
		out[i].InvalidPackage = &api.InvalidPackage{Dir: p.Dir, State: "failed", Error: p.Err}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	ms := []api.Model{}
	for _, m := range s.modelsJSON() {
		if tn.Allowed(m.Name) {
			ms = append(ms, m)
		}
	}
	writeJSON(w, http.StatusOK, api.ModelList{Models: ms})
	return nil
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request, name string) error {
	for _, m := range s.modelsJSON() {
		if m.Name == name {
			writeJSON(w, http.StatusOK, m)
			return nil
		}
	}
	return errs.New(errs.NotFound, "model %q not found", name)
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request, model string, n int) error {
	st, ok := s.status(model, n)
	if !ok {
		return errs.New(errs.NotFound, "model version %s@%d not found", model, n)
	}
	writeJSON(w, http.StatusOK, s.versionJSON(st, s.servingVersions()[model] == n))
	return nil
}
