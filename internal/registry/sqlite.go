package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/storefile"
)

// SQLite is the embedded Store: metadata in one SQLite database, artifacts
// in an Artifacts (a Dir under the data directory, from Open).
type SQLite struct {
	Artifacts // where Publish stores and File reads artifact bytes
	db        *sql.DB
	aside     string // where Options.InitStore moved a damaged database ("" if not)

	publishing holds // artifacts stored by publishes under way
}

var (
	_ Store     = (*SQLite)(nil)
	_ Artifacts = (*Dir)(nil)
)

const schemaSQL = `
CREATE TABLE IF NOT EXISTS versions (
  model          TEXT    NOT NULL,
  version        INTEGER NOT NULL,
  digest         TEXT    NOT NULL,
  artifact_sha   TEXT    NOT NULL,
  artifact_bytes INTEGER NOT NULL,
  runtime        TEXT    NOT NULL,
  input_schema   TEXT    NOT NULL,
  output_schema  TEXT    NOT NULL,
  manifest       BLOB    NOT NULL,
  created_at     INTEGER NOT NULL,
  state          TEXT    NOT NULL,
  reason         TEXT    NOT NULL DEFAULT '',
  load_us        INTEGER NOT NULL DEFAULT 0,
  golden_us      INTEGER NOT NULL DEFAULT 0,
  warmup_us      INTEGER NOT NULL DEFAULT 0,
  stated_at      INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (model, version),
  UNIQUE (model, digest)
);
CREATE TABLE IF NOT EXISTS files (
  model   TEXT    NOT NULL,
  version INTEGER NOT NULL,
  name    TEXT    NOT NULL,
  sha     TEXT    NOT NULL,
  PRIMARY KEY (model, version, name)
);`

// Options of OpenWith.
type Options struct {
	// InitStore re-initialises a database file that exists but is empty or
	// not a database: it is moved aside (see MovedAside) and an empty
	// registry is created. Without it such a file is refused (a
	// *storefile.Damaged that names it and the fix), because opening it
	// would silently start again with no versions and no deployments.
	InitStore bool
	// Artifacts is where artifact bytes go (an object store, internal/
	// registry/s3); nil: the folder artifacts/ in the data directory.
	Artifacts Artifacts
}

// Open opens (creating if needed) the registry in dataDir: the database
// sluice.db and the artifact folder artifacts/ (or Options.Artifacts). A sluice.db that exists but
// is empty or is not a database is refused (see Options.InitStore).
func Open(dataDir string) (*SQLite, error) { return OpenWith(dataDir, Options{}) }

// OpenWith is Open with options.
func OpenWith(dataDir string, o Options) (*SQLite, error) {
	art := o.Artifacts
	if art == nil {
		if err := os.MkdirAll(filepath.Join(dataDir, "artifacts", "sha256"), 0o755); err != nil {
			return nil, fmt.Errorf("registry: create data directory: %w", err)
		}
		d, err := NewDir(filepath.Join(dataDir, "artifacts"))
		if err != nil {
			return nil, err
		}
		art = d
	} else if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("registry: create data directory: %w", err)
	}
	return openSQLite(filepath.Join(dataDir, "sluice.db"), art, o)
}

// OpenSQLite opens (creating if needed) the database file at path, with
// artifacts in art. A file that exists but is empty or is not a database
// is refused, as by Open.
func OpenSQLite(path string, art Artifacts) (*SQLite, error) {
	return openSQLite(path, art, Options{})
}

// storeName and initFlag name the database and its fix in refusals.
const (
	storeName = "the registry (every version, deployment and rollout)"
	initFlag  = "sluice serve --init-store"
)

func openSQLite(path string, art Artifacts, o Options) (*SQLite, error) {
	var aside string
	err := storefile.Check(path, storeName, initFlag)
	if err != nil && o.InitStore {
		if aside, err = storefile.MoveAside(path, time.Now()); err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	s, err := openDB(path, art)
	if err != nil && storefile.Corrupt(err) {
		dmg := &storefile.Damaged{Path: path, Problem: "is damaged (" + err.Error() + ")", Store: storeName, Flag: initFlag, Err: err}
		if !o.InitStore {
			return nil, fmt.Errorf("registry: %w", dmg)
		}
		if aside, err = storefile.MoveAside(path, time.Now()); err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
		s, err = openDB(path, art)
	}
	if err != nil {
		return nil, err
	}
	s.aside = aside
	return s, nil
}

// MovedAside is where Options.InitStore moved a damaged database ("" when
// it did not).
func (s *SQLite) MovedAside() string { return s.aside }

func openDB(path string, art Artifacts) (*SQLite, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(1000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("registry: open database: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schemaSQL + deploymentsSQL); err != nil {
		db.Close()
		return nil, fmt.Errorf("registry: open %s: %w", path, err)
	}
	return &SQLite{Artifacts: art, db: db}, nil
}

// Close closes the database.
func (s *SQLite) Close() error { return s.db.Close() }

// Publish stores the package as the next version of its model. Publishing
// content identical to an existing version returns that version and
// created=false. A publish that fails leaves no bytes behind: the
// artifact and reference it stored are deleted unless a version (or a
// publish still running) uses them.
func (s *SQLite) Publish(ctx context.Context, p *modelpkg.Package) (v Version, created bool, err error) {
	shas := []string{p.ArtifactSHA}
	if p.ReferenceSHA != "" {
		shas = append(shas, p.ReferenceSHA)
	}
	s.publishing.hold(shas)
	defer func() { err = s.release(ctx, shas, err) }()
	name := p.Spec.Manifest.Name
	existing, derr := s.byDigest(ctx, name, p.Digest)
	if derr != nil && !errors.Is(derr, sql.ErrNoRows) {
		return Version{}, false, storeErr(derr)
	}
	// Identical content is the same version: storing again rewrites an
	// artifact that was lost or corrupted, so publishing again repairs it.
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
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Version{}, false, storeErr(err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version),0)+1 FROM versions WHERE model=?`, name).Scan(&n); err != nil {
		return Version{}, false, storeErr(err)
	}
	now := time.Now().UTC()
	m := p.Spec.Manifest
	_, err = tx.ExecContext(ctx, `INSERT INTO versions (model, version, digest, artifact_sha, artifact_bytes, runtime, input_schema, output_schema, manifest, created_at, state, stated_at)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
		name, n, p.Digest, p.ArtifactSHA, p.ArtifactSize(), m.Runtime, m.Input.Schema, m.Output.Schema, p.ManifestYAML, now.UnixMicro(), string(Published), now.UnixMicro())
	if err != nil {
		return Version{}, false, storeErr(err)
	}
	if p.ReferenceSHA != "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO files (model, version, name, sha) VALUES (?,?,?,?)`, name, n, "drift.reference", p.ReferenceSHA); err != nil {
			return Version{}, false, storeErr(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Version{}, false, storeErr(err)
	}
	v, err = s.Get(ctx, name, n)
	return v, err == nil, err
}

// release ends the hold of a publish. When it failed (perr != nil), the
// blobs that neither a version nor another publish uses are deleted: the
// failed publish may have written them. A failed deletion is added to
// perr, which is returned.
func (s *SQLite) release(ctx context.Context, shas []string, perr error) error {
	ctx = context.WithoutCancel(ctx) // a cancelled publish still cleans up
	s.publishing.release(shas, func(sha string) {
		if perr == nil {
			return
		}
		used, err := s.used(ctx, sha)
		if err == nil && !used {
			err = s.Delete(ctx, sha)
		}
		if err != nil {
			perr = errors.Join(perr, StorageError("delete", sha, err))
		}
	})
	return perr
}

// used says whether a version names sha as its artifact or one of its files.
func (s *SQLite) used(ctx context.Context, sha string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM versions WHERE artifact_sha=?) + (SELECT COUNT(*) FROM files WHERE sha=?)`, sha, sha).Scan(&n)
	if err != nil {
		return false, storeErr(err)
	}
	return n > 0, nil
}

const cols = `model, version, digest, artifact_sha, artifact_bytes, runtime, input_schema, output_schema, manifest, created_at, state, reason, load_us, golden_us, warmup_us, stated_at`

func scan(r interface{ Scan(...any) error }) (Version, error) {
	var v Version
	var created, stated, lu, gu, wu int64
	var st string
	err := r.Scan(&v.Model, &v.N, &v.Digest, &v.ArtifactSHA, &v.ArtifactBytes, &v.Runtime, &v.InputSchema, &v.OutputSchema, &v.Manifest, &created, &st, &v.Reason, &lu, &gu, &wu, &stated)
	v.CreatedAt = time.UnixMicro(created).UTC()
	v.StatedAt = time.UnixMicro(stated).UTC()
	v.State = State(st)
	v.Timings = Timings{Load: time.Duration(lu) * time.Microsecond, Golden: time.Duration(gu) * time.Microsecond, Warmup: time.Duration(wu) * time.Microsecond}
	return v, err
}

func (s *SQLite) byDigest(ctx context.Context, model, digest string) (Version, error) {
	return scan(s.db.QueryRowContext(ctx, `SELECT `+cols+` FROM versions WHERE model=? AND digest=?`, model, digest))
}

// Get returns model@n.
func (s *SQLite) Get(ctx context.Context, model string, n int) (Version, error) {
	v, err := scan(s.db.QueryRowContext(ctx, `SELECT `+cols+` FROM versions WHERE model=? AND version=?`, model, n))
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, errs.New(errs.NotFound, "model version %s@%d not found", model, n)
	}
	if err != nil {
		return Version{}, storeErr(err)
	}
	return v, nil
}

// List returns every version of every model, by model then version.
func (s *SQLite) List(ctx context.Context) ([]Version, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+cols+` FROM versions ORDER BY model, version`)
	if err != nil {
		return nil, storeErr(err)
	}
	defer rows.Close()
	var out []Version
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, storeErr(err)
		}
		out = append(out, v)
	}
	return out, storeErr(rows.Err())
}

// SetState records a version's load state.
func (s *SQLite) SetState(ctx context.Context, model string, n int, st State, reason string, t Timings) error {
	_, err := s.db.ExecContext(ctx, `UPDATE versions SET state=?, reason=?, load_us=?, golden_us=?, warmup_us=?, stated_at=? WHERE model=? AND version=?`,
		string(st), reason, t.Load.Microseconds(), t.Golden.Microseconds(), t.Warmup.Microseconds(), time.Now().UTC().UnixMicro(), model, n)
	return storeErr(err)
}

func storeErr(err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	if storefile.Full(err) {
		out := &errs.Error{Code: errs.Unavailable, Message: "metadata store unavailable: no space left on its disk; free space on the server, then try again", Err: err, RetryAfter: 30 * time.Second}
		return out
	}
	out := errs.Wrap(errs.Unavailable, err, "metadata store unavailable")
	out.RetryAfter = time.Second
	return out
}

// File returns a version's extra file (e.g. "drift.reference"), verified
// against its hash; nil, nil when the version has none.
func (s *SQLite) File(ctx context.Context, model string, n int, name string) ([]byte, error) {
	var sha string
	err := s.db.QueryRowContext(ctx, `SELECT sha FROM files WHERE model=? AND version=? AND name=?`, model, n, name).Scan(&sha)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return ReadArtifact(ctx, s, sha)
}
