package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/app"
	"github.com/sluiceml/sluice/internal/bytesize"
	"github.com/sluiceml/sluice/internal/cpuprio"
	"github.com/sluiceml/sluice/internal/runtime/onnx"
	"github.com/sluiceml/sluice/internal/runtime/synthetic"
	"github.com/sluiceml/sluice/internal/worker"
)

func newWorkerCmd() *cobra.Command {
	var (
		cfg                 worker.Config
		logFormat, logLevel string
		onnxLib             string
		grace               time.Duration
		pprofAddr           string
		modelCPUsFlag       int
		modelSchedFlag      string
		gcFloor             string
		nice                int
		schedFlag           string
		workerMemory        string
		artifacts           storeFlags
	)
	cmd := &cobra.Command{
		Use:   "worker --join ADDR",
		Short: "Run a worker process that hosts model replicas for a control plane (sluice serve --control-addr)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logFormat, logLevel)
			if err != nil {
				return err
			}
			if onnxLib != "" {
				onnx.SetLibraryPath(onnxLib)
			}
			allowWorkerOnlyRuntimes()
			stopPprof, err := app.StartPprof(pprofAddr, log)
			if err != nil {
				return err
			}
			defer stopPprof()
			if cfg.ID == "" {
				host, _ := os.Hostname()
				cfg.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
			}
			if workerMemory != "" {
				n, err := bytesize.Parse(workerMemory)
				if err != nil || n == 0 {
					return fmt.Errorf("--worker-memory %q: a size more than 0 like \"4GiB\" (%v)", workerMemory, err)
				}
				cfg.MemoryBudget, cfg.MemoryBudgetSource = n, "--worker-memory"
			}
			if cfg.WorkersOnHost < 0 {
				return fmt.Errorf("--workers-on-host %d: must be >= 0", cfg.WorkersOnHost)
			}
			modelSched, err := cpuprio.ParseSched("--model-sched", modelSchedFlag)
			if err != nil {
				return err
			}
			floor, err := parseGCFloor(gcFloor)
			if err != nil {
				return err
			}
			defer app.StartGCFloor(floor, log).Stop()
			if cfg.CPUs, err = app.ModelCPUs(modelCPUsFlag, modelSched, log); err != nil {
				return err
			}
			if err := cpuprio.CheckNice("--nice", nice); err != nil {
				return err
			}
			sched, err := cpuprio.ParseSched("--sched", schedFlag)
			if err != nil {
				return err
			}
			if err := cpuprio.Lower(nice, sched); err != nil {
				return fmt.Errorf("--nice %d --sched %s: %w", nice, sched, err)
			}
			cfg.Logger, cfg.Build = log, version
			if art, err := artifacts.open(cmd.Context(), log, true); err != nil {
				return err
			} else if art != nil {
				cfg.Artifacts, cfg.ArtifactsName = art, art.String()
			}
			w, err := worker.New(cfg)
			if err != nil {
				return err
			}
			if os.Getenv("GOMEMLIMIT") == "" {
				limit := worker.GoMemoryLimit(w.Budget())
				debug.SetMemoryLimit(limit)
				log.Info("Go memory limit set from the memory budget (GOMEMLIMIT overrides)", "go_memory_limit_mb", limit>>20)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return w.Run(ctx, grace)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Join, "join", "", "address of the control plane to register with (sluice serve --control-addr), e.g. 127.0.0.1:7070")
	f.StringVar(&cfg.ID, "id", "", "worker id, stable across restarts (default: hostname-pid)")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "address of the worker's gRPC server (OIP inference + control)")
	f.StringVar(&cfg.Advertise, "advertise", "", "address the gateway should dial (default: the listener's address)")
	f.StringVar(&cfg.CacheDir, "cache-dir", "", "artifact cache folder (default: the user cache folder, sluice/artifacts-ID)")
	f.Int64Var(&cfg.CacheBytes, "cache-bytes", 2<<30, "bound of the artifact cache; least recently used artifacts are deleted beyond it")
	f.IntVar(&cfg.MaxLoads, "max-loads", 2, "versions loaded at once")
	f.StringVar(&workerMemory, "worker-memory", "", "memory this worker's versions may hold, e.g. 4GiB (KiB|MiB|GiB|KB|MB|GB); reported to the control plane for placement (default: the cgroup's memory.max when set, else the host's MemTotal, divided by --workers-on-host)")
	f.IntVar(&cfg.WorkersOnHost, "workers-on-host", 0, "how many workers share this host's memory, for the default --worker-memory (0: this worker alone; sluice serve --workers N passes N)")
	f.StringVar(&onnxLib, "onnxruntime-lib", "", "path of ONNX Runtime's shared library (as for sluice serve)")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.DurationVar(&grace, "grace", 30*time.Second, "how long shutdown waits for queued work")
	f.StringVar(&gcFloor, "gc-floor", "0", gcFloorHelp+" (off by default in a worker: its versions may fill its memory budget outside the Go heap, and the floor's garbage is memory placement does not count)")
	f.StringVar(&modelSchedFlag, "model-sched", "normal", "CPU scheduling policy of the replicas' threads: normal, or idle (SCHED_IDLE: this worker's gRPC handlers, admission and refusals preempt a computing model at once; see sluice serve --model-sched)")
	f.IntVar(&modelCPUsFlag, "model-cpus", 0, "at most this many batches compute at once in this worker (0: no bound)")
	f.IntVar(&nice, "nice", 0, "lower this worker's CPU priority by this much (0-19), every thread of it: a gateway sharing the cores admits, refuses and answers health checks first")
	f.StringVar(&schedFlag, "sched", "normal", "CPU scheduling policy: normal, or idle (SCHED_IDLE: the worker computes only when nothing else on the CPU wants to run; a gateway on the same cores is never kept waiting)")
	f.StringVar(&pprofAddr, "pprof-addr", "", "serve Go profiles (/debug/pprof/) on this admin address (default: off)")
	artifacts.register(f, true)
	return cmd
}

// newLogger builds the process logger from --log-format and --log-level.
func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lv})), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv})), nil
	}
	return nil, fmt.Errorf("--log-format %q: use json or text", format)
}

// allowWorkerOnlyRuntimes turns on what only a worker process may do (the
// synthetic runtime's exitEvery kills the process that runs the model).
func allowWorkerOnlyRuntimes() { synthetic.AllowExit() }
