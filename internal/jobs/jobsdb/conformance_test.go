package jobsdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobsdb"
	"github.com/sluiceml/sluice/internal/jobs/jobstest"
	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
)

func TestSQLiteConformance(t *testing.T) {
	jobstest.Run(t, func(t *testing.T, now func() time.Time) func() jobs.Store {
		dir := t.TempDir()
		return func() jobs.Store {
			s, err := jobsdb.OpenSQLite(dir, jobsdb.Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}

func TestPostgresConformance(t *testing.T) {
	pgtest.Server(t)
	jobstest.Run(t, func(t *testing.T, now func() time.Time) func() jobs.Store {
		url := pgtest.URL(t)
		return func() jobs.Store {
			s, err := jobsdb.OpenPostgres(context.Background(), url, jobsdb.Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}
