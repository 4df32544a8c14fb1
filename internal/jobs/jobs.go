// Package jobs is batch prediction (issue 20): a job scores every row of
// an input file with one pinned model version and writes each row's
// answer exactly once to an output, resuming after a crash at the first
// chunk whose completion was not recorded.
//
// The pieces, and who owns them:
//
//   - this file: the job's types, the Store seam (the job and its chunks,
//     chunk claims as leases), the Predictor seam (how a runner scores
//     rows: in process through the gateway, jobgw, or over HTTP from
//     `sluice job run --shard I/N`, jobhttp), and Service (what the HTTP
//     API calls).
//   - decide.go: the pure decisions (progress and ETA, the error-rate
//     rule, which state follows which, the next step of a job, the
//     backoff of a retried chunk, the submit's validation).
//   - manager.go: the Service. A submit is validated, its version pinned
//     (the deployment's primary when none is named), its input opened and
//     its first rows read in its format, its output refused when it or
//     parts of it exist; then the job is queued. Tenants see their own
//     jobs (another's is job_not_found), admins every job.
//   - runner.go: the same code in `sluice serve` (Run: up to Runners jobs
//     at once) and in `sluice job run` (RunShard: chunk i is shard
//     i%N's).
//   - jobio: where files live, streaming readers in chunks, part files.
//   - jobsdb: the Store in SQLite (jobs.db in --data) and PostgreSQL
//     (--store), each passing jobstest's conformance suite.
//
// # A job's life
//
// queued → running → succeeded | failed | cancelled. The first runner to
// see a queued job scans its input once, streaming (rows, every chunk's
// start, duplicate ids across the whole input), commits the scan's record
// (each chunk's first line, and the rows whose id an earlier chunk holds)
// among the output's parts as scan.json, and only then records the scan
// in the store: every runner that can claim a chunk can read the record.
// Bad rows are failures (counted in rowsFailed, the first ones listed):
// a row that does not parse or has no id, a duplicate id (never written:
// the output holds each id once), a row the version's schema refuses
// (written with its error). A job fails as soon as rowsFailed > maxErrorRate
// × rowsTotal: failures only grow, so no later chunk could bring it back.
// A cancel stops the chunks in flight within CancelPoll (500 ms) and a
// predict call; committed parts are kept and the job marked incomplete.
//
// # A chunk's life, and exactly once
//
// pending → claimed (a lease: owner and expiry, renewed every third of it
// while the chunk runs; a lost lease abandons the chunk) → done. The
// runner reads the chunk with a reader opened at its start, scores its
// good rows (a retryable predictor error — queue full, quota, unavailable
// — backs off and retries, never a row failure; another fails the job),
// commits its part (renamed into place, jobio.OutputWriter), and only
// then records it done with Complete. A crash between the commit and
// Complete redoes the chunk after its lease expires: its part is written
// again whole (or skipped), so the output holds each id once, and the
// rows redone are at most one chunk per runner that died. When every
// chunk is done the output is assembled from the parts in chunk order
// (again after a crash during it) and the job succeeds.
package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// State is a job's state.
type State = api.JobState

// The states. Queued: accepted, its input not yet scanned or no runner
// has started it. Running: chunks are being scored. The other three are
// final.
const (
	Queued    State = "queued"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// Final says whether s is a state a job never leaves.
func Final(s State) bool { return s == Succeeded || s == Failed || s == Cancelled }

// ValidState says whether s is one of the five states.
func ValidState(s State) bool {
	switch s {
	case Queued, Running, Succeeded, Failed, Cancelled:
		return true
	}
	return false
}

// Defaults of a Spec.
const (
	DefaultChunkRows = 1000
	MaxChunkRows     = 100_000
	DefaultIDField   = "id"
	// MaxErrorsKept is how many row errors a job keeps to show (the first
	// ones, by chunk then row); all are counted.
	MaxErrorsKept = 20
)

// The wire types are the api package's (one definition: the client
// and the CLI read the same structs the server writes).
type (
	IO       = api.JobIO       // an input or output: URI and format
	Spec     = api.JobSpec     // a submit with its version resolved and its submitter
	RowError = api.JobRowError // one failed row
	Counts   = api.JobCounts   // progress summed over done chunks
	Job      = api.Job         // a job as the store keeps it
	Submit   = api.JobSubmit   // POST /v1/jobs
	Status   = api.JobStatus   // a job with its throughput and ETA
)

// Claim is a chunk leased to one runner.
type Claim struct {
	Job    string
	Chunk  int
	Start  jobio.Start // where its reader begins
	Owner  string
	Until  time.Time // the lease's expiry; Renew moves it
	Redone bool      // the chunk was claimed before (a lease lost or a runner crashed)
}

// ChunkResult is what a chunk's scoring found, recorded by Complete.
type ChunkResult struct {
	Rows   int64      // rows in the chunk (scored + failed)
	Failed int64      // rows that failed (validation, duplicates, the model's refusal of the row)
	Errors []RowError // the chunk's first errors (the store keeps the job's first MaxErrorsKept)
}

// The store's errors (wrapped with the job id).
var (
	ErrNotFound  = errors.New("no such job")
	ErrLeaseLost = errors.New("the chunk's lease is held by another runner or expired")
	ErrExists    = errors.New("a job with this id exists")
)

// ListOptions filter List. Jobs come newest first.
type ListOptions struct {
	Tenant string // "": every tenant's
	State  State  // "": every state
	Limit  int    // 0: 100; at most 1000
	Before string // page: jobs created before the job of this id
}

// Store keeps jobs and their chunks. Every method is atomic; several
// processes may share one store (PostgreSQL), so claims are leases with
// an owner and an expiry, and every write that a lease guards checks it.
type Store interface {
	// Create adds a job in state Queued (ErrExists for a taken id).
	Create(ctx context.Context, j Job) error
	// Get returns a job with its counts (ErrNotFound).
	Get(ctx context.Context, id string) (Job, error)
	// List returns jobs, newest first.
	List(ctx context.Context, o ListOptions) ([]Job, error)
	// SetScan records the input's scan once: its rows, the chunks'
	// starts (index i at chunks[i]) and the scan's first errors. A second
	// call on a scanned job changes nothing and returns nil.
	SetScan(ctx context.Context, id string, rows int64, chunks []jobio.Start, errs []RowError) error
	// Claim leases one chunk of the job to owner until now+lease: a
	// pending chunk, or one whose lease expired (then Redone), of those
	// with index%shards == shard (shards 1: all), lowest index first.
	// ok is false when no chunk is claimable now (all done or leased).
	Claim(ctx context.Context, id, owner string, shard, shards int, lease time.Duration) (c Claim, ok bool, err error)
	// Renew extends owner's lease of the chunk to now+lease, or returns
	// ErrLeaseLost.
	Renew(ctx context.Context, id string, chunk int, owner string, lease time.Duration) error
	// Complete marks owner's chunk done and adds its result to the job's
	// counts, once: completing a done chunk again returns nil and adds
	// nothing. A lease that expired but was not claimed by another runner
	// may still complete; one claimed by another returns ErrLeaseLost.
	Complete(ctx context.Context, id string, chunk int, owner string, r ChunkResult) error
	// SetState moves a job from one of from to to (with message and
	// incomplete), setting Started on the first move to Running and
	// Finished on a final state; ok is false when the job was not in one
	// of from (nothing changed).
	SetState(ctx context.Context, id string, from []State, to State, message string, incomplete bool) (ok bool, err error)
	// RequestCancel sets CancelRequested on a job not final, and returns
	// the job.
	RequestCancel(ctx context.Context, id string) (Job, error)
	// Runnable lists the ids of jobs in state Queued or Running, oldest
	// first, at most limit.
	Runnable(ctx context.Context, limit int) ([]string, error)
	Close() error
}

// VersionInfo is what a runner needs to know of the pinned version: its
// input fields (CSV typing, validation) and its output columns.
type VersionInfo struct {
	VersionID string        // "fraud@3"
	Fields    []jobio.Field // the input schema's fields
	Outputs   []string      // output names, in column order
}

// RowResult is one row's answer: its outputs, or its error.
type RowResult struct {
	Outputs map[string]any
	Err     *jobio.OutError // nil: scored
}

// Predictor scores rows with the pinned version at the batch class
// (serving.BatchJob): the lowest, which takes only what online traffic
// leaves idle. The in-process Predictor calls the gateway; the remote
// one (sluice job run) calls a gateway over HTTP.
type Predictor interface {
	// Version describes the pinned version (an error: the version is gone
	// or the tenant may not call it).
	Version(ctx context.Context, tenant, model string, version int) (VersionInfo, error)
	// Predict scores rows: one RowResult per row, in order. A row the
	// version's schema refuses is that row's error, not the call's; the
	// call's error is for what is not the rows' fault (the version
	// unloaded, queue full, quota, deadline) and is retried by the runner
	// with backoff (errs.Retryable) or fails the job.
	Predict(ctx context.Context, tenant, model string, version int, rows []jobio.Row) ([]RowResult, error)
}

// Service is what the HTTP API calls (the Manager implements it). Every
// error is an *errs.Error from the catalogue, naming the field and the
// fix. tenant is the caller's name; admin callers see every job.
type Service interface {
	Submit(ctx context.Context, tenant string, s Submit) (Status, error)
	Get(ctx context.Context, tenant string, admin bool, id string) (Status, error)
	List(ctx context.Context, tenant string, admin bool, o ListOptions) ([]Status, error)
	Cancel(ctx context.Context, tenant string, admin bool, id string) (Status, error)
}
