package app

import (
	"context"
	"fmt"

	"github.com/minio/minio-go/v7"

	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobgw"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
	"github.com/sluiceml/sluice/internal/jobs/jobsdb"
	"github.com/sluiceml/sluice/internal/routing"
)

// Batch jobs in `sluice serve` (docs/jobs.md): the job store opens with
// the other stores; the gateway part builds the Manager (the /v1/jobs
// API) over a jobgw.Predictor of the server's own gateway; the job
// runner part, after the gateway and before the listeners, runs
// --job-runners jobs at once and stops before the gateway and the
// controller do (its chunks in flight are left to their leases: the next
// runner redoes at most one chunk each).

// batchJobs is what the parts build for jobs.
type batchJobs struct {
	store  jobs.Store
	local  *jobio.LocalStore // --jobs-dir (nil: file: URIs refused)
	s3     *minio.Client     // the --artifacts object store's client (nil: s3:// URIs refused)
	pred   *jobgw.Predictor
	mgr    *jobs.Manager
	runner *jobs.Runner
	ctx    context.Context
	stop   context.CancelFunc
}

// minioClienter is what an object store of --artifacts offers to serve
// s3:// job URIs too (registry/s3's Artifacts).
type minioClienter interface{ Client() *minio.Client }

// openJobs opens the job store (jobs.db in --data, or the PostgreSQL of
// --store) and the jobs dir.
func (a *app) openJobs(ctx context.Context) error {
	c := a.cfg
	b := &batchJobs{}
	if c.JobsDir != "" {
		l, err := jobio.OpenLocal(c.JobsDir)
		if err != nil {
			return fmt.Errorf("--jobs-dir: %w", err)
		}
		b.local = l
	}
	st, err := jobsdb.Open(context.WithoutCancel(ctx), c.StoreURL, c.Data, c.InitStore, a.log)
	if err != nil {
		b.close()
		return err
	}
	b.store = st
	if mc, ok := a.artifacts.(minioClienter); ok {
		b.s3 = mc.Client()
	}
	a.jobs = b
	a.log.Info("batch jobs on", "jobs_dir", orNone(c.JobsDir), "s3", b.s3 != nil, "job_runners", c.JobRunners)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (b *batchJobs) close() error {
	var err error
	if b.store != nil {
		err = b.store.Close()
	}
	if b.local != nil {
		b.local.Close()
	}
	return err
}

// objects is jobs.Config.Objects: where a URI's files live.
func (b *batchJobs) objects(loc jobio.Location) (jobio.ObjectStore, error) {
	switch loc.Scheme {
	case "file":
		if b.local == nil {
			return nil, fmt.Errorf("%s: this server has no jobs dir, so it reads and writes no file: URIs; start it with --jobs-dir DIR (the folder job files live in) or use an s3:// URI", loc.URI)
		}
		return b.local, nil
	case "s3":
		if b.s3 == nil {
			return nil, fmt.Errorf("%s: this server has no object store; start it with --artifacts s3://BUCKET/PREFIX (and --s3-endpoint for a store that is not Amazon S3, credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or use a file: URI in its --jobs-dir", loc.URI)
		}
		return jobio.NewS3Store(b.s3, loc.Bucket), nil
	}
	return nil, fmt.Errorf("%s: unknown scheme; write file:NAME or s3://BUCKET/KEY", loc.URI)
}

// primary is jobs.Config.Resolve: the version with the largest share of
// model's traffic in the routing snapshot (its deployment's primary).
func primary(h *routing.Holder) func(model string) (int, error) {
	return func(model string) (int, error) {
		t := h.Load()
		if n := t.Serving(model); n > 0 {
			return n, nil
		}
		_, _, err := t.Pick(model, "") // why not: not found, or no ready version
		if err == nil {
			err = fmt.Errorf("model %q has no routable version", model)
		}
		return 0, err
	}
}

// jobsConfig is the Manager's and the Runner's Config (the gateway part
// sets pred's Gateway before anything calls it).
func (a *app) jobsConfig() jobs.Config {
	b := a.jobs
	cfg := jobs.Config{Store: b.store, Predictor: b.pred, Objects: b.objects, JobsDir: a.cfg.JobsDir,
		Resolve: primary(a.ctl.Load().Table), Log: a.log, Runners: a.cfg.JobRunners, ChunksInFlight: a.cfg.JobChunksInFlight}
	if !a.cfg.NoMetrics {
		cfg.Metrics = a.reg
	}
	return cfg
}

// newJobManager builds the jobs' Manager for the server, and the Runner
// it wakes on a submit or a cancel (nil with --job-runners 0). The
// predictor's Gateway is set by the gateway part once server.New made it,
// before the listeners serve (no submit arrives earlier) and before the
// runner runs.
func (a *app) newJobManager() *jobs.Manager {
	b := a.jobs
	b.pred = &jobgw.Predictor{Tenants: a.tenants}
	cfg := a.jobsConfig()
	if a.cfg.JobRunners > 0 {
		b.runner = jobs.NewRunner(cfg)
		cfg.Wake = b.runner.Wake
	}
	b.mgr = jobs.NewManager(cfg)
	return b.mgr
}

// startJobRunner readies the runner built with the Manager (the gateway
// part); its Run is the part's body.
func (a *app) startJobRunner(context.Context) error {
	a.jobs.ctx, a.jobs.stop = context.WithCancel(context.Background())
	return nil
}

func (a *app) runJobs() error { return a.jobs.runner.Run(a.jobs.ctx) }

func (a *app) stopJobRunner(context.Context) error {
	a.jobs.stop()
	return nil
}
