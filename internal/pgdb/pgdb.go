// Package pgdb opens Sluice's PostgreSQL database for the stores that
// live in it (the registry and the prediction records): a pgx connection
// pool, versioned migrations applied at start, and URLs with their
// password redacted for logs and errors.
//
// Migrations are numbered per component ("registry", "records") in the
// table sluice_schema. Open applies the missing ones in one transaction
// that first takes a transaction-level advisory lock, so several gateways
// starting at once apply each migration once and the later ones wait,
// then find nothing to do. A database whose schema is newer than the
// binary knows (a newer Sluice migrated it) is refused with an error that
// says so: an older binary writing a newer schema could lose data.
package pgdb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// IsURL reports whether store names a PostgreSQL database
// (postgres:// or postgresql://).
func IsURL(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// Redact returns the URL with its password (in the user info or a
// password= parameter) replaced by "xxxxx", for logs and errors.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://(unparsable URL, not shown)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Migration is one numbered schema change of a component.
type Migration struct {
	Version int    // 1, 2, …: applied in order, each once
	SQL     string // statements run in the migration's transaction
}

// lockKey is the advisory lock every migration transaction takes
// (pg_advisory_xact_lock): "sluice" in ASCII.
const lockKey = 0x736c75696365

// ConnectTimeout bounds each connection attempt (pgx's connect_timeout
// parameter overrides it).
const ConnectTimeout = 5 * time.Second

// Open connects to the database at rawURL (the password from the URL or
// PGPASSWORD, as libpq reads it) and checks it answers. Errors name the
// URL redacted.
func Open(ctx context.Context, rawURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--store %s: not a PostgreSQL URL (postgres://USER@HOST:PORT/DB?sslmode=disable): %v", Redact(rawURL), redactErr(err, rawURL))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = ConnectTimeout
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--store %s: %v", Redact(rawURL), redactErr(err, rawURL))
	}
	pctx, cancel := context.WithTimeout(ctx, 2*ConnectTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("--store %s: cannot reach PostgreSQL: %v", Redact(rawURL), redactErr(err, rawURL))
	}
	return pool, nil
}

// redactErr is err's text without the URL's password, should a driver
// message quote it.
func redactErr(err error, rawURL string) string {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
		if pw := u.Query().Get("password"); pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// OpenMigrated is Open followed by Migrate of component's schema: what
// each store does first. Errors start with the component and name the URL
// redacted; the pool is closed on a failed migration.
func OpenMigrated(ctx context.Context, rawURL, component string, ms []Migration) (*pgxpool.Pool, error) {
	pool, err := Open(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", component, err)
	}
	if _, err := Migrate(ctx, pool, component, ms); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: --store %s: %w", component, Redact(rawURL), err)
	}
	return pool, nil
}

// OpTimeout bounds a statement's wait for the database when its caller set
// no deadline: a database that stops answering fails the call (503, or a
// counted failed batch of records) instead of holding it.
const OpTimeout = 10 * time.Second

// Op is ctx for one statement: ctx's own deadline if it has one, else
// OpTimeout.
func Op(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, OpTimeout)
}

// NewerSchemaError is Migrate's refusal of a database migrated by a newer
// Sluice.
type NewerSchemaError struct {
	Component string
	Have      int // the database's schema version
	Know      int // the newest this binary knows
}

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("the %s schema in the database is version %d, newer than this sluice binary knows (%d): a newer sluice migrated it; run that version (or newer), or restore a backup taken before the upgrade",
		e.Component, e.Have, e.Know)
}

// Migrate brings component's schema to the newest of ms (sorted by
// Version, from 1, no gaps) in one transaction under the advisory lock.
// It returns the version the database had before.
func Migrate(ctx context.Context, pool *pgxpool.Pool, component string, ms []Migration) (int, error) {
	for i, m := range ms {
		if m.Version != i+1 {
			return 0, fmt.Errorf("pgdb: %s migration %d has version %d (want %d): the list must run 1, 2, … in order", component, i, m.Version, i+1)
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate the %s schema: %w", component, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockKey)); err != nil {
		return 0, fmt.Errorf("migrate the %s schema: take the migration lock: %w", component, err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS sluice_schema (
  component  TEXT PRIMARY KEY,
  version    INTEGER NOT NULL,
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`); err != nil {
		return 0, fmt.Errorf("migrate the %s schema: create sluice_schema: %w", component, err)
	}
	var have int
	err = tx.QueryRow(ctx, `SELECT version FROM sluice_schema WHERE component=$1`, component).Scan(&have)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("migrate the %s schema: read its version: %w", component, err)
	}
	if have > len(ms) {
		return have, &NewerSchemaError{Component: component, Have: have, Know: len(ms)}
	}
	for _, m := range ms[have:] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return have, fmt.Errorf("migrate the %s schema to version %d: %w", component, m.Version, err)
		}
	}
	if have < len(ms) {
		if _, err := tx.Exec(ctx, `INSERT INTO sluice_schema (component, version) VALUES ($1, $2)
			ON CONFLICT (component) DO UPDATE SET version=excluded.version, updated_at=now()`, component, len(ms)); err != nil {
			return have, fmt.Errorf("migrate the %s schema: record version %d: %w", component, len(ms), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return have, fmt.Errorf("migrate the %s schema: commit: %w", component, err)
	}
	return have, nil
}

// Unavailable reports whether err means the database could not be
// reached or failed for a while (trying again later may succeed), not
// because the statement is wrong: connection refused, reset, timeouts,
// shutdown, too many connections, disk full, a deadlock.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "40", "53", "57", "58": // connection, transaction rollback (deadlock, serialization), resources, operator intervention, system
			return true
		}
		return false
	}
	return true // no answer from the server: connection-level
}

// UniqueViolation reports whether err is a unique or primary key conflict.
func UniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// DiskFull reports whether err is PostgreSQL's disk_full.
func DiskFull(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53100"
}
