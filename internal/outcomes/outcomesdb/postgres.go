package outcomesdb

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluiceml/sluice/internal/outcomes"
	"github.com/sluiceml/sluice/internal/pgdb"
)

// Postgres is the outcomes store in the PostgreSQL database several
// gateways share: a join written by one gateway is found by an outcome
// posted to another.
type Postgres struct {
	pool *pgxpool.Pool
}

var _ outcomes.Store = (*Postgres)(nil)

var pgMigrations = []pgdb.Migration{
	{Version: 1, SQL: `
CREATE TABLE outcome_joins (
  request_id TEXT    NOT NULL,
  tenant     TEXT    NOT NULL,
  model      TEXT    NOT NULL,
  version    INTEGER NOT NULL,
  policy     INTEGER NOT NULL,
  unit       TEXT    NOT NULL,
  created    BIGINT  NOT NULL, -- unix microseconds
  scores     BYTEA,
  PRIMARY KEY (request_id, tenant)
);
CREATE INDEX outcome_joins_model ON outcome_joins (model, created);
CREATE INDEX outcome_joins_created ON outcome_joins (created);
CREATE TABLE outcomes (
  request_id TEXT             NOT NULL,
  instance   INTEGER          NOT NULL,
  name       TEXT             NOT NULL,
  value      DOUBLE PRECISION NOT NULL,
  at         BIGINT           NOT NULL,
  model      TEXT             NOT NULL,
  version    INTEGER          NOT NULL,
  policy     INTEGER          NOT NULL,
  unit       TEXT             NOT NULL,
  created    BIGINT           NOT NULL,
  score      DOUBLE PRECISION,
  PRIMARY KEY (request_id, instance, name)
);
CREATE INDEX outcomes_model ON outcomes (model, name, created);
CREATE INDEX outcomes_created ON outcomes (created);
`},
	{Version: 2, SQL: experimentsSQL + `CREATE SEQUENCE experiment_ids START 1;`},
}

// OpenPostgres connects to url and applies the outcomes' migrations.
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	pool, err := pgdb.OpenMigrated(ctx, url, "outcomes", pgMigrations)
	if err != nil {
		return nil, err
	}
	return &Postgres{pool: pool}, nil
}

// Close closes the pool.
func (s *Postgres) Close() error { s.pool.Close(); return nil }

// WriteJoins inserts js in one statement.
func (s *Postgres) WriteJoins(ctx context.Context, js []outcomes.Join) error {
	if len(js) == 0 {
		return nil
	}
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	n := len(js)
	ids, tenants, models, units := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions, policies := make([]int32, n), make([]int32, n)
	created := make([]int64, n)
	scores := make([][]byte, n)
	for i, j := range js {
		ids[i], tenants[i], models[i], units[i] = j.RequestID, j.Tenant, j.Model, j.Unit
		versions[i], policies[i], created[i], scores[i] = int32(j.Version), int32(j.Policy), micros(j.Created), encodeScores(j.Scores)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO outcome_joins (request_id, tenant, model, version, policy, unit, created, scores)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::text[], $7::bigint[], $8::bytea[])
ON CONFLICT DO NOTHING`, ids, tenants, models, versions, policies, units, created, scores)
	if err != nil {
		return fmt.Errorf("outcomes: write joins: %w", err)
	}
	return nil
}

// Joins reads the joins of ids.
func (s *Postgres) Joins(ctx context.Context, ids []string) ([]outcomes.Join, error) {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT request_id, tenant, model, version, policy, unit, created, scores FROM outcome_joins WHERE request_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("outcomes: read joins: %w", err)
	}
	defer rows.Close()
	var out []outcomes.Join
	for rows.Next() {
		var j outcomes.Join
		var created int64
		var sc []byte
		if err := rows.Scan(&j.RequestID, &j.Tenant, &j.Model, &j.Version, &j.Policy, &j.Unit, &created, &sc); err != nil {
			return nil, fmt.Errorf("outcomes: read joins: %w", err)
		}
		j.Created, j.Scores = fromMicros(created), decodeScores(sc)
		out = append(out, j)
	}
	return out, rows.Err()
}

// Put inserts os in one statement; RETURNING says which were new.
func (s *Postgres) Put(ctx context.Context, os []outcomes.Outcome) ([]bool, error) {
	fresh := make([]bool, len(os))
	if len(os) == 0 {
		return fresh, nil
	}
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	n := len(os)
	ids, names, models, units := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	inst, versions, policies := make([]int32, n), make([]int32, n), make([]int32, n)
	vals, scores := make([]float64, n), make([]*float64, n)
	at, created := make([]int64, n), make([]int64, n)
	ord := make([]int32, n)
	for i, o := range os {
		ids[i], names[i], models[i], units[i] = o.RequestID, o.Name, o.Model, o.Unit
		inst[i], versions[i], policies[i] = int32(o.Instance), int32(o.Version), int32(o.Policy)
		vals[i], at[i], created[i], ord[i] = o.Value, micros(o.At), micros(o.Created), int32(i)
		if !math.IsNaN(o.Score) {
			v := o.Score
			scores[i] = &v
		}
	}
	// A batch may repeat a key: the first of each is the one stored.
	rows, err := s.pool.Query(ctx, `WITH b AS (
  SELECT DISTINCT ON (r, i, n) * FROM unnest($1::text[], $2::int[], $3::text[], $4::float8[], $5::bigint[], $6::text[], $7::int[], $8::int[], $9::text[], $10::bigint[], $11::float8[], $12::int[])
    AS t(r, i, n, v, a, m, ver, p, u, c, s, o) ORDER BY r, i, n, o)
INSERT INTO outcomes (request_id, instance, name, value, at, model, version, policy, unit, created, score)
SELECT r, i, n, v, a, m, ver, p, u, c, s FROM b
ON CONFLICT DO NOTHING RETURNING request_id, instance, name`, ids, inst, names, vals, at, models, versions, policies, units, created, scores, ord)
	if err != nil {
		return nil, fmt.Errorf("outcomes: put: %w", err)
	}
	defer rows.Close()
	type key struct {
		id   string
		inst int32
		name string
	}
	added := map[key]bool{}
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.id, &k.inst, &k.name); err != nil {
			return nil, fmt.Errorf("outcomes: put: %w", err)
		}
		added[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outcomes: put: %w", err)
	}
	for i, o := range os {
		k := key{o.RequestID, int32(o.Instance), o.Name}
		if added[k] {
			fresh[i] = true
			delete(added, k) // a repeat later in the batch is a duplicate
		}
	}
	return fresh, nil
}

// Arms sums q per version.
func (s *Postgres) Arms(ctx context.Context, q outcomes.Query) ([]outcomes.Arm, error) {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	arms := map[int]*outcomes.Arm{}
	get := func(v int) *outcomes.Arm {
		a := arms[v]
		if a == nil {
			a = &outcomes.Arm{Version: v}
			arms[v] = a
		}
		return a
	}
	rows, err := s.pool.Query(ctx, `SELECT version, COUNT(DISTINCT unit) FROM outcome_joins WHERE model = $1 AND created >= $2 AND created < $3 GROUP BY version`, q.Model, micros(q.Since), until(q))
	if err != nil {
		return nil, fmt.Errorf("outcomes: count units: %w", err)
	}
	for rows.Next() {
		var v int32
		var n int64
		if err := rows.Scan(&v, &n); err != nil {
			rows.Close()
			return nil, err
		}
		get(int(v)).Units = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outcomes: count units: %w", err)
	}
	rows, err = s.pool.Query(ctx, `SELECT version, COUNT(*), COALESCE(SUM(value), 0), COALESCE(SUM(value*value), 0) FROM outcomes WHERE model = $1 AND name = $2 AND created >= $3 AND created < $4 GROUP BY version`, q.Model, q.Name, micros(q.Since), until(q))
	if err != nil {
		return nil, fmt.Errorf("outcomes: sum outcomes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int32
		var a outcomes.Arm
		if err := rows.Scan(&v, &a.N, &a.Sum, &a.SumSq); err != nil {
			return nil, err
		}
		g := get(int(v))
		g.N, g.Sum, g.SumSq = a.N, a.Sum, a.SumSq
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outcomes: sum outcomes: %w", err)
	}
	return sortArms(arms), nil
}

// Pairs returns the newest scored outcomes of q.
func (s *Postgres) Pairs(ctx context.Context, q outcomes.Query, limit int) ([]outcomes.Pair, error) {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT version, score, value FROM outcomes WHERE model = $1 AND name = $2 AND created >= $3 AND created < $4 AND score IS NOT NULL ORDER BY created DESC LIMIT $5`, q.Model, q.Name, micros(q.Since), until(q), limit)
	if err != nil {
		return nil, fmt.Errorf("outcomes: read pairs: %w", err)
	}
	defer rows.Close()
	var out []outcomes.Pair
	for rows.Next() {
		var p outcomes.Pair
		var v int32
		if err := rows.Scan(&v, &p.Score, &p.Label); err != nil {
			return nil, err
		}
		p.Version = int(v)
		out = append(out, p)
	}
	return out, rows.Err()
}

// DeleteBefore deletes joins and outcomes of predictions before t.
func (s *Postgres) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	var n int64
	for _, q := range []string{`DELETE FROM outcome_joins WHERE created < $1`, `DELETE FROM outcomes WHERE created < $1`} {
		tag, err := s.pool.Exec(ctx, q, micros(t))
		if err != nil {
			return n, fmt.Errorf("outcomes: retention: %w", err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}
