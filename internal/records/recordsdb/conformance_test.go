package recordsdb_test

import (
	"testing"

	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/records/recordsdb"
	"github.com/sluiceml/sluice/internal/records/recordstest"
)

func TestSQLiteConformance(t *testing.T) {
	recordstest.Run(t, func(t *testing.T) records.Store {
		s, err := recordsdb.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
