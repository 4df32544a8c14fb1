package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/app"
	"github.com/sluiceml/sluice/internal/bytesize"
	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/cpuprio"
	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/placement"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/server"
)

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the server (with no flags: the built-in examples on ./.sluice-data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return app.Run(ctx, cfg) // internal/app: the start and stop order
		},
	}
	f.register(cmd)
	return cmd
}

// serveFlags are serve's flags, mapped to an app.Config by config.
type serveFlags struct {
	cfg                 app.Config // the fields flags set directly
	logFormat, logLevel string
	durability          string
	gcFloor             string
	modelSched          string
	workerNice          int
	workerSched         string
	artifacts           storeFlags
	workerCIDRs         string
}

func (sf *serveFlags) register(cmd *cobra.Command) {
	c := &sf.cfg
	f := cmd.Flags()
	f.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "listen address")
	f.StringVar(&c.GRPCAddr, "grpc-addr", "", "also serve the Open Inference Protocol v2 over gRPC on this address, e.g. 127.0.0.1:8081 (default: off)")
	f.StringVar(&c.TLSCert, "tls-cert", "", "serve HTTPS and gRPC over TLS with this certificate chain (PEM, leaf first; needs --tls-key); re-read when it changes, no restart (default: plain HTTP and gRPC)")
	f.StringVar(&c.TLSKey, "tls-key", "", "the private key of --tls-cert (PEM, unencrypted)")
	f.StringVar(&c.TLSClientCA, "tls-client-ca", "", "require a client certificate on both listeners, verified against the CAs of this PEM file (mutual TLS; needs --tls-cert); re-read when it changes")
	f.StringVar(&c.Data, "data", ".sluice-data", "data directory (registry database and artifacts); created if missing")
	f.StringVar(&c.StoreURL, "store", "", "metadata and records store: a PostgreSQL URL (postgres://USER@HOST:PORT/DB?sslmode=disable; password in the URL or $PGPASSWORD) that several gateways share; default: SQLite files in --data (artifacts stay in --data unless --artifacts puts them in an object store)")
	f.StringVar(&c.FeaturesRedis, "features-redis", "", "Redis feature store for models with features: (redis://[USER:PASSWORD@]HOST:PORT/DB): hashes VIEW:ENTITY of decimal strings, optional _ts; a server that does not answer yet gets its fields' defaults until it does (default: none)")
	f.StringVar(&c.FeaturesPostgres, "features-postgres", "", "PostgreSQL feature store for models with features: (postgres://USER@HOST:PORT/DB?sslmode=disable): table VIEW keyed by the entity column, one column per feature, optional updated_at; asked after --features-redis, whose misses it fills (default: none; with neither, a model with features: refuses to load)")
	f.BoolVar(&c.InitStore, "init-store", false, "re-initialise a sluice.db or records.db that exists but is empty or damaged: move it aside (FILE.damaged-TIME) and start an empty one (without it such a file stops the server)")
	f.StringVar(&c.OnnxLib, "onnxruntime-lib", "", "path of ONNX Runtime's shared library for runtime onnx (default: $SLUICE_ONNXRUNTIME_LIB, then the cache of scripts/fetch-onnxruntime.sh, then standard locations)")
	f.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "export OpenTelemetry spans (one per predict call) over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318 (default: off)")
	f.StringVar(&c.TenantsFile, "tenants", "", "tenants file (API key hashes, allowed models, quotas); without it authentication is off")
	f.StringVar(&c.Models, "models", "", "a model package folder, or a folder of them, to publish at start (default: the built-in examples)")
	f.DurationVar(&c.ModelsPoll, "models-poll", 0, "poll --models this often (e.g. 5s) and publish new and changed packages as new versions; a change moves traffic only with a release: plan (0: read --models at start only)")
	f.BoolVar(&c.Strict, "strict", false, "exit non-zero when a package in --models is invalid (default: serve the valid ones, report the invalid ones as failed)")
	f.Int64Var(&c.Server.MaxBodyBytes, "max-body-bytes", 1<<20, "largest predict request body")
	f.Int64Var(&c.Server.MaxUploadBytes, "max-upload-bytes", 512<<20, "largest package upload: the compressed body, and the inflated files it holds")
	f.DurationVar(&c.Server.MaxDeadline, "max-deadline", time.Minute, "largest deadlineMs a request may ask for")
	f.IntVar(&c.Server.HTTPMaxConns, "http-max-conns", server.DefaultHTTPMaxConns, "connections the HTTP listener holds open at once; one past it is closed at once (lowered, with a warning, to leave 1024 of the open-file limit to the rest of the process)")
	f.IntVar(&c.Server.GRPCMaxConns, "grpc-max-conns", server.DefaultGRPCMaxConns, "connections the gRPC listener (--grpc-addr) holds open at once; one past it is closed at once (lowered like --http-max-conns)")
	f.StringVar(&sf.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&sf.logLevel, "log-level", "info", "log level: debug (one line per predict call), info, warn, error")
	f.DurationVar(&c.Retention, "records-retention", 7*24*time.Hour, "prediction records older than this are deleted")
	f.DurationVar(&c.ExperimentsEvery, "experiments-every", 15*time.Second, "how often running experiments' figures are refreshed (1s to 1m)")
	f.BoolVar(&c.NoRecords, "no-records", false, "do not keep prediction records")
	f.StringVar(&sf.durability, "records-durability", "async", "async: answers go out before their record is written (a kill -9 loses at most the records not yet committed, sluice_records_pending: about 1s of traffic, at most 10,500); durable: an answer goes out only after its record is committed to disk (group commit, synchronous=FULL), or it is 503 unavailable")
	f.BoolVar(&c.NoMetrics, "no-metrics", false, "do not serve /metrics or count requests (for overhead measurements)")
	f.BoolVar(&c.NoDrift, "no-drift", false, "do not run drift monitors, even for models that declare drift:")
	f.DurationVar(&c.Server.IdempotencyWindow, "idempotency-window", 10*time.Minute, "a retry with the same X-Request-Id within this window replays the first answer (negative: off)")
	f.DurationVar(&c.DeleteQuiet, "delete-quiet", control.DefaultDeleteQuiet, "sluice delete MODEL is refused unless the model had no predict call for this long (0: no check); traffic before the server started counts as traffic at its start")
	f.Int64Var(&c.Server.IdempotencyMaxBytes, "idempotency-max-bytes", records.DefaultMaxBytes, "bytes the answers kept for replay may hold; the oldest go first")
	f.DurationVar(&c.Grace, "grace", 30*time.Second, "how long shutdown waits for in-flight and queued requests")
	f.StringVar(&c.Server.LabReport, "lab-report", "", "the sluice lab report GET /v1/lab/report serves, with the CSV and JSON files beside it (default: <--data>/lab/report.html, where sluice lab --publish DATA_DIR puts it)")
	f.IntVar(&c.Workers, "workers", 0, "start and supervise N local worker processes that host the replicas (0: replicas in this process, no hop)")
	f.StringVar(&c.PprofAddr, "pprof-addr", "", "serve Go profiles (/debug/pprof/) on this admin address, e.g. 127.0.0.1:6060 (default: off)")
	f.StringVar(&sf.modelSched, "model-sched", "normal", "CPU scheduling policy of the replicas' threads: normal, or idle (each replica computes on its own SCHED_IDLE thread, so the server's handlers, admission, refusals and health preempt a computing model at once; raises GOMAXPROCS to 2 on one core and bounds --model-cpus to GOMAXPROCS-1; passed to --workers too). For models that compute for a while: it costs a thread hand-off per batch")
	f.IntVar(&c.ModelCPUs, "model-cpus", 0, "at most this many batches compute at once in this process's replicas (in-process mode), so admission, refusals and health keep a core: e.g. 1 on 2 cores (0: no bound; workers: --worker-nice, or sluice worker --model-cpus)")
	f.IntVar(&sf.workerNice, "worker-nice", 0, "lower the local workers' CPU priority by this much (0-19): the server's admission, refusals and health checks run first when the CPUs are busy")
	f.StringVar(&sf.workerSched, "worker-sched", "normal", "the local workers' CPU scheduling policy: normal, or idle (SCHED_IDLE: workers compute only when the server's front end does not want the CPU, so refusals and health answer at once however busy the models are)")
	f.StringVar(&sf.gcFloor, "gc-floor", defaultGCFloor, gcFloorHelp+" (passed to --workers when set here; a worker's own default is off)")
	f.StringVar(&c.WorkerMemory, "worker-memory", "", "memory each local worker's versions may hold, e.g. 2GiB, passed to the workers (default: the cgroup's or host's memory divided by --workers)")
	f.DurationVar(&c.MinResidency, "min-residency", placement.DefaultMinResidency, "a version loaded on a worker less than this long ago that serves is never evicted, and one not called for this long is idle (anti-thrash)")
	f.IntVar(&c.ShardSize, "shard-size", 2, "how many workers hold each model (its shard, chosen by rendezvous hashing of the model name)")
	f.StringVar(&c.KubeWorkers, "kube-workers", "", "label selector of worker pods in Kubernetes, e.g. app.kubernetes.io/name=sluice-worker: a pod not Ready or terminating is out of routing at once, a deleted one forgotten (needs --control-addr; the API from $KUBECONFIG or the pod's service account)")
	f.IntVar(&c.MaxWorkers, "max-workers", cluster.DefaultMaxWorkers, "at most this many workers registered at once: a registration of a new id beyond it is refused (too_many_workers, retried by the worker); the local --workers always register")
	f.IntVar(&c.Events.MaxStreams, "events-max-streams", 128, "at most this many GET /v1/events streams open at once: one more is refused (too_many_streams, 503 with Retry-After)")
	f.DurationVar(&c.ForgetAfter, "forget-after", cluster.DefaultForgetAfter, "a worker that attached with --join (not a local --workers one) and stayed out of routing and silent this long is forgotten: out of the registry and every model's shard, its connection closed, its metric series deleted")
	f.StringVar(&sf.workerCIDRs, "worker-cidrs", "127.0.0.0/8,::1/128", "the networks whose addresses the gateway dials when a worker registers (comma-separated CIDRs or IPs; a worker address that is a name must resolve only inside them); with --kube-workers only a watched pod's own IP is dialled, and the local --workers only on loopback")
	f.StringVar(&c.KubeNamespace, "kube-namespace", "", "namespace of the --kube-workers pods (default: $POD_NAMESPACE, then the service account's)")
	sf.artifacts.register(f, false)
	f.StringVar(&c.JobsDir, "jobs-dir", "", "batch jobs: the folder file: job URIs resolve in (file:NAME is NAME inside it; paths and symlinks out of it are refused). Default: none, file: URIs refused (s3:// URIs use the --artifacts object store)")
	f.IntVar(&c.JobRunners, "job-runners", 1, "batch jobs this server runs at once (0: none here; sluice job run processes sharing --store run them)")
	f.IntVar(&c.JobChunksInFlight, "job-chunks-in-flight", jobs.DefaultChunksInFlight, "chunks of one batch job scored at once (each up to its chunkRows rows; one keeps the replicas busy, since a chunk's calls overlap, and a crash redoes at most one chunk per job)")
	f.StringVar(&c.ControlAddr, "control-addr", "", "where workers register (sluice worker --join ADDR); set it to attach workers started elsewhere (default with --workers: 127.0.0.1:0). It always speaks TLS, and workers join with --join-token-file or a client certificate")
	f.StringVar(&c.ControlTLSCert, "control-tls-cert", "", "certificate of the control plane's listener (with --control-tls-key; reloaded when it changes). Default: a self-signed one made once in <--data>/control/ca.pem (key.pem 0600) and reused: the file workers take as --ca")
	f.StringVar(&c.ControlTLSKey, "control-tls-key", "", "key of --control-tls-cert")
	f.StringSliceVar(&c.ControlTLSHosts, "control-tls-hosts", nil, "more host names or IP addresses the self-signed control plane certificate is valid for (besides 127.0.0.1, ::1, localhost, the host name and --control-addr's host), e.g. gw.example.com,10.0.0.5; a certificate that lacks one is made again")
	f.StringVar(&c.JoinTokenFile, "join-token-file", "", "file holding the token workers present to register (sluice worker --join-token-file: a copy of it); re-read when it changes. Default: <--data>/control/join-token, made (32 random bytes, hex, 0600) if missing")
	f.StringVar(&c.WorkerClientCA, "worker-client-ca", "", "CA file of workers' client certificates: a worker presenting one it signs (sluice worker --cert, --key) joins without the token (mTLS)")
}

// config validates the flags (each error names its flag and the fix) and
// maps them to the process's app.Config.
func (sf *serveFlags) config(cmd *cobra.Command) (app.Config, error) {
	c := sf.cfg
	var err error
	if c.Logger, err = newLogger(sf.logFormat, sf.logLevel); err != nil {
		return c, err
	}
	c.Version, c.LogFormat, c.LogLevel = version, sf.logFormat, sf.logLevel
	if c.ModelSched, err = cpuprio.ParseSched("--model-sched", sf.modelSched); err != nil {
		return c, err
	}
	if c.GCFloor, err = parseGCFloor(sf.gcFloor); err != nil {
		return c, err
	}
	if c.Durable, err = parseDurability(sf.durability); err != nil && !c.NoRecords {
		return c, err
	}
	if c.WorkerMemory != "" {
		if n, err := bytesize.Parse(c.WorkerMemory); err != nil || n == 0 {
			return c, fmt.Errorf("--worker-memory %q: a size more than 0 like \"4GiB\" (%v)", c.WorkerMemory, err)
		}
	}
	if c.WorkerCIDRs, err = cluster.ParseCIDRs(sf.workerCIDRs); err != nil {
		return c, err
	}
	for _, l := range []struct {
		flag string
		n    int
	}{{"--http-max-conns", c.Server.HTTPMaxConns}, {"--grpc-max-conns", c.Server.GRPCMaxConns}} {
		if l.n < 1 {
			return c, fmt.Errorf("%s %d: must be >= 1 (the connections the listener holds open at once)", l.flag, l.n)
		}
	}
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return c, errors.New("--tls-cert and --tls-key: give both (the certificate chain and its private key, PEM files) or neither")
	case c.TLSClientCA != "" && c.TLSCert == "":
		return c, errors.New("--tls-client-ca: needs --tls-cert and --tls-key (client certificates are asked for in a TLS handshake)")
	case c.Workers < 0:
		return c, fmt.Errorf("--workers %d: must be >= 0", c.Workers)
	case (c.Workers > 0 || c.ControlAddr != "") && c.MinResidency < 0:
		return c, fmt.Errorf("--min-residency %s: must be >= 0", c.MinResidency)
	case c.KubeWorkers != "" && c.Workers == 0 && c.ControlAddr == "":
		return c, errors.New("--kube-workers: needs --control-addr (the workers in those pods register there)")
	case c.ModelCPUs < 0: // refused with workers too, as before --model-sched
		return c, fmt.Errorf("--model-cpus %d: use 0 (no bound) or the number of batches that may compute at once", c.ModelCPUs)
	case c.Events.MaxStreams < 1:
		return c, fmt.Errorf("--events-max-streams %d: must be >= 1 (the event streams open at once)", c.Events.MaxStreams)
	case c.MaxWorkers < 1:
		return c, fmt.Errorf("--max-workers %d: must be >= 1 (the workers registered at once)", c.MaxWorkers)
	case c.ForgetAfter <= 0:
		return c, fmt.Errorf("--forget-after %s: must be > 0 (how long a silent attached worker is kept)", c.ForgetAfter)
	case c.DeleteQuiet < 0:
		return c, fmt.Errorf("--delete-quiet %s: must be >= 0", c.DeleteQuiet)
	case c.JobRunners < 0:
		return c, fmt.Errorf("--job-runners %d: must be >= 0 (0: this server runs no batch jobs)", c.JobRunners)
	case c.JobChunksInFlight < 1:
		return c, fmt.Errorf("--job-chunks-in-flight %d: must be >= 1 (the chunks of one job scored at once)", c.JobChunksInFlight)
	case c.ModelsPoll < 0 || (c.ModelsPoll > 0 && c.Models == ""):
		return c, fmt.Errorf("--models-poll %s: must be > 0 (0: off) and needs --models (the built-in examples never change)", c.ModelsPoll)
	}
	if c.JobsDir != "" {
		if fi, err := os.Stat(c.JobsDir); err != nil || !fi.IsDir() {
			return c, fmt.Errorf("--jobs-dir %q: not a directory (%v); create it, or leave the flag out to refuse file: job URIs", c.JobsDir, errOrFile(err))
		}
	}
	if c.Workers > 0 {
		if err := cpuprio.CheckNice("--worker-nice", sf.workerNice); err != nil {
			return c, err
		}
		sched, err := cpuprio.ParseSched("--worker-sched", sf.workerSched)
		if err != nil {
			return c, err
		}
		// Each worker lowers its own threads (cpuprio.Lower): setting it
		// from here, after the fork, races the child's runtime creating
		// threads.
		c.WorkerArgs = append(sf.artifacts.args(), "--nice", strconv.Itoa(sf.workerNice), "--sched", string(sched), "--model-sched", string(c.ModelSched))
		if cmd.Flags().Changed("gc-floor") {
			c.WorkerArgs = append(c.WorkerArgs, "--gc-floor", sf.gcFloor) // else the workers' own default: off
		}
	}
	log := c.Logger
	c.OpenArtifacts = func(ctx context.Context) (registry.Artifacts, error) {
		a, err := sf.artifacts.open(ctx, log, false)
		if a == nil || err != nil {
			return nil, err // no interface holding a nil *s3.Artifacts
		}
		return a, nil
	}
	return c, nil
}

// errOrFile is err, or "a file" when a path that should be a directory
// is a file.
func errOrFile(err error) any {
	if err != nil {
		return err
	}
	return "a file"
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
