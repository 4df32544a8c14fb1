package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc"

	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/cpuprio"
	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/kube"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/runtime/synthetic"
	"github.com/sluiceml/sluice/internal/serving"
)

// workersHost adapts a cluster.Pool to the controller's Host seam.
type workersHost struct {
	pool  *cluster.Pool
	store registry.Artifacts
}

func (h workersHost) Name() string { return "workers" }

func (h workersHost) Start(ctx context.Context, req control.HostRequest) (control.Hosted, hosting.Timings, error) {
	v := req.Version
	// The store's copy is verified at every load, as in process: a damaged
	// artifact fails the version even when workers hold a good cached copy.
	// A cold version is verified here too, then returned loaded nowhere:
	// the controller marks it ready and routes to it, and its first
	// request loads it (cluster.Pool.Start).
	r, _, err := h.store.Open(ctx, v.ArtifactSHA)
	if err != nil {
		return nil, hosting.Timings{}, fmt.Errorf("load %s: %w", v.ID(), err)
	}
	var head bytes.Buffer
	_, err = io.Copy(io.Discard, io.TeeReader(r, &limitedWriter{&head, 64 << 10}))
	r.Close()
	if err != nil {
		return nil, hosting.Timings{}, fmt.Errorf("load %s: %w", v.ID(), err)
	}
	var loadTime time.Duration
	var memory int64
	if v.Runtime == "synthetic" {
		if c, err := synthetic.Decode(head.Bytes()); err == nil {
			// What the artifact declares: the first load's expected time
			// and each replica's memory (the reservation before a load is
			// measured, when the manifest sets no serving.memory).
			loadTime, memory = c.LoadTime, c.Memory
		}
	}
	rv, tm, err := h.pool.Start(ctx, cluster.VersionSpec{Model: v.Model, N: v.N, Manifest: v.Manifest, ArtifactSHA: v.ArtifactSHA,
		ArtifactBytes: v.ArtifactBytes, Spec: req.Spec, Observer: req.Observer, LoadTime: loadTime, Memory: memory})
	if err != nil {
		return nil, tm, err
	}
	return rv, tm, nil
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	b *bytes.Buffer
	n int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if room := w.n - w.b.Len(); room > 0 {
		w.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// storeArtifacts serves the registry's artifacts to workers (verified as
// they stream: a damaged artifact ends the stream with an error).
type storeArtifacts struct{ store registry.Artifacts }

func (a storeArtifacts) OpenArtifact(ctx context.Context, sha string) (io.ReadCloser, int64, error) {
	return a.store.Open(ctx, sha)
}

// controlPlane is the gRPC listener workers register with.
type controlPlane struct {
	ln net.Listener
	gs *grpc.Server
}

// localWorkerIDs names the `--workers N` processes.
func localWorkerIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "worker-" + strconv.Itoa(i+1)
	}
	return ids
}

// localJoin is the address local workers join at: the listener's, on
// loopback when it listens on every address (the certificate names
// 127.0.0.1, not 0.0.0.0).
func localJoin(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	return addr.String()
}

// localWorkers is the supervisor of `--workers N` processes: each joins
// with the control plane's CA and join token files.
func localWorkers(ids []string, join string, creds *controlCreds, data, logFormat, logLevel, onnxLib, memory string, store []string, log *slog.Logger, pool *cluster.Pool) (*cluster.Supervisor, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("--workers: find the sluice binary: %w", err)
	}
	cache, err := filepath.Abs(filepath.Join(data, "worker-cache"))
	if err != nil {
		return nil, err
	}
	caFile, err := filepath.Abs(creds.caFile)
	if err != nil {
		return nil, err
	}
	tokenFile, err := filepath.Abs(creds.tokenFile)
	if err != nil {
		return nil, err
	}
	return &cluster.Supervisor{
		Exe: exe, IDs: ids, Logger: log,
		Args: func(id string) []string {
			args := []string{"worker", "--join", join, "--ca", caFile, "--join-token-file", tokenFile, "--id", id, "--cache-dir", filepath.Join(cache, id),
				"--log-format", logFormat, "--log-level", logLevel, "--workers-on-host", strconv.Itoa(len(ids))}
			if onnxLib != "" {
				args = append(args, "--onnxruntime-lib", onnxLib)
			}
			if memory != "" {
				args = append(args, "--worker-memory", memory)
			}
			return append(args, store...)
		},
		OnExit: func(id, why string) { pool.MarkDead(id, why) },
	}, nil
}

// ModelCPUs is the process's bound on batches computing at once
// (--model-cpus) with --model-sched applied. With idle, every replica loop
// runs on its own SCHED_IDLE thread, and the front end needs a P the
// models cannot hold: GOMAXPROCS is raised to 2 if it is 1 (a process
// pinned to one core), and a bound of 0 becomes GOMAXPROCS−1.
func ModelCPUs(n int, sched cpuprio.Sched, log *slog.Logger) (*serving.CPUs, error) {
	if n < 0 {
		return nil, fmt.Errorf("--model-cpus %d: use 0 (no bound) or the number of batches that may compute at once", n)
	}
	if sched != cpuprio.Idle {
		if n > 0 {
			log.Info("replicas bounded", "model_cpus", n, "gomaxprocs", goruntime.GOMAXPROCS(0))
		}
		return serving.NewCPUs(n), nil
	}
	if goruntime.GOMAXPROCS(0) < 2 {
		goruntime.GOMAXPROCS(2)
	}
	procs := goruntime.GOMAXPROCS(0)
	if n == 0 {
		n = procs - 1
	}
	if n >= procs {
		return nil, fmt.Errorf("--model-cpus %d with --model-sched idle: use at most %d (GOMAXPROCS %d less one, so the front end always has a P the models cannot take)", n, procs-1, procs)
	}
	log.Info("replicas compute on SCHED_IDLE threads", "model_cpus", n, "gomaxprocs", procs)
	return serving.NewCPUs(n).WithThread(cpuprio.IdleThread), nil
}

// workerAddrPolicy is the pool's dial policy (cluster.Config.AllowAddr):
// the local --workers on loopback; with --kube-workers, a watched pod's
// own worker from that pod's IP (pods is nil until the watch listed
// them: nobody else is admitted meanwhile); otherwise an IP inside
// --worker-cidrs (default loopback).
func workerAddrPolicy(c Config, pods func() *kube.PodWatch) func(string, netip.Addr) error {
	local := localWorkerIDs(c.Workers)
	cidrs := cluster.AllowCIDRs(c.WorkerCIDRs)
	if len(c.WorkerCIDRs) == 0 {
		cidrs = cluster.LoopbackOnly
	}
	return func(id string, ip netip.Addr) error {
		switch {
		case slices.Contains(local, id):
			return cluster.LoopbackOnly(id, ip)
		case c.KubeWorkers != "":
			pw := pods()
			if pw == nil {
				return fmt.Errorf("the --kube-workers pods are not listed yet: register again shortly")
			}
			return pw.Admit(id, ip)
		}
		return cidrs(id, ip)
	}
}
