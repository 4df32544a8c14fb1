package jobsdb_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/jobs/jobsdb"
	"github.com/sluiceml/sluice/internal/storefile"
)

// A jobs.db that is empty or not a database is refused with the fix, and
// moved aside (never deleted) with --init-store.
func TestOpenDamaged(t *testing.T) {
	for name, content := range map[string]string{"empty": "", "foreign": "not a database at all, just text"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "jobs.db")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := jobsdb.Open(context.Background(), "", dir, false, nil)
			var dmg *storefile.Damaged
			if !errors.As(err, &dmg) || !strings.Contains(err.Error(), "--init-store") || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open of a damaged jobs.db: %v, want a refusal naming it and --init-store", err)
			}
			s, err := jobsdb.OpenSQLite(dir, jobsdb.Options{InitStore: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			aside, err := os.ReadFile(s.MovedAside())
			if s.MovedAside() == "" || err != nil || string(aside) != content {
				t.Errorf("moved aside to %q (%v): want the old file kept", s.MovedAside(), err)
			}
		})
	}
}

func TestOpenURL(t *testing.T) {
	if _, err := jobsdb.Open(context.Background(), "mysql://x", t.TempDir(), false, nil); err == nil || !strings.Contains(err.Error(), "postgres://") {
		t.Errorf("Open of a mysql URL: %v, want a refusal naming postgres://", err)
	}
	if _, err := jobsdb.Open(context.Background(), "", "", false, nil); err == nil || !strings.Contains(err.Error(), "--data") {
		t.Errorf("Open with no --data: %v, want an error naming --data", err)
	}
	s, err := jobsdb.Open(context.Background(), "", t.TempDir(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
