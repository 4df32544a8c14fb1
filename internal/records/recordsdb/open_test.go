package recordsdb_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/records/recordsdb"
)

// A records.db truncated to nothing is refused, naming the file and the
// fix, instead of silently starting an empty one; InitStore moves it aside.
func TestOpenRefusesTruncatedDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := recordsdb.Open(dir) // fresh: no file yet
	if err != nil {
		t.Fatalf("fresh directory: %v", err)
	}
	if err := s.Insert(ctx, []records.Record{{RequestID: "r1", Tenant: "t", Model: "m", Version: 1, Outcome: "ok"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := filepath.Join(dir, "records.db")
	if err := os.Truncate(db, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := recordsdb.Open(dir); err == nil || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "--init-store") {
		t.Fatalf("Open of a truncated records.db = %v; want a refusal naming %s and --init-store", err, db)
	}
	s, err = recordsdb.OpenWith(dir, recordsdb.Options{InitStore: true})
	if err != nil {
		t.Fatalf("OpenWith(InitStore): %v", err)
	}
	defer s.Close()
	if rs, err := s.List(ctx, records.Filter{}); err != nil || len(rs) != 0 {
		t.Errorf("re-initialised: List = %v, %v; want empty", rs, err)
	}
	if _, err := os.Stat(s.MovedAside()); s.MovedAside() == "" || err != nil {
		t.Errorf("the damaged file was not kept (MovedAside %q): %v", s.MovedAside(), err)
	}
}
