package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/autoscale"
	"github.com/sluiceml/sluice/internal/bytesize"
	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/cpuprio"
	"github.com/sluiceml/sluice/internal/kube"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/placement"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/runtime/onnx"
	"github.com/sluiceml/sluice/internal/server"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/tenant"
)

func newServeCmd() *cobra.Command {
	var (
		addr, data, models  string
		grpcAddr            string
		tenantsFile         string
		logFormat, logLevel string
		retention           time.Duration
		noRecords           bool
		durability          string
		noMetrics, noDrift  bool
		strict              bool
		deleteQuiet         time.Duration
		poll                time.Duration
		onnxLib             string
		otlpEndpoint        string
		cfg                 server.Config
		grace               time.Duration
		workers             int
		workerMemory        string
		gcFloor             string
		minResidency        time.Duration
		controlAddr         string
		shardSize           int
		pprofAddr           string
		initStore           bool
		storeURL            string
		workerNice          int
		workerSched         string
		kubeWorkers         string
		kubeNamespace       string
		artifacts           storeFlags
		modelCPUsFlag       int
		modelSchedFlag      string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the server (with no flags: the built-in examples on ./.sluice-data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logFormat, logLevel)
			if err != nil {
				return err
			}
			cfg.Logger, cfg.Version = log, version
			modelSched, err := cpuprio.ParseSched("--model-sched", modelSchedFlag)
			if err != nil {
				return err
			}
			gcTuner, err := startGCFloor(gcFloor, log)
			if err != nil {
				return err
			}
			defer gcTuner.Stop()
			// Listen first: a port in use is reported before the data
			// directory is created or opened. Requests wait in the accept
			// queue until Serve starts.
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w (nothing was started; the data directory was not touched)", addr, err)
			}
			defer ln.Close()
			if grpcAddr != "" {
				if cfg.GRPCListener, err = net.Listen("tcp", grpcAddr); err != nil {
					return fmt.Errorf("listen on --grpc-addr %s: %w (nothing was started; the data directory was not touched)", grpcAddr, err)
				}
			}
			if onnxLib != "" {
				onnx.SetLibraryPath(onnxLib)
			}
			if tenantsFile != "" {
				set, err := tenant.Load(tenantsFile)
				if err != nil {
					return err
				}
				cfg.Tenants = set
				log.Info("authentication on", "tenants", set.Names())
			} else {
				log.Warn("no --tenants file: authentication is off, every caller is tenant \"default\" with no quota")
			}
			var art registry.Artifacts // nil: the folder in --data
			if a, err := artifacts.open(cmd.Context(), log, false); err != nil {
				return err
			} else if a != nil {
				art = a
			}
			store, err := openRegistry(cmd.Context(), storeURL, data, initStore, art, log)
			if err != nil {
				return err
			}
			defer store.Close()
			cfg.UploadDir = filepath.Join(data, "uploads")
			if err := os.MkdirAll(cfg.UploadDir, 0o755); err != nil {
				return fmt.Errorf("create the upload folder: %w", err)
			}
			if n, err := modelpkg.RemoveUploads(cfg.UploadDir); err != nil {
				return err
			} else if n > 0 {
				log.Info("deleted partial uploads left by an interrupted push", "files", n)
			}
			if otlpEndpoint != "" {
				stopTracing, err := telemetry.StartTracing(cmd.Context(), otlpEndpoint, telemetry.BuildInfo{Version: version})
				if err != nil {
					return err
				}
				defer func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_ = stopTracing(ctx) // flush the last spans
				}()
				log.Info("tracing on", "otlp_endpoint", otlpEndpoint)
			}
			stopPprof, err := startPprof(pprofAddr, log)
			if err != nil {
				return err
			}
			defer stopPprof()
			reg := telemetry.NewRegistry()
			metrics := telemetry.New(reg, telemetry.BuildInfo{Version: version, GoVersion: goruntime.Version()})
			var ctlRef atomic.Pointer[control.Controller] // for the pool's hooks, set once the controller exists
			var loopRef atomic.Pointer[autoscale.Loop]    // for GET /v1/workers' demand, set once the autoscaler runs
			if workerMemory != "" {
				if n, err := bytesize.Parse(workerMemory); err != nil || n == 0 {
					return fmt.Errorf("--worker-memory %q: a size more than 0 like \"4GiB\" (%v)", workerMemory, err)
				}
			}
			var host control.Host // nil: replicas in this process
			var pool *cluster.Pool
			var sup *cluster.Supervisor
			if workers < 0 {
				return fmt.Errorf("--workers %d: must be >= 0", workers)
			}
			if workers > 0 || controlAddr != "" {
				if controlAddr == "" {
					controlAddr = "127.0.0.1:0"
				}
				ids := localWorkerIDs(workers)
				if minResidency < 0 {
					return fmt.Errorf("--min-residency %s: must be >= 0", minResidency)
				}
				pool = cluster.New(cluster.Config{Artifacts: storeArtifacts{store}, Known: ids, ShardSize: shardSize, Logger: log,
					Placement: placement.Policy{MinResidency: minResidency}, Metrics: placementMetrics(metrics, noMetrics),
					Protected: func(model string, n int) bool { c := ctlRef.Load(); return c != nil && c.RollbackTarget(model, n) },
					OnQuarantine: func(model string, n int, why string) {
						if c := ctlRef.Load(); c != nil {
							c.Quarantine(model, n, why)
						}
					}})
				defer pool.Close()
				cp, err := startControlPlane(controlAddr, pool)
				if err != nil {
					return err
				}
				defer cp.stop()
				log.Info("control plane listening for workers", "control_addr", cp.ln.Addr().String(), "local_workers", workers)
				if workers > 0 {
					if err := cpuprio.CheckNice("--worker-nice", workerNice); err != nil {
						return err
					}
					sched, err := cpuprio.ParseSched("--worker-sched", workerSched)
					if err != nil {
						return err
					}
					// Each worker lowers its own threads (cpuprio.Lower):
					// setting it from here, after the fork, races the
					// child's runtime creating threads.
					extra := append(artifacts.args(), "--nice", strconv.Itoa(workerNice), "--sched", string(sched), "--model-sched", string(modelSched))
					if cmd.Flags().Changed("gc-floor") {
						extra = append(extra, "--gc-floor", gcFloor) // else the workers' own default: off
					}
					if sup, err = localWorkers(ids, cp.ln.Addr().String(), data, logFormat, logLevel, onnxLib, workerMemory, extra, log, pool); err != nil {
						return err
					}
					sctx, stopWorkers := context.WithCancel(context.Background())
					supDone := make(chan struct{})
					go func() { defer close(supDone); sup.Run(sctx, grace) }()
					// Workers stop after the server drained (deferred calls run last in, first out).
					defer func() { stopWorkers(); <-supDone }()
				}
				host = workersHost{pool, store}
				cfg.Workers = pool
				cfg.Demand = func() []cluster.Demand {
					var st map[string]autoscale.Status
					if l := loopRef.Load(); l != nil {
						st = l.Status()
					}
					return pool.Demand(st)
				}
				if kubeWorkers != "" {
					kc, err := kube.ClientFromEnv()
					if err != nil {
						return fmt.Errorf("--kube-workers: %w", err)
					}
					pw, err := kube.WatchPods(context.Background(), kc, kube.Namespace(kubeNamespace), kubeWorkers, pool, log)
					if err != nil {
						return fmt.Errorf("--kube-workers: %w", err)
					}
					defer pw.Stop()
				}
			} else if kubeWorkers != "" {
				return errors.New("--kube-workers: needs --control-addr (the workers in those pods register there)")
			}
			if modelCPUsFlag < 0 {
				// Refused with workers too, as before --model-sched.
				return fmt.Errorf("--model-cpus %d: use 0 (no bound) or the number of batches that may compute at once", modelCPUsFlag)
			}
			if host == nil {
				cpus, err := modelCPUs(modelCPUsFlag, modelSched, log)
				if err != nil {
					return err
				}
				if cpus != nil {
					host = &control.LocalHost{CPUs: cpus,
						Artifact: func(ctx context.Context, sha string) ([]byte, error) { return registry.ReadArtifact(ctx, store, sha) }}
				}
			}
			if deleteQuiet < 0 {
				return fmt.Errorf("--delete-quiet %s: must be >= 0", deleteQuiet)
			}
			ccfg := control.Config{Store: store, Host: host, Logger: log, NoDrift: noDrift, DeleteQuiet: deleteQuiet}
			if !noMetrics {
				ccfg.Metrics, cfg.Metrics = metrics, metrics
			}
			// Built whole, then followed: a change notification may start
			// work at once, so nothing is set on the controller after.
			ctl := control.New(ccfg)
			ctlRef.Store(ctl)
			metrics.SetVersionSource(ctl.LiveState)
			if ch, ok := store.(registry.Changes); ok {
				// Other gateways share the store: their deployment changes
				// reach this routing snapshot (LISTEN/NOTIFY, polled too).
				ctl.Follow(ch)
			}
			if !noRecords {
				durable, err := parseDurability(durability)
				if err != nil {
					return err
				}
				rs, err := openRecords(cmd.Context(), storeURL, data, initStore, durable, log)
				if err != nil {
					return err
				}
				defer rs.Close()
				cfg.RecordStore = rs
				w := records.NewWriter(rs, records.Config{Retention: retention, Logger: log, Durable: durable})
				cfg.Records = w
				metrics.SetRecordDrops(func() telemetry.RecordDrops {
					return telemetry.RecordDrops{BufferFull: w.Overflows(), WriteFailed: w.Failed(), Written: w.Written(), Pending: w.Pending()}
				})
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()

			if poll < 0 || (poll > 0 && models == "") {
				return fmt.Errorf("--models-poll %s: must be > 0 (0: off) and needs --models (the built-in examples never change)", poll)
			}
			var fsys fs.FS = examples.FS
			root, display := ".", "examples (built in)"
			if models != "" {
				fsys, display = os.DirFS(models), models
			}
			// Restore deployments first, then publish the folder: a package
			// that changed there is released with its plan.
			if err := ctl.Start(ctx); err != nil {
				return err
			}
			if poll > 0 {
				ctl.Watch(fsys, root, display, poll) // before the first scan: a change made during it is seen
			}
			scan, err := ctl.PublishFS(ctx, fsys, root, display)
			if err != nil {
				return err
			}
			if strict && len(scan.Invalid) > 0 {
				probs := make([]error, len(scan.Invalid))
				for i, p := range scan.Invalid {
					probs[i] = errors.New(p.Err)
				}
				return fmt.Errorf("--strict: %d invalid package(s) in %s:\n%w", len(probs), display, errors.Join(probs...))
			}
			if err := ctl.ReleaseChanged(ctx, scan.Published); err != nil {
				if strict {
					return fmt.Errorf("--strict: %w", err)
				}
				// Published, not released: the operator deploys it by hand.
				log.Error("changed package published but not released; deploy it by hand (sluice deploy)", "err", err)
			}
			ctl.MarkStarted()
			if pool != nil {
				// Replicas follow the traffic for versions whose placement
				// lets them (maxReplicas above the floor); stopped after the
				// server drained.
				actx, stopScaling := context.WithCancel(context.Background())
				loop := autoscale.NewLoop(pool, pool, autoscale.LoopConfig{Logger: log, OnDecision: func(version string, d autoscale.Decision, _ int) {
					if model, n, ok := strings.Cut(version, "@"); ok && !noMetrics {
						metrics.SetDesiredReplicas(model, n, d.Replicas)
					}
				}})
				loopRef.Store(loop)
				scaled := make(chan struct{})
				go func() { defer close(scaled); _ = loop.Run(actx) }()
				defer func() { stopScaling(); <-scaled }()
			}
			log.Info("serving", "addr", ln.Addr().String(), "data", data, "models", display, "store", storeName(storeURL))
			return server.New(cfg, ctl).Serve(ctx, ln, grace)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	f.StringVar(&grpcAddr, "grpc-addr", "", "also serve the Open Inference Protocol v2 over gRPC on this address, e.g. 127.0.0.1:8081 (default: off)")
	f.StringVar(&data, "data", ".sluice-data", "data directory (registry database and artifacts); created if missing")
	f.StringVar(&storeURL, "store", "", "metadata and records store: a PostgreSQL URL (postgres://USER@HOST:PORT/DB?sslmode=disable; password in the URL or $PGPASSWORD) that several gateways share; default: SQLite files in --data (artifacts stay in --data unless --artifacts puts them in an object store)")
	f.BoolVar(&initStore, "init-store", false, "re-initialise a sluice.db or records.db that exists but is empty or damaged: move it aside (FILE.damaged-TIME) and start an empty one (without it such a file stops the server)")
	f.StringVar(&onnxLib, "onnxruntime-lib", "", "path of ONNX Runtime's shared library for runtime onnx (default: $SLUICE_ONNXRUNTIME_LIB, then the cache of scripts/fetch-onnxruntime.sh, then standard locations)")
	f.StringVar(&otlpEndpoint, "otlp-endpoint", "", "export OpenTelemetry spans (one per predict call) over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318 (default: off)")
	f.StringVar(&tenantsFile, "tenants", "", "tenants file (API key hashes, allowed models, quotas); without it authentication is off")
	f.StringVar(&models, "models", "", "a model package folder, or a folder of them, to publish at start (default: the built-in examples)")
	f.DurationVar(&poll, "models-poll", 0, "poll --models this often (e.g. 5s) and publish new and changed packages as new versions; a change moves traffic only with a release: plan (0: read --models at start only)")
	f.BoolVar(&strict, "strict", false, "exit non-zero when a package in --models is invalid (default: serve the valid ones, report the invalid ones as failed)")
	f.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", 1<<20, "largest predict request body")
	f.Int64Var(&cfg.MaxUploadBytes, "max-upload-bytes", 512<<20, "largest package upload: the compressed body, and the inflated files it holds")
	f.DurationVar(&cfg.MaxDeadline, "max-deadline", time.Minute, "largest deadlineMs a request may ask for")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug (one line per predict call), info, warn, error")
	f.DurationVar(&retention, "records-retention", 7*24*time.Hour, "prediction records older than this are deleted")
	f.BoolVar(&noRecords, "no-records", false, "do not keep prediction records")
	f.StringVar(&durability, "records-durability", "async", "async: answers go out before their record is written (a kill -9 loses at most the records not yet committed, sluice_records_pending: about 1s of traffic, at most 10,500); durable: an answer goes out only after its record is committed to disk (group commit, synchronous=FULL), or it is 503 unavailable")
	f.BoolVar(&noMetrics, "no-metrics", false, "do not serve /metrics or count requests (for overhead measurements)")
	f.BoolVar(&noDrift, "no-drift", false, "do not run drift monitors, even for models that declare drift:")
	f.DurationVar(&cfg.IdempotencyWindow, "idempotency-window", 10*time.Minute, "a retry with the same X-Request-Id within this window replays the first answer (negative: off)")
	f.DurationVar(&deleteQuiet, "delete-quiet", control.DefaultDeleteQuiet, "sluice delete MODEL is refused unless the model had no predict call for this long (0: no check); traffic before the server started counts as traffic at its start")
	f.Int64Var(&cfg.IdempotencyMaxBytes, "idempotency-max-bytes", records.DefaultMaxBytes, "bytes the answers kept for replay may hold; the oldest go first")
	f.DurationVar(&grace, "grace", 30*time.Second, "how long shutdown waits for in-flight and queued requests")
	f.IntVar(&workers, "workers", 0, "start and supervise N local worker processes that host the replicas (0: replicas in this process, no hop)")
	f.StringVar(&pprofAddr, "pprof-addr", "", "serve Go profiles (/debug/pprof/) on this admin address, e.g. 127.0.0.1:6060 (default: off)")
	f.StringVar(&modelSchedFlag, "model-sched", "normal", "CPU scheduling policy of the replicas' threads: normal, or idle (each replica computes on its own SCHED_IDLE thread, so the server's handlers, admission, refusals and health preempt a computing model at once; raises GOMAXPROCS to 2 on one core and bounds --model-cpus to GOMAXPROCS-1; passed to --workers too). For models that compute for a while: it costs a thread hand-off per batch")
	f.IntVar(&modelCPUsFlag, "model-cpus", 0, "at most this many batches compute at once in this process's replicas (in-process mode), so admission, refusals and health keep a core: e.g. 1 on 2 cores (0: no bound; workers: --worker-nice, or sluice worker --model-cpus)")
	f.IntVar(&workerNice, "worker-nice", 0, "lower the local workers' CPU priority by this much (0-19): the server's admission, refusals and health checks run first when the CPUs are busy")
	f.StringVar(&workerSched, "worker-sched", "normal", "the local workers' CPU scheduling policy: normal, or idle (SCHED_IDLE: workers compute only when the server's front end does not want the CPU, so refusals and health answer at once however busy the models are)")
	f.StringVar(&gcFloor, "gc-floor", defaultGCFloor, gcFloorHelp+" (passed to --workers when set here; a worker's own default is off)")
	f.StringVar(&workerMemory, "worker-memory", "", "memory each local worker's versions may hold, e.g. 2GiB, passed to the workers (default: the cgroup's or host's memory divided by --workers)")
	f.DurationVar(&minResidency, "min-residency", placement.DefaultMinResidency, "a version loaded on a worker less than this long ago that serves is never evicted, and one not called for this long is idle (anti-thrash)")
	f.IntVar(&shardSize, "shard-size", 2, "how many workers hold each model (its shard, chosen by rendezvous hashing of the model name)")
	f.StringVar(&kubeWorkers, "kube-workers", "", "label selector of worker pods in Kubernetes, e.g. app.kubernetes.io/name=sluice-worker: a pod not Ready or terminating is out of routing at once, a deleted one forgotten (needs --control-addr; the API from $KUBECONFIG or the pod's service account)")
	f.StringVar(&kubeNamespace, "kube-namespace", "", "namespace of the --kube-workers pods (default: $POD_NAMESPACE, then the service account's)")
	artifacts.register(f, false)
	f.StringVar(&controlAddr, "control-addr", "", "where workers register (sluice worker --join ADDR); set it to attach workers started elsewhere (default with --workers: 127.0.0.1:0)")
	return cmd
}

// parseDurability reads --records-durability.
func parseDurability(v string) (durable bool, err error) {
	switch v {
	case "async":
		return false, nil
	case "durable":
		return true, nil
	}
	return false, fmt.Errorf("--records-durability: must be async or durable, got %q", v)
}
