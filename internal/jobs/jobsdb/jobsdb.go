// Package jobsdb holds the batch jobs' databases: SQLite (jobs.db in the
// server's --data, for one machine) and PostgreSQL (the --store database
// the gateways and `sluice job run` processes share), each a jobs.Store
// that passes jobstest.
//
// A job is a row of jobs (its spec as JSON, state, counts, its first
// errors); its chunks are rows of job_chunks (where each starts in the
// input, pending → leased → done, the lease's owner and expiry, how often
// it was claimed, and the rows it counted). A claim is one write
// transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: an UPDATE of the row
// a FOR UPDATE SKIP LOCKED subquery picked), so two processes never hold
// one chunk's lease at once; Complete adds a chunk's counts in the same
// transaction that marks it done, so they are added once. Leases are
// compared with the clock of the process that claims (Options.Now): the
// machines' clocks must agree to well within a lease.
package jobsdb

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/pgdb"
)

// Options of OpenSQLite and OpenPostgres.
type Options struct {
	// InitStore (SQLite) moves aside a jobs.db that exists but is empty or
	// not a database and starts an empty one; without it such a file is
	// refused (a *storefile.Damaged naming it and the fix).
	InitStore bool
	// Now is the clock of leases and of the jobs' times (default
	// time.Now): tests move it to expire a lease without sleeping.
	Now func() time.Time
	// Log receives what opening did (a jobs.db moved aside); default
	// slog.Default().
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// Open opens the jobs' store the server's flags name: storeURL ""
// (the embedded store) is SQLite's dataDir/jobs.db, a postgres:// URL is
// that database (the same as the registry's, tables of its own).
// initStore is --init-store (SQLite: a damaged jobs.db is moved aside).
func Open(ctx context.Context, storeURL, dataDir string, initStore bool, log *slog.Logger) (jobs.Store, error) {
	o := Options{InitStore: initStore, Log: log}
	if pgdb.IsURL(storeURL) {
		return OpenPostgres(ctx, storeURL, o)
	}
	if storeURL != "" {
		return nil, fmt.Errorf("jobs: --store %q: want a postgres:// URL or none (SQLite in --data)", storeURL)
	}
	if dataDir == "" {
		return nil, errors.New("jobs: no --data folder for jobs.db and no --store postgres:// URL")
	}
	return OpenSQLite(dataDir, o)
}

// Chunk states in job_chunks.state.
const (
	chunkPending = "pending"
	chunkLeased  = "leased"
	chunkDone    = "done"
)

// Bounds of what a row error keeps: a job keeps MaxErrorsKept of them,
// each bounded in bytes, so a job's row stays small whatever its input.
const (
	maxMessageBytes = 1024
	maxIDBytes      = 256
	maxFieldBytes   = 256
)

// Bounds of List and Runnable.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

// scanBatch is how many chunks one insert statement of SetScan carries
// (SQLite: 4 parameters each, under its 32,766).
const scanBatch = 500

func limitOf(n int) int {
	if n <= 0 {
		return defaultLimit
	}
	return min(n, maxLimit)
}

func checkList(o jobs.ListOptions) error {
	if o.State != "" && !jobs.ValidState(o.State) {
		return fmt.Errorf("jobs: list: state %q is not one of queued, running, succeeded, failed, cancelled", o.State)
	}
	return nil
}

func checkClaim(shard, shards int, lease time.Duration) error {
	if shards < 1 || shard < 0 || shard >= shards {
		return fmt.Errorf("jobs: claim: shard %d of %d: want 0 ≤ shard < shards", shard, shards)
	}
	if lease <= 0 {
		return fmt.Errorf("jobs: claim: lease %v: want > 0", lease)
	}
	return nil
}

func notFound(id string) error { return fmt.Errorf("job %s: %w", id, jobs.ErrNotFound) }

func chunkNotFound(id string, chunk int) error {
	return fmt.Errorf("job %s chunk %d: %w", id, chunk, jobs.ErrNotFound)
}

func leaseLost(id string, chunk int, owner string) error {
	return fmt.Errorf("job %s chunk %d (owner %s): %w", id, chunk, owner, jobs.ErrLeaseLost)
}

// micros is t as the tables keep it: unix microseconds, 0 for the zero
// time.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// mergeErrors is the job's kept errors after adding more: the first
// MaxErrorsKept of both by chunk then line, each once, each bounded in
// bytes. Chunks complete in any order; the kept ones are still the
// first of the input.
func mergeErrors(have, add []jobs.RowError) []jobs.RowError {
	out := make([]jobs.RowError, 0, min(len(have)+len(add), 2*jobs.MaxErrorsKept))
	out = append(out, have...)
	for _, e := range add {
		e.Message = clip(e.Message, maxMessageBytes)
		e.ID = clip(e.ID, maxIDBytes)
		e.Field = clip(e.Field, maxFieldBytes)
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
		// Keep the work bounded for a chunk with many errors.
		if len(out) >= 2*jobs.MaxErrorsKept {
			sortErrors(out)
			out = out[:jobs.MaxErrorsKept]
		}
	}
	sortErrors(out)
	return out[:min(len(out), jobs.MaxErrorsKept)]
}

func sortErrors(es []jobs.RowError) {
	slices.SortStableFunc(es, func(a, b jobs.RowError) int {
		return cmp.Or(cmp.Compare(a.Chunk, b.Chunk), cmp.Compare(a.Line, b.Line))
	})
}

func encodeErrors(es []jobs.RowError) (string, error) {
	if len(es) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(es)
	return string(b), err
}

// scanner is a row of either driver.
type scanner interface{ Scan(dest ...any) error }

// jobCols are the columns scanJob reads, in its order.
const jobCols = `id, spec, state, scanned, rows_total, rows_done, rows_failed, rows_redone, chunks_total, chunks_done, errors, message, incomplete, cancel_requested, created, started, finished, updated`

func scanJob(sc scanner) (jobs.Job, error) {
	var j jobs.Job
	var spec, errs string
	var created, started, finished, updated int64
	if err := sc.Scan(&j.ID, &spec, &j.State, &j.Scanned, &j.RowsTotal, &j.RowsDone, &j.RowsFailed, &j.RowsRedone,
		&j.ChunksTotal, &j.ChunksDone, &errs, &j.Message, &j.Incomplete, &j.CancelRequested,
		&created, &started, &finished, &updated); err != nil {
		return jobs.Job{}, err
	}
	if err := json.Unmarshal([]byte(spec), &j.Spec); err != nil {
		return jobs.Job{}, fmt.Errorf("job %s: its spec in the store is not JSON: %w", j.ID, err)
	}
	if err := json.Unmarshal([]byte(errs), &j.Errors); err != nil {
		return jobs.Job{}, fmt.Errorf("job %s: its errors in the store are not JSON: %w", j.ID, err)
	}
	if len(j.Errors) == 0 {
		j.Errors = nil
	}
	j.Created, j.Started, j.Finished, j.Updated = fromMicros(created), fromMicros(started), fromMicros(finished), fromMicros(updated)
	return j, nil
}

// newJob is what Create stores of j: a fresh job in state Queued, created
// at j.Created (now if zero), with no counts or errors.
func newJob(j jobs.Job, now time.Time) (jobs.Job, string, error) {
	if j.ID == "" {
		return jobs.Job{}, "", errors.New("jobs: create: the job has no id")
	}
	spec, err := json.Marshal(j.Spec)
	if err != nil {
		return jobs.Job{}, "", fmt.Errorf("job %s: encode its spec: %w", j.ID, err)
	}
	created := j.Created
	if created.IsZero() {
		created = now
	}
	return jobs.Job{ID: j.ID, Spec: j.Spec, State: jobs.Queued, Created: created, Updated: created}, string(spec), nil
}

// stateTimes are Started and Finished after a move to to at now.
func stateTimes(to jobs.State, started, finished, now int64) (int64, int64) {
	if to == jobs.Running && started == 0 {
		started = now
	}
	if jobs.Final(to) {
		finished = now
	}
	return started, finished
}

func checkState(id string, to jobs.State) error {
	if !jobs.ValidState(to) {
		return fmt.Errorf("job %s: set state %q: not a job state", id, to)
	}
	return nil
}

func containsState(from []jobs.State, s jobs.State) bool { return slices.Contains(from, s) }

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// completion is what Complete does to a chunk found in state with holder
// as its lease's owner.
type completion struct {
	noop   bool  // the chunk is done: nothing to add
	redone int64 // rows to add to rows_redone (a chunk claimed more than once)
}

var errNotHolder = errors.New("not the lease's holder")

// decideComplete: a done chunk adds nothing; a pending one (never
// claimed) or one another owner holds is a lost lease; owner's chunk,
// its lease expired or not, completes (no one else claimed it).
func decideComplete(state, holder, owner string, claims int, r jobs.ChunkResult) (completion, error) {
	switch {
	case state == chunkDone:
		return completion{noop: true}, nil
	case state != chunkLeased || holder != owner:
		return completion{}, errNotHolder
	case claims > 1:
		return completion{redone: r.Rows}, nil
	}
	return completion{}, nil
}

func checkResult(id string, chunk int, r jobs.ChunkResult) error {
	if r.Rows < 0 || r.Failed < 0 || r.Failed > r.Rows {
		return fmt.Errorf("job %s chunk %d: complete: rows %d, failed %d: want 0 ≤ failed ≤ rows", id, chunk, r.Rows, r.Failed)
	}
	return nil
}
