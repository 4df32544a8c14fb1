package jobsdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
	"github.com/sluiceml/sluice/internal/storefile"
)

// SQLite is the jobs' store in a SQLite file of its own (jobs.db in
// --data), apart from the registry's and the records' so that a chunk's
// completion never waits for their writes. Every write is a BEGIN
// IMMEDIATE transaction (the driver's _txlock=immediate): it takes the
// file's write lock before it reads, so two handles (or processes) on one
// file never both claim a chunk.
type SQLite struct {
	db    *sql.DB
	now   func() time.Time
	aside string // where InitStore moved a damaged jobs.db ("" if not)
}

var _ jobs.Store = (*SQLite)(nil)

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS jobs (
  seq              INTEGER PRIMARY KEY,  -- creation order: List is newest first, Runnable oldest first
  id               TEXT    NOT NULL UNIQUE,
  tenant           TEXT    NOT NULL,
  spec             TEXT    NOT NULL,     -- jobs.Spec as JSON
  state            TEXT    NOT NULL,
  scanned          INTEGER NOT NULL DEFAULT 0,
  rows_total       INTEGER NOT NULL DEFAULT 0,
  rows_done        INTEGER NOT NULL DEFAULT 0,
  rows_failed      INTEGER NOT NULL DEFAULT 0,
  rows_redone      INTEGER NOT NULL DEFAULT 0,
  chunks_total     INTEGER NOT NULL DEFAULT 0,
  chunks_done      INTEGER NOT NULL DEFAULT 0,
  errors           TEXT    NOT NULL DEFAULT '[]', -- the first jobs.MaxErrorsKept, JSON
  message          TEXT    NOT NULL DEFAULT '',
  incomplete       INTEGER NOT NULL DEFAULT 0,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  created          INTEGER NOT NULL,     -- unix microseconds; 0: not yet
  started          INTEGER NOT NULL DEFAULT 0,
  finished         INTEGER NOT NULL DEFAULT 0,
  updated          INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, seq);
CREATE INDEX IF NOT EXISTS jobs_tenant ON jobs (tenant, seq);
CREATE TABLE IF NOT EXISTS job_chunks (
  job         TEXT    NOT NULL,
  idx         INTEGER NOT NULL,
  start_chunk INTEGER NOT NULL,  -- jobio.Start of its reader
  off         INTEGER NOT NULL,
  state       TEXT    NOT NULL DEFAULT 'pending', -- pending, leased, done
  owner       TEXT    NOT NULL DEFAULT '',
  lease_until INTEGER NOT NULL DEFAULT 0,         -- unix microseconds
  claims      INTEGER NOT NULL DEFAULT 0,         -- how often it was claimed: > 1 is a redo
  n_rows      INTEGER NOT NULL DEFAULT 0,         -- what Complete counted
  n_failed    INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job, idx)
) WITHOUT ROWID;
-- A claim walks the chunks not done, lowest first: done ones are not in it.
CREATE INDEX IF NOT EXISTS job_chunks_open ON job_chunks (job, idx) WHERE state <> 'done';
`

const (
	jobsStoreName = "the batch jobs (their states, chunks and progress)"
	jobsInitFlag  = "sluice serve --init-store"
)

// OpenSQLite opens (creating if needed) dir/jobs.db. A jobs.db that exists
// but is empty or is not a database is refused (see Options.InitStore).
func OpenSQLite(dir string, o Options) (*SQLite, error) {
	o = o.withDefaults()
	path := filepath.Join(dir, "jobs.db")
	var aside string
	err := storefile.Check(path, jobsStoreName, jobsInitFlag)
	if err != nil && o.InitStore {
		aside, err = storefile.MoveAside(path, time.Now())
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	db, err := openSQLiteDB(path)
	if err != nil && storefile.Corrupt(err) {
		dmg := &storefile.Damaged{Path: path, Problem: "is damaged (" + err.Error() + ")", Store: jobsStoreName, Flag: jobsInitFlag, Err: err}
		if !o.InitStore {
			return nil, fmt.Errorf("jobs: %w", dmg)
		}
		if aside, err = storefile.MoveAside(path, time.Now()); err != nil {
			return nil, fmt.Errorf("jobs: %w", err)
		}
		db, err = openSQLiteDB(path)
	}
	if err != nil {
		return nil, err
	}
	if aside != "" {
		o.Log.Warn("jobs: moved a damaged jobs.db aside and started an empty one", "path", path, "aside", aside)
	}
	return &SQLite{db: db, now: o.Now, aside: aside}, nil
}

func openSQLiteDB(path string) (*sql.DB, error) {
	// synchronous=FULL: a chunk's completion is on the disk before it
	// returns (one commit per chunk of rows: cheap), so it survives a
	// power loss, not only a killed process.
	dsn := "file:" + path + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("jobs: open database: %w", err)
	}
	db.SetMaxOpenConns(4)
	if _, err := db.Exec(sqliteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("jobs: create schema in %s: %w", path, err)
	}
	return db, nil
}

// MovedAside is where InitStore moved a damaged jobs.db ("" when it did
// not).
func (s *SQLite) MovedAside() string { return s.aside }

// Close closes the database.
func (s *SQLite) Close() error { return s.db.Close() }

// write runs f in a BEGIN IMMEDIATE transaction and commits it.
func (s *SQLite) write(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("jobs: begin: %w", err)
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("jobs: commit: %w", err)
	}
	return nil
}

// Create adds a job in state Queued.
func (s *SQLite) Create(ctx context.Context, j jobs.Job) error {
	nj, spec, err := newJob(j, s.now())
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO jobs (id, tenant, spec, state, created, updated) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		nj.ID, nj.Spec.Tenant, spec, string(nj.State), micros(nj.Created), micros(nj.Updated))
	if err != nil {
		return fmt.Errorf("job %s: create: %w", nj.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("job %s: %w", nj.ID, jobs.ErrExists)
	}
	return nil
}

// Get returns a job.
func (s *SQLite) Get(ctx context.Context, id string) (jobs.Job, error) {
	j, err := scanJob(s.db.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.Job{}, notFound(id)
	}
	if err != nil {
		return jobs.Job{}, fmt.Errorf("job %s: get: %w", id, err)
	}
	return j, nil
}

// List returns jobs, newest first.
func (s *SQLite) List(ctx context.Context, o jobs.ListOptions) ([]jobs.Job, error) {
	if err := checkList(o); err != nil {
		return nil, err
	}
	before := int64(-1)
	if o.Before != "" {
		err := s.db.QueryRowContext(ctx, `SELECT seq FROM jobs WHERE id = ?`, o.Before).Scan(&before)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("jobs: list before %s: %w", o.Before, jobs.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("jobs: list: %w", err)
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+jobCols+` FROM jobs
		WHERE (? = '' OR tenant = ?) AND (? = '' OR state = ?) AND (? < 0 OR seq < ?)
		ORDER BY seq DESC LIMIT ?`,
		o.Tenant, o.Tenant, string(o.State), string(o.State), before, before, limitOf(o.Limit))
	if err != nil {
		return nil, fmt.Errorf("jobs: list: %w", err)
	}
	defer rows.Close()
	var out []jobs.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("jobs: list: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("jobs: list: %w", err)
	}
	return out, nil
}

// SetScan records the input's scan once, its chunks in batched inserts
// within one transaction.
func (s *SQLite) SetScan(ctx context.Context, id string, rows int64, chunks []jobio.Start, errs []jobs.RowError) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		var scanned bool
		var have string
		err := tx.QueryRowContext(ctx, `SELECT scanned, errors FROM jobs WHERE id = ?`, id).Scan(&scanned, &have)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return fmt.Errorf("job %s: set scan: %w", id, err)
		}
		if scanned {
			return nil
		}
		kept, err := addErrors(have, errs)
		if err != nil {
			return fmt.Errorf("job %s: set scan: %w", id, err)
		}
		var full *sql.Stmt
		for i := 0; i < len(chunks); i += scanBatch {
			part := chunks[i:min(i+scanBatch, len(chunks))]
			q := `INSERT INTO job_chunks (job, idx, start_chunk, off) VALUES ` + strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", len(part)), ", ")
			args := make([]any, 0, 4*len(part))
			for k, c := range part {
				args = append(args, id, i+k, c.Chunk, c.Offset)
			}
			if len(part) == scanBatch {
				if full == nil {
					if full, err = tx.PrepareContext(ctx, q); err != nil {
						return fmt.Errorf("job %s: set scan: %w", id, err)
					}
					defer full.Close()
				}
				_, err = full.ExecContext(ctx, args...)
			} else {
				_, err = tx.ExecContext(ctx, q, args...)
			}
			if err != nil {
				return fmt.Errorf("job %s: set scan: insert chunks: %w", id, err)
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET scanned = 1, rows_total = ?, chunks_total = ?, errors = ?, updated = ? WHERE id = ?`,
			rows, len(chunks), kept, micros(s.now()), id)
		if err != nil {
			return fmt.Errorf("job %s: set scan: %w", id, err)
		}
		return nil
	})
}

// addErrors is the kept errors (JSON) after adding add.
func addErrors(have string, add []jobs.RowError) (string, error) {
	if len(add) == 0 {
		return have, nil
	}
	var es []jobs.RowError
	if err := jsonUnmarshal(have, &es); err != nil {
		return "", fmt.Errorf("its errors in the store are not JSON: %w", err)
	}
	return encodeErrors(mergeErrors(es, add))
}

// Claim leases the lowest claimable chunk of the shard.
func (s *SQLite) Claim(ctx context.Context, id, owner string, shard, shards int, lease time.Duration) (jobs.Claim, bool, error) {
	if err := checkClaim(shard, shards, lease); err != nil {
		return jobs.Claim{}, false, err
	}
	var c jobs.Claim
	var ok bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := s.now()
		until := now.Add(lease)
		var claims int
		err := tx.QueryRowContext(ctx, `UPDATE job_chunks SET state = 'leased', owner = ?, lease_until = ?, claims = claims + 1
			WHERE job = ? AND idx = (SELECT idx FROM job_chunks
				WHERE job = ? AND state <> 'done' AND (state = 'pending' OR lease_until <= ?) AND idx % ? = ?
				ORDER BY idx LIMIT 1)
			RETURNING idx, start_chunk, off, claims`,
			owner, micros(until), id, id, micros(now), shards, shard).Scan(&c.Chunk, &c.Start.Chunk, &c.Start.Offset, &claims)
		if errors.Is(err, sql.ErrNoRows) {
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1 FROM jobs WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return notFound(id)
			} else if err != nil {
				return fmt.Errorf("job %s: claim: %w", id, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("job %s: claim: %w", id, err)
		}
		c.Job, c.Owner, c.Until, c.Redone, ok = id, owner, fromMicros(micros(until)), claims > 1, true
		return nil
	})
	if err != nil || !ok {
		return jobs.Claim{}, false, err
	}
	return c, true, nil
}

// Renew extends owner's unexpired lease.
func (s *SQLite) Renew(ctx context.Context, id string, chunk int, owner string, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("job %s chunk %d: renew: lease %v: want > 0", id, chunk, lease)
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		now := s.now()
		res, err := tx.ExecContext(ctx, `UPDATE job_chunks SET lease_until = ?
			WHERE job = ? AND idx = ? AND state = 'leased' AND owner = ? AND lease_until > ?`,
			micros(now.Add(lease)), id, chunk, owner, micros(now))
		if err != nil {
			return fmt.Errorf("job %s chunk %d: renew: %w", id, chunk, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM job_chunks WHERE job = ? AND idx = ?`, id, chunk).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return chunkNotFound(id, chunk)
		}
		if err != nil {
			return fmt.Errorf("job %s chunk %d: renew: %w", id, chunk, err)
		}
		return leaseLost(id, chunk, owner)
	})
}

// Complete marks owner's chunk done and adds its counts, once.
func (s *SQLite) Complete(ctx context.Context, id string, chunk int, owner string, r jobs.ChunkResult) error {
	if err := checkResult(id, chunk, r); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		var state, holder string
		var claims int
		err := tx.QueryRowContext(ctx, `SELECT state, owner, claims FROM job_chunks WHERE job = ? AND idx = ?`, id, chunk).Scan(&state, &holder, &claims)
		if errors.Is(err, sql.ErrNoRows) {
			return chunkNotFound(id, chunk)
		}
		if err != nil {
			return fmt.Errorf("job %s chunk %d: complete: %w", id, chunk, err)
		}
		d, err := decideComplete(state, holder, owner, claims, r)
		if err != nil || d.noop {
			if err != nil {
				return leaseLost(id, chunk, owner)
			}
			return nil
		}
		var have string
		if err := tx.QueryRowContext(ctx, `SELECT errors FROM jobs WHERE id = ?`, id).Scan(&have); err != nil {
			return fmt.Errorf("job %s chunk %d: complete: %w", id, chunk, err)
		}
		kept, err := addErrors(have, r.Errors)
		if err != nil {
			return fmt.Errorf("job %s chunk %d: complete: %w", id, chunk, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE job_chunks SET state = 'done', n_rows = ?, n_failed = ? WHERE job = ? AND idx = ?`,
			r.Rows, r.Failed, id, chunk); err != nil {
			return fmt.Errorf("job %s chunk %d: complete: %w", id, chunk, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET rows_done = rows_done + ?, rows_failed = rows_failed + ?, rows_redone = rows_redone + ?,
			chunks_done = chunks_done + 1, errors = ?, updated = ? WHERE id = ?`,
			r.Rows, r.Failed, d.redone, kept, micros(s.now()), id); err != nil {
			return fmt.Errorf("job %s chunk %d: complete: %w", id, chunk, err)
		}
		return nil
	})
}

// SetState moves a job from one of from to to.
func (s *SQLite) SetState(ctx context.Context, id string, from []jobs.State, to jobs.State, message string, incomplete bool) (bool, error) {
	if err := checkState(id, to); err != nil {
		return false, err
	}
	var ok bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		var state jobs.State
		var started, finished int64
		err := tx.QueryRowContext(ctx, `SELECT state, started, finished FROM jobs WHERE id = ?`, id).Scan(&state, &started, &finished)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return fmt.Errorf("job %s: set state: %w", id, err)
		}
		if !containsState(from, state) {
			return nil
		}
		now := micros(s.now())
		started, finished = stateTimes(to, started, finished, now)
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, message = ?, incomplete = ?, started = ?, finished = ?, updated = ? WHERE id = ?`,
			string(to), clip(message, maxMessageBytes), incomplete, started, finished, now, id); err != nil {
			return fmt.Errorf("job %s: set state: %w", id, err)
		}
		ok = true
		return nil
	})
	return ok, err
}

// RequestCancel sets CancelRequested on a job not final.
func (s *SQLite) RequestCancel(ctx context.Context, id string) (jobs.Job, error) {
	if _, err := s.db.ExecContext(ctx, `UPDATE jobs SET cancel_requested = 1, updated = ?
		WHERE id = ? AND cancel_requested = 0 AND state IN ('queued', 'running')`, micros(s.now()), id); err != nil {
		return jobs.Job{}, fmt.Errorf("job %s: request cancel: %w", id, err)
	}
	return s.Get(ctx, id)
}

// Runnable lists queued and running jobs, oldest first.
func (s *SQLite) Runnable(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM jobs WHERE state IN ('queued', 'running') ORDER BY seq LIMIT ?`, limitOf(limit))
	if err != nil {
		return nil, fmt.Errorf("jobs: runnable: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("jobs: runnable: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("jobs: runnable: %w", err)
	}
	return out, nil
}
