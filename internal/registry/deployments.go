package registry

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

const deploymentsSQL = `
CREATE TABLE IF NOT EXISTS policies (
  model      TEXT    NOT NULL,
  version    INTEGER NOT NULL,
  targets    TEXT    NOT NULL,
  created_at INTEGER NOT NULL,
  actor      TEXT    NOT NULL,
  reason     TEXT    NOT NULL,
  diff       TEXT    NOT NULL,
  PRIMARY KEY (model, version)
);
CREATE TABLE IF NOT EXISTS audit (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  model      TEXT    NOT NULL,
  at         INTEGER NOT NULL,
  actor      TEXT    NOT NULL,
  action     TEXT    NOT NULL,
  what       TEXT    NOT NULL,
  reason     TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_model_at ON audit (model, at);
CREATE TABLE IF NOT EXISTS rollouts (
  model      TEXT    PRIMARY KEY,
  state      TEXT    NOT NULL,
  updated_at INTEGER NOT NULL
);`

// Target is one version in a deployment policy.
type Target struct {
	Version int  `json:"version"`
	Weight  int  `json:"weight"`           // percent of traffic; 0 for shadows
	Shadow  bool `json:"shadow,omitempty"` // takes copies of requests, never answers
}

// Policy is one version of a model's deployment: who answers what share.
// Policies are immutable; every change makes a new one.
type Policy struct {
	Model     string    `json:"model"`
	Version   int       `json:"policyVersion"`
	Targets   []Target  `json:"targets"`
	CreatedAt time.Time `json:"createdAt"`
	Actor     string    `json:"actor"`
	Reason    string    `json:"reason"`
	Diff      string    `json:"diff"`
}

// Event is one audit event: a policy change or a rollout action.
type Event struct {
	Seq    int64     `json:"-"` // its place in the audit log (set by Events and EventPage)
	Model  string    `json:"model"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	What   string    `json:"what"`
	Reason string    `json:"reason"`
}

// SetPolicy stores the next policy version of p.Model (p.Version is
// assigned) and its audit event in one transaction. If expect >= 0 and the
// current policy version differs, nothing is written and AlreadyExists (409)
// is returned, so concurrent changes cannot overwrite each other.
func (s *SQLite) SetPolicy(ctx context.Context, p Policy, expect int) (Policy, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Policy{}, storeErr(err)
	}
	defer tx.Rollback()
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version),0) FROM policies WHERE model=?`, p.Model).Scan(&cur); err != nil {
		return Policy{}, storeErr(err)
	}
	if expect >= 0 && cur != expect {
		return Policy{}, errs.New(errs.AlreadyExists, "deployment of %s changed meanwhile (policy version %d, expected %d); read it again", p.Model, cur, expect)
	}
	p.Version = cur + 1
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now().UTC()
	}
	tj, _ := json.Marshal(p.Targets)
	if _, err := tx.ExecContext(ctx, `INSERT INTO policies (model, version, targets, created_at, actor, reason, diff) VALUES (?,?,?,?,?,?,?)`,
		p.Model, p.Version, string(tj), p.CreatedAt.UnixMicro(), p.Actor, p.Reason, p.Diff); err != nil {
		return Policy{}, storeErr(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit (model, at, actor, action, what, reason) VALUES (?,?,?,?,?,?)`,
		p.Model, p.CreatedAt.UnixMicro(), p.Actor, "policy", p.Diff, p.Reason); err != nil {
		return Policy{}, storeErr(err)
	}
	if err := tx.Commit(); err != nil {
		return Policy{}, storeErr(err)
	}
	return p, nil
}

// Audit records an event that is not a policy change (rollout actions).
func (s *SQLite) Audit(ctx context.Context, e Event) error {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO audit (model, at, actor, action, what, reason) VALUES (?,?,?,?,?,?)`,
		e.Model, e.At.UnixMicro(), e.Actor, e.Action, e.What, e.Reason)
	return storeErr(err)
}

func scanPolicy(r interface{ Scan(...any) error }) (Policy, error) {
	var p Policy
	var tj string
	var at int64
	if err := r.Scan(&p.Model, &p.Version, &tj, &at, &p.Actor, &p.Reason, &p.Diff); err != nil {
		return p, err
	}
	p.CreatedAt = time.UnixMicro(at).UTC()
	if err := json.Unmarshal([]byte(tj), &p.Targets); err != nil {
		return p, err
	}
	return p, nil
}

const policyCols = `model, version, targets, created_at, actor, reason, diff`

// Policies returns the policy history of model, oldest first (all models
// when model is "").
func (s *SQLite) Policies(ctx context.Context, model string) ([]Policy, error) {
	q := `SELECT ` + policyCols + ` FROM policies WHERE model=? ORDER BY version`
	args := []any{model}
	if model == "" {
		q = `SELECT ` + policyCols + ` FROM policies ORDER BY model, version`
		args = nil
	}
	return s.policies(ctx, q, args...)
}

// Current returns the policy in force of every model, by model.
func (s *SQLite) Current(ctx context.Context) ([]Policy, error) {
	return s.policies(ctx, `SELECT `+policyCols+` FROM policies p WHERE version = (SELECT MAX(version) FROM policies q WHERE q.model = p.model) ORDER BY model`)
}

// PolicyAt returns the policy of model in force at t.
func (s *SQLite) PolicyAt(ctx context.Context, model string, t time.Time) (Policy, error) {
	p, err := scanPolicy(s.db.QueryRowContext(ctx, `SELECT `+policyCols+` FROM policies WHERE model=? AND created_at<=? ORDER BY version DESC LIMIT 1`, model, t.UnixMicro()))
	if errors.Is(err, sql.ErrNoRows) {
		return Policy{}, errs.New(errs.NotFound, "model %s had no deployment at %s", model, t.Format(time.RFC3339Nano))
	}
	if err != nil {
		return Policy{}, storeErr(err)
	}
	return p, nil
}

// PolicyPage returns at most limit policies of model with a version above
// after, oldest first.
func (s *SQLite) PolicyPage(ctx context.Context, model string, after, limit int) ([]Policy, error) {
	return s.policies(ctx, `SELECT `+policyCols+` FROM policies WHERE model=? AND version>? ORDER BY version LIMIT ?`, model, after, limit)
}

// policies runs a query of policyCols and scans every row.
func (s *SQLite) policies(ctx context.Context, q string, args ...any) ([]Policy, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, storeErr(err)
	}
	defer rows.Close()
	var out []Policy
	for rows.Next() {
		p, err := scanPolicy(rows)
		if err != nil {
			return nil, storeErr(err)
		}
		out = append(out, p)
	}
	return out, storeErr(rows.Err())
}

// Events returns the audit events of model, oldest first.
func (s *SQLite) Events(ctx context.Context, model string) ([]Event, error) {
	return s.EventPage(ctx, model, 0, -1)
}

// EventPage returns at most limit (< 0: every) audit events of model
// after the one with Seq after, oldest first.
func (s *SQLite) EventPage(ctx context.Context, model string, after int64, limit int) ([]Event, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, model, at, actor, action, what, reason FROM audit WHERE model=? AND id>? ORDER BY id LIMIT ?`, model, after, limit)
	if err != nil {
		return nil, storeErr(err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var at int64
		if err := rows.Scan(&e.Seq, &e.Model, &at, &e.Actor, &e.Action, &e.What, &e.Reason); err != nil {
			return nil, storeErr(err)
		}
		e.At = time.UnixMicro(at).UTC()
		out = append(out, e)
	}
	return out, storeErr(rows.Err())
}

// SaveRollout stores the latest rollout state of model (an opaque JSON
// document owned by the control plane).
func (s *SQLite) SaveRollout(ctx context.Context, model string, state []byte) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO rollouts (model, state, updated_at) VALUES (?,?,?)
		ON CONFLICT(model) DO UPDATE SET state=excluded.state, updated_at=excluded.updated_at`, model, string(state), time.Now().UTC().UnixMicro())
	return storeErr(err)
}

// Rollouts returns the stored rollout state of every model.
func (s *SQLite) Rollouts(ctx context.Context) (map[string][]byte, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT model, state FROM rollouts`)
	if err != nil {
		return nil, storeErr(err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var m, st string
		if err := rows.Scan(&m, &st); err != nil {
			return nil, storeErr(err)
		}
		out[m] = []byte(st)
	}
	return out, storeErr(rows.Err())
}
