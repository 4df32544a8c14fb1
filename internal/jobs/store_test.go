package jobs_test

import (
	"context"
	"testing"

	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobsdb"
	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
)

// The runner's scenarios on the real stores: SQLite (jobs.db) always,
// PostgreSQL under make test-postgres.
func TestRunnerOnSQLite(t *testing.T) {
	jobs.RunnerScenarios(t, func(t *testing.T) jobs.Store {
		s, err := jobsdb.OpenSQLite(t.TempDir(), jobsdb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestRunnerOnPostgres(t *testing.T) {
	pgtest.Server(t)
	jobs.RunnerScenarios(t, func(t *testing.T) jobs.Store {
		s, err := jobsdb.OpenPostgres(context.Background(), pgtest.URL(t), jobsdb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
