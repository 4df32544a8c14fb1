package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobhttp"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
	"github.com/sluiceml/sluice/internal/jobs/jobsdb"
	"github.com/sluiceml/sluice/internal/pgdb"
)

func init() { jobCommands = append(jobCommands, newJobRunCmd) }

// jobRunFlags are the flags of `sluice job run`.
type jobRunFlags struct {
	server, apiKey, shard, store, data, jobsDir, owner string
	logFormat, logLevel                                string
	lease                                              time.Duration
	inFlight                                           int
	initStore                                          bool
	objects                                            storeFlags
}

// errJobEnded is the exit of a runner whose job failed or was cancelled
// (exit code 3: a Kubernetes podFailurePolicy fails the Job on it rather
// than restarting the pod).
type errJobEnded struct{ msg string }

func (e *errJobEnded) Error() string { return e.msg }

// exitJobEnded is errJobEnded's exit code.
const exitJobEnded = 3

// newJobRunCmd is `sluice job run ID --shard I/N`: a runner process that
// scores the chunks of shard I of job ID through a gateway (docs/jobs.md).
func newJobRunCmd() *cobra.Command {
	var f jobRunFlags
	cmd := &cobra.Command{
		Use:   "run ID",
		Short: "Run a job's chunks of one shard (--shard I/N) in this process, scored by --server",
		Long: `Run scores the chunks of shard I of N of a submitted job (chunk k is
shard k%N's): it claims each as a lease in the job store (--store, the
PostgreSQL database the servers share), reads its rows from the input,
scores them through the gateway at --server at the batch priority
(Sluice-Priority: batch), writes the chunk's output part and records it
done. N processes — a Kubernetes Indexed Job, or several machines — split
a job; a chunk whose runner died is claimed again once its lease expires.

It exits 0 when no chunk of its shard is left (the other shards may still
run: the last runner to finish assembles the output), 3 when the job
failed or was cancelled, 1 on any other error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runJobShard(cmd, args[0], &f) },
	}
	fl := cmd.Flags()
	serverFlag(cmd, &f.server)
	fl.StringVar(&f.apiKey, "api-key", os.Getenv("SLUICE_API_KEY"), "API key of the tenant whose permissions and quota score the rows: the job's submitter's, or an admin's (default: env SLUICE_API_KEY)")
	fl.StringVar(&f.shard, "shard", "0/1", "the shard to run, I/N: chunks k with k%N == I (0 ≤ I < N)")
	fl.StringVar(&f.store, "store", "", "the job store the servers use: a PostgreSQL URL (postgres://USER@HOST:PORT/DB?sslmode=disable), required with N > 1; default: jobs.db in --data (one machine)")
	fl.StringVar(&f.data, "data", ".sluice-data", "the server's data directory, for jobs.db without --store (a runner on the server's machine)")
	fl.BoolVar(&f.initStore, "init-store", false, "move aside a jobs.db in --data that is empty or damaged (as sluice serve --init-store)")
	fl.StringVar(&f.jobsDir, "jobs-dir", "", "where file: URIs resolve, the servers' --jobs-dir as this machine sees it (default: none, file: URIs refused)")
	fl.StringVar(&f.owner, "owner", "", "this runner's name in the chunks' leases (default: HOST-PID-RANDOM, new at each start)")
	fl.DurationVar(&f.lease, "lease", 30*time.Second, "a chunk claim's lease, renewed every third of it: a runner that dies leaves its chunk to others after this long")
	fl.IntVar(&f.inFlight, "chunks-in-flight", jobs.DefaultChunksInFlight, "chunks this process scores at once")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.objects.register(fl, false)
	return cmd
}

// parseShard reads --shard I/N.
func parseShard(s string) (shard, shards int, err error) {
	is, ns, ok := strings.Cut(s, "/")
	i, ierr := strconv.Atoi(is)
	n, nerr := strconv.Atoi(ns)
	if !ok || ierr != nil || nerr != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--shard %q: want I/N with 0 ≤ I < N, like 0/4 (in a Kubernetes Indexed Job: $(JOB_COMPLETION_INDEX)/N)", s)
	}
	return i, n, nil
}

// checkRunFlags checks what needs no I/O.
func checkRunFlags(f *jobRunFlags, shards int) error {
	if shards > 1 && !pgdb.IsURL(f.store) {
		return fmt.Errorf("--shard %s: N > 1 runners need --store postgres://… (the servers' PostgreSQL job store): SQLite's jobs.db is a file on one machine that runners elsewhere cannot share", f.shard)
	}
	if f.store != "" && !pgdb.IsURL(f.store) {
		return fmt.Errorf("--store %q: want a postgres:// URL (or none: jobs.db in --data)", f.store)
	}
	if f.lease < time.Second {
		return fmt.Errorf("--lease %v: want at least 1s (a lease is renewed every third of it)", f.lease)
	}
	if f.inFlight < 1 {
		return fmt.Errorf("--chunks-in-flight %d: want ≥ 1", f.inFlight)
	}
	return nil
}

func runJobShard(cmd *cobra.Command, id string, f *jobRunFlags) error {
	shard, shards, err := parseShard(f.shard)
	if err != nil {
		return err
	}
	if err := checkRunFlags(f, shards); err != nil {
		return err
	}
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	objs, closeObjs, err := f.openObjects(ctx, log)
	if err != nil {
		return err
	}
	defer closeObjs()
	if f.store == "" {
		if fi, err := os.Stat(f.data); err != nil || !fi.IsDir() {
			return fmt.Errorf("--data %s: no such folder: without --store the job store is jobs.db in the server's --data (give that folder, or --store postgres://…)", f.data)
		}
	}
	st, err := jobsdb.Open(ctx, f.store, f.data, f.initStore, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Get(ctx, id); err != nil {
		return fmt.Errorf("%w (in the store %s)", err, storeName(f))
	}
	c := apiClient(cmd, f.server)
	c.APIKey = f.apiKey
	r := jobs.NewRunner(jobs.Config{Store: st, Predictor: jobhttp.New(c), Objects: objs, JobsDir: f.jobsDir, Log: log,
		Runners: 1, ChunksInFlight: f.inFlight, Lease: f.lease, Owner: f.owner})
	log.Info("job runner", "job", id, "shard", fmt.Sprintf("%d/%d", shard, shards), "owner", r.Owner(), "server", f.server, "store", storeName(f))
	if err := r.RunShard(ctx, id, shard, shards); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("job %s shard %d/%d: stopped by a signal before its chunks were done (its leases expire in %v; run it again to go on)", id, shard, shards, f.lease)
		}
		return fmt.Errorf("job %s shard %d/%d: %w", id, shard, shards, err)
	}
	j, err := st.Get(context.WithoutCancel(ctx), id)
	if err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	if j.State == jobs.Failed || j.State == jobs.Cancelled {
		msg := j.Message
		if msg == "" {
			msg = "no message"
		}
		return &errJobEnded{fmt.Sprintf("job %s %s: %s", id, j.State, msg)}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "job %s shard %d/%d: no chunk left (job %s, chunks %d/%d done, %d rows, %d failed, %d redone)\n",
		id, shard, shards, j.State, j.ChunksDone, j.ChunksTotal, j.RowsDone, j.RowsFailed, j.RowsRedone)
	return nil
}

func storeName(f *jobRunFlags) string {
	if f.store != "" {
		return pgdb.Redact(f.store)
	}
	return "jobs.db in --data " + f.data
}

// openObjects is jobs.Config.Objects of the runner: file: URIs in
// --jobs-dir, s3:// ones through the object store of --artifacts (the
// flags of sluice serve).
func (f *jobRunFlags) openObjects(ctx context.Context, log *slog.Logger) (func(jobio.Location) (jobio.ObjectStore, error), func(), error) {
	var local *jobio.LocalStore
	if f.jobsDir != "" {
		l, err := jobio.OpenLocal(f.jobsDir)
		if err != nil {
			return nil, nil, fmt.Errorf("--jobs-dir: %w", err)
		}
		local = l
	}
	closer := func() {
		if local != nil {
			local.Close()
		}
	}
	art, err := f.objects.open(ctx, log, false)
	if err != nil {
		closer()
		return nil, nil, err
	}
	objs := func(loc jobio.Location) (jobio.ObjectStore, error) {
		switch loc.Scheme {
		case "file":
			if local == nil {
				return nil, fmt.Errorf("%s: this runner has no jobs dir; start it with --jobs-dir DIR (the servers' --jobs-dir as this machine mounts it) or use an s3:// URI", loc.URI)
			}
			return local, nil
		case "s3":
			if art == nil {
				return nil, fmt.Errorf("%s: this runner has no object store; start it with --artifacts s3://BUCKET/PREFIX (and --s3-endpoint for a store that is not Amazon S3, credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), as the servers", loc.URI)
			}
			return jobio.NewS3Store(art.Client(), loc.Bucket), nil
		}
		return nil, fmt.Errorf("%s: unknown scheme; write file:NAME or s3://BUCKET/KEY", loc.URI)
	}
	return objs, closer, nil
}

// exitCode is the process's exit for err (main): 3 for a job that ended
// failed or cancelled, else 1.
func exitCode(err error) int {
	var je *errJobEnded
	if errors.As(err, &je) {
		return exitJobEnded
	}
	return 1
}
