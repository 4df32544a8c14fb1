// Package pgtest gives tests a real PostgreSQL to run against: the server
// named by SLUICE_TEST_POSTGRES (make test-postgres starts one with
// scripts/start-postgres.sh and sets it), one fresh schema per test.
// Without the variable the tests skip, saying which make target runs
// them, unless SLUICE_TEST_POSTGRES_REQUIRED is set: then they fail, so
// the distributed target cannot pass without a database.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env names the variable that holds the server's URL.
const Env = "SLUICE_TEST_POSTGRES"

// Server returns the URL of the test server, or skips (fails when
// SLUICE_TEST_POSTGRES_REQUIRED is set) without one.
func Server(t testing.TB) string {
	t.Helper()
	u := os.Getenv(Env)
	if u == "" {
		if os.Getenv(Env+"_REQUIRED") != "" {
			t.Fatalf("%s is not set but %s_REQUIRED is: the PostgreSQL tests cannot run (make test-postgres starts the server with scripts/start-postgres.sh)", Env, Env)
		}
		t.Skipf("needs PostgreSQL: %s is not set (make test-postgres starts one and runs these tests)", Env)
	}
	return u
}

// URL returns a URL of the test server whose connections use a new, empty
// schema (search_path), dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	base := Server(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", Env, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return // the server is gone (a test stopped it): nothing to drop
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`)
	})
	return WithSchema(t, base, schema)
}

// WithSchema returns base with search_path set to schema.
func WithSchema(t testing.TB, base, schema string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
