package pgdb

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://sluice@db:5432/sluice?sslmode=disable", "postgres://sluice@db:5432/sluice?sslmode=disable"},
		{"postgres://sluice:s3cret@db:5432/sluice", "postgres://sluice:xxxxx@db:5432/sluice"},
		{"postgresql://sluice:p%40ss@db/sluice", "postgresql://sluice:xxxxx@db/sluice"},
		{"postgres://db/sluice?user=sluice&password=s3cret", "postgres://db/sluice?password=xxxxx&user=sluice"},
		{"postgres://sluice:s3cret@db:bad port/x", "postgres://(unparsable URL, not shown)"},
	}
	for _, tc := range tests {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(Redact(tc.in), "s3cret") {
			t.Errorf("Redact(%q) kept the password", tc.in)
		}
	}
}

func TestIsURL(t *testing.T) {
	for in, want := range map[string]bool{"postgres://x/y": true, "postgresql://x/y": true, "sqlite": false, "": false, "mysql://x": false} {
		if got := IsURL(in); got != want {
			t.Errorf("IsURL(%q) = %v", in, got)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	tests := []struct {
		err                 error
		unavailable, unique bool
	}{
		{errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"), true, false},
		{&pgconn.PgError{Code: "57P01"}, true, false}, // admin_shutdown
		{&pgconn.PgError{Code: "53300"}, true, false}, // too_many_connections
		{&pgconn.PgError{Code: "23505"}, false, true},
		{&pgconn.PgError{Code: "40P01"}, true, false},  // deadlock_detected: try again
		{&pgconn.PgError{Code: "42P01"}, false, false}, // undefined_table: a bug, not an outage
		{nil, false, false},
	}
	for _, tc := range tests {
		if got := Unavailable(tc.err); got != tc.unavailable {
			t.Errorf("Unavailable(%v) = %v", tc.err, got)
		}
		if got := UniqueViolation(tc.err); got != tc.unique {
			t.Errorf("UniqueViolation(%v) = %v", tc.err, got)
		}
	}
}

// A migration list out of order is refused before the database is asked.
func TestMigrateChecksTheList(t *testing.T) {
	_, err := Migrate(context.Background(), nil, "x", []Migration{{Version: 1}, {Version: 3}})
	if err == nil || !strings.Contains(err.Error(), "must run 1, 2") {
		t.Errorf("Migrate of a gapped list = %v", err)
	}
}
