package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/sluiceml/sluice/internal/cpuprio"
	"github.com/sluiceml/sluice/internal/gcfloor"
	"github.com/sluiceml/sluice/internal/runtime/onnx"
	"github.com/sluiceml/sluice/internal/runtime/synthetic"
	"github.com/sluiceml/sluice/internal/worker"
)

// WorkerConfig is the whole of a `sluice worker` process, as its flags
// give it (cmd/sluice validates them).
type WorkerConfig struct {
	Logger    *slog.Logger
	Worker    worker.Config // Logger and CPUs are set by RunWorker
	PprofAddr string        // --pprof-addr ("": off)
	OnnxLib   string        // --onnxruntime-lib
	GCFloor   int64         // --gc-floor, bytes (0: off)
	ModelCPUs int           // --model-cpus
	// ModelSched, Nice and Sched: --model-sched, --nice, --sched.
	ModelSched, Sched cpuprio.Sched
	Nice              int
	// OpenArtifacts opens the object store of --artifacts (nil, or a nil
	// source: artifacts are fetched from the control plane).
	OpenArtifacts func(context.Context) (worker.Source, string, error)
	Grace         time.Duration // --grace
}

// RunWorker runs a worker process until ctx ends or it fails: its parts
// in one Group, as Run does for serve (pprof, GC floor, the worker).
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	log := cfg.Logger
	if cfg.OnnxLib != "" {
		onnx.SetLibraryPath(cfg.OnnxLib)
	}
	synthetic.AllowExit() // only a worker may run a model that kills its process
	var (
		stopPprof func()
		tuner     *gcfloor.Tuner
		w         *worker.Worker
		wctx      context.Context
		stopW     context.CancelFunc
	)
	g := &Group{Log: log}
	if cfg.PprofAddr != "" {
		g.Add(Part{Name: "pprof", Start: func(context.Context) (err error) { stopPprof, err = StartPprof(cfg.PprofAddr, log); return err },
			Stop: func(context.Context) error { stopPprof(); return nil }})
	}
	g.Add(Part{Name: "gc floor", Start: func(context.Context) error { tuner = StartGCFloor(cfg.GCFloor, log); return nil },
		Stop: func(context.Context) error { tuner.Stop(); return nil }})
	g.Add(Part{Name: "worker", Start: func(ctx context.Context) error {
		wc := cfg.Worker
		var err error
		if wc.CPUs, err = ModelCPUs(cfg.ModelCPUs, cfg.ModelSched, log); err != nil {
			return err
		}
		if err := cpuprio.Lower(cfg.Nice, cfg.Sched); err != nil {
			return fmt.Errorf("--nice %d --sched %s: %w", cfg.Nice, cfg.Sched, err)
		}
		wc.Logger = log
		if cfg.OpenArtifacts != nil {
			if wc.Artifacts, wc.ArtifactsName, err = cfg.OpenArtifacts(context.WithoutCancel(ctx)); err != nil {
				return err
			}
		}
		if w, err = worker.New(wc); err != nil {
			return err
		}
		if os.Getenv("GOMEMLIMIT") == "" {
			limit := worker.GoMemoryLimit(w.Budget())
			debug.SetMemoryLimit(limit)
			log.Info("Go memory limit set from the memory budget (GOMEMLIMIT overrides)", "go_memory_limit_mb", limit>>20)
		}
		wctx, stopW = context.WithCancel(context.Background())
		return nil
	}, Run: func() error {
		err := w.Run(wctx, cfg.Grace) // drains every version within the grace once stopped
		if wctx.Err() != nil {
			return err // stopped: its error, if any, is the drain's
		}
		if err == nil {
			err = ErrStopped
		}
		return err
	}, Stop: func(context.Context) error { stopW(); return nil }})
	return g.Run(ctx, cfg.Grace)
}
