package registry

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/pgdb"
)

// Postgres is the Store for several gateways sharing one PostgreSQL
// database: metadata in its tables, artifacts in an Artifacts (a Dir under
// the data directory unless another store is given). Times are stored as
// unix microseconds, as in SQLite, so both keep the same precision.
//
// Writes that change what gateways route (a new version, a policy, a
// rollout state) also bump the counter in sluice_changes and NOTIFY
// ChangesChannel in their transaction: WatchChanges tells the other
// gateways. Version numbers and policy versions are assigned under a
// per-model transaction-level advisory lock, so two gateways publishing or
// changing the same model at once get consecutive numbers instead of a
// conflict.
type Postgres struct {
	Artifacts // where Publish stores and File reads artifact bytes
	pool      *pgxpool.Pool
	url       string // redacted, for messages
	// Logger, when set, gets WatchChanges' reports: the database became
	// unreachable, or answers again.
	Logger *slog.Logger

	publishing holds // artifacts stored by publishes under way in this process
}

var (
	_ Store   = (*Postgres)(nil)
	_ Changes = (*Postgres)(nil)
)

// ChangesChannel is the NOTIFY channel of registry changes; the payload is
// the new value of the change counter.
const ChangesChannel = "sluice_registry_changes"

// pgMigrations are the registry's schema versions, applied in order.
var pgMigrations = []pgdb.Migration{
	{Version: 1, SQL: `
CREATE TABLE versions (
  model          TEXT    NOT NULL,
  version        INTEGER NOT NULL,
  digest         TEXT    NOT NULL,
  artifact_sha   TEXT    NOT NULL,
  artifact_bytes BIGINT  NOT NULL,
  runtime        TEXT    NOT NULL,
  input_schema   TEXT    NOT NULL,
  output_schema  TEXT    NOT NULL,
  manifest       BYTEA   NOT NULL,
  created_at     BIGINT  NOT NULL,
  state          TEXT    NOT NULL,
  reason         TEXT    NOT NULL DEFAULT '',
  load_us        BIGINT  NOT NULL DEFAULT 0,
  golden_us      BIGINT  NOT NULL DEFAULT 0,
  warmup_us      BIGINT  NOT NULL DEFAULT 0,
  stated_at      BIGINT  NOT NULL DEFAULT 0,
  PRIMARY KEY (model, version),
  UNIQUE (model, digest)
);
CREATE INDEX versions_artifact ON versions (artifact_sha);
CREATE TABLE files (
  model   TEXT    NOT NULL,
  version INTEGER NOT NULL,
  name    TEXT    NOT NULL,
  sha     TEXT    NOT NULL,
  PRIMARY KEY (model, version, name)
);
CREATE INDEX files_sha ON files (sha);
CREATE TABLE policies (
  model      TEXT    NOT NULL,
  version    INTEGER NOT NULL,
  targets    TEXT    NOT NULL,
  created_at BIGINT  NOT NULL,
  actor      TEXT    NOT NULL,
  reason     TEXT    NOT NULL,
  diff       TEXT    NOT NULL,
  PRIMARY KEY (model, version)
);
CREATE INDEX policies_model_at ON policies (model, created_at);
CREATE TABLE audit (
  id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  model      TEXT    NOT NULL,
  at         BIGINT  NOT NULL,
  actor      TEXT    NOT NULL,
  action     TEXT    NOT NULL,
  what       TEXT    NOT NULL,
  reason     TEXT    NOT NULL
);
CREATE INDEX audit_model_id ON audit (model, id);
CREATE TABLE rollouts (
  model      TEXT    PRIMARY KEY,
  state      TEXT    NOT NULL,
  updated_at BIGINT  NOT NULL
);
CREATE TABLE sluice_changes (
  id  INTEGER PRIMARY KEY CHECK (id = 1),
  seq BIGINT  NOT NULL
);
INSERT INTO sluice_changes (id, seq) VALUES (1, 0);
`},
}

// PostgresMigrations is how many registry schema versions this binary
// knows.
func PostgresMigrations() int { return len(pgMigrations) }

// OpenPostgres connects to the database at url (its password from the URL
// or PGPASSWORD), applies the registry's migrations and keeps artifacts in
// art. A schema newer than this binary knows is refused
// (*pgdb.NewerSchemaError).
func OpenPostgres(ctx context.Context, url string, art Artifacts) (*Postgres, error) {
	pool, err := pgdb.OpenMigrated(ctx, url, "registry", pgMigrations)
	if err != nil {
		return nil, err
	}
	return &Postgres{Artifacts: art, pool: pool, url: pgdb.Redact(url)}, nil
}

// Close closes the connection pool.
func (s *Postgres) Close() error { s.pool.Close(); return nil }

// op bounds every statement's wait for the database (pgdb.Op), so a store
// that stops answering makes calls fail (503) instead of hang.
var op = pgdb.Op

// pgErr is the coded error of a failed database call: unavailable (503,
// Retry-After) naming the store, the cause kept for the log.
func pgErr(err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	if pgdb.DiskFull(err) {
		return &errs.Error{Code: errs.Unavailable, Message: "metadata store (PostgreSQL) unavailable: its disk is full; free space on the database server, then try again", Err: err, RetryAfter: 30 * time.Second}
	}
	if !pgdb.Unavailable(err) {
		// The database answered but refused the statement: a bug or a
		// schema changed by hand, not an outage.
		return &errs.Error{Code: errs.Internal, Message: "metadata store (PostgreSQL) refused a statement; the server log has the error", Err: err}
	}
	return &errs.Error{Code: errs.Unavailable, Message: "metadata store (PostgreSQL) unavailable; this gateway keeps serving predictions on its last routing snapshot; try the change again when the database is back", Err: err, RetryAfter: 2 * time.Second}
}

// modelLock takes model's advisory lock for the transaction: publishes and
// policy changes of one model are serialized across gateways.
func modelLock(ctx context.Context, tx pgx.Tx, kind, model string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, kind+":"+model)
	return err
}

// bumpChanges counts a change and notifies the other gateways on commit.
func bumpChanges(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `WITH c AS (UPDATE sluice_changes SET seq = seq + 1 WHERE id = 1 RETURNING seq)
		SELECT pg_notify('`+ChangesChannel+`', seq::text) FROM c`)
	return err
}

// shaLock is the advisory lock key of an artifact: its hash's first 8
// bytes. Two hashes sharing a key only make a failed publish keep bytes
// it could have deleted.
func shaLock(sha string) int64 {
	b, err := hex.DecodeString(sha[:16])
	if err != nil || len(b) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// Publish stores the package as the next version of its model, as
// SQLite.Publish does. While it runs, this session holds a shared advisory
// lock on each hash it stores; a failed publish deletes a blob only when it
// gets the exclusive lock (no publish in any gateway is storing it) and no
// version uses it.
func (s *Postgres) Publish(ctx context.Context, p *modelpkg.Package) (v Version, created bool, err error) {
	shas := []string{p.ArtifactSHA}
	if p.ReferenceSHA != "" {
		shas = append(shas, p.ReferenceSHA)
	}
	for _, sha := range shas {
		if err := checkSHA(sha); err != nil {
			return Version{}, false, errs.Wrap(errs.InvalidArgument, err, "publish %s", p.Spec.Manifest.Name)
		}
	}
	actx, cancel := op(ctx)
	conn, err := s.pool.Acquire(actx)
	cancel()
	if err != nil {
		return Version{}, false, pgErr(err)
	}
	if err := s.holdShared(ctx, conn, shas); err != nil {
		conn.Conn().Close(context.Background()) // its locks go with the session
		conn.Release()
		return Version{}, false, pgErr(err)
	}
	s.publishing.hold(shas)
	defer func() { err = s.releasePublish(ctx, conn, shas, err) }()

	name := p.Spec.Manifest.Name
	// Every statement of the publish goes through conn: a publish holds
	// one connection, never waits for a second one.
	existing, derr := s.byDigest(ctx, conn, name, p.Digest)
	if derr != nil && !errors.Is(derr, pgx.ErrNoRows) {
		return Version{}, false, pgErr(derr)
	}
	if err := putBlob(ctx, s.Artifacts, p.ArtifactSHA, p.OpenArtifact); err != nil {
		return Version{}, false, err
	}
	if p.ReferenceSHA != "" {
		if err := putBlob(ctx, s.Artifacts, p.ReferenceSHA, p.OpenReference); err != nil {
			return Version{}, false, err
		}
	}
	if derr == nil {
		return existing, false, nil
	}
	n, err := s.insertVersion(ctx, conn, p)
	if pgdb.UniqueViolation(err) {
		// Another gateway published the same content meanwhile.
		if existing, derr := s.byDigest(ctx, conn, name, p.Digest); derr == nil {
			return existing, false, nil
		}
	}
	if err != nil {
		return Version{}, false, pgErr(err)
	}
	v, err = s.get(ctx, conn, name, n)
	return v, err == nil, err
}

// querier is a pool or one connection of it.
type querier interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Postgres) insertVersion(ctx context.Context, q querier, p *modelpkg.Package) (int, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	tx, err := q.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	name := p.Spec.Manifest.Name
	if err := modelLock(ctx, tx, "version", name); err != nil {
		return 0, err
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version),0)+1 FROM versions WHERE model=$1`, name).Scan(&n); err != nil {
		return 0, err
	}
	now := time.Now().UTC()
	m := p.Spec.Manifest
	if _, err := tx.Exec(ctx, `INSERT INTO versions (model, version, digest, artifact_sha, artifact_bytes, runtime, input_schema, output_schema, manifest, created_at, state, stated_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)`,
		name, n, p.Digest, p.ArtifactSHA, p.ArtifactSize(), m.Runtime, m.Input.Schema, m.Output.Schema, p.ManifestYAML, now.UnixMicro(), string(Published), now.UnixMicro()); err != nil {
		return 0, err
	}
	if p.ReferenceSHA != "" {
		if _, err := tx.Exec(ctx, `INSERT INTO files (model, version, name, sha) VALUES ($1,$2,$3,$4)`, name, n, "drift.reference", p.ReferenceSHA); err != nil {
			return 0, err
		}
	}
	if err := bumpChanges(ctx, tx); err != nil {
		return 0, err
	}
	return n, tx.Commit(ctx)
}

func (s *Postgres) holdShared(ctx context.Context, conn *pgxpool.Conn, shas []string) error {
	ctx, cancel := op(ctx)
	defer cancel()
	for _, sha := range shas {
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, shaLock(sha)); err != nil {
			return err
		}
	}
	return nil
}

// releasePublish ends a publish: it drops the shared locks and, when the
// publish failed, deletes the blobs nobody else is storing or using.
func (s *Postgres) releasePublish(ctx context.Context, conn *pgxpool.Conn, shas []string, perr error) error {
	ctx = context.WithoutCancel(ctx) // a cancelled publish still cleans up
	cctx, cancel := op(ctx)
	defer cancel()
	broken := false
	for _, sha := range shas {
		if _, err := conn.Exec(cctx, `SELECT pg_advisory_unlock_shared($1)`, shaLock(sha)); err != nil {
			broken = true
		}
	}
	// The in-process holds cover two publishes of one gateway that share a
	// session-less moment (the advisory locks are per session, and a
	// session's shared lock does not stop its own exclusive try).
	s.publishing.release(shas, func(sha string) {
		if perr == nil || broken {
			return
		}
		if err := s.deleteUnused(cctx, conn, sha); err != nil {
			perr = errors.Join(perr, StorageError("delete", sha, err))
		}
	})
	if broken {
		conn.Conn().Close(context.Background()) // the pool drops a closed connection; the locks end with it
	}
	conn.Release()
	return perr
}

// deleteUnused deletes blob sha if no publish holds its lock and no
// version names it, under its exclusive lock.
func (s *Postgres) deleteUnused(ctx context.Context, conn *pgxpool.Conn, sha string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return pgErr(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var got bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, shaLock(sha)).Scan(&got); err != nil {
		return pgErr(err)
	}
	if !got {
		return nil // a publish in another gateway is storing it
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT (SELECT COUNT(*) FROM versions WHERE artifact_sha=$1) + (SELECT COUNT(*) FROM files WHERE sha=$1)`, sha).Scan(&n); err != nil {
		return pgErr(err)
	}
	if n > 0 {
		return nil
	}
	if err := s.Delete(ctx, sha); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (s *Postgres) byDigest(ctx context.Context, q querier, model, digest string) (Version, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	return scan(q.QueryRow(ctx, `SELECT `+cols+` FROM versions WHERE model=$1 AND digest=$2`, model, digest))
}

// Get returns model@n.
func (s *Postgres) Get(ctx context.Context, model string, n int) (Version, error) {
	return s.get(ctx, s.pool, model, n)
}

func (s *Postgres) get(ctx context.Context, q querier, model string, n int) (Version, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	v, err := scan(q.QueryRow(ctx, `SELECT `+cols+` FROM versions WHERE model=$1 AND version=$2`, model, n))
	if errors.Is(err, pgx.ErrNoRows) {
		return Version{}, errs.New(errs.NotFound, "model version %s@%d not found", model, n)
	}
	if err != nil {
		return Version{}, pgErr(err)
	}
	return v, nil
}

// List returns every version of every model, by model then version.
func (s *Postgres) List(ctx context.Context) ([]Version, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+cols+` FROM versions ORDER BY model, version`)
	if err != nil {
		return nil, pgErr(err)
	}
	defer rows.Close()
	var out []Version
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, pgErr(err)
		}
		out = append(out, v)
	}
	return out, pgErr(rows.Err())
}

// SetState records a version's load state. Archiving a version (or
// deleting its model) is a change the other gateways follow; the states
// of a load are each gateway's own and notify nobody.
func (s *Postgres) SetState(ctx context.Context, model string, n int, st State, reason string, t Timings) error {
	ctx, cancel := op(ctx)
	defer cancel()
	const q = `UPDATE versions SET state=$1, reason=$2, load_us=$3, golden_us=$4, warmup_us=$5, stated_at=$6 WHERE model=$7 AND version=$8`
	args := []any{string(st), reason, t.Load.Microseconds(), t.Golden.Microseconds(), t.Warmup.Microseconds(), time.Now().UTC().UnixMicro(), model, n}
	if st != Archived && st != Deleted {
		_, err := s.pool.Exec(ctx, q, args...)
		return pgErr(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return pgErr(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, q, args...); err != nil {
		return pgErr(err)
	}
	if err := bumpChanges(ctx, tx); err != nil {
		return pgErr(err)
	}
	return pgErr(tx.Commit(ctx))
}

// File returns a version's extra file, verified against its hash; nil,
// nil when the version has none.
func (s *Postgres) File(ctx context.Context, model string, n int, name string) ([]byte, error) {
	qctx, cancel := op(ctx)
	var sha string
	err := s.pool.QueryRow(qctx, `SELECT sha FROM files WHERE model=$1 AND version=$2 AND name=$3`, model, n, name).Scan(&sha)
	cancel()
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, pgErr(err)
	}
	return ReadArtifact(ctx, s, sha)
}

// SetPolicy stores the next policy version of p.Model and its audit event
// in one transaction, under the model's advisory lock.
func (s *Postgres) SetPolicy(ctx context.Context, p Policy, expect int) (Policy, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Policy{}, pgErr(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := modelLock(ctx, tx, "policy", p.Model); err != nil {
		return Policy{}, pgErr(err)
	}
	var cur int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version),0) FROM policies WHERE model=$1`, p.Model).Scan(&cur); err != nil {
		return Policy{}, pgErr(err)
	}
	if expect >= 0 && cur != expect {
		return Policy{}, errs.New(errs.AlreadyExists, "deployment of %s changed meanwhile (policy version %d, expected %d); read it again", p.Model, cur, expect)
	}
	p.Version = cur + 1
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now().UTC()
	}
	tj, _ := json.Marshal(p.Targets)
	if _, err := tx.Exec(ctx, `INSERT INTO policies (model, version, targets, created_at, actor, reason, diff) VALUES ($1,$2,$3,$4,$5,$6,$7)`,
		p.Model, p.Version, string(tj), p.CreatedAt.UnixMicro(), p.Actor, p.Reason, p.Diff); err != nil {
		return Policy{}, pgErr(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO audit (model, at, actor, action, what, reason) VALUES ($1,$2,$3,$4,$5,$6)`,
		p.Model, p.CreatedAt.UnixMicro(), p.Actor, "policy", p.Diff, p.Reason); err != nil {
		return Policy{}, pgErr(err)
	}
	if err := bumpChanges(ctx, tx); err != nil {
		return Policy{}, pgErr(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Policy{}, pgErr(err)
	}
	return p, nil
}

// Audit records an event that is not a policy change.
func (s *Postgres) Audit(ctx context.Context, e Event) error {
	ctx, cancel := op(ctx)
	defer cancel()
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO audit (model, at, actor, action, what, reason) VALUES ($1,$2,$3,$4,$5,$6)`,
		e.Model, e.At.UnixMicro(), e.Actor, e.Action, e.What, e.Reason)
	return pgErr(err)
}

func (s *Postgres) policies(ctx context.Context, q string, args ...any) ([]Policy, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, pgErr(err)
	}
	defer rows.Close()
	var out []Policy
	for rows.Next() {
		p, err := scanPolicy(rows)
		if err != nil {
			return nil, pgErr(err)
		}
		out = append(out, p)
	}
	return out, pgErr(rows.Err())
}

// Policies returns the policy history of model, oldest first (all models
// when model is "").
func (s *Postgres) Policies(ctx context.Context, model string) ([]Policy, error) {
	if model == "" {
		return s.policies(ctx, `SELECT `+policyCols+` FROM policies ORDER BY model, version`)
	}
	return s.policies(ctx, `SELECT `+policyCols+` FROM policies WHERE model=$1 ORDER BY version`, model)
}

// Current returns the policy in force of every model, by model.
func (s *Postgres) Current(ctx context.Context) ([]Policy, error) {
	return s.policies(ctx, `SELECT DISTINCT ON (model) `+policyCols+` FROM policies ORDER BY model, version DESC`)
}

// PolicyPage returns at most limit policies of model with a version above
// after, oldest first.
func (s *Postgres) PolicyPage(ctx context.Context, model string, after, limit int) ([]Policy, error) {
	return s.policies(ctx, `SELECT `+policyCols+` FROM policies WHERE model=$1 AND version>$2 ORDER BY version LIMIT $3`, model, after, limit)
}

// PolicyAt returns the policy of model in force at t.
func (s *Postgres) PolicyAt(ctx context.Context, model string, t time.Time) (Policy, error) {
	ps, err := s.policies(ctx, `SELECT `+policyCols+` FROM policies WHERE model=$1 AND created_at<=$2 ORDER BY version DESC LIMIT 1`, model, t.UnixMicro())
	if err != nil {
		return Policy{}, err
	}
	if len(ps) == 0 {
		return Policy{}, errs.New(errs.NotFound, "model %s had no deployment at %s", model, t.Format(time.RFC3339Nano))
	}
	return ps[0], nil
}

// Events returns the audit events of model, oldest first.
func (s *Postgres) Events(ctx context.Context, model string) ([]Event, error) {
	return s.EventPage(ctx, model, 0, -1)
}

// EventPage returns at most limit (< 0: every) audit events of model
// after the one with Seq after, oldest first.
func (s *Postgres) EventPage(ctx context.Context, model string, after int64, limit int) ([]Event, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	var lim any // NULL: no limit
	if limit >= 0 {
		lim = limit
	}
	rows, err := s.pool.Query(ctx, `SELECT id, model, at, actor, action, what, reason FROM audit WHERE model=$1 AND id>$2 ORDER BY id LIMIT $3`, model, after, lim)
	if err != nil {
		return nil, pgErr(err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var at int64
		if err := rows.Scan(&e.Seq, &e.Model, &at, &e.Actor, &e.Action, &e.What, &e.Reason); err != nil {
			return nil, pgErr(err)
		}
		e.At = time.UnixMicro(at).UTC()
		out = append(out, e)
	}
	return out, pgErr(rows.Err())
}

// SaveRollout stores the latest rollout state of model.
func (s *Postgres) SaveRollout(ctx context.Context, model string, state []byte) error {
	ctx, cancel := op(ctx)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return pgErr(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `INSERT INTO rollouts (model, state, updated_at) VALUES ($1,$2,$3)
		ON CONFLICT (model) DO UPDATE SET state=excluded.state, updated_at=excluded.updated_at`, model, string(state), time.Now().UTC().UnixMicro()); err != nil {
		return pgErr(err)
	}
	if err := bumpChanges(ctx, tx); err != nil {
		return pgErr(err)
	}
	return pgErr(tx.Commit(ctx))
}

// Rollouts returns the stored rollout state of every model.
func (s *Postgres) Rollouts(ctx context.Context) (map[string][]byte, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT model, state FROM rollouts`)
	if err != nil {
		return nil, pgErr(err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var m, st string
		if err := rows.Scan(&m, &st); err != nil {
			return nil, pgErr(err)
		}
		out[m] = []byte(st)
	}
	return out, pgErr(rows.Err())
}

// ChangeSeq is the change counter: it grows with every write that changes
// what gateways route.
func (s *Postgres) ChangeSeq(ctx context.Context) (int64, error) {
	ctx, cancel := op(ctx)
	defer cancel()
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT seq FROM sluice_changes WHERE id=1`).Scan(&seq)
	return seq, pgErr(err)
}

// PollEvery is how often WatchChanges reads the change counter even
// without a notification (one lost, or the listening connection down).
const PollEvery = 500 * time.Millisecond

// WatchChanges calls changed whenever the change counter moved (a
// notification on ChangesChannel, or the counter read every PollEvery),
// and once at start, until ctx ends. It listens on a connection of its
// own and opens it again after a failure; while the database is down it
// keeps trying, and calls changed once it reads the counter again.
func (s *Postgres) WatchChanges(ctx context.Context, changed func()) error {
	last := int64(-1)
	down := false
	check := func() {
		seq, err := s.ChangeSeq(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !down:
			down = true
			if s.Logger != nil {
				s.Logger.Warn("metadata store unreachable: serving on the last routing snapshot; changes (push, deploy) answer 503 until it is back", "store", s.url, "err", err)
			}
		case err == nil && down:
			down = false
			if s.Logger != nil {
				s.Logger.Info("metadata store reachable again", "store", s.url)
			}
		}
		if err == nil && seq != last {
			last = seq
			changed()
		}
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		if conn == nil {
			cctx, cancel := context.WithTimeout(ctx, pgdb.ConnectTimeout)
			c, err := pgx.ConnectConfig(cctx, s.pool.Config().ConnConfig.Copy())
			if err == nil {
				if _, err = c.Exec(cctx, `LISTEN `+ChangesChannel); err != nil {
					c.Close(context.Background())
				} else {
					conn = c
				}
			}
			cancel()
		}
		check()
		if conn == nil {
			select {
			case <-ctx.Done():
			case <-time.After(PollEvery):
			}
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, PollEvery)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && (conn.IsClosed() || wctx.Err() == nil) {
			conn.Close(context.Background()) // broken: listen again on a new one
			conn = nil
		}
		if err == nil {
			// Drain what else arrived: one check covers them all.
			for {
				dctx, dcancel := context.WithTimeout(ctx, time.Millisecond)
				_, derr := conn.WaitForNotification(dctx)
				dcancel()
				if derr != nil {
					if conn.IsClosed() {
						conn = nil
					}
					break
				}
			}
		}
	}
	return nil
}

// String names the store, its password redacted.
func (s *Postgres) String() string { return "PostgreSQL " + s.url }
