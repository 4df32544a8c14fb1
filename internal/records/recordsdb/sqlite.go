// Package recordsdb holds the databases of the prediction records: SQLite
// (records.db, the embedded store) and PostgreSQL (shared by several
// gateways), each a records.Store that passes recordstest. Only what opens
// a store imports it (cmd/sluice, tests): the gateway writes through
// records.Store and links neither driver.
package recordsdb

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/storefile"
)

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

// SQLite is the records database, a SQLite file of its own (records.db),
// apart from the registry's so that record writes never contend with it.
type SQLite struct {
	db    *sql.DB // every write, and List: one connection
	rdb   *sql.DB // Lookup: read-only connections of their own (WAL readers do not wait for the writer)
	aside string  // where Options.InitStore moved a damaged records.db ("" if not)

	wmu      sync.Mutex             // guards what follows: Write's state
	stmts    map[string]driver.Stmt // Write's statements, prepared on stmtConn
	stmtConn any                    // the driver connection of stmts
	args     []driver.NamedValue    // Write's arguments, reused
	enc      batchEncoder           // Write's batch, reused
	blob     []byte                 // its encoding, reused
	high     int64                  // the highest row id ever assigned (record_rows)
}

var _ records.Store = (*SQLite)(nil)

// schemaSQL is the records' tables: a row per batch of records (see
// batch.go), the attempts bumps apart (a bump does not rewrite its
// batch), and what keeps row ids from being used twice even after
// retention deleted the newest records.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS record_batches (
  id          INTEGER PRIMARY KEY, -- the batch's largest row when written: no row of it is larger
  min_row     INTEGER NOT NULL,
  max_row     INTEGER NOT NULL,
  min_created INTEGER NOT NULL, -- unix microseconds
  max_created INTEGER NOT NULL,
  n           INTEGER NOT NULL, -- records in data
  data        BLOB    NOT NULL
);
-- Listings walk batches newest first and stop early; retention finds the
-- batches that straddle its cut by min_created; a bump finds its batch by
-- its row through id. One index entry per batch, not per record.
CREATE INDEX IF NOT EXISTS record_batches_created ON record_batches (max_created, max_row);
CREATE INDEX IF NOT EXISTS record_batches_min ON record_batches (min_created);
CREATE TABLE IF NOT EXISTS record_bumps (
  row   INTEGER PRIMARY KEY, -- the record's row id
  batch INTEGER NOT NULL,    -- record_batches.id of its batch
  n     INTEGER NOT NULL     -- attempts to add
);
CREATE INDEX IF NOT EXISTS record_bumps_batch ON record_bumps (batch);
-- The highest row when retention last ran (it may delete the newest
-- batch): with MAX(record_batches.id), the highest row ever assigned.
CREATE TABLE IF NOT EXISTS record_rows (
  max_row INTEGER NOT NULL
);
INSERT INTO record_rows (max_row) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM record_rows);
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
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=page_size(16384)&_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")&_pragma=cache_size(-65536)&_pragma=temp_store(MEMORY)"
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
	s := &SQLite{db: db, rdb: rdb}
	if err := s.convertRowTable(); err != nil {
		s.Close()
		return nil, fmt.Errorf("records: convert the records of %s to batches: %w", path, err)
	}
	if err := db.QueryRow(`SELECT max(max_row, (SELECT COALESCE(MAX(id), 0) FROM record_batches)) FROM record_rows`).Scan(&s.high); err != nil {
		s.Close()
		return nil, fmt.Errorf("records: read the highest row of %s: %w", path, err)
	}
	return s, nil
}

// convertRowTable moves the records of a records.db written before
// batches (a table row per record) into batches of 500, in row order, in
// one transaction, and drops the old table.
func (s *SQLite) convertRowTable() error {
	var name string
	err := s.db.QueryRow(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'records'`).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var e batchEncoder
	last := int64(math.MinInt64)
	for {
		rows, err := tx.Query(`SELECT id, request_id, tenant, model, version, latency_ms, outcome, input_hash, created_at, attempts, input FROM records WHERE id > ? ORDER BY id LIMIT 500`, last)
		if err != nil {
			return err
		}
		e.reset()
		for rows.Next() {
			var r records.Record
			var created int64
			if err := rows.Scan(&r.Row, &r.RequestID, &r.Tenant, &r.Model, &r.Version, &r.LatencyMs, &r.Outcome, &r.InputHash, &created, &r.Attempts, &r.Input); err != nil {
				rows.Close()
				return err
			}
			e.add(r.Row, &r, created, r.Attempts)
			last = r.Row
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if e.n == 0 {
			break
		}
		if _, err := tx.Exec(insertBatchSQL, e.maxRow, e.minRow, e.maxRow, e.minCreated, e.maxCreated, e.n, e.blob(nil)); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`DROP TABLE records`); err != nil {
		return err
	}
	return tx.Commit()
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
func (s *SQLite) Insert(ctx context.Context, recs []records.Record) error {
	ops := make([]records.Op, len(recs))
	for i := range recs {
		ops[i] = records.Op{Record: recs[i]}
	}
	return s.Write(ctx, ops)
}

// BumpAttempts adds one to the attempts of tenant's record of requestID.
func (s *SQLite) BumpAttempts(ctx context.Context, tenant, requestID string) error {
	return s.Write(ctx, []records.Op{{Bump: true, Record: records.Record{Tenant: tenant, RequestID: requestID}}})
}

// Statements of Write, prepared once per connection.
const (
	insertBatchSQL = `INSERT INTO record_batches (id, min_row, max_row, min_created, max_created, n, data) VALUES (?, ?, ?, ?, ?, ?, ?)`
	bumpSQL        = `INSERT INTO record_bumps (row, batch, n) VALUES (?, ?, 1) ON CONFLICT (row) DO UPDATE SET n = n + 1`
)

// Write runs ops in order in one transaction: the inserts go in batches
// (one per run of inserts between bumps), each one row of record_batches.
//
// It talks to the driver directly (database/sql's Conn.Raw), with its
// statements prepared once per connection and kept: the writer
// goroutine's cost per record is then little more than encoding it
// (docs/benchmarks.md, "Prediction records on the hot path").
func (s *SQLite) Write(ctx context.Context, ops []records.Op) error {
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
func (s *SQLite) stmtLocked(ctx context.Context, dc any, query string) (driver.Stmt, error) {
	if dc != s.stmtConn {
		for _, st := range s.stmts {
			st.Close()
		}
		s.stmts, s.stmtConn = map[string]driver.Stmt{}, dc
	}
	if st, ok := s.stmts[query]; ok {
		return st, nil
	}
	p, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, fmt.Errorf("the sqlite driver cannot prepare with a context")
	}
	st, err := p.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	_, ok1 := st.(driver.StmtExecContext)
	_, ok2 := st.(driver.StmtQueryContext)
	if !ok1 || !ok2 {
		st.Close()
		return nil, fmt.Errorf("the sqlite driver cannot execute with a context")
	}
	s.stmts[query] = st
	return st, nil
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

func (s *SQLite) execLocked(ctx context.Context, dc any, query string, args ...any) (driver.Result, error) {
	st, err := s.stmtLocked(ctx, dc, query)
	if err != nil {
		return nil, err
	}
	return st.(driver.StmtExecContext).ExecContext(ctx, s.argsLocked(args))
}

// queryLocked runs query on dc and calls row for each row (its values
// are valid only during the call).
func (s *SQLite) queryLocked(ctx context.Context, dc any, query string, row func([]driver.Value) error, args ...any) error {
	st, err := s.stmtLocked(ctx, dc, query)
	if err != nil {
		return err
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, s.argsLocked(args))
	if err != nil {
		return err
	}
	defer rows.Close()
	vals := make([]driver.Value, len(rows.Columns()))
	for {
		if err := rows.Next(vals); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := row(vals); err != nil {
			return err
		}
	}
}

// argsLocked puts args in the reused argument slice.
func (s *SQLite) argsLocked(args []any) []driver.NamedValue {
	if cap(s.args) < len(args) {
		s.args = make([]driver.NamedValue, len(args))
	}
	a := s.args[:len(args)]
	for i, v := range args {
		if n, ok := v.(int); ok {
			v = int64(n)
		}
		a[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return a
}

// errRowInUse is Write's error for an insert at a row id that is taken.
var errRowInUse = errors.New("row id in use")

func (s *SQLite) writeLocked(ctx context.Context, dc any, ops []records.Op) error {
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
	high := s.high           // the highest row assigned, this Write's included
	var taken map[int64]bool // this Write's rows, once they are not increasing
	e := &s.enc
	e.reset()
	flush := func() error {
		if e.n == 0 {
			return nil
		}
		if e.maxRow <= s.high {
			// Not from the Writer (its rows only grow): the batch's id,
			// its largest row, may name a batch whose largest record
			// retention deleted.
			taken := false
			if err := s.queryLocked(ctx, dc, `SELECT 1 FROM record_batches WHERE id = ?`, func([]driver.Value) error { taken = true; return nil }, e.maxRow); err != nil {
				return fmt.Errorf("records: insert a batch of %d records: %w", e.n, err)
			}
			if taken {
				return fmt.Errorf("records: insert a batch of %d records: %w: %d (a deleted record's)", e.n, errRowInUse, e.maxRow)
			}
		}
		s.blob = e.blob(s.blob)
		if _, err := s.execLocked(ctx, dc, insertBatchSQL, e.maxRow, e.minRow, e.maxRow, e.minCreated, e.maxCreated, e.n, s.blob); err != nil {
			return fmt.Errorf("records: insert a batch of %d records: %w", e.n, err)
		}
		e.reset()
		return nil
	}
	for _, o := range ops {
		if o.Bump {
			// Bumps see the inserts before them: those go first.
			if err := flush(); err != nil {
				return err
			}
			if err := s.bumpLocked(ctx, dc, o); err != nil {
				return fmt.Errorf("records: bump attempts of %s: %w", o.Record.RequestID, err)
			}
			continue
		}
		r := &o.Record
		if r.Saved != nil && o.Row <= 0 {
			return fmt.Errorf("records: insert %s: a record with a saved answer needs its row", r.RequestID)
		}
		row := o.Row
		if row <= 0 {
			row = high + 1 // the store picks a free row
		}
		if row <= high {
			// Below rows already assigned (never so from the Writer, whose
			// rows only grow): it must be free, here and in the store.
			if taken == nil {
				taken = map[int64]bool{}
				if e.n > 0 {
					if err := e.rows(taken); err != nil {
						return err
					}
				}
			}
			if taken[row] {
				return fmt.Errorf("records: insert %s: %w: %d", r.RequestID, errRowInUse, row)
			}
			if _, err := s.findRowLocked(ctx, dc, row); err == nil {
				return fmt.Errorf("records: insert %s: %w: %d", r.RequestID, errRowInUse, row)
			} else if !errors.Is(err, errNoRow) {
				return fmt.Errorf("records: insert %s: %w", r.RequestID, err)
			}
		}
		if taken != nil {
			taken[row] = true
		}
		high = max(high, row)
		attempts := r.Attempts
		if attempts < 1 {
			attempts = 1
		}
		created := r.CreatedAt
		if created.IsZero() {
			created = time.Now()
		}
		e.add(row, r, created.UnixMicro(), attempts)
		if r.Saved != nil {
			if err := s.writeReplayLocked(ctx, dc, row, o.Record); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("records: commit: %w", err)
	}
	s.high = high
	return nil
}

// errNoRow is findRowLocked's answer for a row no batch holds.
var errNoRow = errors.New("no such row")

// findRowLocked returns the id of the batch that holds row: the batches
// whose rows may include it (by id, their largest row when written, and
// min_row), smallest first, decoded.
func (s *SQLite) findRowLocked(ctx context.Context, dc any, row int64) (int64, error) {
	batch := int64(-1)
	var v recordView
	err := s.queryLocked(ctx, dc, `SELECT id, data FROM record_batches WHERE id >= ? AND min_row <= ? ORDER BY id`, func(vals []driver.Value) error {
		id, _ := vals[0].(int64)
		data, _ := vals[1].([]byte)
		br := newBatchReader(data)
		for br.next(&v) {
			if v.row == row {
				batch = id
				return errFound
			}
		}
		return br.err
	}, row, row)
	switch {
	case errors.Is(err, errFound):
		return batch, nil
	case err != nil:
		return 0, err
	}
	return 0, errNoRow
}

// errFound ends a query early.
var errFound = errors.New("found")

// bumpLocked adds one to the attempts of o's record: the one at o.Row, or
// every record of o's tenant and request id (found by decoding every
// batch: rare, the writer knows the rows of recent records).
func (s *SQLite) bumpLocked(ctx context.Context, dc any, o records.Op) error {
	if o.Row > 0 {
		batch, err := s.findRowLocked(ctx, dc, o.Row)
		if errors.Is(err, errNoRow) {
			return nil // deleted, or never written: nothing to count
		}
		if err != nil {
			return err
		}
		_, err = s.execLocked(ctx, dc, bumpSQL, o.Row, batch)
		return err
	}
	type hit struct{ row, batch int64 }
	var hits []hit
	var v recordView
	err := s.queryLocked(ctx, dc, `SELECT id, data FROM record_batches`, func(vals []driver.Value) error {
		id, _ := vals[0].(int64)
		data, _ := vals[1].([]byte)
		br := newBatchReader(data)
		for br.next(&v) {
			if string(v.tenant) == o.Record.Tenant && v.idIs(o.Record.RequestID) {
				hits = append(hits, hit{v.row, id})
			}
		}
		return br.err
	})
	if err != nil {
		return err
	}
	for _, h := range hits {
		if _, err := s.execLocked(ctx, dc, bumpSQL, h.row, h.batch); err != nil {
			return err
		}
	}
	return nil
}

// rows adds the rows of the records encoded so far to m.
func (e *batchEncoder) rows(m map[int64]bool) error {
	var v recordView
	br := newBatchReader(e.blob(nil))
	for br.next(&v) {
		m[v.row] = true
	}
	return br.err
}

// List returns the records f selects, newest first: it walks the batches
// by their newest record, newest first, filters each batch's records and
// stops once no batch left can hold a record newer than the last one it
// keeps.
func (s *SQLite) List(ctx context.Context, f records.Filter) ([]records.Record, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = records.DefaultLimit
	}
	if limit > records.MaxLimit {
		limit = records.MaxLimit
	}
	q := `SELECT max_created, max_row, data FROM record_batches`
	var where []string
	var args []any
	if !f.Since.IsZero() {
		where = append(where, "max_created >= ?")
		args = append(args, f.Since.UnixMicro())
	}
	if b := f.Before; b != nil {
		where = append(where, "min_created <= ?")
		args = append(args, b.CreatedAt.UnixMicro())
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY max_created DESC, max_row DESC"
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("records: list: %w", err)
	}
	defer rows.Close()
	var since, beforeAt int64
	if !f.Since.IsZero() {
		since = f.Since.UnixMicro()
	}
	if f.Before != nil {
		beforeAt = f.Before.CreatedAt.UnixMicro()
	}
	newer := func(c1, r1, c2, r2 int64) bool { return c1 > c2 || c1 == c2 && r1 > r2 }
	maxBytes, size := f.MaxBytesOf(), int64(0)
	var out []records.Record
	var v recordView
	var data []byte
	sorted := true
	for rows.Next() {
		var maxCreated, maxRow int64
		if err := rows.Scan(&maxCreated, &maxRow, &data); err != nil {
			return nil, fmt.Errorf("records: list: %w", err)
		}
		if len(out) >= limit {
			if !sorted {
				sortNewest(out)
				out, sorted = out[:limit], true
			}
			last := out[limit-1]
			if newer(last.CreatedAt.UnixMicro(), last.Row, maxCreated, maxRow) {
				break // every record left is older than the ones kept
			}
		}
		br := newBatchReader(data)
		for br.next(&v) {
			if f.Tenant != "" && string(v.tenant) != f.Tenant ||
				f.RequestID != "" && !v.idIs(f.RequestID) ||
				f.Model != "" && string(v.model) != f.Model ||
				f.Version != 0 && v.version != int64(f.Version) ||
				f.Outcome != "" && string(v.outcome) != f.Outcome ||
				!f.Since.IsZero() && v.created < since ||
				f.Before != nil && !newer(beforeAt, f.Before.Row, v.created, v.row) ||
				f.Models != nil && !f.Matches(string(v.model)) {
				continue
			}
			out = append(out, v.record())
			sorted = false
			if size += out[len(out)-1].Bytes(); size > 2*maxBytes {
				// Newer records may follow in later batches: keep the
				// newest that fit (twice the bound, so this sort is rare).
				sortNewest(out)
				out, sorted = records.CutBytes(out, maxBytes), true
				limit = min(limit, len(out))
				size = 0
				for i := range out {
					size += out[i].Bytes()
				}
			}
		}
		if br.err != nil {
			return nil, fmt.Errorf("records: list: %w", br.err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("records: list: %w", err)
	}
	rows.Close()
	sortNewest(out)
	if len(out) > limit {
		out = out[:limit]
	}
	out = records.CutBytes(out, maxBytes)
	if len(out) > 0 {
		if err := s.addBumps(ctx, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sortNewest sorts rs newest first: by CreatedAt, then by row.
func sortNewest(rs []records.Record) {
	slices.SortFunc(rs, func(a, b records.Record) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.Row, a.Row)
	})
}

// addBumps adds the attempts bumped since the records were written.
func (s *SQLite) addBumps(ctx context.Context, rs []records.Record) error {
	lo, hi := rs[0].Row, rs[0].Row
	at := make(map[int64]int, len(rs))
	for i, r := range rs {
		lo, hi = min(lo, r.Row), max(hi, r.Row)
		at[r.Row] = i
	}
	rows, err := s.db.QueryContext(ctx, `SELECT row, n FROM record_bumps WHERE row BETWEEN ? AND ?`, lo, hi)
	if err != nil {
		return fmt.Errorf("records: list: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var row int64
		var n int
		if err := rows.Scan(&row, &n); err != nil {
			return fmt.Errorf("records: list: %w", err)
		}
		if i, ok := at[row]; ok {
			rs[i].Attempts += n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("records: list: %w", err)
	}
	return nil
}

// DeleteBefore deletes records created before t and says how many:
// whole batches whose newest record is older, and the older records of
// the batches that straddle t (rewritten without them).
func (s *SQLite) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	cut := t.UnixMicro()
	fail := func(err error) (int64, error) {
		return 0, fmt.Errorf("records: delete before %s: %w", t.Format(time.RFC3339), err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	// The newest batch may go: its rows must not be assigned again.
	if _, err := tx.ExecContext(ctx, `UPDATE record_rows SET max_row = max(max_row, (SELECT COALESCE(MAX(id), 0) FROM record_batches))`); err != nil {
		return fail(err)
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(n), 0) FROM record_batches WHERE max_created < ?`, cut).Scan(&n); err != nil {
		return fail(err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM record_bumps WHERE batch IN (SELECT id FROM record_batches WHERE max_created < ?)`, cut); err != nil {
		return fail(err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM record_batches WHERE max_created < ?`, cut); err != nil {
		return fail(err)
	}
	type straddler struct {
		id   int64
		data []byte
	}
	var ss []straddler
	rows, err := tx.QueryContext(ctx, `SELECT id, data FROM record_batches WHERE min_created < ?`, cut)
	if err != nil {
		return fail(err)
	}
	for rows.Next() {
		var st straddler
		if err := rows.Scan(&st.id, &st.data); err != nil {
			rows.Close()
			return fail(err)
		}
		ss = append(ss, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	var e batchEncoder
	var v recordView
	for _, st := range ss {
		e.reset()
		var gone []int64
		br := newBatchReader(st.data)
		for br.next(&v) {
			if v.created < cut {
				gone = append(gone, v.row)
				continue
			}
			r := v.record()
			e.addRecord(&r)
		}
		if br.err != nil {
			return fail(br.err)
		}
		for _, row := range gone {
			if _, err := tx.ExecContext(ctx, `DELETE FROM record_bumps WHERE row = ?`, row); err != nil {
				return fail(err)
			}
		}
		n += int64(len(gone))
		if e.n == 0 {
			_, err = tx.ExecContext(ctx, `DELETE FROM record_batches WHERE id = ?`, st.id)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE record_batches SET min_row = ?, max_row = ?, min_created = ?, max_created = ?, n = ?, data = ? WHERE id = ?`,
				e.minRow, e.maxRow, e.minCreated, e.maxCreated, e.n, e.blob(nil), st.id)
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return n, nil
}

// MaxRow returns the largest row id ever assigned.
func (s *SQLite) MaxRow(ctx context.Context) (int64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.high, nil
}

// replaysSQL is the table of replays: only records with a Saved answer have a
// row, so the random-key primary key costs only requests with a client-
// chosen id, never the others (the records keep no such index).
const replaysSQL = `
CREATE TABLE IF NOT EXISTS replays (
  tenant     TEXT    NOT NULL,
  request_id TEXT    NOT NULL,
  row        INTEGER NOT NULL, -- records.id of the record
  key        TEXT    NOT NULL,
  status     INTEGER NOT NULL,
  answer     BLOB,             -- NULL: the answer was over MaxReplayBytes
  until      INTEGER NOT NULL, -- unix microseconds
  PRIMARY KEY (tenant, request_id)
) WITHOUT ROWID;
`

// writeReplayLocked stores rec's Saved for the record at row, replacing
// an older one of the same id (a retry computed again after a
// non-replayable answer).
func (s *SQLite) writeReplayLocked(ctx context.Context, dc any, row int64, rec records.Record) error {
	r := rec.Saved
	var answer any
	if r.Answer != nil {
		answer = r.Answer
	}
	if _, err := s.execLocked(ctx, dc, insertReplaySQL, rec.Tenant, rec.RequestID, row, r.Key, r.Status, answer, r.Until.UnixMicro()); err != nil {
		return fmt.Errorf("records: keep the answer of %s: %w", rec.RequestID, err)
	}
	return nil
}

const insertReplaySQL = `INSERT OR REPLACE INTO replays (tenant, request_id, row, key, status, answer, until) VALUES (?, ?, ?, ?, ?, ?, ?)`

// Lookup returns tenant's saved answer of requestID whose window has not
// ended at now, or nil. It reads through a connection of its own, so it
// does not wait for the writer's transactions.
func (s *SQLite) Lookup(ctx context.Context, tenant, requestID string, now time.Time) (*records.Found, error) {
	var k records.Found
	var until int64
	err := s.rdb.QueryRowContext(ctx, `SELECT row, key, status, answer, until FROM replays WHERE tenant = ? AND request_id = ? AND until > ?`,
		tenant, requestID, now.UnixMicro()).Scan(&k.Row, &k.Key, &k.Status, &k.Answer, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("records: look up request id %s: %w", requestID, err)
	}
	k.Until = time.UnixMicro(until).UTC()
	return &k, nil
}

// ExpireReplays deletes replays whose window ended before now.
func (s *SQLite) ExpireReplays(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM replays WHERE until < ?`, now.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("records: delete replays that ended before %s: %w", now.Format(time.RFC3339), err)
	}
	return res.RowsAffected()
}
