package main

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	goruntime "runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/control"
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
		noMetrics, noDrift  bool
		onnxLib             string
		otlpEndpoint        string
		cfg                 server.Config
		grace               time.Duration
		workers             int
		controlAddr         string
		shardSize           int
		pprofAddr           string
		initStore           bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the server (with no flags: the built-in examples on ./.sluice-data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: use debug, info, warn or error", logLevel)
			}
			var handler slog.Handler
			switch logFormat {
			case "json":
				handler = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
			case "text":
				handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
			default:
				return fmt.Errorf("--log-format %q: use json or text", logFormat)
			}
			log := slog.New(handler)
			cfg.Logger, cfg.Version = log, version
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
			store, err := registry.OpenWith(data, registry.Options{InitStore: initStore})
			if err != nil {
				return err
			}
			defer store.Close()
			if a := store.MovedAside(); a != "" {
				log.Warn("--init-store: the damaged registry database was moved aside; starting with an empty registry", "moved_to", a)
			}
			if d, ok := store.Artifacts.(*registry.Dir); ok && d.Removed() > 0 {
				log.Info("deleted partial artifact writes left by an interrupted push", "files", d.Removed())
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
				pool = cluster.New(cluster.Config{Artifacts: storeArtifacts{store}, Known: ids, ShardSize: shardSize, Logger: log})
				defer pool.Close()
				cp, err := startControlPlane(controlAddr, pool)
				if err != nil {
					return err
				}
				defer cp.stop()
				log.Info("control plane listening for workers", "control_addr", cp.ln.Addr().String(), "local_workers", workers)
				if workers > 0 {
					if sup, err = localWorkers(ids, cp.ln.Addr().String(), data, logFormat, logLevel, onnxLib, log, pool); err != nil {
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
			}
			ctl := control.New(store, host, log)
			reg := telemetry.NewRegistry()
			metrics := telemetry.New(reg, telemetry.BuildInfo{Version: version, GoVersion: goruntime.Version()})
			metrics.SetVersionSource(ctl.LiveState)
			if !noMetrics {
				ctl.Metrics, cfg.Metrics = metrics, metrics
			}
			ctl.NoDrift = noDrift
			if !noRecords {
				rs, err := records.OpenWith(data, records.Options{InitStore: initStore})
				if err != nil {
					return err
				}
				defer rs.Close()
				if a := rs.MovedAside(); a != "" {
					log.Warn("--init-store: the damaged records database was moved aside; starting with no records", "moved_to", a)
				}
				cfg.RecordStore = rs
				w := records.NewWriter(rs, records.Config{Retention: retention, Logger: log})
				cfg.Records = w
				metrics.SetRecordDrops(func() telemetry.RecordDrops {
					return telemetry.RecordDrops{BufferFull: w.Overflows(), WriteFailed: w.Failed()}
				})
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()

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
			pubs, err := ctl.PublishFS(ctx, fsys, root, display)
			if err != nil {
				return err
			}
			if err := ctl.ReleaseChanged(ctx, pubs); err != nil {
				return err
			}
			ctl.MarkStarted()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			if grpcAddr != "" {
				if cfg.GRPCListener, err = net.Listen("tcp", grpcAddr); err != nil {
					return fmt.Errorf("listen on --grpc-addr %s: %w", grpcAddr, err)
				}
			}
			log.Info("serving", "addr", ln.Addr().String(), "data", data, "models", display)
			return server.New(cfg, ctl).Serve(ctx, ln, grace)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	f.StringVar(&grpcAddr, "grpc-addr", "", "also serve the Open Inference Protocol v2 over gRPC on this address, e.g. 127.0.0.1:8081 (default: off)")
	f.StringVar(&data, "data", ".sluice-data", "data directory (registry database and artifacts); created if missing")
	f.BoolVar(&initStore, "init-store", false, "re-initialise a sluice.db or records.db that exists but is empty or damaged: move it aside (FILE.damaged-TIME) and start an empty one (without it such a file stops the server)")
	f.StringVar(&onnxLib, "onnxruntime-lib", "", "path of ONNX Runtime's shared library for runtime onnx (default: $SLUICE_ONNXRUNTIME_LIB, then the cache of scripts/fetch-onnxruntime.sh, then standard locations)")
	f.StringVar(&otlpEndpoint, "otlp-endpoint", "", "export OpenTelemetry spans (one per predict call) over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318 (default: off)")
	f.StringVar(&tenantsFile, "tenants", "", "tenants file (API key hashes, allowed models, quotas); without it authentication is off")
	f.StringVar(&models, "models", "", "folder of model packages to publish at start (default: the built-in examples)")
	f.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", 1<<20, "largest predict request body")
	f.Int64Var(&cfg.MaxUploadBytes, "max-upload-bytes", 512<<20, "largest package upload")
	f.DurationVar(&cfg.MaxDeadline, "max-deadline", time.Minute, "largest deadlineMs a request may ask for")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug (one line per predict call), info, warn, error")
	f.DurationVar(&retention, "records-retention", 7*24*time.Hour, "prediction records older than this are deleted")
	f.BoolVar(&noRecords, "no-records", false, "do not keep prediction records")
	f.BoolVar(&noMetrics, "no-metrics", false, "do not serve /metrics or count requests (for overhead measurements)")
	f.BoolVar(&noDrift, "no-drift", false, "do not run drift monitors, even for models that declare drift:")
	f.DurationVar(&cfg.IdempotencyWindow, "idempotency-window", 10*time.Minute, "a retry with the same X-Request-Id within this window replays the first answer (negative: off)")
	f.Int64Var(&cfg.IdempotencyMaxBytes, "idempotency-max-bytes", records.DefaultMaxBytes, "bytes the answers kept for replay may hold; the oldest go first")
	f.DurationVar(&grace, "grace", 30*time.Second, "how long shutdown waits for in-flight and queued requests")
	f.IntVar(&workers, "workers", 0, "start and supervise N local worker processes that host the replicas (0: replicas in this process, no hop)")
	f.StringVar(&pprofAddr, "pprof-addr", "", "serve Go profiles (/debug/pprof/) on this admin address, e.g. 127.0.0.1:6060 (default: off)")
	f.IntVar(&shardSize, "shard-size", 2, "how many workers hold each model (its shard, chosen by rendezvous hashing of the model name)")
	f.StringVar(&controlAddr, "control-addr", "", "where workers register (sluice worker --join ADDR); set it to attach workers started elsewhere (default with --workers: 127.0.0.1:0)")
	return cmd
}
