// Package app owns the lifecycle of `sluice serve`: every long-running
// part of the process (listeners, stores, records writer, worker pool and
// its control plane, local workers, Kubernetes pod watch, controller,
// autoscaler, gateway, tracing, profiles, GC floor) is a Part of one
// Group, started bottom-up and stopped top-down in the one order parts()
// writes. A start that fails half-way stops exactly what it started.
// Components are built whole from Config values before they start:
// nothing is set on a running one.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/autoscale"
	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/cpuprio"
	"github.com/sluiceml/sluice/internal/events"
	"github.com/sluiceml/sluice/internal/gcfloor"
	"github.com/sluiceml/sluice/internal/kube"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/outcomes"
	"github.com/sluiceml/sluice/internal/placement"
	"github.com/sluiceml/sluice/internal/predcache"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/runtime/onnx"
	"github.com/sluiceml/sluice/internal/server"
	"github.com/sluiceml/sluice/internal/server/oipgrpc"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/tenant"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// Config is the whole of a `sluice serve` process, as its flags give it
// (cmd/sluice validates them; each field names its flag).
type Config struct {
	Logger              *slog.Logger
	Version             string // the build's
	LogFormat, LogLevel string // passed to --workers

	Addr        string // --addr
	GRPCAddr    string // --grpc-addr ("": no gRPC)
	PprofAddr   string // --pprof-addr ("": off)
	ControlAddr string // --control-addr ("" with Workers: 127.0.0.1:0)
	// The control plane's TLS and the workers' credential (controltls.go):
	// --control-tls-cert and --control-tls-key ("": a self-signed
	// certificate in Data/control), --control-tls-hosts (more names of
	// the self-signed one), --join-token-file ("": Data/control/join-token,
	// made if missing), --worker-client-ca ("": no client certificates).
	ControlTLSCert, ControlTLSKey string
	ControlTLSHosts               []string
	JoinTokenFile                 string
	WorkerClientCA                string

	// TLSCert and TLSKey (both or neither) make the HTTP and gRPC
	// listeners speak TLS, reloading the files when they change;
	// TLSClientCA, with them, requires client certificates it verifies.
	TLSCert, TLSKey string // --tls-cert, --tls-key
	TLSClientCA     string // --tls-client-ca

	Data      string // --data
	StoreURL  string // --store ("": SQLite in Data)
	InitStore bool   // --init-store
	// OpenArtifacts opens the object store of --artifacts (nil, or a nil
	// store: the artifacts folder in Data).
	OpenArtifacts func(context.Context) (registry.Artifacts, error)
	TenantsFile   string // --tenants ("": authentication off)
	OnnxLib       string // --onnxruntime-lib
	OTLPEndpoint  string // --otlp-endpoint ("": no tracing)

	Models     string        // --models ("": the built-in examples)
	ModelsPoll time.Duration // --models-poll (0: off)
	Strict     bool          // --strict

	// Server holds the HTTP limits and idempotency settings; Run fills
	// in the rest (logger, metrics, records, tenants, workers).
	Server server.Config

	// FeaturesRedis and FeaturesPostgres are the feature stores versions
	// with features: read ("": none; with neither such a version refuses
	// to load).
	FeaturesRedis    string // --features-redis
	FeaturesPostgres string // --features-postgres

	NoRecords bool          // --no-records
	Durable   bool          // --records-durability durable
	Retention time.Duration // --records-retention
	// ExperimentsEvery is how often running experiments are refreshed
	// (--experiments-every; 0: 15 s).
	ExperimentsEvery time.Duration
	NoMetrics        bool          // --no-metrics
	NoDrift          bool          // --no-drift
	DeleteQuiet      time.Duration // --delete-quiet
	Grace            time.Duration // --grace

	GCFloor    int64         // --gc-floor, bytes (0: off)
	ModelCPUs  int           // --model-cpus (in-process replicas)
	ModelSched cpuprio.Sched // --model-sched

	Workers      int           // --workers (0: replicas in this process)
	WorkerMemory string        // --worker-memory, passed to the workers
	WorkerArgs   []string      // more flags for the local workers (artifacts, --nice, --sched, --model-sched, --gc-floor)
	MinResidency time.Duration // --min-residency
	ShardSize    int           // --shard-size

	KubeWorkers   string // --kube-workers (label selector; needs ControlAddr)
	KubeNamespace string // --kube-namespace

	MaxWorkers  int            // --max-workers (0: cluster.DefaultMaxWorkers)
	ForgetAfter time.Duration  // --forget-after (0: cluster.DefaultForgetAfter)
	WorkerCIDRs []netip.Prefix // --worker-cidrs (nil: loopback only)

	// Batch jobs (docs/jobs.md): JobsDir is where file: URIs resolve
	// ("": none, file: URIs refused); JobRunners how many jobs this
	// process runs at once (0: none, `sluice job run` processes do);
	// JobChunksInFlight the chunks of one job scored at once.
	JobsDir           string // --jobs-dir
	JobRunners        int    // --job-runners
	JobChunksInFlight int    // --job-chunks-in-flight

	// Events bounds the change feed of GET /v1/events (--events-max-streams).
	Events events.Config

	// Serving, when set, is called with the HTTP listener's address once
	// every part is up (tests, and programs that embed the server).
	Serving func(addr net.Addr)
}

// withWorkers reports whether replicas run on worker processes.
func (c Config) withWorkers() bool { return c.Workers > 0 || c.ControlAddr != "" }

// Run runs the process until ctx ends (SIGTERM) or a part fails, then
// stops it: it returns nil after a clean shutdown.
func Run(ctx context.Context, cfg Config) error {
	a := newApp(cfg)
	g := a.group()
	err := g.Run(ctx, cfg.Grace)
	if a.serving {
		a.log.Info("stopped", "records_written", a.recordsWritten())
	}
	return err
}

// app holds what the parts build, for the parts after them.
type app struct {
	cfg     Config
	log     *slog.Logger
	metrics *telemetry.Metrics   // always made; served and counted unless NoMetrics
	reg     *prometheus.Registry // metrics' registry (the jobs register theirs on it)

	gc          *gcfloor.Tuner
	ln, grpcLn  net.Listener
	tls         *tls.Config // nil: plain listeners
	tenants     *tenant.Set
	store       registryStore
	artifacts   registry.Artifacts // --artifacts' object store (nil: the folder in --data)
	rs          recordStore
	stopTracing func(context.Context) error
	stopPprof   func()
	pool        *cluster.Pool
	cp          *controlPlane
	cpCreds     *controlCreds
	sup         *cluster.Supervisor
	supCtx      context.Context
	stopSup     context.CancelFunc
	pods        *kube.PodWatch
	podsReady   atomic.Pointer[kube.PodWatch] // pods, once listed: the dial policy reads it (workerAddrPolicy)
	writer      *records.Writer
	writerCtxV  context.Context
	stopWriter  context.CancelFunc
	ctl         atomic.Pointer[control.Controller] // read by the pool's hooks, which may run before it exists
	loop        *autoscale.Loop
	loopCtx     context.Context
	stopLoop    context.CancelFunc
	srv         *server.Server
	lis         *server.Listeners
	caches      *predcache.Set // the gateway's prediction caches; the controller drops a version's
	serving     bool           // the listeners started
	feat        *featureStores // nil: no feature store
	jobs        *batchJobs
	feed        *changeFeed
	os          outcomeStore // nil: no records, so no outcomes
	joiner      *outcomes.Joiner
	joinerCtx   context.Context
	stopJoiner  context.CancelFunc
	lab         *outcomes.Lab
	labCtx      context.Context
	stopLab     context.CancelFunc
}

func newApp(cfg Config) *app {
	reg := telemetry.NewRegistry()
	return &app{cfg: cfg, log: cfg.Logger, caches: predcache.NewSet(), reg: reg,
		metrics: telemetry.New(reg, telemetry.BuildInfo{Version: cfg.Version, GoVersion: goruntime.Version()})}
}

// group is the process in its one order: each part starts after the
// ones above it and stops before them.
func (a *app) group() *Group {
	c := a.cfg
	g := &Group{Log: a.log}
	g.Add(Part{Name: "gc floor", Start: a.startGCFloor, Stop: func(context.Context) error { a.gc.Stop(); return nil }})
	// Listen first: a port in use is reported before the data directory
	// is created or opened. Requests wait in the accept queue until the
	// listeners part serves them, last.
	g.Add(Part{Name: "listen", Start: a.listen, Stop: a.closeListeners})
	g.Add(Part{Name: "tenants", Start: a.loadTenants})
	g.Add(Part{Name: "registry", Start: a.openRegistry, Stop: func(context.Context) error { return a.store.Close() }})
	if !c.NoRecords {
		g.Add(Part{Name: "records store", Start: a.openRecords, Stop: func(context.Context) error { return a.rs.Close() }})
	}
	g.Add(Part{Name: "job store", Start: a.openJobs, Stop: func(context.Context) error { return a.jobs.close() }})
	if !c.NoRecords {
		g.Add(Part{Name: "outcome store", Start: a.openOutcomes, Stop: a.closeOutcomes})
	}
	if c.OTLPEndpoint != "" {
		g.Add(Part{Name: "tracing", Start: a.startTracing, Stop: a.flushTracing})
	}
	if c.PprofAddr != "" {
		g.Add(Part{Name: "pprof", Start: a.startPprof, Stop: func(context.Context) error { a.stopPprof(); return nil }})
	}
	if c.withWorkers() {
		g.Add(Part{Name: "pool", Start: a.newPool, Stop: func(context.Context) error { a.pool.Close(); return nil }})
		g.Add(Part{Name: "control plane", Start: a.startControlPlane, Run: a.serveControlPlane, Stop: a.stopControlPlane})
		if c.Workers > 0 {
			g.Add(Part{Name: "local workers", Start: a.newSupervisor, Run: a.superviseWorkers,
				Stop: func(context.Context) error { a.stopSup(); return nil }})
		}
		if c.KubeWorkers != "" {
			g.Add(Part{Name: "kube pod watch", Start: a.watchPods, Stop: func(context.Context) error { a.pods.Stop(); return nil }})
		}
	}
	if !c.NoRecords {
		g.Add(Part{Name: "records writer", Start: a.newWriter, Run: func() error { return a.writer.Run(a.writerCtx()) },
			Stop: func(context.Context) error { a.stopWriter(); return nil }}) // Run flushes every buffered record, then returns
		g.Add(Part{Name: "outcome joins", Start: a.newJoiner, Run: a.runJoiner,
			Stop: func(context.Context) error { a.stopJoiner(); return nil }}) // Run flushes the buffered joins, then returns
		g.Add(Part{Name: "experiments", Start: a.newLab, Run: a.runLab, Stop: func(context.Context) error { a.stopLab(); return nil }})
	}
	if c.FeaturesRedis != "" || c.FeaturesPostgres != "" {
		g.Add(Part{Name: "feature stores", Start: a.startFeatures, Run: a.runFeatures, Stop: a.stopFeatures})
	}
	g.Add(Part{Name: "events", Start: a.startEvents, Run: a.runEvents, Stop: a.stopEvents})
	g.Add(Part{Name: "controller", Start: a.startController, Stop: func(ctx context.Context) error { return a.ctl.Load().Close(ctx) }})
	g.Add(Part{Name: "models", Start: a.publishModels})
	if c.withWorkers() {
		g.Add(Part{Name: "autoscaler", Start: a.newLoop, Run: a.runLoop, Stop: func(context.Context) error { a.stopLoop(); return nil }})
	}
	g.Add(Part{Name: "gateway", Start: a.newServer, Stop: func(context.Context) error { a.srv.Close(); return nil }})
	if c.JobRunners > 0 {
		g.Add(Part{Name: "job runner", Start: a.startJobRunner, Run: a.runJobs, Stop: a.stopJobRunner}) // Run returns once every job's goroutines have
	}
	g.Add(Part{Name: "listeners", Start: a.serve, Run: func() error { return a.lis.Wait() }, Stop: a.stopServing})
	return g
}

func (a *app) startGCFloor(context.Context) error {
	a.gc = StartGCFloor(a.cfg.GCFloor, a.log)
	return nil
}

func (a *app) listen(context.Context) error {
	var err error
	if a.tls, err = listenerTLS(a.cfg, a.log); err != nil {
		return fmt.Errorf("%w (nothing was started; the data directory was not touched)", err)
	}
	if a.ln, err = net.Listen("tcp", a.cfg.Addr); err != nil {
		return fmt.Errorf("listen on %s: %w (nothing was started; the data directory was not touched)", a.cfg.Addr, err)
	}
	if a.cfg.GRPCAddr != "" {
		if a.grpcLn, err = net.Listen("tcp", a.cfg.GRPCAddr); err != nil {
			a.ln.Close()
			return fmt.Errorf("listen on --grpc-addr %s: %w (nothing was started; the data directory was not touched)", a.cfg.GRPCAddr, err)
		}
	}
	return nil
}

// closeListeners closes the listeners (once served, they are closed
// already: closing again does nothing).
func (a *app) closeListeners(context.Context) error {
	a.ln.Close()
	if a.grpcLn != nil {
		a.grpcLn.Close()
	}
	return nil
}

func (a *app) loadTenants(context.Context) error {
	if a.cfg.OnnxLib != "" {
		onnx.SetLibraryPath(a.cfg.OnnxLib)
	}
	if a.cfg.TenantsFile == "" {
		a.log.Warn("no --tenants file: authentication is off, every caller is tenant \"default\" with no quota")
		return nil
	}
	set, err := tenant.Load(a.cfg.TenantsFile)
	if err != nil {
		return err
	}
	a.tenants = set
	a.log.Info("authentication on", "tenants", set.Names())
	return nil
}

// uploadDir is where an upload's artifact waits while it is published.
func (a *app) uploadDir() string { return filepath.Join(a.cfg.Data, "uploads") }

func (a *app) openRegistry(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx) // the store outlives the start
	var art registry.Artifacts       // nil: the folder in --data
	if a.cfg.OpenArtifacts != nil {
		var err error
		if art, err = a.cfg.OpenArtifacts(ctx); err != nil {
			return err
		}
	}
	a.artifacts = art
	store, err := openRegistry(ctx, a.cfg.StoreURL, a.cfg.Data, a.cfg.InitStore, art, a.log)
	if err != nil {
		return err
	}
	a.store = store
	if err := os.MkdirAll(a.uploadDir(), 0o755); err != nil {
		store.Close()
		return fmt.Errorf("create the upload folder: %w", err)
	}
	if n, err := modelpkg.RemoveUploads(a.uploadDir()); err != nil {
		store.Close()
		return err
	} else if n > 0 {
		a.log.Info("deleted partial uploads left by an interrupted push", "files", n)
	}
	return nil
}

func (a *app) openRecords(ctx context.Context) error {
	rs, err := openRecords(context.WithoutCancel(ctx), a.cfg.StoreURL, a.cfg.Data, a.cfg.InitStore, a.cfg.Durable, a.log)
	if err != nil {
		return err
	}
	a.rs = rs
	return nil
}

func (a *app) startTracing(ctx context.Context) error {
	stop, err := telemetry.StartTracing(context.WithoutCancel(ctx), a.cfg.OTLPEndpoint, telemetry.BuildInfo{Version: a.cfg.Version})
	if err != nil {
		return err
	}
	a.stopTracing = stop
	a.log.Info("tracing on", "otlp_endpoint", a.cfg.OTLPEndpoint)
	return nil
}

// flushTracing sends the last spans, with its own 5 s: the shutdown's
// grace may be spent by then.
func (a *app) flushTracing(context.Context) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.stopTracing(ctx)
	return nil
}

func (a *app) startPprof(context.Context) error {
	stop, err := StartPprof(a.cfg.PprofAddr, a.log)
	if err != nil {
		return err
	}
	a.stopPprof = stop
	return nil
}

// counting is the metrics sink, nil with --no-metrics.
func (a *app) counting() *telemetry.Metrics {
	if a.cfg.NoMetrics {
		return nil
	}
	return a.metrics
}

func (a *app) newPool(context.Context) error {
	c := a.cfg
	var m cluster.Metrics // a nil *telemetry.Metrics in the interface would not be nil
	if !c.NoMetrics {
		m = a.metrics
	}
	creds, err := loadControlCreds(c, a.log)
	if err != nil {
		return err
	}
	a.cpCreds = creds
	a.pool = cluster.New(cluster.Config{Artifacts: storeArtifacts{a.store}, Join: creds.join, Known: localWorkerIDs(c.Workers), ShardSize: c.ShardSize, Logger: a.log,
		MaxWorkers: c.MaxWorkers, ForgetAfter: c.ForgetAfter, AllowAddr: workerAddrPolicy(c, a.podsReady.Load),
		Placement: placement.Policy{MinResidency: c.MinResidency}, Metrics: m,
		Protected: func(model string, n int) bool { ctl := a.ctl.Load(); return ctl != nil && ctl.RollbackTarget(model, n) },
		OnQuarantine: func(model string, n int, why string) {
			if ctl := a.ctl.Load(); ctl != nil {
				ctl.Quarantine(model, n, why)
			}
		}})
	return nil
}

func (a *app) startControlPlane(context.Context) error {
	addr := a.cfg.ControlAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--control-addr %s: %w", addr, err)
	}
	// Bounded as the OIP gRPC listener (issue 18, findings 14 and 15),
	// for as many workers as --max-workers admits: a flood of idle or
	// stalled connections from anyone who reaches it holds at most that.
	maxWorkers := a.cfg.MaxWorkers
	if maxWorkers <= 0 {
		maxWorkers = cluster.DefaultMaxWorkers
	}
	ln = server.LimitListener(ln, "control", "--max-workers", 4*maxWorkers+64, a.log, a.counting())
	gs := grpc.NewServer(append(oipgrpc.Bounds(4<<20, 16*maxWorkers+64), grpc.Creds(credentials.NewTLS(a.cpCreds.tls)))...)
	workerpb.RegisterControlPlaneServer(gs, a.pool)
	a.cp = &controlPlane{ln: ln, gs: gs}
	args := []any{"control_addr", ln.Addr().String(), "local_workers", a.cfg.Workers, "ca", a.cpCreds.caFile, "join_token_file", a.cpCreds.tokenFile}
	if a.cfg.WorkerClientCA != "" {
		args = append(args, "worker_client_ca", a.cfg.WorkerClientCA)
	}
	a.log.Info("control plane listening for workers (TLS): to attach a worker on another host, copy the CA and the join token there and run "+
		"sluice worker --join ADDR --ca CA --join-token-file TOKEN", args...)
	return nil
}

func (a *app) serveControlPlane() error { return a.cp.gs.Serve(a.cp.ln) } // nil once stopped

func (a *app) stopControlPlane(context.Context) error {
	a.cp.gs.Stop()
	return nil
}

func (a *app) newSupervisor(context.Context) error {
	c := a.cfg
	sup, err := localWorkers(localWorkerIDs(c.Workers), localJoin(a.cp.ln.Addr()), a.cpCreds, c.Data, c.LogFormat, c.LogLevel, c.OnnxLib, c.WorkerMemory, c.WorkerArgs, a.log, a.pool)
	if err != nil {
		return err
	}
	a.sup = sup
	a.supCtx, a.stopSup = context.WithCancel(context.Background())
	return nil
}

func (a *app) superviseWorkers() error {
	a.sup.Run(a.supCtx, a.cfg.Grace) // each worker gets the grace to drain
	return nil
}

func (a *app) watchPods(context.Context) error {
	kc, err := kube.ClientFromEnv()
	if err != nil {
		return fmt.Errorf("--kube-workers: %w", err)
	}
	pw, err := kube.WatchPods(context.Background(), kc, kube.Namespace(a.cfg.KubeNamespace), a.cfg.KubeWorkers, a.pool, a.log)
	if err != nil {
		return fmt.Errorf("--kube-workers: %w", err)
	}
	a.pods = pw
	a.podsReady.Store(pw)
	return nil
}

func (a *app) newWriter(context.Context) error {
	w := records.NewWriter(a.rs, records.Config{Retention: a.cfg.Retention, Logger: a.log, Durable: a.cfg.Durable})
	a.writer = w
	a.metrics.SetRecordDrops(func() telemetry.RecordDrops {
		return telemetry.RecordDrops{BufferFull: w.Overflows(), WriteFailed: w.Failed(), Written: w.Written(), Pending: w.Pending()}
	})
	a.writerCtxV, a.stopWriter = context.WithCancel(context.Background())
	return nil
}

func (a *app) writerCtx() context.Context { return a.writerCtxV }

// host is where the controller runs versions: the worker pool, or this
// process (nil: LocalHost with no bound, or bounded by --model-cpus).
func (a *app) host() (control.Host, error) {
	if a.pool != nil {
		return workersHost{a.pool, a.store}, nil
	}
	cpus, err := ModelCPUs(a.cfg.ModelCPUs, a.cfg.ModelSched, a.log)
	if err != nil || cpus == nil {
		return nil, err
	}
	store := a.store
	return &control.LocalHost{CPUs: cpus,
		Artifact: func(ctx context.Context, sha string) ([]byte, error) { return registry.ReadArtifact(ctx, store, sha) }}, nil
}

func (a *app) startController(context.Context) error {
	host, err := a.host()
	if err != nil {
		return err
	}
	// Built whole, then followed: a change notification may start work
	// at once, so nothing is set on the controller after.
	ctl := control.New(control.Config{Store: a.store, Host: host, Logger: a.log, Metrics: a.counting(),
		NoDrift: a.cfg.NoDrift, DeleteQuiet: a.cfg.DeleteQuiet, Unrouted: a.caches.Drop,
		CheckSpec: a.checkSpec, Changed: a.changed, Outcomes: a.outcomeSource()})
	a.ctl.Store(ctl)
	a.metrics.SetVersionSource(ctl.LiveState)
	if ch, ok := a.store.(registry.Changes); ok {
		// Other gateways share the store: their deployment changes reach
		// this routing snapshot (LISTEN/NOTIFY, polled too).
		ctl.Follow(ch)
	}
	return nil
}

// modelsFS is --models, or the built-in examples.
func (a *app) modelsFS() (fs.FS, string, string) {
	if a.cfg.Models == "" {
		return examples.FS, ".", "examples (built in)"
	}
	return os.DirFS(a.cfg.Models), ".", a.cfg.Models
}

// publishModels restores the deployments first, then publishes the
// models folder: a package that changed there is released with its plan.
func (a *app) publishModels(ctx context.Context) error {
	ctl := a.ctl.Load()
	fsys, root, display := a.modelsFS()
	if err := ctl.Start(ctx); err != nil {
		return err
	}
	if a.cfg.ModelsPoll > 0 {
		ctl.Watch(fsys, root, display, a.cfg.ModelsPoll) // before the first scan: a change made during it is seen
	}
	scan, err := ctl.PublishFS(ctx, fsys, root, display)
	if err != nil {
		return err
	}
	if a.cfg.Strict && len(scan.Invalid) > 0 {
		probs := make([]error, len(scan.Invalid))
		for i, p := range scan.Invalid {
			probs[i] = errors.New(p.Err)
		}
		return fmt.Errorf("--strict: %d invalid package(s) in %s:\n%w", len(probs), display, errors.Join(probs...))
	}
	if err := ctl.ReleaseChanged(ctx, scan.Published); err != nil {
		if a.cfg.Strict {
			return fmt.Errorf("--strict: %w", err)
		}
		// Published, not released: the operator deploys it by hand.
		a.log.Error("changed package published but not released; deploy it by hand (sluice deploy)", "err", err)
	}
	ctl.MarkStarted()
	return nil
}

// newLoop builds the autoscaler: replicas follow the traffic for versions
// whose placement lets them (maxReplicas above the floor).
func (a *app) newLoop(context.Context) error {
	a.loop = autoscale.NewLoop(a.pool, a.pool, autoscale.LoopConfig{Logger: a.log, OnDecision: func(version string, d autoscale.Decision, _ int) {
		if model, n, ok := strings.Cut(version, "@"); ok && !a.cfg.NoMetrics {
			a.metrics.SetDesiredReplicas(model, n, d.Replicas)
		}
	}})
	a.loopCtx, a.stopLoop = context.WithCancel(context.Background())
	return nil
}

func (a *app) runLoop() error {
	err := a.loop.Run(a.loopCtx)
	if a.loopCtx.Err() != nil {
		return nil // stopped
	}
	return err
}

func (a *app) newServer(context.Context) error {
	cfg := a.cfg.Server
	cfg.Logger, cfg.Version, cfg.Tenants, cfg.UploadDir, cfg.Metrics = a.log, a.cfg.Version, a.tenants, a.uploadDir(), a.counting()
	cfg.TLS, cfg.Caches = a.tls, a.caches
	cfg.Features = a.featureSet()
	if a.writer != nil {
		cfg.Records, cfg.RecordStore = a.writer, a.rs
	}
	if a.joiner != nil {
		cfg.Joins = a.joiner
		cfg.Outcomes = &outcomes.Service{Store: a.os, Metrics: a.metrics}
		cfg.Lab = a.lab
	}
	if a.pool != nil {
		pool, loop := a.pool, a.loop
		cfg.Workers = pool
		cfg.Demand = func() []cluster.Demand { return pool.Demand(loop.Status()) }
	}
	cfg.Jobs = a.newJobManager()
	if cfg.LabReport == "" {
		cfg.LabReport = filepath.Join(a.cfg.Data, "lab", "report.html") // where sluice lab --publish DATA puts it
	}
	cfg.Events = a.feed.hub
	a.srv = server.New(cfg, a.ctl.Load())
	a.jobs.pred.Gateway = a.srv.Gateway() // before the listeners serve and the runner runs: nothing called the predictor yet
	return nil
}

func (a *app) serve(ctx context.Context) error {
	_, _, display := a.modelsFS()
	a.lis = a.srv.Listeners(a.ln, a.grpcLn)
	a.log.Info("serving", "addr", a.ln.Addr().String(), a.scheme(), "data", a.cfg.Data, "models", display, "store", storeName(a.cfg.StoreURL))
	a.serving = true
	if err := a.lis.Start(ctx); err != nil {
		return err
	}
	if a.cfg.Serving != nil {
		a.cfg.Serving(a.ln.Addr())
	}
	return nil
}

func (a *app) stopServing(ctx context.Context) error {
	a.log.Info("shutting down: not ready, finishing in-flight requests", "grace", a.cfg.Grace)
	return a.lis.Stop(ctx)
}

func (a *app) recordsWritten() int64 {
	if a.writer == nil {
		return 0
	}
	return a.writer.Written()
}
