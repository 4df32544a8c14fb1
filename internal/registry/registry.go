// Package registry is the only package that touches Sluice's metadata store
// and artifact storage. Model versions are immutable once published: a
// version row never changes except for its load state. Artifacts are stored
// content-addressed by SHA-256 under the data directory; metadata lives in
// embedded SQLite (modernc.org/sqlite, pure Go, no cgo).
package registry

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
)

// State is a version's load state.
type State string

// Version states: published → loading → validating → ready | failed.
const (
	Published  State = "published"
	Loading    State = "loading"
	Validating State = "validating"
	Ready      State = "ready"
	Failed     State = "failed"
)

// Version is one immutable model version.
type Version struct {
	Model         string
	N             int
	Digest        string
	ArtifactSHA   string
	ArtifactBytes int64
	Runtime       string
	InputSchema   string
	OutputSchema  string
	Manifest      []byte // model.yaml as published
	CreatedAt     time.Time

	// Load state, last recorded.
	State    State
	Reason   string
	Timings  Timings
	StatedAt time.Time
}

// Timings of the last load.
type Timings struct {
	Load   time.Duration
	Golden time.Duration
	Warmup time.Duration
}

// ID is "model@N".
func (v Version) ID() string { return fmt.Sprintf("%s@%d", v.Model, v.N) }

// Store is the registry backed by SQLite and a content-addressed folder.
type Store struct {
	db  *sql.DB
	dir string
}

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

// Open opens (creating if needed) the registry in dataDir.
func Open(dataDir string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dataDir, "artifacts", "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("registry: create data directory: %w", err)
	}
	dsn := "file:" + filepath.Join(dataDir, "sluice.db") + "?_pragma=busy_timeout(1000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("registry: open database: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schemaSQL + deploymentsSQL); err != nil {
		db.Close()
		return nil, fmt.Errorf("registry: open %s: %w", filepath.Join(dataDir, "sluice.db"), err)
	}
	return &Store{db: db, dir: dataDir}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Publish stores the package as the next version of its model. Publishing
// content identical to an existing version returns that version and
// created=false.
func (s *Store) Publish(ctx context.Context, p *modelpkg.Package) (v Version, created bool, err error) {
	name := p.Spec.Manifest.Name
	if v, err := s.byDigest(ctx, name, p.Digest); err == nil {
		// Identical content: same version. Rewrite the stored artifact if it
		// was lost or corrupted, so publishing again repairs it.
		if err := s.putArtifact(p.ArtifactSHA, p.Artifact); err != nil {
			return Version{}, false, err
		}
		if p.Reference != nil {
			if err := s.putArtifact(p.ReferenceSHA, p.Reference); err != nil {
				return Version{}, false, err
			}
		}
		return v, false, nil
	} else if !errors.Is(err, sql.ErrNoRows) {
		return Version{}, false, err
	}
	if err := s.putArtifact(p.ArtifactSHA, p.Artifact); err != nil {
		return Version{}, false, err
	}
	if p.Reference != nil {
		if err := s.putArtifact(p.ReferenceSHA, p.Reference); err != nil {
			return Version{}, false, err
		}
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
		name, n, p.Digest, p.ArtifactSHA, len(p.Artifact), m.Runtime, m.Input.Schema, m.Output.Schema, p.ManifestYAML, now.UnixMicro(), string(Published), now.UnixMicro())
	if err != nil {
		return Version{}, false, storeErr(err)
	}
	if p.Reference != nil {
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

func (s *Store) byDigest(ctx context.Context, model, digest string) (Version, error) {
	return scan(s.db.QueryRowContext(ctx, `SELECT `+cols+` FROM versions WHERE model=? AND digest=?`, model, digest))
}

// Get returns model@n.
func (s *Store) Get(ctx context.Context, model string, n int) (Version, error) {
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
func (s *Store) List(ctx context.Context) ([]Version, error) {
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
func (s *Store) SetState(ctx context.Context, model string, n int, st State, reason string, t Timings) error {
	_, err := s.db.ExecContext(ctx, `UPDATE versions SET state=?, reason=?, load_us=?, golden_us=?, warmup_us=?, stated_at=? WHERE model=? AND version=?`,
		string(st), reason, t.Load.Microseconds(), t.Golden.Microseconds(), t.Warmup.Microseconds(), time.Now().UTC().UnixMicro(), model, n)
	return storeErr(err)
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ArtifactPath is where the artifact with this hash is stored.
func (s *Store) ArtifactPath(sha string) string {
	return filepath.Join(s.dir, "artifacts", "sha256", sha[:2], sha)
}

// Artifact reads the artifact and verifies its hash. A mismatch is an error
// saying so; the caller fails that version only.
func (s *Store) Artifact(sha string) ([]byte, error) {
	if !shaRE.MatchString(sha) {
		return nil, fmt.Errorf("invalid artifact hash %q", sha)
	}
	b, err := os.ReadFile(s.ArtifactPath(sha))
	if err != nil {
		return nil, fmt.Errorf("read artifact sha256:%s: %w", sha[:12], err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != sha {
		return nil, fmt.Errorf("artifact sha256 mismatch: expected %s, stored file hashes to %s (the stored artifact was changed or corrupted; publish the package again)", sha, got)
	}
	return b, nil
}

// putArtifact writes the artifact unless an intact copy is there already.
// It writes to a temporary file and renames, so a crash never leaves a
// partial artifact under its hash.
func (s *Store) putArtifact(sha string, data []byte) error {
	p := s.ArtifactPath(sha)
	if b, err := os.ReadFile(p); err == nil {
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) == sha {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("registry: store artifact: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("registry: store artifact: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("registry: store artifact: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("registry: store artifact: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("registry: store artifact: %w", err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return fmt.Errorf("registry: store artifact: %w", err)
	}
	return nil
}

func storeErr(err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	out := errs.Wrap(errs.Unavailable, err, "metadata store unavailable")
	out.RetryAfter = time.Second
	return out
}

// File returns a version's extra file (e.g. "drift.reference"), verified
// against its hash; nil, nil when the version has none.
func (s *Store) File(ctx context.Context, model string, n int, name string) ([]byte, error) {
	var sha string
	err := s.db.QueryRowContext(ctx, `SELECT sha FROM files WHERE model=? AND version=? AND name=?`, model, n, name).Scan(&sha)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return s.Artifact(sha)
}
