// Package worker is the process that hosts replicas for a control plane
// (`sluice worker`). It fetches artifacts by SHA-256 into a bounded local
// disk cache (verifying every byte), hosts versions with internal/hosting
// (load, golden examples, warmup, and only then ready), runs each version's
// admission, work queue and batcher next to its replicas, and serves two
// gRPC services: the Open Inference Protocol's GRPCInferenceService for
// batches of preprocessed rows (see internal/hop for the tensor layout) and
// the worker control service (load, unload, status). It registers with the
// control plane and heartbeats its status (versions, replicas, queue work,
// RSS, each version's memory and the worker's memory budget: memory.go).
// It knows nothing of tenants, deployments or HTTP.
//
// Where artifacts come from: given the object store the registry keeps
// them in (Config.Artifacts, `sluice worker --artifacts s3://…`), a worker
// reads them from it directly; otherwise it streams them from the control
// plane (FetchArtifact), which reads the same store. Direct is what
// production systems do (KServe's storage initializer and ModelMesh's
// puller read the model store themselves): the bytes cross the network
// once instead of twice, a cold start does not queue behind other
// workers' downloads on the gateway, and loading keeps working while the
// control plane is busy or restarting. A failed direct fetch is not
// retried through the control plane: both paths read the same object, so
// the retry would double the time to the same error (a store that is
// down, a corrupted object) and hide a worker that cannot reach the store.
// Either way the cache verifies every byte against the SHA-256 before it
// keeps or serves it.
package worker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/internal/connlimit"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// Config configures a worker.
type Config struct {
	// CPUs bounds the batches computing at once in this worker (sluice
	// worker --model-cpus; nil: no bound).
	CPUs       *serving.CPUs
	ID         string // stable across restarts ("worker-1")
	Join       string // the control plane's address (host:port)
	Listen     string // where to serve gRPC (default 127.0.0.1:0)
	Advertise  string // the address to register (default: the listener's)
	CacheDir   string
	CacheBytes int64 // artifact cache bound (default 2 GiB)
	MaxLoads   int   // concurrent loads (default 2)
	// MaxMessageBytes bounds a gRPC message either way (default 64 MiB).
	MaxMessageBytes int
	// MemoryBudget is the memory this worker's versions may hold, reported
	// in its status for placement (0: DefaultBudget(WorkersOnHost)), and
	// MemoryBudgetSource where the figure came from.
	MemoryBudget       int64
	MemoryBudgetSource string
	// WorkersOnHost is how many workers share this host's memory (for
	// the default budget; 0: this one alone).
	WorkersOnHost int
	Logger        *slog.Logger
	Build         string
	// Artifacts, when set, is the object store to read artifacts from
	// directly (see the package doc), and ArtifactsName how the log and
	// load answers name it; nil: from the control plane.
	Artifacts     Source
	ArtifactsName string
	// ControlTLS configures the connection to the control plane, which
	// always speaks TLS: it verifies the gateway's certificate (sluice
	// worker --ca) and may carry a client certificate (--cert, --key).
	// Required.
	ControlTLS *tls.Config
	// JoinToken returns the join token presented on Register
	// (--join-token-file, read at every registration, so a rotated token
	// is picked up); nil: none (the client certificate is the credential).
	JoinToken func() ([]byte, error)
	// HealthListen, when set, serves gRPC health alone there, without TLS
	// (Kubernetes' gRPC probes speak no TLS); the main listener answers
	// health too.
	HealthListen string
	// MaxConns and MaxCalls bound the connections and the calls open at
	// once on the worker's listener (--max-conns, --max-calls; 0:
	// DefaultMaxConns, DefaultMaxCalls); HandshakeTimeout and IdleTimeout
	// override the listener's (0: connlimit.HandshakeTimeout, IdleTimeout; tests).
	// See bounds.go.
	MaxConns, MaxCalls            int
	HandshakeTimeout, IdleTimeout time.Duration
}

// Source opens an artifact by SHA-256 (registry.Artifacts does); the size
// is -1 when unknown.
type Source interface {
	Open(ctx context.Context, sha string) (io.ReadCloser, int64, error)
}

// Flow-control windows of the hop's server side: static (the same sizes as
// the gateway's client, cluster.StreamWindowBytes), so gRPC does not send a
// BDP-estimation PING for nearly every small request it receives.
const (
	streamWindowBytes = 4 << 20
	connWindowBytes   = 16 << 20
)

// Worker is one worker process's state.
type Worker struct {
	cfg     Config
	log     *slog.Logger
	cache   *Cache
	started time.Time
	loads   chan struct{} // bounds concurrent loads
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	addr    string

	health *health.Server // set by Run before the heartbeat starts
	// conns and calls are the listener's bounds (set by Run before it
	// serves; bounds.go).
	conns  *connlimit.Listener
	calls  *connlimit.Calls
	cpConn *grpc.ClientConn
	cp     workerpb.ControlPlaneClient
	meter  meter
	// ident is the server's certificate and call secret (auth.go);
	// session sends the session Register issued on every call to the
	// control plane.
	ident   serverIdentity
	session *hop.Credentials

	mu       sync.Mutex // guards versions
	versions map[string]*version

	workerpb.UnimplementedWorkerServer
	inferencepb.UnimplementedGRPCInferenceServiceServer
}

// version is one version hosted here.
type version struct {
	model string
	n     int64
	done  chan struct{} // closed when the load ends

	// set before done is closed, then read-only
	spec   *modelpkg.Spec
	srv    *serving.Server
	timing hosting.Timings
	source string
	err    error
	// memory is what the version holds here, all replicas (see memory.go);
	// measured says it is the RSS growth of its load, not the estimate.
	memory   int64
	replicas int
	measured bool

	unloading bool // guarded by Worker.mu
	// reserved is what the load holds in the budget while it runs (its
	// estimate; once done, its memory counts instead), guarded by
	// Worker.mu; overBudget says
	// the load was refused for the budget (v.err is why).
	reserved   int64
	overBudget bool

	req   *workerpb.LoadRequest // what loaded it: SetReplicas loads more from it
	scale sync.Mutex            // serializes SetReplicas of this version
}

func (v *version) id() string { return fmt.Sprintf("%s@%d", v.model, v.n) }

// New prepares a worker: its cache and its connection to the control plane.
func New(cfg Config) (*Worker, error) {
	if cfg.ID == "" {
		return nil, errors.New("worker: --id is required")
	}
	if cfg.Join == "" {
		return nil, errors.New("worker: --join is required (the control plane's address, e.g. 127.0.0.1:7070)")
	}
	if cfg.ControlTLS == nil {
		return nil, errors.New("worker: --ca is required: the certificate that signed the control plane's (the gateway writes its own to <--data>/control/ca.pem; or the CA of its --control-tls-cert)")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = 2 << 30
	}
	if cfg.MaxLoads <= 0 {
		cfg.MaxLoads = 2
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 64 << 20
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxCalls <= 0 {
		cfg.MaxCalls = DefaultMaxCalls
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MemoryBudget < 0 {
		return nil, fmt.Errorf("worker: memory budget must not be negative, got %d", cfg.MemoryBudget)
	}
	if cfg.MemoryBudget == 0 {
		cfg.MemoryBudget, cfg.MemoryBudgetSource = DefaultBudget(cfg.WorkersOnHost)
	}
	if cfg.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		cfg.CacheDir = dir + "/sluice/artifacts-" + cfg.ID
	}
	cache, err := OpenCache(cfg.CacheDir, cfg.CacheBytes)
	if err != nil {
		return nil, err
	}
	ident, err := newServerIdentity()
	if err != nil {
		return nil, err
	}
	session := hop.NewCredentials()
	conn, err := grpc.NewClient(cfg.Join, grpc.WithTransportCredentials(credentials.NewTLS(cfg.ControlTLS.Clone())),
		grpc.WithPerRPCCredentials(session), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("worker: --join %s: %w", cfg.Join, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Worker{cfg: cfg, log: cfg.Logger.With("worker", cfg.ID), cache: cache, started: time.Now(),
		loads: make(chan struct{}, cfg.MaxLoads), ctx: ctx, cancel: cancel, ident: ident, session: session,
		cpConn: conn, cp: workerpb.NewControlPlaneClient(conn), versions: map[string]*version{}}, nil
}

// Run serves until ctx ends, then stops admitting, drains every version
// (bounded by grace) and returns.
func (w *Worker) Run(ctx context.Context, grace time.Duration) error {
	raw, err := net.Listen("tcp", w.cfg.Listen)
	if err != nil {
		return fmt.Errorf("worker: listen on %s: %w", w.cfg.Listen, err)
	}
	ln := connlimit.New(raw, connlimit.Config{Max: w.cfg.MaxConns, Name: "worker", Flag: "--max-conns", Log: w.log})
	w.conns, w.calls = ln, connlimit.NewCalls(w.cfg.MaxCalls)
	w.addr = ln.Addr().String()
	if w.cfg.Advertise != "" {
		w.addr = w.cfg.Advertise
	}
	var hln net.Listener
	if w.cfg.HealthListen != "" {
		if hln, err = net.Listen("tcp", w.cfg.HealthListen); err != nil {
			ln.Close()
			return fmt.Errorf("worker: listen on --health-addr %s: %w", w.cfg.HealthListen, err)
		}
		hln = connlimit.New(hln, connlimit.Config{Max: healthMaxConns, Name: "health", Log: w.log})
	}
	// TLS always, with the certificate the control plane pins; every call
	// but health needs the call secret, checked when its headers arrive
	// (callTap) and again by the interceptors (auth.go); the listener
	// bounded (bounds.go).
	tc := &tls.Config{Certificates: []tls.Certificate{w.ident.cert}, MinVersion: tls.VersionTLS12}
	gs := grpc.NewServer(append(w.bounds(int(w.calls.Max()), w.callTap(w.calls)),
		grpc.Creds(credentials.NewTLS(tc)), grpc.ChainUnaryInterceptor(w.unaryAuth), grpc.ChainStreamInterceptor(w.streamAuth),
		grpc.MaxRecvMsgSize(w.cfg.MaxMessageBytes), grpc.MaxSendMsgSize(w.cfg.MaxMessageBytes),
		grpc.StaticStreamWindowSize(streamWindowBytes), grpc.StaticConnWindowSize(connWindowBytes))...)
	inferencepb.RegisterGRPCInferenceServiceServer(gs, w)
	workerpb.RegisterWorkerServer(gs, w)
	// The gRPC health status (a Kubernetes readiness probe's answer) is
	// SERVING only once the control plane knows the worker: a pod is not
	// Ready, and a rolling update does not retire an old pod for it, until
	// the gateway can place versions on it.
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	w.health = hs
	healthpb.RegisterHealthServer(gs, hs)
	serveErr := make(chan error, 2)
	go func() { serveErr <- gs.Serve(ln) }()
	var hgs *grpc.Server
	if hln != nil {
		hgs = grpc.NewServer(w.bounds(healthMaxCalls, healthTap(connlimit.NewCalls(healthMaxCalls)))...)
		healthpb.RegisterHealthServer(hgs, hs)
		go func() { serveErr <- hgs.Serve(hln) }()
		defer hgs.Stop()
	}
	w.log.Info("worker serving", "addr", w.addr, "tls_cert_sha256", w.ident.certSHA, "join", w.cfg.Join, "pid", os.Getpid(), "cache", w.cfg.CacheDir,
		"memory_budget_mb", w.cfg.MemoryBudget>>20, "memory_budget_source", w.cfg.MemoryBudgetSource, "artifacts", w.artifactsFrom())

	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.heartbeat(ctx)
	}()
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		w.cancel()
		return fmt.Errorf("worker: serve: %w", err)
	}
	hs.Shutdown()
	// Drain: refuse new work, finish what is queued within grace.
	dctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	w.closeAll(dctx)
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-dctx.Done():
		gs.Stop()
	}
	w.cancel()
	w.wg.Wait()
	_ = w.cpConn.Close()
	return nil
}

func (w *Worker) closeAll(ctx context.Context) {
	w.mu.Lock()
	var vs []*version
	for _, v := range w.versions {
		vs = append(vs, v)
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, v := range vs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-v.done:
			case <-ctx.Done():
				return
			}
			if v.srv != nil {
				_ = v.srv.Close(ctx)
			}
		}()
	}
	wg.Wait()
}

// heartbeat registers with the control plane and reports the status every
// interval; it registers again whenever the control plane forgot it.
func (w *Worker) heartbeat(ctx context.Context) {
	interval := 250 * time.Millisecond
	registered := false
	backoff := 100 * time.Millisecond
	for {
		if !registered {
			resp, err := w.register(ctx)
			if err == nil {
				registered = true
				backoff = 100 * time.Millisecond
				if ms := resp.HeartbeatIntervalMs; ms > 0 {
					interval = time.Duration(ms) * time.Millisecond
				}
				w.session.Set(hop.WorkerKey, w.cfg.ID, hop.SessionKey, resp.SessionSecret)
				w.log.Info("registered", "control_plane", w.cfg.Join, "heartbeat", interval.String())
				w.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
			} else if ctx.Err() == nil {
				args := []any{"control_plane", w.cfg.Join, "err", err, "retry_in", backoff.String()}
				if hint := registerHint(err); hint != "" {
					args = append(args, "fix", hint)
				}
				w.log.Warn("register refused or failed; retrying", args...)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		cctx, cancel := context.WithTimeout(ctx, 2*interval+time.Second)
		resp, err := w.cp.Heartbeat(cctx, w.status())
		cancel()
		if err == nil && !resp.Known || status.Code(err) == codes.Unauthenticated {
			// Forgotten (the control plane restarted) or the session is
			// no longer ours: register again.
			registered = false
		}
		// A failed heartbeat is tried again at the next tick; the worker
		// keeps serving: the data plane never waits on the control plane.
	}
}

// register announces the worker with its join credential, its server's
// certificate fingerprint and its call secret.
func (w *Worker) register(ctx context.Context) (*workerpb.RegisterResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	jctx, err := w.joinContext(cctx)
	if err != nil {
		return nil, fmt.Errorf("--join-token-file: %w", err)
	}
	return w.cp.Register(jctx, &workerpb.RegisterRequest{Status: w.status(), CallSecret: w.ident.callSecret, TlsCertSha256: w.ident.certSHA})
}

// status reports what the worker holds now.
func (w *Worker) status() *workerpb.WorkerStatus {
	st := &workerpb.WorkerStatus{Id: w.cfg.ID, Address: w.addr, Pid: int64(os.Getpid()), RssBytes: RSS(), Healthy: true,
		StartedUnixMs: w.started.UnixMilli(), Build: w.cfg.Build, CacheBytes: w.cache.Bytes(),
		MemoryBudgetBytes: w.cfg.MemoryBudget, MemoryBudgetSource: w.cfg.MemoryBudgetSource}
	w.mu.Lock()
	vs := make([]*version, 0, len(w.versions))
	for _, v := range w.versions {
		vs = append(vs, v)
	}
	unloading := map[*version]bool{}
	for _, v := range vs {
		unloading[v] = v.unloading
	}
	w.mu.Unlock()
	sort.Slice(vs, func(i, j int) bool { return vs[i].id() < vs[j].id() })
	for _, v := range vs {
		vst := &workerpb.VersionStatus{Model: v.model, Version: v.n, State: "loading"}
		select {
		case <-v.done:
			if v.err != nil {
				vst.State, vst.Reason = "failed", v.err.Error()
			} else {
				vst.State = "ready"
				s := v.srv.Stats()
				vst.ReadyReplicas, vst.RestartingReplicas = int32(s.ReadyReplicas), int32(s.Restarting)
				vst.QueuedInstances, vst.InflightBatches = int64(s.QueuedInstances), int32(s.InflightBatches)
				vst.Batches, vst.Rows, vst.Crashes, vst.ExpiredInQueue = s.Batches, s.Rows, s.Crashes, s.ExpiredInQueue
				vst.CostANs, vst.CostBNs, vst.MaxBatch = int64(s.Cost.A), int64(s.Cost.B), int32(v.spec.Manifest.Serving.MaxBatchSize)
				vst.MemoryBytes, vst.ReplicaMemoryBytes, vst.MemoryMeasured = v.memory, v.memory/int64(max(v.replicas, 1)), v.measured
			}
		default:
		}
		if unloading[v] {
			vst.State = "unloading"
		}
		st.Versions = append(st.Versions, vst)
	}
	return st
}

// Status implements the worker control service.
func (w *Worker) Status(context.Context, *workerpb.StatusRequest) (*workerpb.WorkerStatus, error) {
	return w.status(), nil
}

func key(model string, n int64) string { return model + "@" + strconv.FormatInt(n, 10) }

// Load implements the worker control service: it answers when the version
// is ready here, or why it failed. Concurrent loads of one version share
// one load; a failed version is loaded again by the next Load.
func (w *Worker) Load(ctx context.Context, req *workerpb.LoadRequest) (*workerpb.LoadResponse, error) {
	if req.Model == "" || req.Version < 1 || req.Replicas < 0 || req.Replicas > 64 {
		return nil, hop.Status(errs.New(errs.InvalidArgument, "load: model, version >= 1 and 0..64 replicas are required"))
	}
	k := key(req.Model, req.Version)
	w.mu.Lock()
	v := w.versions[k]
	if v != nil {
		select {
		case <-v.done:
			if v.err != nil && !v.unloading {
				v = nil // failed: try again
			}
		default:
		}
	}
	if v != nil && v.unloading {
		w.mu.Unlock()
		return nil, hop.Status(errs.New(errs.Unavailable, "%s is being unloaded; load it again when that is done", k))
	}
	if v == nil {
		v = &version{model: req.Model, n: req.Version, done: make(chan struct{}), req: req}
		w.versions[k] = v
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.load(v, req)
		}()
	}
	w.mu.Unlock()
	select {
	case <-v.done:
	case <-ctx.Done():
		return nil, hop.Status(errs.New(errs.DeadlineExceeded, "%s is still loading", k))
	}
	if v.overBudget {
		// Not the version's failure: this worker has no room now. The
		// control plane places it elsewhere or evicts first.
		return nil, status.Error(codes.ResourceExhausted, v.err.Error())
	}
	if v.err != nil {
		return nil, hop.Status(errs.New(errs.Unavailable, "%s", v.err.Error()))
	}
	return &workerpb.LoadResponse{LoadNs: int64(v.timing.Load), GoldenNs: int64(v.timing.Golden), WarmupNs: int64(v.timing.Warmup),
		RssBytes: RSS(), ArtifactSource: v.source, MemoryBytes: v.memory, MemoryMeasured: v.measured}, nil
}

func (w *Worker) load(v *version, req *workerpb.LoadRequest) {
	defer close(v.done)
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Minute)
	defer cancel()
	select {
	case w.loads <- struct{}{}:
		defer func() { <-w.loads }()
	case <-ctx.Done():
		v.err = errors.New("worker stopping")
		return
	}
	log := w.log.With("model", v.model, "version", v.n)
	id := v.id()
	spec, err := modelpkg.Parse(id+"/model.yaml", req.Manifest)
	if err != nil {
		v.err = fmt.Errorf("load %s: %w", id, err)
		log.Error("load failed", "err", v.err)
		return
	}

	art, source, err := w.cache.Get(ctx, req.ArtifactSha256, max(req.ArtifactBytes, 0)+1, func(ctx context.Context) (io.ReadCloser, int64, error) {
		return w.fetch(ctx, req.ArtifactSha256)
	})
	if err != nil {
		v.err = fmt.Errorf("load %s: %w", id, err)
		log.Error("load failed", "err", v.err)
		return
	}
	if source == "fetched" && w.cfg.Artifacts != nil {
		source = "fetched from " + w.cfg.ArtifactsName
	}
	if err := w.reserve(v, spec, req, art); err != nil {
		v.err, v.overBudget = err, true
		w.mu.Lock()
		if w.versions[id] == v {
			delete(w.versions, id)
		}
		w.mu.Unlock()
		log.Warn("load refused", "err", err)
		return
	}
	mark, before := w.meter.begin()
	srv, tm, err := hosting.Start(ctx, hosting.Config{ID: id, Spec: spec, Runtime: spec.Manifest.Runtime, Artifact: art,
		Replicas: int(req.Replicas), Logger: log, CPUs: w.cfg.CPUs})
	grew, alone := w.meter.end(mark, before)
	v.spec, v.srv, v.timing, v.source, v.err = spec, srv, tm, source, err
	if err != nil {
		log.Error("load failed", "err", err)
		return
	}
	v.replicas = max(int(req.Replicas), 1)
	var declared int64
	if m := spec.Manifest.Serving.Memory; m != nil {
		declared = m.Bytes
	}
	reported, known := srv.ReportedMemory()
	v.memory, v.measured = memoryOf(grew, alone, reported, known, v.replicas, declared, int64(len(art)), spec.Manifest.Runtime)
	log.Info("version ready", "replicas", v.replicas, "artifact", source, "load", tm.Load.String(), "golden", tm.Golden.String(), "warmup", tm.Warmup.String(),
		"memory_mb", float64(v.memory)/(1<<20), "memory_measured", v.measured)
}

// artifactsFrom names where the worker fetches artifacts, for its log.
func (w *Worker) artifactsFrom() string {
	if w.cfg.Artifacts != nil {
		return w.cfg.ArtifactsName
	}
	return "the control plane"
}

// fetch streams an artifact from the object store when the worker has it,
// else from the control plane. A fetch the control plane refuses as
// unauthenticated is tried once more when the session changes (within
// ctx): the pool starts a worker's loads while it registers, so a Load
// can arrive before the Register answer that carries the session.
func (w *Worker) fetch(ctx context.Context, sha string) (io.ReadCloser, int64, error) {
	if w.cfg.Artifacts != nil {
		return w.cfg.Artifacts.Open(ctx, sha)
	}
	changed := w.session.Changed()
	r, n, err := w.fetchControl(ctx, sha)
	if errs.CodeOf(err) != errs.Unauthenticated && status.Code(err) != codes.Unauthenticated {
		return r, n, err
	}
	select {
	case <-changed:
		return w.fetchControl(ctx, sha)
	case <-ctx.Done():
		return nil, 0, err
	}
}

// fetchControl streams an artifact from the control plane.
func (w *Worker) fetchControl(ctx context.Context, sha string) (io.ReadCloser, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := w.cp.FetchArtifact(ctx, &workerpb.FetchArtifactRequest{Sha256: sha})
	if err != nil {
		cancel()
		return nil, 0, err
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		e, _ := hop.FromStatus(err)
		return nil, 0, e
	}
	return &chunkReader{stream: stream, buf: first.Data, cancel: cancel}, first.TotalBytes, nil
}

type chunkReader struct {
	stream grpc.ServerStreamingClient[workerpb.ArtifactChunk]
	buf    []byte
	cancel context.CancelFunc
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		c, err := r.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0, io.EOF
			}
			e, _ := hop.FromStatus(err)
			return 0, e
		}
		r.buf = c.Data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *chunkReader) Close() error { r.cancel(); return nil }

// Unload implements the worker control service.
func (w *Worker) Unload(ctx context.Context, req *workerpb.UnloadRequest) (*workerpb.UnloadResponse, error) {
	k := key(req.Model, req.Version)
	w.mu.Lock()
	v := w.versions[k]
	if v == nil {
		w.mu.Unlock()
		return &workerpb.UnloadResponse{}, nil
	}
	v.unloading = true
	w.mu.Unlock()
	select {
	case <-v.done:
	case <-ctx.Done():
		return nil, hop.Status(errs.New(errs.DeadlineExceeded, "%s is still loading", k))
	}
	if v.srv != nil {
		drain := time.Duration(req.DrainMs) * time.Millisecond
		if drain <= 0 {
			drain = 10 * time.Second
		}
		dctx, cancel := context.WithTimeout(context.Background(), drain)
		_ = v.srv.Close(dctx)
		cancel()
	}
	w.mu.Lock()
	if w.versions[k] == v {
		delete(w.versions, k)
	}
	w.mu.Unlock()
	before := RSS()
	giveBack()
	after := RSS()
	w.log.Info("version unloaded", "model", req.Model, "version", req.Version, "memory_mb", float64(v.memory)/(1<<20),
		"rss_mb", float64(after)/(1<<20), "rss_given_back_by_gc_mb", float64(before-after)/(1<<20))
	return &workerpb.UnloadResponse{}, nil
}

// RSS is the resident set size of this process in bytes (0 if unknown).
func RSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, rss int64
	if _, err := fmt.Sscan(string(b), &size, &rss); err != nil {
		return 0
	}
	return rss * int64(os.Getpagesize())
}
