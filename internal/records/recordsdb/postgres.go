package recordsdb

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluiceml/sluice/internal/pgdb"
	"github.com/sluiceml/sluice/internal/records"
)

// Postgres is the records Store in a PostgreSQL database that several
// gateways share (the same database as the registry, tables of its own).
// Each gateway's Writer gets a range of row ids of its own (RowBase), so
// their inserts never collide. Filter.Models keeps path.Match semantics:
// the models a glob may select are read from record_models (one row per
// model ever recorded, written with the records) and matched in Go, so
// the database compares plain names.
type Postgres struct {
	pool    *pgxpool.Pool
	durable bool
	url     string // redacted, for messages
}

var (
	_ records.Store     = (*Postgres)(nil)
	_ records.RowRanger = (*Postgres)(nil)
)

// pgMigrations are the records' schema versions, applied in order.
var pgMigrations = []pgdb.Migration{
	{Version: 1, SQL: `
CREATE TABLE records (
  id         BIGINT           PRIMARY KEY,
  request_id TEXT             NOT NULL,
  tenant     TEXT             NOT NULL,
  model      TEXT             NOT NULL,
  version    INTEGER          NOT NULL,
  latency_ms DOUBLE PRECISION NOT NULL,
  outcome    TEXT             NOT NULL,
  input_hash TEXT             NOT NULL,
  created_at BIGINT           NOT NULL, -- unix microseconds
  attempts   INTEGER          NOT NULL,
  input      BYTEA
);
-- As in SQLite: no (tenant, request_id) or model index, every index costs
-- each insert; listings walk records_created newest first.
CREATE INDEX records_created ON records (created_at, id);
CREATE TABLE record_models (
  model TEXT PRIMARY KEY
);
CREATE TABLE replays (
  tenant     TEXT    NOT NULL,
  request_id TEXT    NOT NULL,
  row_id     BIGINT  NOT NULL, -- records.id of the record
  key        TEXT    NOT NULL,
  status     INTEGER NOT NULL,
  answer     BYTEA,            -- NULL: the answer was over MaxReplayBytes
  until      BIGINT  NOT NULL, -- unix microseconds
  PRIMARY KEY (tenant, request_id)
);
CREATE INDEX replays_until ON replays (until);
-- Each writer's row ids start at nextval << 40: 2^40 records per gateway
-- start, 2^23 starts.
CREATE SEQUENCE records_writer_range START 1;
`},
	// 2: the instances answered from the prediction cache (issue 19).
	{Version: 2, SQL: `ALTER TABLE records ADD COLUMN cached INTEGER NOT NULL DEFAULT 0;`},
	{Version: 3, SQL: `ALTER TABLE records ADD COLUMN features BYTEA;`},
	// 4: the answer the caller got (issue 22).
	{Version: 4, SQL: `ALTER TABLE records ADD COLUMN outputs BYTEA;`},
}

// PostgresMigrations is how many records schema versions this binary
// knows.
func PostgresMigrations() int { return len(pgMigrations) }

// OpenPostgres connects to the database at url and applies the records'
// migrations. durable makes every commit wait for the database's disk
// (synchronous_commit on, PostgreSQL's default); without it the writer's
// transactions use synchronous_commit=off, as SQLite's async mode uses
// synchronous=NORMAL.
func OpenPostgres(ctx context.Context, url string, durable bool) (*Postgres, error) {
	pool, err := pgdb.OpenMigrated(ctx, url, "records", pgMigrations)
	if err != nil {
		return nil, err
	}
	return &Postgres{pool: pool, durable: durable, url: pgdb.Redact(url)}, nil
}

// Close closes the connection pool.
func (s *Postgres) Close() error { s.pool.Close(); return nil }

// op bounds a call's wait for the database (pgdb.Op): a store that stops
// answering fails the batch (counted, as any failed write) instead of
// holding the writer.
var op = pgdb.Op

// rangeBits is the width of each writer's row id range.
const rangeBits = 40

// RowBase hands a writer a range of row ids no other writer uses.
func (s *Postgres) RowBase(ctx context.Context) (int64, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT nextval('records_writer_range')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("records: reserve row ids: %w", err)
	}
	return n << rangeBits, nil
}

// Write runs ops in order in one transaction.
func (s *Postgres) Write(ctx context.Context, ops []records.Op) error {
	if len(ops) == 0 {
		return nil
	}
	ctx, cancel := op(ctx)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("records: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if !s.durable {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return fmt.Errorf("records: begin: %w", err)
		}
	}
	// Rows the store picks (Row 0) follow the largest in use, under a lock.
	var picked int64
	for _, o := range ops {
		if !o.Bump && o.Row <= 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('sluice records: pick rows'))`); err != nil {
				return fmt.Errorf("records: pick rows: %w", err)
			}
			if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(id), 0) FROM records`).Scan(&picked); err != nil {
				return fmt.Errorf("records: pick rows: %w", err)
			}
			break
		}
	}
	for i := 0; i < len(ops); {
		o := ops[i]
		if o.Bump {
			var err error
			if o.Row > 0 {
				_, err = tx.Exec(ctx, `UPDATE records SET attempts = attempts + 1 WHERE id = $1`, o.Row)
			} else {
				_, err = tx.Exec(ctx, `UPDATE records SET attempts = attempts + 1 WHERE tenant = $1 AND request_id = $2`, o.Record.Tenant, o.Record.RequestID)
			}
			if err != nil {
				return fmt.Errorf("records: bump attempts of %s: %w", o.Record.RequestID, err)
			}
			i++
			continue
		}
		j := i
		for j < len(ops) && !ops[j].Bump {
			j++
		}
		if err := s.insertRun(ctx, tx, ops[i:j], &picked); err != nil {
			return err
		}
		i = j
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("records: commit: %w", err)
	}
	return nil
}

// insertRun inserts a run of records in one statement (arrays unnested:
// one round trip however many rows), their models, then their replays.
func (s *Postgres) insertRun(ctx context.Context, tx pgx.Tx, run []records.Op, picked *int64) error {
	n := len(run)
	var (
		ids                             = make([]int64, n)
		reqs, tenants, models, outcomes = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		hashes                          = make([]string, n)
		versions, attempts, cached      = make([]int32, n), make([]int32, n), make([]int32, n)
		lat                             = make([]float64, n)
		created                         = make([]int64, n)
		inputs, feats, outs             = make([][]byte, n), make([][]byte, n), make([][]byte, n)
	)
	seen := map[string]bool{}
	var newModels []string
	for k, o := range run {
		r := o.Record
		id := o.Row
		if id <= 0 {
			*picked++
			id = *picked
		}
		if o.Record.Saved != nil && o.Row <= 0 {
			return fmt.Errorf("records: insert %s: a record with a saved answer needs its row", r.RequestID)
		}
		at := r.Attempts
		if at < 1 {
			at = 1
		}
		c := r.CreatedAt
		if c.IsZero() {
			c = time.Now()
		}
		ids[k], reqs[k], tenants[k], models[k], outcomes[k], hashes[k] = id, r.RequestID, r.Tenant, r.Model, r.Outcome, r.InputHash
		versions[k], attempts[k], lat[k], created[k], inputs[k] = int32(r.Version), int32(at), r.LatencyMs, c.UnixMicro(), r.Input
		cached[k] = int32(min(max(r.Cached, 0), 1<<31-1))
		feats[k], outs[k] = r.Features, r.Outputs
		if !seen[r.Model] {
			seen[r.Model] = true
			newModels = append(newModels, r.Model)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO records (id, request_id, tenant, model, version, latency_ms, outcome, input_hash, created_at, attempts, input, cached, features, outputs)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int[], $6::float8[], $7::text[], $8::text[], $9::bigint[], $10::int[], $11::bytea[], $12::int[], $13::bytea[], $14::bytea[])`,
		ids, reqs, tenants, models, versions, lat, outcomes, hashes, created, attempts, inputs, cached, feats, outs); err != nil {
		return fmt.Errorf("records: insert %s: %w", run[0].Record.RequestID, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO record_models (model) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, newModels); err != nil {
		return fmt.Errorf("records: insert %s: %w", run[0].Record.RequestID, err)
	}
	for k, o := range run {
		r := o.Record
		if r.Saved == nil {
			continue
		}
		sv := r.Saved
		var answer []byte
		if sv.Answer != nil {
			answer = sv.Answer
		}
		if _, err := tx.Exec(ctx, `INSERT INTO replays (tenant, request_id, row_id, key, status, answer, until) VALUES ($1,$2,$3,$4,$5,$6,$7)
			ON CONFLICT (tenant, request_id) DO UPDATE SET row_id=excluded.row_id, key=excluded.key, status=excluded.status, answer=excluded.answer, until=excluded.until`,
			r.Tenant, r.RequestID, ids[k], sv.Key, sv.Status, answer, sv.Until.UnixMicro()); err != nil {
			return fmt.Errorf("records: keep the answer of %s: %w", r.RequestID, err)
		}
	}
	return nil
}

// List returns the records f selects, newest first.
func (s *Postgres) List(ctx context.Context, f records.Filter) ([]records.Record, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", fmt.Sprintf("$%d", len(args))))
	}
	if f.Tenant != "" {
		add("tenant = ?", f.Tenant)
	}
	if f.RequestID != "" {
		add("request_id = ?", f.RequestID)
	}
	if f.Model != "" {
		add("model = ?", f.Model)
	}
	if f.Version != 0 {
		add("version = ?", f.Version)
	}
	if f.Outcome != "" {
		add("outcome = ?", f.Outcome)
	}
	if !f.Since.IsZero() {
		add("created_at >= ?", f.Since.UnixMicro())
	}
	if f.Models != nil {
		names, err := s.matchModels(ctx, f.Models)
		if err != nil {
			return nil, err
		}
		if len(names) == 0 {
			return nil, nil
		}
		add("model = ANY(?)", names)
	}
	if b := f.Before; b != nil {
		at := b.CreatedAt.UnixMicro()
		args = append(args, at, b.Row)
		where = append(where, fmt.Sprintf("(created_at < $%d OR (created_at = $%d AND id < $%d))", len(args)-1, len(args)-1, len(args)))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = records.DefaultLimit
	}
	if limit > records.MaxLimit {
		limit = records.MaxLimit
	}
	q := `SELECT id, request_id, tenant, model, version, latency_ms, outcome, input_hash, created_at, attempts, input, cached, features, outputs FROM records`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	q += fmt.Sprintf(" ORDER BY created_at DESC, id DESC LIMIT $%d", len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("records: list: %w", err)
	}
	defer rows.Close()
	var out []records.Record
	maxBytes, size := f.MaxBytesOf(), int64(0)
	for rows.Next() {
		var r records.Record
		var created int64
		if err := rows.Scan(&r.Row, &r.RequestID, &r.Tenant, &r.Model, &r.Version, &r.LatencyMs, &r.Outcome, &r.InputHash, &created, &r.Attempts, &r.Input, &r.Cached, &r.Features, &r.Outputs); err != nil {
			return nil, fmt.Errorf("records: list: %w", err)
		}
		r.CreatedAt = time.UnixMicro(created).UTC()
		out = append(out, r)
		if size += r.Bytes(); size > maxBytes {
			break // past the page's bytes (Filter.MaxBytes): the caller sees there is more
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("records: list: %w", err)
	}
	return out, nil
}

// matchModels returns the recorded models that one of globs matches
// (path.Match; a malformed glob matches nothing, as in SQLite).
func (s *Postgres) matchModels(ctx context.Context, globs []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT model FROM record_models`)
	if err != nil {
		return nil, fmt.Errorf("records: list: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, fmt.Errorf("records: list: %w", err)
		}
		for _, g := range globs {
			if ok, _ := path.Match(g, m); ok {
				out = append(out, m)
				break
			}
		}
	}
	return out, rows.Err()
}

// DeleteBefore deletes records created before t and says how many.
func (s *Postgres) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM records WHERE created_at < $1`, t.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("records: delete before %s: %w", t.Format(time.RFC3339), err)
	}
	return tag.RowsAffected(), nil
}

// MaxRow returns the largest row id in use.
func (s *Postgres) MaxRow(ctx context.Context) (int64, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(id), 0) FROM records`).Scan(&id)
	return id, err
}

// Lookup returns tenant's saved answer of requestID whose window has not
// ended at now, or nil. Readers never wait for writers in PostgreSQL.
func (s *Postgres) Lookup(ctx context.Context, tenant, requestID string, now time.Time) (*records.Found, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	var k records.Found
	var until int64
	err := s.pool.QueryRow(ctx, `SELECT row_id, key, status, answer, until FROM replays WHERE tenant = $1 AND request_id = $2 AND until > $3`,
		tenant, requestID, now.UnixMicro()).Scan(&k.Row, &k.Key, &k.Status, &k.Answer, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("records: look up request id %s: %w", requestID, err)
	}
	k.Until = time.UnixMicro(until).UTC()
	return &k, nil
}

// ExpireReplays deletes replays whose window ended before now.
func (s *Postgres) ExpireReplays(ctx context.Context, now time.Time) (int64, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM replays WHERE until < $1`, now.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("records: delete replays that ended before %s: %w", now.Format(time.RFC3339), err)
	}
	return tag.RowsAffected(), nil
}

// String names the store, its password redacted.
func (s *Postgres) String() string { return "PostgreSQL " + s.url }
