// Package pgfeat is the PostgreSQL feature store (a features.Source and
// Pinger): view VIEW is the table VIEW (in the connection's search_path)
// with a column named as the entity field (its primary key: text, or
// bigint for an int entity), one numeric column per feature (NULL:
// absent) and an optional updated_at (timestamptz) that staleness is
// judged by. A lookup of N entities is one query (WHERE entity =
// ANY($1)); the table's columns are read once per view from
// information_schema, so a feature column the table lacks is absent, not
// an error. Names are identifiers modelpkg validated, and quoted all the
// same.
package pgfeat

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluiceml/sluice/internal/features"
	"github.com/sluiceml/sluice/internal/pgdb"
)

// UpdatedAt is the optional column of the values' time.
const UpdatedAt = "updated_at"

// MaxColumnsCache bounds the views whose columns are remembered.
const MaxColumnsCache = 1024

// Source is the PostgreSQL feature store at one URL.
type Source struct {
	pool *pgxpool.Pool
	url  string

	mu       sync.Mutex                 // guards cols, fetching
	cols     map[string]map[string]bool // view -> its columns
	fetching map[string]chan struct{}   // view -> closed when its columns' fetch ends
	wg       sync.WaitGroup             // the fetches
	ctx      context.Context            // cancelled by Close: ends the fetches
	cancel   context.CancelFunc
}

// ColumnsTimeout bounds the one read of a view's columns. It runs apart
// from the request that needed it (whose budget is a few milliseconds,
// less than information_schema takes on a busy server): that request
// gets its defaults if it cannot wait, the next ones find the columns.
const ColumnsTimeout = 5 * time.Second

// Open connects to rawURL lazily (pgx dials on first use, so a gateway
// starts while the database is down): a bad URL is an error naming
// --features-postgres.
func Open(ctx context.Context, rawURL string) (*Source, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--features-postgres %s: not a PostgreSQL URL (postgres://USER@HOST:PORT/DB?sslmode=disable): %v", pgdb.Redact(rawURL), err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = time.Second
	}
	cfg.MaxConns = 16
	// Connections are kept open: a request's budget is too short to dial.
	cfg.MinConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--features-postgres %s: %v", pgdb.Redact(rawURL), err)
	}
	s := &Source{pool: pool, url: pgdb.Redact(rawURL), cols: map[string]map[string]bool{}, fetching: map[string]chan struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// URL is the store's URL without its password.
func (s *Source) URL() string { return s.url }

// Close ends the columns' fetches and closes the pool.
func (s *Source) Close() {
	s.cancel()
	s.wg.Wait()
	s.pool.Close()
}

// Ping checks the database answers.
func (s *Source) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// columns is view's columns, read once (ColumnsTimeout, apart from ctx,
// one fetch per view at a time) and waited for within ctx.
func (s *Source) columns(ctx context.Context, view string) (map[string]bool, error) {
	s.mu.Lock()
	if c, ok := s.cols[view]; ok {
		s.mu.Unlock()
		return c, nil
	}
	done, ok := s.fetching[view]
	if !ok {
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			return nil, s.ctx.Err()
		}
		done = make(chan struct{})
		s.fetching[view] = done
		s.wg.Add(1)
		go s.fetchColumns(view, done)
	}
	s.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cols[view]; ok {
		return c, nil
	}
	return map[string]bool{}, nil // no such table (yet): every entity unknown
}

func (s *Source) fetchColumns(view string, done chan struct{}) {
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(s.ctx, ColumnsTimeout)
	defer cancel()
	var c map[string]bool
	rows, err := s.pool.Query(ctx, `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1`, view)
	if err == nil {
		var names []string
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil && len(names) > 0 {
			c = map[string]bool{}
			for _, n := range names {
				c[n] = true
			}
		}
	}
	s.mu.Lock()
	delete(s.fetching, view)
	if c != nil {
		if len(s.cols) >= MaxColumnsCache {
			clear(s.cols)
		}
		s.cols[view] = c // a missing table is not remembered: it may be made later
	}
	s.mu.Unlock()
	close(done)
}

// Lookup reads the view's fields of the entities: one query (plus, the
// first time a view is read, one for its columns).
func (s *Source) Lookup(ctx context.Context, v *features.View, entities []string, out []features.Row) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(entities) == 0 {
		return s.pool.Ping(ctx)
	}
	for i := range out {
		out[i].Found, out[i].At = false, time.Time{}
		for k := range out[i].Values {
			out[i].Values[k] = math.NaN()
		}
	}
	cols, err := s.columns(ctx, v.Name)
	if err != nil {
		return err
	}
	if !cols[v.Entity] {
		return nil // no such table or no entity column: nobody is known
	}
	var q strings.Builder
	q.WriteString("SELECT ")
	q.WriteString(pgx.Identifier{v.Entity}.Sanitize())
	q.WriteString("::text")
	idx := make([]int, 0, len(v.Fields)) // field index of each selected column
	for k, f := range v.Fields {
		if cols[f] {
			q.WriteString(", " + pgx.Identifier{f}.Sanitize() + "::float8")
			idx = append(idx, k)
		}
	}
	hasTS := cols[UpdatedAt]
	if hasTS {
		q.WriteString(", " + pgx.Identifier{UpdatedAt}.Sanitize())
	}
	q.WriteString(" FROM " + pgx.Identifier{v.Name}.Sanitize() + " WHERE " + pgx.Identifier{v.Entity}.Sanitize() + " = ANY($1)")
	var arg any = entities
	if v.EntityInt {
		ids := make([]int64, 0, len(entities))
		for _, e := range entities {
			if n, err := strconv.ParseInt(e, 10, 64); err == nil {
				ids = append(ids, n)
			}
		}
		arg = ids
	}
	rows, err := s.pool.Query(ctx, q.String(), arg)
	if err != nil {
		return err
	}
	defer rows.Close()
	pos := make(map[string][]int, len(entities))
	for i, e := range entities {
		pos[e] = append(pos[e], i)
	}
	ent := ""
	vals := make([]*float64, len(idx))
	var ts *time.Time
	dst := make([]any, 0, 2+len(idx))
	dst = append(dst, &ent)
	for i := range vals {
		dst = append(dst, &vals[i])
	}
	if hasTS {
		dst = append(dst, &ts)
	}
	for rows.Next() {
		ts = nil
		if err := rows.Scan(dst...); err != nil {
			return err
		}
		for _, i := range pos[ent] {
			r := &out[i]
			r.Found = true
			for j, k := range idx {
				if vals[j] != nil && k < len(r.Values) && !math.IsInf(*vals[j], 0) {
					r.Values[k] = *vals[j]
				}
			}
			if ts != nil {
				r.At = *ts
			}
		}
	}
	return rows.Err()
}
