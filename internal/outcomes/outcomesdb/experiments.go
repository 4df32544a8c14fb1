package outcomesdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/outcomes"
	"github.com/sluiceml/sluice/internal/pgdb"
)

var (
	_ outcomes.ExperimentStore = (*SQLite)(nil)
	_ outcomes.ExperimentStore = (*Postgres)(nil)
)

// experimentsSQL is the experiments' tables (the same text in both
// databases): one running experiment per model (a partial unique index),
// the spec as JSON, the last refresh and a bounded history.
const experimentsSQL = `
CREATE TABLE IF NOT EXISTS experiments (
  id      BIGINT  PRIMARY KEY,
  model   TEXT    NOT NULL,
  spec    TEXT    NOT NULL, -- api.ExperimentSpec JSON
  started BIGINT  NOT NULL, -- unix microseconds
  stopped BIGINT  NOT NULL, -- 0: running
  actor   TEXT    NOT NULL,
  reason  TEXT    NOT NULL,
  pvalue  DOUBLE PRECISION NOT NULL,
  last    TEXT              -- api.Experiment JSON of the last refresh
);
CREATE UNIQUE INDEX IF NOT EXISTS experiments_running ON experiments (model) WHERE stopped = 0;
CREATE INDEX IF NOT EXISTS experiments_model ON experiments (model, id);
CREATE TABLE IF NOT EXISTS experiment_history (
  experiment BIGINT NOT NULL,
  at         BIGINT NOT NULL,
  pvalue     DOUBLE PRECISION NOT NULL,
  body       TEXT   NOT NULL,
  PRIMARY KEY (experiment, at)
);
`

const expCols = `id, model, spec, started, stopped, actor, reason, pvalue, last`

type scanner interface{ Scan(...any) error }

func scanExp(r scanner) (outcomes.Experiment, error) {
	var e outcomes.Experiment
	var spec string
	var last sql.NullString
	var started, stopped int64
	if err := r.Scan(&e.ID, &e.Model, &spec, &started, &stopped, &e.Actor, &e.Reason, &e.PValue, &last); err != nil {
		return e, err
	}
	if err := json.Unmarshal([]byte(spec), &e.Spec); err != nil {
		return e, fmt.Errorf("outcomes: experiment %d: spec: %w", e.ID, err)
	}
	e.Started = fromMicros(started)
	if stopped != 0 {
		e.Stopped = fromMicros(stopped)
	}
	if last.Valid {
		e.Last = []byte(last.String)
	}
	return e, nil
}

func specJSON(s api.ExperimentSpec) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// StartExperiment stores e.
func (s *SQLite) StartExperiment(ctx context.Context, e outcomes.Experiment) (outcomes.Experiment, error) {
	var id int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) + 1 FROM experiments`).Scan(&id); err != nil {
		return e, fmt.Errorf("outcomes: start experiment: %w", err)
	}
	e.ID = id
	_, err := s.db.ExecContext(ctx, `INSERT INTO experiments (`+expCols+`) VALUES (?, ?, ?, ?, 0, ?, ?, ?, NULL)`,
		e.ID, e.Model, specJSON(e.Spec), micros(e.Started), e.Actor, e.Reason, e.PValue)
	if err != nil && strings.Contains(err.Error(), "UNIQUE") {
		return e, outcomes.ErrRunning
	}
	if err != nil {
		return e, fmt.Errorf("outcomes: start experiment: %w", err)
	}
	return e, nil
}

// LatestExperiment is model's newest experiment.
func (s *SQLite) LatestExperiment(ctx context.Context, model string) (*outcomes.Experiment, error) {
	e, err := scanExp(s.db.QueryRowContext(ctx, `SELECT `+expCols+` FROM experiments WHERE model = ? ORDER BY id DESC LIMIT 1`, model))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outcomes: read experiment: %w", err)
	}
	return &e, nil
}

// RunningExperiments lists the running experiments.
func (s *SQLite) RunningExperiments(ctx context.Context) ([]outcomes.Experiment, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+expCols+` FROM experiments WHERE stopped = 0 ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("outcomes: list experiments: %w", err)
	}
	defer rows.Close()
	var out []outcomes.Experiment
	for rows.Next() {
		e, err := scanExp(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// StopExperiment marks id stopped.
func (s *SQLite) StopExperiment(ctx context.Context, id int64, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE experiments SET stopped = ? WHERE id = ? AND stopped = 0`, micros(at), id)
	if err != nil {
		return fmt.Errorf("outcomes: stop experiment: %w", err)
	}
	return nil
}

// SaveSnapshot stores a refresh.
func (s *SQLite) SaveSnapshot(ctx context.Context, id int64, sn outcomes.Snapshot) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE experiments SET pvalue = ?, last = ? WHERE id = ?`, sn.PValue, string(sn.Body), id); err != nil {
		return fmt.Errorf("outcomes: save snapshot: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO experiment_history (experiment, at, pvalue, body) VALUES (?, ?, ?, ?)`, id, micros(sn.At), sn.PValue, string(sn.Body)); err != nil {
		return fmt.Errorf("outcomes: save snapshot: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM experiment_history WHERE experiment = ? AND at <= (SELECT at FROM experiment_history WHERE experiment = ? ORDER BY at DESC LIMIT 1 OFFSET ?)`, id, id, outcomes.MaxHistory); err != nil {
		return fmt.Errorf("outcomes: prune history: %w", err)
	}
	return tx.Commit()
}

// History returns the newest snapshots of id.
func (s *SQLite) History(ctx context.Context, id int64, limit int) ([]outcomes.Snapshot, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT at, pvalue, body FROM experiment_history WHERE experiment = ? ORDER BY at DESC LIMIT ?`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("outcomes: read history: %w", err)
	}
	defer rows.Close()
	var out []outcomes.Snapshot
	for rows.Next() {
		var sn outcomes.Snapshot
		var at int64
		var body string
		if err := rows.Scan(&at, &sn.PValue, &body); err != nil {
			return nil, err
		}
		sn.At, sn.Body = fromMicros(at), []byte(body)
		out = append(out, sn)
	}
	return out, rows.Err()
}

// StartExperiment stores e.
func (s *Postgres) StartExperiment(ctx context.Context, e outcomes.Experiment) (outcomes.Experiment, error) {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	err := s.pool.QueryRow(ctx, `INSERT INTO experiments (`+expCols+`) VALUES (nextval('experiment_ids'), $1, $2, $3, 0, $4, $5, $6, NULL) RETURNING id`,
		e.Model, specJSON(e.Spec), micros(e.Started), e.Actor, e.Reason, e.PValue).Scan(&e.ID)
	if pgdb.UniqueViolation(err) {
		return e, outcomes.ErrRunning
	}
	if err != nil {
		return e, fmt.Errorf("outcomes: start experiment: %w", err)
	}
	return e, nil
}

// LatestExperiment is model's newest experiment.
func (s *Postgres) LatestExperiment(ctx context.Context, model string) (*outcomes.Experiment, error) {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	e, err := scanExp(s.pool.QueryRow(ctx, `SELECT `+expCols+` FROM experiments WHERE model = $1 ORDER BY id DESC LIMIT 1`, model))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outcomes: read experiment: %w", err)
	}
	return &e, nil
}

// RunningExperiments lists the running experiments.
func (s *Postgres) RunningExperiments(ctx context.Context) ([]outcomes.Experiment, error) {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+expCols+` FROM experiments WHERE stopped = 0 ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("outcomes: list experiments: %w", err)
	}
	defer rows.Close()
	var out []outcomes.Experiment
	for rows.Next() {
		e, err := scanExp(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// StopExperiment marks id stopped.
func (s *Postgres) StopExperiment(ctx context.Context, id int64, at time.Time) error {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE experiments SET stopped = $1 WHERE id = $2 AND stopped = 0`, micros(at), id); err != nil {
		return fmt.Errorf("outcomes: stop experiment: %w", err)
	}
	return nil
}

// SaveSnapshot stores a refresh.
func (s *Postgres) SaveSnapshot(ctx context.Context, id int64, sn outcomes.Snapshot) error {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `UPDATE experiments SET pvalue = $1, last = $2 WHERE id = $3`, sn.PValue, string(sn.Body), id); err != nil {
		return fmt.Errorf("outcomes: save snapshot: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO experiment_history (experiment, at, pvalue, body) VALUES ($1, $2, $3, $4)
ON CONFLICT (experiment, at) DO UPDATE SET pvalue = EXCLUDED.pvalue, body = EXCLUDED.body`, id, micros(sn.At), sn.PValue, string(sn.Body)); err != nil {
		return fmt.Errorf("outcomes: save snapshot: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM experiment_history WHERE experiment = $1 AND at <= (SELECT at FROM experiment_history WHERE experiment = $1 ORDER BY at DESC LIMIT 1 OFFSET $2)`, id, outcomes.MaxHistory); err != nil {
		return fmt.Errorf("outcomes: prune history: %w", err)
	}
	return tx.Commit(ctx)
}

// History returns the newest snapshots of id.
func (s *Postgres) History(ctx context.Context, id int64, limit int) ([]outcomes.Snapshot, error) {
	ctx, cancel := pgdb.Op(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT at, pvalue, body FROM experiment_history WHERE experiment = $1 ORDER BY at DESC LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("outcomes: read history: %w", err)
	}
	defer rows.Close()
	var out []outcomes.Snapshot
	for rows.Next() {
		var sn outcomes.Snapshot
		var at int64
		var body string
		if err := rows.Scan(&at, &sn.PValue, &body); err != nil {
			return nil, err
		}
		sn.At, sn.Body = fromMicros(at), []byte(body)
		out = append(out, sn)
	}
	return out, rows.Err()
}
