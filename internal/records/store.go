// Package records keeps prediction records (who asked which model version
// what, and how it went) behind the Store interface, writes them off the
// request path (Writer), and owns the idempotency cache that replays
// answers to retried request ids. The embedded Store is SQLite; every
// implementation must pass the suite in recordstest. It knows nothing of
// HTTP beyond status codes.
package records

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/sluiceml/sluice/internal/storefile"
)

// Record is one prediction request, as recorded after it was answered.
type Record struct {
	RequestID string
	Tenant    string
	Model     string
	Version   int
	LatencyMs float64
	Outcome   string // "ok" or the error code
	InputHash string // see InputHash
	CreatedAt time.Time
	Attempts  int    // 1, plus one for every retry answered by replay
	Input     []byte // the sampled payload, only for models that opt in; nil otherwise
	// Saved, when set, is stored beside the record (in the same
	// transaction) so that a retry is answered from the store; an insert
	// with one needs its Row (the Writer assigns rows). List does not
	// return it.
	Saved *Saved
	// Row is the store's row id, set by List: with CreatedAt, the
	// record's place in a listing (Filter.Before).
	Row int64

	// Retryable marks a record whose request id the client chose, so a
	// retry may bump its attempts: the writer remembers its row for that.
	// Not stored.
	Retryable bool
}

// Filter selects records for List. Zero fields match everything.
type Filter struct {
	Tenant    string // "" = every tenant (admin); a tenant's view sets it
	RequestID string
	Model     string
	Version   int // 0 = every version
	Outcome   string
	Since     time.Time // records created at or after Since
	Limit     int       // 0 = DefaultLimit; at most MaxLimit
	// Models, when not nil, keeps only records whose model matches one of
	// these globs (path.Match syntax, as in the tenants file): the models
	// a tenant may act on. An empty, non-nil list matches nothing.
	Models []string
	// Before, when set, lists only records after it in List's order
	// (older, or as old with a smaller row): the next page after a
	// listing whose last record was Before.
	Before *Position
}

// Position is a record's place in List's order: its CreatedAt and Row.
type Position struct {
	CreatedAt time.Time
	Row       int64
}

// Matches reports whether model is selected by f.Models.
func (f Filter) Matches(model string) bool {
	if f.Models == nil {
		return true
	}
	for _, g := range f.Models {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

// globFunc is the SQL function that matches a model against a glob with
// path.Match, so Filter.Models means in SQL what it means in the tenants
// file (SQLite's GLOB differs on '/' and escapes).
const globFunc = "sluice_path_match"

func init() {
	sqlite.MustRegisterDeterministicScalarFunction(globFunc, 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		g, _ := args[0].(string)
		m, _ := args[1].(string)
		ok, _ := path.Match(g, m)
		if ok {
			return int64(1), nil
		}
		return int64(0), nil
	})
}

// List limits.
const (
	DefaultLimit = 100
	MaxLimit     = 10000
)

// Store keeps prediction records. The Writer writes through it; GET
// /v1/records lists through it.
type Store interface {
	// Write applies ops in order, atomically: all or none. Inserting a
	// row id in use is an error; bumping a record that is not there is
	// not (it may have been dropped or deleted).
	Write(ctx context.Context, ops []Op) error
	// List returns the records f selects, newest first (by CreatedAt,
	// then by row), at most f.Limit of them (DefaultLimit when 0, never
	// more than MaxLimit).
	List(ctx context.Context, f Filter) ([]Record, error)
	// DeleteBefore deletes records created before t and says how many.
	DeleteBefore(ctx context.Context, t time.Time) (int64, error)
	// MaxRow returns the largest row id in use (0 when empty), so a Writer
	// assigns row ids after it.
	MaxRow(ctx context.Context) (int64, error)
	// Lookup returns the Saved answer stored with tenant's record of requestID
	// (and the record's row) if its window has not ended at now; nil when
	// there is none. It must not wait for writes in progress.
	Lookup(ctx context.Context, tenant, requestID string, now time.Time) (*Found, error)
	// ExpireReplays deletes the replays whose window ended before now (the
	// records stay until DeleteBefore).
	ExpireReplays(ctx context.Context, now time.Time) (int64, error)
}

// RowRanger is implemented by a store that several writers share
// (PostgreSQL: one Writer per gateway): RowBase hands the calling writer a
// range of row ids that no other writer uses, above every row in use; the
// writer assigns ids after it. A store without it has one writer, which
// starts after MaxRow.
type RowRanger interface {
	RowBase(ctx context.Context) (int64, error)
}

// Op is one write of a batch: the insert of Record, or (Bump) adding one
// to the attempts of a stored record.
type Op struct {
	Bump bool
	// Row is, for an insert, the row id to store Record under (0: the store
	// picks one); for a bump, the row to bump (0: the row of Record.Tenant
	// and Record.RequestID).
	Row    int64
	Record Record

	ack chan error // durable mode: the writer sends the batch's result (buffered, 1)
}

// SQLite is the records database, a SQLite file of its own (records.db),
// apart from the registry's so that record writes never contend with it.
type SQLite struct {
	db    *sql.DB // every write, and List: one connection
	rdb   *sql.DB // Lookup: read-only connections of their own (WAL readers do not wait for the writer)
	aside string  // where Options.InitStore moved a damaged records.db ("" if not)

	wmu       sync.Mutex             // guards what follows: Write's state
	stmts     map[string]driver.Stmt // Write's statements, prepared on stmtConn
	stmtConn  any                    // the driver connection of stmts
	insertSQL map[int]string         // insertSQL(n) by n
	args      []driver.NamedValue    // Write's arguments, reused
}

var _ Store = (*SQLite)(nil)

const schemaSQL = `
CREATE TABLE IF NOT EXISTS records (
  id         INTEGER PRIMARY KEY,
  request_id TEXT    NOT NULL,
  tenant     TEXT    NOT NULL,
  model      TEXT    NOT NULL,
  version    INTEGER NOT NULL,
  latency_ms REAL    NOT NULL,
  outcome    TEXT    NOT NULL,
  input_hash TEXT    NOT NULL,
  created_at INTEGER NOT NULL, -- unix microseconds
  attempts   INTEGER NOT NULL,
  input      BLOB
);
-- No (tenant, request_id) index: request ids are random, and a random-key
-- index costs every insert more than the row itself. Bumps find their row
-- by the id the writer assigned; lookups by request id scan (rare).
DROP INDEX IF EXISTS records_request;
CREATE INDEX IF NOT EXISTS records_created ON records (created_at);
-- No (model, …) index: every index costs each insert, and a model filter
-- walks records_created newest first, which a bounded listing stops early.
DROP INDEX IF EXISTS records_model;
`

// Options of OpenWith.
type Options struct {
	// InitStore re-initialises a records.db that exists but is empty or not
	// a database: it is moved aside (see MovedAside) and an empty one is
	// created. Without it such a file is refused (a *storefile.Damaged that
	// names it and the fix).
	InitStore bool
	// Durable opens the database with synchronous=FULL: a commit is on the
	// disk (fsync of the WAL) before it returns, so it survives a power
	// loss or an OS crash, not only a killed process. The default is
	// synchronous=NORMAL: a commit survives kill -9 (it is in the OS's
	// page cache) but the last ones may be lost to a power loss.
	Durable bool
}

// Open opens (creating if needed) dir/records.db. A records.db that exists
// but is empty or is not a database is refused (see Options.InitStore).
func Open(dir string) (*SQLite, error) { return OpenWith(dir, Options{}) }

// storeName and initFlag name the database and its fix in refusals.
const (
	storeName = "the prediction records"
	initFlag  = "sluice serve --init-store"
)

// OpenWith is Open with options.
func OpenWith(dir string, o Options) (*SQLite, error) {
	path := filepath.Join(dir, "records.db")
	var aside string
	err := storefile.Check(path, storeName, initFlag)
	if err != nil && o.InitStore {
		aside, err = storefile.MoveAside(path, time.Now())
	}
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	s, err := openDB(path, o.Durable)
	if err != nil && storefile.Corrupt(err) {
		dmg := &storefile.Damaged{Path: path, Problem: "is damaged (" + err.Error() + ")", Store: storeName, Flag: initFlag, Err: err}
		if !o.InitStore {
			return nil, fmt.Errorf("records: %w", dmg)
		}
		if aside, err = storefile.MoveAside(path, time.Now()); err != nil {
			return nil, fmt.Errorf("records: %w", err)
		}
		s, err = openDB(path, o.Durable)
	}
	if err != nil {
		return nil, err
	}
	s.aside = aside
	return s, nil
}

// MovedAside is where Options.InitStore moved a damaged records.db (""
// when it did not).
func (s *SQLite) MovedAside() string { return s.aside }

func openDB(path string, durable bool) (*SQLite, error) {
	sync := "NORMAL"
	if durable {
		sync = "FULL"
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")&_pragma=cache_size(-65536)&_pragma=temp_store(MEMORY)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("records: open database: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schemaSQL + replaysSQL); err != nil {
		db.Close()
		return nil, fmt.Errorf("records: create schema in %s: %w", path, err)
	}
	rdb, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("records: open database: %w", err)
	}
	rdb.SetMaxOpenConns(2)
	return &SQLite{db: db, rdb: rdb}, nil
}

// Close closes the database.
func (s *SQLite) Close() error {
	s.closeStmts()
	rerr := s.rdb.Close()
	if err := s.db.Close(); err != nil {
		return err
	}
	return rerr
}

// Insert adds records in one transaction.
func (s *SQLite) Insert(ctx context.Context, recs []Record) error {
	ops := make([]Op, len(recs))
	for i := range recs {
		ops[i] = Op{Record: recs[i]}
	}
	return s.Write(ctx, ops)
}

// BumpAttempts adds one to the attempts of tenant's record of requestID.
func (s *SQLite) BumpAttempts(ctx context.Context, tenant, requestID string) error {
	return s.Write(ctx, []Op{{Bump: true, Record: Record{Tenant: tenant, RequestID: requestID}}})
}

// maxChunk is the most rows of one multi-row insert. A run of inserts
// goes in statements of maxChunk rows and then of the powers of two below
// it (a run of 500: 3×128, 64, 32, 16, 4), so a handful of statements,
// prepared once per connection, serve every batch size.
const maxChunk = 128

// insertSQL is an INSERT of n rows.
func insertSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO records (id, request_id, tenant, model, version, latency_ms, outcome, input_hash, created_at, attempts, input) VALUES `)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

const (
	bumpSQL    = `UPDATE records SET attempts = attempts + 1 WHERE tenant = ? AND request_id = ?`
	bumpRowSQL = `UPDATE records SET attempts = attempts + 1 WHERE id = ?`
)

// cols is the number of columns of an inserted row.
const cols = 11

// Write runs ops in order in one transaction.
//
// It talks to the driver directly (database/sql's Conn.Raw): the
// statements are prepared once per connection and kept (preparing a
// 128-row insert costs more than writing its rows), and the arguments go
// in one reused slice, without database/sql's per-argument conversion.
// This is the writer goroutine's whole cost per record; see
// docs/benchmarks.md, "Prediction records on the hot path".
func (s *SQLite) Write(ctx context.Context, ops []Op) error {
	if len(ops) == 0 {
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("records: begin: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		return s.writeLocked(ctx, dc, ops)
	})
}

// stmtLocked returns the statement of query prepared on dc, preparing it
// on first use. Statements of a connection that database/sql replaced are
// closed and prepared again.
func (s *SQLite) stmtLocked(ctx context.Context, dc any, query string) (driver.StmtExecContext, error) {
	if dc != s.stmtConn {
		for _, st := range s.stmts {
			st.Close()
		}
		s.stmts, s.stmtConn = map[string]driver.Stmt{}, dc
	}
	if st, ok := s.stmts[query]; ok {
		return st.(driver.StmtExecContext), nil
	}
	p, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, fmt.Errorf("the sqlite driver cannot prepare with a context")
	}
	st, err := p.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	se, ok := st.(driver.StmtExecContext)
	if !ok {
		st.Close()
		return nil, fmt.Errorf("the sqlite driver cannot execute with a context")
	}
	s.stmts[query] = st
	return se, nil
}

// closeStmts closes the kept statements (before the database closes).
func (s *SQLite) closeStmts() {
	conn, err := s.db.Conn(context.Background())
	if err != nil {
		return
	}
	defer conn.Close()
	_ = conn.Raw(func(dc any) error {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		for _, st := range s.stmts {
			st.Close()
		}
		s.stmts, s.stmtConn = nil, nil
		return nil
	})
}

func (s *SQLite) execLocked(ctx context.Context, dc any, query string, args []driver.NamedValue) error {
	st, err := s.stmtLocked(ctx, dc, query)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx, args)
	return err
}

// argsLocked returns the reused argument slice, n long, ordinals set.
func (s *SQLite) argsLocked(n int) []driver.NamedValue {
	if cap(s.args) < n {
		s.args = make([]driver.NamedValue, n)
	}
	a := s.args[:n]
	for i := range a {
		a[i] = driver.NamedValue{Ordinal: i + 1}
	}
	return a
}

func (s *SQLite) writeLocked(ctx context.Context, dc any, ops []Op) error {
	bt, ok := dc.(driver.ConnBeginTx)
	if !ok {
		return fmt.Errorf("records: begin: the sqlite driver cannot begin with a context")
	}
	tx, err := bt.BeginTx(ctx, driver.TxOptions{})
	if err != nil {
		return fmt.Errorf("records: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback()
		}
	}()
	if s.insertSQL == nil {
		s.insertSQL = map[int]string{}
	}
	for i := 0; i < len(ops); {
		o := ops[i]
		if o.Bump {
			var err error
			if o.Row > 0 {
				a := s.argsLocked(1)
				a[0].Value = o.Row
				err = s.execLocked(ctx, dc, bumpRowSQL, a)
			} else {
				a := s.argsLocked(2)
				a[0].Value, a[1].Value = o.Record.Tenant, o.Record.RequestID
				err = s.execLocked(ctx, dc, bumpSQL, a)
			}
			if err != nil {
				return fmt.Errorf("records: bump attempts of %s: %w", o.Record.RequestID, err)
			}
			i++
			continue
		}
		j := i
		for j < len(ops) && !ops[j].Bump && j-i < maxChunk {
			j++
		}
		n := maxChunk
		for n > j-i {
			n /= 2
		}
		run := ops[i : i+n]
		q, ok := s.insertSQL[n]
		if !ok {
			q = insertSQL(n)
			s.insertSQL[n] = q
		}
		a := s.argsLocked(n * cols)
		var last [3]string // tenant, model, outcome of the previous row
		var lastV [3]any   // … boxed: repeated values are not boxed again
		box := func(k int, v string) any {
			if lastV[k] == nil || last[k] != v {
				last[k], lastV[k] = v, v
			}
			return lastV[k]
		}
		for k, o := range run {
			r := &o.Record
			attempts := r.Attempts
			if attempts < 1 {
				attempts = 1
			}
			created := r.CreatedAt
			if created.IsZero() {
				created = time.Now()
			}
			v := a[k*cols : (k+1)*cols]
			if o.Row > 0 {
				v[0].Value = o.Row
			} // else nil: the database picks the row id
			v[1].Value = r.RequestID
			v[2].Value = box(0, r.Tenant)
			v[3].Value = box(1, r.Model)
			v[4].Value = int64(r.Version)
			v[5].Value = r.LatencyMs
			v[6].Value = box(2, r.Outcome)
			v[7].Value = r.InputHash
			v[8].Value = created.UnixMicro()
			v[9].Value = int64(attempts)
			if r.Input != nil {
				v[10].Value = r.Input
			}
		}
		if err := s.execLocked(ctx, dc, q, a); err != nil {
			return fmt.Errorf("records: insert %s: %w", run[0].Record.RequestID, err)
		}
		for _, o := range run {
			if o.Record.Saved == nil {
				continue
			}
			if o.Row <= 0 {
				return fmt.Errorf("records: insert %s: a record with a saved answer needs its row", o.Record.RequestID)
			}
			if err := s.writeReplayLocked(ctx, dc, o.Row, o.Record); err != nil {
				return err
			}
		}
		i += n
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("records: commit: %w", err)
	}
	return nil
}

// List returns the records f selects, newest first.
func (s *SQLite) List(ctx context.Context, f Filter) ([]Record, error) {
	var where []string
	var args []any
	add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
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
		ors := []string{"0"}
		for _, g := range f.Models {
			ors = append(ors, globFunc+"(?, model)")
			args = append(args, g)
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	if b := f.Before; b != nil {
		at := b.CreatedAt.UnixMicro()
		where = append(where, "(created_at < ? OR (created_at = ? AND id < ?))")
		args = append(args, at, at, b.Row)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	if limit > MaxLimit {
		limit = MaxLimit
	}
	q := `SELECT id, request_id, tenant, model, version, latency_ms, outcome, input_hash, created_at, attempts, input FROM records`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("records: list: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var created int64
		if err := rows.Scan(&r.Row, &r.RequestID, &r.Tenant, &r.Model, &r.Version, &r.LatencyMs, &r.Outcome, &r.InputHash, &created, &r.Attempts, &r.Input); err != nil {
			return nil, fmt.Errorf("records: list: %w", err)
		}
		r.CreatedAt = time.UnixMicro(created).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("records: list: %w", err)
	}
	return out, nil
}

// DeleteBefore deletes records created before t and says how many.
func (s *SQLite) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM records WHERE created_at < ?`, t.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("records: delete before %s: %w", t.Format(time.RFC3339), err)
	}
	return res.RowsAffected()
}

// MaxRow returns the largest row id in use.
func (s *SQLite) MaxRow(ctx context.Context) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM records`).Scan(&id)
	return id, err
}
