package jobsdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
	"github.com/sluiceml/sluice/internal/pgdb"
)

// Postgres is the jobs' store in the PostgreSQL database the gateways
// share (--store; tables of its own). A claim is one UPDATE of the row
// that a FOR UPDATE SKIP LOCKED subquery picked: runners claiming at once
// each get another chunk and never wait on each other's row.
type Postgres struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

var _ jobs.Store = (*Postgres)(nil)

// pgMigrations are the jobs' schema versions, applied in order.
var pgMigrations = []pgdb.Migration{
	{Version: 1, SQL: `
CREATE TABLE jobs (
  seq              BIGINT  GENERATED ALWAYS AS IDENTITY UNIQUE, -- creation order
  id               TEXT    PRIMARY KEY,
  tenant           TEXT    NOT NULL,
  spec             TEXT    NOT NULL,  -- jobs.Spec as JSON
  state            TEXT    NOT NULL,
  scanned          BOOLEAN NOT NULL DEFAULT false,
  rows_total       BIGINT  NOT NULL DEFAULT 0,
  rows_done        BIGINT  NOT NULL DEFAULT 0,
  rows_failed      BIGINT  NOT NULL DEFAULT 0,
  rows_redone      BIGINT  NOT NULL DEFAULT 0,
  chunks_total     INTEGER NOT NULL DEFAULT 0,
  chunks_done      INTEGER NOT NULL DEFAULT 0,
  errors           TEXT    NOT NULL DEFAULT '[]', -- the first jobs.MaxErrorsKept, JSON
  message          TEXT    NOT NULL DEFAULT '',
  incomplete       BOOLEAN NOT NULL DEFAULT false,
  cancel_requested BOOLEAN NOT NULL DEFAULT false,
  created          BIGINT  NOT NULL,  -- unix microseconds; 0: not yet
  started          BIGINT  NOT NULL DEFAULT 0,
  finished         BIGINT  NOT NULL DEFAULT 0,
  updated          BIGINT  NOT NULL
);
CREATE INDEX jobs_state ON jobs (state, seq);
CREATE INDEX jobs_tenant ON jobs (tenant, seq);
CREATE TABLE job_chunks (
  job         TEXT    NOT NULL, -- jobs.id (no foreign key: a check per row would slow the COPY of a scan)
  idx         INTEGER NOT NULL,
  start_chunk INTEGER NOT NULL,
  off         BIGINT  NOT NULL,
  state       TEXT    NOT NULL DEFAULT 'pending', -- pending, leased, done
  owner       TEXT    NOT NULL DEFAULT '',
  lease_until BIGINT  NOT NULL DEFAULT 0,         -- unix microseconds
  claims      INTEGER NOT NULL DEFAULT 0,
  n_rows      BIGINT  NOT NULL DEFAULT 0,
  n_failed    BIGINT  NOT NULL DEFAULT 0,
  PRIMARY KEY (job, idx)
);
CREATE INDEX job_chunks_open ON job_chunks (job, idx) WHERE state <> 'done';
`},
}

// OpenPostgres connects to the database at url and brings the jobs'
// tables to the newest schema.
func OpenPostgres(ctx context.Context, url string, o Options) (*Postgres, error) {
	o = o.withDefaults()
	pool, err := pgdb.OpenMigrated(ctx, url, "jobs", pgMigrations)
	if err != nil {
		return nil, err
	}
	return &Postgres{pool: pool, now: o.Now}, nil
}

// Close closes the pool.
func (s *Postgres) Close() error {
	s.pool.Close()
	return nil
}

// write runs f in a transaction and commits it.
func (s *Postgres) write(ctx context.Context, f func(tx pgx.Tx) error) error {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("jobs: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("jobs: commit: %w", err)
	}
	return nil
}

// Create adds a job in state Queued.
func (s *Postgres) Create(ctx context.Context, j jobs.Job) error {
	nj, spec, err := newJob(j, s.now())
	if err != nil {
		return err
	}
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `INSERT INTO jobs (id, tenant, spec, state, created, updated) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
		nj.ID, nj.Spec.Tenant, spec, string(nj.State), micros(nj.Created), micros(nj.Updated))
	if err != nil {
		return fmt.Errorf("job %s: create: %w", nj.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("job %s: %w", nj.ID, jobs.ErrExists)
	}
	return nil
}

// Get returns a job.
func (s *Postgres) Get(ctx context.Context, id string) (jobs.Job, error) {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return jobs.Job{}, notFound(id)
	}
	if err != nil {
		return jobs.Job{}, fmt.Errorf("job %s: get: %w", id, err)
	}
	return j, nil
}

// List returns jobs, newest first.
func (s *Postgres) List(ctx context.Context, o jobs.ListOptions) ([]jobs.Job, error) {
	if err := checkList(o); err != nil {
		return nil, err
	}
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	before := int64(-1)
	if o.Before != "" {
		err := s.pool.QueryRow(ctx, `SELECT seq FROM jobs WHERE id = $1`, o.Before).Scan(&before)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("jobs: list before %s: %w", o.Before, jobs.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("jobs: list: %w", err)
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+jobCols+` FROM jobs
		WHERE ($1 = '' OR tenant = $1) AND ($2 = '' OR state = $2) AND ($3 < 0 OR seq < $3)
		ORDER BY seq DESC LIMIT $4`,
		o.Tenant, string(o.State), before, limitOf(o.Limit))
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

// SetScan records the input's scan once, its chunks by COPY within the
// transaction that marks the job scanned (the job's row locked: a second
// scanner waits, then finds it scanned).
func (s *Postgres) SetScan(ctx context.Context, id string, rows int64, chunks []jobio.Start, errs []jobs.RowError) error {
	if _, ok := ctx.Deadline(); !ok {
		// A million chunks take seconds, more than pgdb.OpTimeout allows
		// one statement; still bounded.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, scanTimeout)
		defer cancel()
	}
	return s.write(ctx, func(tx pgx.Tx) error {
		var scanned bool
		var have string
		err := tx.QueryRow(ctx, `SELECT scanned, errors FROM jobs WHERE id = $1 FOR UPDATE`, id).Scan(&scanned, &have)
		if errors.Is(err, pgx.ErrNoRows) {
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
		i := 0
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(chunks) {
				return nil, nil
			}
			c := chunks[i]
			i++
			return []any{id, int32(i - 1), int32(c.Chunk), c.Offset}, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"job_chunks"}, []string{"job", "idx", "start_chunk", "off"}, src); err != nil {
			return fmt.Errorf("job %s: set scan: copy chunks: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET scanned = true, rows_total = $1, chunks_total = $2, errors = $3, updated = $4 WHERE id = $5`,
			rows, len(chunks), kept, micros(s.now()), id); err != nil {
			return fmt.Errorf("job %s: set scan: %w", id, err)
		}
		return nil
	})
}

// scanTimeout bounds SetScan when its caller set no deadline.
const scanTimeout = 2 * time.Minute

// Claim leases the lowest claimable chunk of the shard.
func (s *Postgres) Claim(ctx context.Context, id, owner string, shard, shards int, lease time.Duration) (jobs.Claim, bool, error) {
	if err := checkClaim(shard, shards, lease); err != nil {
		return jobs.Claim{}, false, err
	}
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	now := s.now()
	until := now.Add(lease)
	c := jobs.Claim{Job: id, Owner: owner, Until: fromMicros(micros(until))}
	var claims int
	// The outer WHERE repeats the claimable test: the row the subquery
	// locked is checked again as it is now.
	err := s.pool.QueryRow(ctx, `UPDATE job_chunks SET state = 'leased', owner = $1, lease_until = $2, claims = claims + 1
		WHERE (job, idx) = (SELECT job, idx FROM job_chunks
			WHERE job = $3 AND state <> 'done' AND (state = 'pending' OR lease_until <= $4) AND idx % $5 = $6
			ORDER BY idx LIMIT 1 FOR UPDATE SKIP LOCKED)
		AND state <> 'done' AND (state = 'pending' OR lease_until <= $4)
		RETURNING idx, start_chunk, off, claims`,
		owner, micros(until), id, micros(now), shards, shard).Scan(&c.Chunk, &c.Start.Chunk, &c.Start.Offset, &claims)
	if errors.Is(err, pgx.ErrNoRows) {
		var one int
		if err := s.pool.QueryRow(ctx, `SELECT 1 FROM jobs WHERE id = $1`, id).Scan(&one); errors.Is(err, pgx.ErrNoRows) {
			return jobs.Claim{}, false, notFound(id)
		} else if err != nil {
			return jobs.Claim{}, false, fmt.Errorf("job %s: claim: %w", id, err)
		}
		return jobs.Claim{}, false, nil
	}
	if err != nil {
		return jobs.Claim{}, false, fmt.Errorf("job %s: claim: %w", id, err)
	}
	c.Redone = claims > 1
	return c, true, nil
}

// Renew extends owner's unexpired lease.
func (s *Postgres) Renew(ctx context.Context, id string, chunk int, owner string, lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("job %s chunk %d: renew: lease %v: want > 0", id, chunk, lease)
	}
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	now := s.now()
	tag, err := s.pool.Exec(ctx, `UPDATE job_chunks SET lease_until = $1
		WHERE job = $2 AND idx = $3 AND state = 'leased' AND owner = $4 AND lease_until > $5`,
		micros(now.Add(lease)), id, chunk, owner, micros(now))
	if err != nil {
		return fmt.Errorf("job %s chunk %d: renew: %w", id, chunk, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var one int
	err = s.pool.QueryRow(ctx, `SELECT 1 FROM job_chunks WHERE job = $1 AND idx = $2`, id, chunk).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return chunkNotFound(id, chunk)
	}
	if err != nil {
		return fmt.Errorf("job %s chunk %d: renew: %w", id, chunk, err)
	}
	return leaseLost(id, chunk, owner)
}

// Complete marks owner's chunk done and adds its counts, once (the
// chunk's row locked, then the job's).
func (s *Postgres) Complete(ctx context.Context, id string, chunk int, owner string, r jobs.ChunkResult) error {
	if err := checkResult(id, chunk, r); err != nil {
		return err
	}
	return s.write(ctx, func(tx pgx.Tx) error {
		var state, holder string
		var claims int
		err := tx.QueryRow(ctx, `SELECT state, owner, claims FROM job_chunks WHERE job = $1 AND idx = $2 FOR UPDATE`, id, chunk).Scan(&state, &holder, &claims)
		if errors.Is(err, pgx.ErrNoRows) {
			return chunkNotFound(id, chunk)
		}
		if err != nil {
			return fmt.Errorf("job %s chunk %d: complete: %w", id, chunk, err)
		}
		d, err := decideComplete(state, holder, owner, claims, r)
		if err != nil {
			return leaseLost(id, chunk, owner)
		}
		if d.noop {
			return nil
		}
		var have string
		if err := tx.QueryRow(ctx, `SELECT errors FROM jobs WHERE id = $1 FOR UPDATE`, id).Scan(&have); err != nil {
			return fmt.Errorf("job %s chunk %d: complete: %w", id, chunk, err)
		}
		kept, err := addErrors(have, r.Errors)
		if err != nil {
			return fmt.Errorf("job %s chunk %d: complete: %w", id, chunk, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE job_chunks SET state = 'done', n_rows = $1, n_failed = $2 WHERE job = $3 AND idx = $4`,
			r.Rows, r.Failed, id, chunk); err != nil {
			return fmt.Errorf("job %s chunk %d: complete: %w", id, chunk, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET rows_done = rows_done + $1, rows_failed = rows_failed + $2, rows_redone = rows_redone + $3,
			chunks_done = chunks_done + 1, errors = $4, updated = $5 WHERE id = $6`,
			r.Rows, r.Failed, d.redone, kept, micros(s.now()), id); err != nil {
			return fmt.Errorf("job %s chunk %d: complete: %w", id, chunk, err)
		}
		return nil
	})
}

// SetState moves a job from one of from to to.
func (s *Postgres) SetState(ctx context.Context, id string, from []jobs.State, to jobs.State, message string, incomplete bool) (bool, error) {
	if err := checkState(id, to); err != nil {
		return false, err
	}
	var ok bool
	err := s.write(ctx, func(tx pgx.Tx) error {
		var state string
		var started, finished int64
		err := tx.QueryRow(ctx, `SELECT state, started, finished FROM jobs WHERE id = $1 FOR UPDATE`, id).Scan(&state, &started, &finished)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return fmt.Errorf("job %s: set state: %w", id, err)
		}
		if !containsState(from, jobs.State(state)) {
			return nil
		}
		now := micros(s.now())
		started, finished = stateTimes(to, started, finished, now)
		if _, err := tx.Exec(ctx, `UPDATE jobs SET state = $1, message = $2, incomplete = $3, started = $4, finished = $5, updated = $6 WHERE id = $7`,
			string(to), clip(message, maxMessageBytes), incomplete, started, finished, now, id); err != nil {
			return fmt.Errorf("job %s: set state: %w", id, err)
		}
		ok = true
		return nil
	})
	return ok, err
}

// RequestCancel sets CancelRequested on a job not final.
func (s *Postgres) RequestCancel(ctx context.Context, id string) (jobs.Job, error) {
	octx, cancel := pgdb.Op(ctx)
	defer cancel()
	if _, err := s.pool.Exec(octx, `UPDATE jobs SET cancel_requested = true, updated = $1
		WHERE id = $2 AND NOT cancel_requested AND state IN ('queued', 'running')`, micros(s.now()), id); err != nil {
		return jobs.Job{}, fmt.Errorf("job %s: request cancel: %w", id, err)
	}
	return s.Get(ctx, id)
}

// Runnable lists queued and running jobs, oldest first.
func (s *Postgres) Runnable(ctx context.Context, limit int) ([]string, error) {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id FROM jobs WHERE state IN ('queued', 'running') ORDER BY seq LIMIT $1`, limitOf(limit))
	if err != nil {
		return nil, fmt.Errorf("jobs: runnable: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("jobs: runnable: %w", err)
	}
	return ids, nil
}
