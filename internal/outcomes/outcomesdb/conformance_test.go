package outcomesdb_test

import (
	"context"
	"testing"

	"github.com/sluiceml/sluice/internal/outcomes"
	"github.com/sluiceml/sluice/internal/outcomes/outcomesdb"
	"github.com/sluiceml/sluice/internal/outcomes/outcomestest"
	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
)

func TestSQLiteConformance(t *testing.T) {
	outcomestest.Run(t, func(t *testing.T) outcomes.Store {
		s, err := outcomesdb.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestPostgresConformance(t *testing.T) {
	pgtest.Server(t)
	outcomestest.Run(t, func(t *testing.T) outcomes.Store {
		s, err := outcomesdb.OpenPostgres(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestSQLiteExperiments(t *testing.T) {
	outcomestest.RunExperiments(t, func(t *testing.T) outcomes.ExperimentStore {
		s, err := outcomesdb.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestPostgresExperiments(t *testing.T) {
	pgtest.Server(t)
	outcomestest.RunExperiments(t, func(t *testing.T) outcomes.ExperimentStore {
		s, err := outcomesdb.OpenPostgres(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
