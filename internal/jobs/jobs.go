// Package jobs is batch prediction (issue 20): a job scores every row of
// an input file with one pinned model version and writes each row's
// answer exactly once to an output, resuming after a crash at the first
// chunk whose completion was not recorded.
//
// The pieces, and who owns them:
//
//   - this file: the job's types, the Store seam (the job and its chunks,
//     chunk claims as leases), the Predictor seam (how a runner scores
//     rows: in process through the gateway, or over HTTP from `sluice job
//     run --shard I/N`), and Service (what the HTTP API calls).
//   - jobio: where files live, streaming readers in chunks, part files.
//   - jobsdb: the Store in SQLite (jobs.db in --data) and PostgreSQL
//     (--store), each passing jobstest's conformance suite.
//   - the runner (runner.go) and the manager (manager.go): the same code
//     in `sluice serve` and in `sluice job run`.
//
// A chunk's life: pending → claimed (a lease: owner and expiry, renewed
// while the chunk runs) → done. Its output part is committed (renamed
// into place, jobio.OutputWriter) before Complete records it, so a crash
// between the two redoes the chunk and WriteChunk writes nothing: the
// output holds each id once, and the rows redone are at most one chunk
// per runner that died.
package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// State is a job's state.
type State string

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
func (s State) Final() bool { return s == Succeeded || s == Failed || s == Cancelled }

// Valid says whether s is one of the five states.
func (s State) Valid() bool {
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

// IO is an input or output: a URI (file:NAME inside --jobs-dir, or
// s3://BUCKET/KEY) and a format (jobio.JSONL, CSV, Parquet).
type IO struct {
	URI    string `json:"uri"`
	Format string `json:"format"`
}

// Spec is what a submit asked for, with the version resolved: a job
// scores with the version it was pinned to at submit, whatever the
// deployment does afterwards.
type Spec struct {
	Model        string  `json:"model"`
	Version      int     `json:"version"`   // pinned at submit (the deployment's primary when the submit named none)
	VersionID    string  `json:"versionId"` // "fraud@3"
	Input        IO      `json:"input"`
	Output       IO      `json:"output"`
	IDField      string  `json:"idField"`
	ChunkRows    int     `json:"chunkRows"`
	MaxErrorRate float64 `json:"maxErrorRate"` // fraction of rows (0..1) that may fail before the job fails; 0: none may
	Tenant       string  `json:"tenant"`       // the submitter: the job runs with its permissions and quota
}

// RowError is one row that failed: its id (when it has one), the line or
// row number of the input, the field to blame and why.
type RowError struct {
	Chunk   int    `json:"chunk"`
	Line    int64  `json:"line"`
	ID      string `json:"id,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Counts are a job's progress, summed over its done chunks (so a chunk
// redone after a crash is counted once, in RowsRedone as well).
type Counts struct {
	RowsTotal   int64 `json:"rowsTotal"` // known once the input is scanned (0 before)
	RowsDone    int64 `json:"rowsDone"`  // rows of done chunks: scored or failed
	RowsFailed  int64 `json:"rowsFailed"`
	RowsRedone  int64 `json:"rowsRedone"` // rows of chunks scored again after a lost lease or a crash
	ChunksTotal int   `json:"chunksTotal"`
	ChunksDone  int   `json:"chunksDone"`
}

// Job is a job as the store keeps it.
type Job struct {
	ID    string `json:"id"`
	Spec  Spec   `json:"spec"`
	State State  `json:"state"`
	// Scanned: the input was read once and its chunks recorded (Counts
	// RowsTotal and ChunksTotal are known).
	Scanned bool `json:"scanned"`
	Counts
	Errors []RowError `json:"errors,omitempty"` // the first MaxErrorsKept
	// Message says why a job failed or was cancelled ("" otherwise).
	Message string `json:"message,omitempty"`
	// Incomplete: the job ended (failed, cancelled) with committed parts
	// that were not assembled into the output; they stay under the
	// output's KEY.parts/.
	Incomplete bool `json:"incomplete,omitempty"`
	// CancelRequested: a cancel was asked; runners stop within a second.
	CancelRequested bool      `json:"cancelRequested,omitempty"`
	Created         time.Time `json:"created"`
	Started         time.Time `json:"started,omitzero"`
	Finished        time.Time `json:"finished,omitzero"`
	Updated         time.Time `json:"updated"`
}

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

// Submit is a job submit as the API takes it (before the version is
// resolved and the input probed).
type Submit struct {
	Model        string   `json:"model"`
	Version      int      `json:"version,omitempty"` // 0: the deployment's primary, pinned
	Input        IO       `json:"input"`
	Output       IO       `json:"output"`
	IDField      string   `json:"idField,omitempty"`
	ChunkRows    int      `json:"chunkRows,omitempty"`
	MaxErrorRate *float64 `json:"maxErrorRate,omitempty"` // default 0
	ID           string   `json:"id,omitempty"`           // optional client-chosen id ([a-z0-9-], ≤ 64); a repeat of the same submit returns the job
}

// Status is a job with what is computed from it: throughput and ETA.
type Status struct {
	Job
	RowsPerSecond float64 `json:"rowsPerSecond"` // rows done per second of running time
	ETASeconds    float64 `json:"etaSeconds"`    // -1: unknown
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
