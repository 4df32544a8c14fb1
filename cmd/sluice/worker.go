package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/app"
	"github.com/sluiceml/sluice/internal/bytesize"
	"github.com/sluiceml/sluice/internal/certs"
	"github.com/sluiceml/sluice/internal/cpuprio"
	"github.com/sluiceml/sluice/internal/worker"
)

func newWorkerCmd() *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker --join ADDR --ca FILE --join-token-file FILE",
		Short: "Run a worker process that hosts model replicas for a control plane (sluice serve --control-addr)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return app.RunWorker(ctx, cfg)
		},
	}
	f.register(cmd)
	return cmd
}

// workerFlags are worker's flags, mapped to an app.WorkerConfig by config.
type workerFlags struct {
	cfg                 app.WorkerConfig // the fields flags set directly
	logFormat, logLevel string
	modelSched, sched   string
	gcFloor             string
	workerMemory        string
	artifacts           storeFlags
	// the hop's credentials: the control plane's CA, the join token, a
	// client certificate
	ca, tokenFile, cert, key, serverName string
}

func (wf *workerFlags) register(cmd *cobra.Command) {
	c := &wf.cfg
	f := cmd.Flags()
	f.StringVar(&c.Worker.Join, "join", "", "address of the control plane to register with (sluice serve --control-addr), e.g. 127.0.0.1:7070")
	f.StringVar(&wf.ca, "ca", "", "certificate file the control plane's certificate must be signed by (required: the gateway writes its own to <--data>/control/ca.pem, or the CA of its --control-tls-cert)")
	f.StringVar(&wf.tokenFile, "join-token-file", "", "file holding the join token presented on registration (a copy of the gateway's --join-token-file, default <--data>/control/join-token there); read again at every registration")
	f.StringVar(&wf.cert, "cert", "", "client certificate presented to the control plane (with --key), accepted in place of the join token when the gateway's --worker-client-ca signs it")
	f.StringVar(&wf.key, "key", "", "key of --cert")
	f.StringVar(&wf.serverName, "control-server-name", "", "name the control plane's certificate must be valid for (default: the host of --join); for a --join address that is resolved to an IP before the worker sees it")
	f.StringVar(&c.Worker.HealthListen, "health-addr", "", "also serve gRPC health alone, without TLS, on this address (for Kubernetes gRPC probes, which speak no TLS; default: off)")
	f.StringVar(&c.Worker.ID, "id", "", "worker id, stable across restarts (default: hostname-pid)")
	f.StringVar(&c.Worker.Listen, "listen", "127.0.0.1:0", "address of the worker's gRPC server (OIP inference + control)")
	f.StringVar(&c.Worker.Advertise, "advertise", "", "address the gateway should dial (default: the listener's address)")
	f.StringVar(&c.Worker.CacheDir, "cache-dir", "", "artifact cache folder (default: the user cache folder, sluice/artifacts-ID)")
	f.Int64Var(&c.Worker.CacheBytes, "cache-bytes", 2<<30, "bound of the artifact cache; least recently used artifacts are deleted beyond it")
	f.IntVar(&c.Worker.MaxLoads, "max-loads", 2, "versions loaded at once")
	f.IntVar(&c.Worker.MaxConns, "max-conns", worker.DefaultMaxConns, "connections the worker's gRPC listener holds open at once; one past it is closed at once (a gateway holds one; see docs/operations.md, Securing workers)")
	f.IntVar(&c.Worker.MaxCalls, "max-calls", worker.DefaultMaxCalls, "calls open at once on the worker's gRPC listener, across connections; more are refused (Unavailable) before they cost a goroutine")
	f.StringVar(&wf.workerMemory, "worker-memory", "", "memory this worker's versions may hold, e.g. 4GiB (KiB|MiB|GiB|KB|MB|GB); reported to the control plane for placement (default: the cgroup's memory.max when set, else the host's MemTotal, divided by --workers-on-host)")
	f.IntVar(&c.Worker.WorkersOnHost, "workers-on-host", 0, "how many workers share this host's memory, for the default --worker-memory (0: this worker alone; sluice serve --workers N passes N)")
	f.StringVar(&c.OnnxLib, "onnxruntime-lib", "", "path of ONNX Runtime's shared library (as for sluice serve)")
	f.StringVar(&wf.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&wf.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.DurationVar(&c.Grace, "grace", 30*time.Second, "how long shutdown waits for queued work")
	f.StringVar(&wf.gcFloor, "gc-floor", "0", gcFloorHelp+" (off by default in a worker: its versions may fill its memory budget outside the Go heap, and the floor's garbage is memory placement does not count)")
	f.StringVar(&wf.modelSched, "model-sched", "normal", "CPU scheduling policy of the replicas' threads: normal, or idle (SCHED_IDLE: this worker's gRPC handlers, admission and refusals preempt a computing model at once; see sluice serve --model-sched)")
	f.IntVar(&c.ModelCPUs, "model-cpus", 0, "at most this many batches compute at once in this worker (0: no bound)")
	f.IntVar(&c.Nice, "nice", 0, "lower this worker's CPU priority by this much (0-19), every thread of it: a gateway sharing the cores admits, refuses and answers health checks first")
	f.StringVar(&wf.sched, "sched", "normal", "CPU scheduling policy: normal, or idle (SCHED_IDLE: the worker computes only when nothing else on the CPU wants to run; a gateway on the same cores is never kept waiting)")
	f.StringVar(&c.PprofAddr, "pprof-addr", "", "serve Go profiles (/debug/pprof/) on this admin address (default: off)")
	wf.artifacts.register(f, true)
}

// config validates the flags (each error names its flag and the fix) and
// maps them to the process's app.WorkerConfig.
func (wf *workerFlags) config() (app.WorkerConfig, error) {
	c := wf.cfg
	var err error
	if c.Logger, err = newLogger(wf.logFormat, wf.logLevel); err != nil {
		return c, err
	}
	if c.Worker.ID == "" {
		host, _ := os.Hostname()
		c.Worker.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if wf.workerMemory != "" {
		n, err := bytesize.Parse(wf.workerMemory)
		if err != nil || n == 0 {
			return c, fmt.Errorf("--worker-memory %q: a size more than 0 like \"4GiB\" (%v)", wf.workerMemory, err)
		}
		c.Worker.MemoryBudget, c.Worker.MemoryBudgetSource = n, "--worker-memory"
	}
	if c.Worker.MaxConns < 1 {
		return c, fmt.Errorf("--max-conns %d: must be >= 1 (default %d)", c.Worker.MaxConns, worker.DefaultMaxConns)
	}
	if c.Worker.MaxCalls < 1 {
		return c, fmt.Errorf("--max-calls %d: must be >= 1 (default %d)", c.Worker.MaxCalls, worker.DefaultMaxCalls)
	}
	if c.Worker.WorkersOnHost < 0 {
		return c, fmt.Errorf("--workers-on-host %d: must be >= 0", c.Worker.WorkersOnHost)
	}
	if c.ModelSched, err = cpuprio.ParseSched("--model-sched", wf.modelSched); err != nil {
		return c, err
	}
	if c.GCFloor, err = parseGCFloor(wf.gcFloor); err != nil {
		return c, err
	}
	if c.ModelCPUs < 0 {
		return c, fmt.Errorf("--model-cpus %d: use 0 (no bound) or the number of batches that may compute at once", c.ModelCPUs)
	}
	if err := cpuprio.CheckNice("--nice", c.Nice); err != nil {
		return c, err
	}
	if c.Sched, err = cpuprio.ParseSched("--sched", wf.sched); err != nil {
		return c, err
	}
	if c.Worker.ControlTLS, c.Worker.JoinToken, err = wf.credentials(); err != nil {
		return c, err
	}
	if wf.tokenFile != "" {
		app.WarnTokenMode(c.Logger, "--join-token-file", wf.tokenFile)
	}
	c.Worker.Build = version
	log := c.Logger
	c.OpenArtifacts = func(ctx context.Context) (worker.Source, string, error) {
		a, err := wf.artifacts.open(ctx, log, true)
		if a == nil || err != nil {
			return nil, "", err // no interface holding a nil *s3.Artifacts
		}
		return a, a.String(), nil
	}
	return c, nil
}

// credentials are the worker's side of the hop from --ca, --cert, --key
// and --join-token-file.
func (wf *workerFlags) credentials() (*tls.Config, func() ([]byte, error), error) {
	if wf.ca == "" {
		return nil, nil, errors.New("--ca is required: the certificate the control plane's is signed by (sluice serve writes its own to <--data>/control/ca.pem and logs where; copy it here)")
	}
	if (wf.cert == "") != (wf.key == "") {
		return nil, nil, errors.New("--cert and --key go together")
	}
	if wf.tokenFile == "" && wf.cert == "" {
		return nil, nil, errors.New("--join-token-file is required (a copy of the gateway's join token, <--data>/control/join-token there), or --cert and --key for a client certificate its --worker-client-ca signs")
	}
	tc, err := certs.ClientConfig(wf.ca, wf.cert, wf.key)
	if err != nil {
		return nil, nil, fmt.Errorf("--ca %s / --cert / --key: %w", wf.ca, err)
	}
	tc.ServerName = wf.serverName
	if wf.tokenFile == "" {
		return tc, nil, nil
	}
	file := wf.tokenFile
	if _, err := app.ReadToken(file); err != nil {
		return nil, nil, fmt.Errorf("--join-token-file: %w", err)
	}
	return tc, func() ([]byte, error) { return app.ReadToken(file) }, nil
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
