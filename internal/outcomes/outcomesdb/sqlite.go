// Package outcomesdb holds the databases of outcomes and experiments:
// SQLite (outcomes.db in the data directory, beside records.db, so that
// neither's writes wait for the other's) and PostgreSQL (the --store
// database, tables of its own), each an outcomes.Store and an
// outcomes.Experiments that pass outcomestest. Only app and tests import
// it.
package outcomesdb

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/sluiceml/sluice/internal/outcomes"
)

// SQLite is the outcomes database in one SQLite file.
type SQLite struct {
	db  *sql.DB // writes: one connection
	rdb *sql.DB // reads: connections of their own (WAL readers do not wait for the writer)
}

var _ outcomes.Store = (*SQLite)(nil)

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS outcome_joins (
  request_id TEXT    NOT NULL,
  tenant     TEXT    NOT NULL,
  model      TEXT    NOT NULL,
  version    INTEGER NOT NULL,
  policy     INTEGER NOT NULL,
  unit       TEXT    NOT NULL,
  created    INTEGER NOT NULL, -- unix microseconds
  scores     BLOB,             -- float32 little-endian, per instance
  PRIMARY KEY (request_id, tenant)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS outcome_joins_model ON outcome_joins (model, created);
CREATE INDEX IF NOT EXISTS outcome_joins_created ON outcome_joins (created);
CREATE TABLE IF NOT EXISTS outcomes (
  request_id TEXT    NOT NULL,
  instance   INTEGER NOT NULL,
  name       TEXT    NOT NULL,
  value      REAL    NOT NULL,
  at         INTEGER NOT NULL,
  model      TEXT    NOT NULL,
  version    INTEGER NOT NULL,
  policy     INTEGER NOT NULL,
  unit       TEXT    NOT NULL,
  created    INTEGER NOT NULL, -- the prediction's
  score      REAL,
  PRIMARY KEY (request_id, instance, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS outcomes_model ON outcomes (model, name, created);
CREATE INDEX IF NOT EXISTS outcomes_created ON outcomes (created);
` + experimentsSQL

// Open opens (creating) dir/outcomes.db.
func Open(dir string) (*SQLite, error) {
	path := filepath.Join(dir, "outcomes.db")
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-32768)&_pragma=temp_store(MEMORY)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("outcomes: open database: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(sqliteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("outcomes: create schema in %s: %w", path, err)
	}
	rdb, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("outcomes: open database: %w", err)
	}
	rdb.SetMaxOpenConns(2)
	return &SQLite{db: db, rdb: rdb}, nil
}

// Close closes the database.
func (s *SQLite) Close() error {
	s.rdb.Close()
	return s.db.Close()
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func encodeScores(sc []float32) []byte {
	if sc == nil {
		return nil
	}
	b := make([]byte, 4*len(sc))
	for i, v := range sc {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func decodeScores(b []byte) []float32 {
	if b == nil {
		return nil
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// WriteJoins inserts js in one transaction.
func (s *SQLite) WriteJoins(ctx context.Context, js []outcomes.Join) error {
	if len(js) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outcomes: begin: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO outcome_joins (request_id, tenant, model, version, policy, unit, created, scores) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("outcomes: write joins: %w", err)
	}
	defer st.Close()
	for _, j := range js {
		if _, err := st.ExecContext(ctx, j.RequestID, j.Tenant, j.Model, j.Version, j.Policy, j.Unit, micros(j.Created), encodeScores(j.Scores)); err != nil {
			return fmt.Errorf("outcomes: write join of %s: %w", j.RequestID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outcomes: commit joins: %w", err)
	}
	return nil
}

// inChunk bounds the parameters of one IN list.
const inChunk = 500

// Joins reads the joins of ids.
func (s *SQLite) Joins(ctx context.Context, ids []string) ([]outcomes.Join, error) {
	var out []outcomes.Join
	for len(ids) > 0 {
		n := min(len(ids), inChunk)
		part := ids[:n]
		ids = ids[n:]
		args := make([]any, n)
		for i, id := range part {
			args[i] = id
		}
		q := `SELECT request_id, tenant, model, version, policy, unit, created, scores FROM outcome_joins WHERE request_id IN (?` + strings.Repeat(",?", n-1) + `)`
		rows, err := s.rdb.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("outcomes: read joins: %w", err)
		}
		for rows.Next() {
			var j outcomes.Join
			var created int64
			var sc []byte
			if err := rows.Scan(&j.RequestID, &j.Tenant, &j.Model, &j.Version, &j.Policy, &j.Unit, &created, &sc); err != nil {
				rows.Close()
				return nil, fmt.Errorf("outcomes: read joins: %w", err)
			}
			j.Created, j.Scores = fromMicros(created), decodeScores(sc)
			out = append(out, j)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("outcomes: read joins: %w", err)
		}
	}
	return out, nil
}

// Put inserts os in one transaction, each once.
func (s *SQLite) Put(ctx context.Context, os []outcomes.Outcome) ([]bool, error) {
	fresh := make([]bool, len(os))
	if len(os) == 0 {
		return fresh, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("outcomes: begin: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO outcomes (request_id, instance, name, value, at, model, version, policy, unit, created, score) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return nil, fmt.Errorf("outcomes: put: %w", err)
	}
	defer st.Close()
	for i, o := range os {
		var score any
		if !math.IsNaN(o.Score) {
			score = o.Score
		}
		r, err := st.ExecContext(ctx, o.RequestID, o.Instance, o.Name, o.Value, micros(o.At), o.Model, o.Version, o.Policy, o.Unit, micros(o.Created), score)
		if err != nil {
			return nil, fmt.Errorf("outcomes: put %s: %w", o.RequestID, err)
		}
		n, _ := r.RowsAffected()
		fresh[i] = n > 0
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("outcomes: commit: %w", err)
	}
	return fresh, nil
}

func until(q outcomes.Query) int64 {
	if q.Until.IsZero() {
		return math.MaxInt64
	}
	return micros(q.Until)
}

// Arms sums q per version.
func (s *SQLite) Arms(ctx context.Context, q outcomes.Query) ([]outcomes.Arm, error) {
	arms := map[int]*outcomes.Arm{}
	get := func(v int) *outcomes.Arm {
		a := arms[v]
		if a == nil {
			a = &outcomes.Arm{Version: v}
			arms[v] = a
		}
		return a
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT version, COUNT(DISTINCT unit) FROM outcome_joins WHERE model = ? AND created >= ? AND created < ? GROUP BY version`, q.Model, micros(q.Since), until(q))
	if err != nil {
		return nil, fmt.Errorf("outcomes: count units: %w", err)
	}
	for rows.Next() {
		var v int
		var n int64
		if err := rows.Scan(&v, &n); err != nil {
			rows.Close()
			return nil, err
		}
		get(v).Units = n
	}
	rows.Close()
	rows, err = s.rdb.QueryContext(ctx, `SELECT version, COUNT(*), COALESCE(SUM(value), 0), COALESCE(SUM(value*value), 0) FROM outcomes WHERE model = ? AND name = ? AND created >= ? AND created < ? GROUP BY version`, q.Model, q.Name, micros(q.Since), until(q))
	if err != nil {
		return nil, fmt.Errorf("outcomes: sum outcomes: %w", err)
	}
	for rows.Next() {
		var v int
		var a outcomes.Arm
		if err := rows.Scan(&v, &a.N, &a.Sum, &a.SumSq); err != nil {
			rows.Close()
			return nil, err
		}
		g := get(v)
		g.N, g.Sum, g.SumSq = a.N, a.Sum, a.SumSq
	}
	rows.Close()
	return sortArms(arms), nil
}

// Pairs returns the newest scored outcomes of q.
func (s *SQLite) Pairs(ctx context.Context, q outcomes.Query, limit int) ([]outcomes.Pair, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT version, score, value FROM outcomes WHERE model = ? AND name = ? AND created >= ? AND created < ? AND score IS NOT NULL ORDER BY created DESC LIMIT ?`, q.Model, q.Name, micros(q.Since), until(q), limit)
	if err != nil {
		return nil, fmt.Errorf("outcomes: read pairs: %w", err)
	}
	defer rows.Close()
	var out []outcomes.Pair
	for rows.Next() {
		var p outcomes.Pair
		if err := rows.Scan(&p.Version, &p.Score, &p.Label); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// DeleteBefore deletes joins and outcomes of predictions before t.
func (s *SQLite) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	var n int64
	for _, q := range []string{`DELETE FROM outcome_joins WHERE created < ?`, `DELETE FROM outcomes WHERE created < ?`} {
		r, err := s.db.ExecContext(ctx, q, micros(t))
		if err != nil {
			return n, fmt.Errorf("outcomes: retention: %w", err)
		}
		k, _ := r.RowsAffected()
		n += k
	}
	return n, nil
}

func sortArms(m map[int]*outcomes.Arm) []outcomes.Arm {
	out := make([]outcomes.Arm, 0, len(m))
	for _, a := range m {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}
