package storefile

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	valid := filepath.Join(dir, "valid.db")
	db, err := sql.Open("sqlite", "file:"+valid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, problem string // problem "" = accepted
	}{
		{"missing", filepath.Join(dir, "none.db"), ""},
		{"valid", valid, ""},
		{"empty", write("empty.db", nil), "is empty"},
		{"short", write("short.db", []byte("SQLite")), "too short"},
		{"garbage", write("garbage.db", []byte(strings.Repeat("not a database ", 100))), "is not a SQLite database"},
		{"directory", dir, "is a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.path, "the test store", "--init-store")
			if tc.problem == "" {
				if err != nil {
					t.Errorf("Check = %v, want nil", err)
				}
				return
			}
			var d *Damaged
			if !errors.As(err, &d) {
				t.Fatalf("Check = %v, want *Damaged", err)
			}
			for _, want := range []string{tc.path, tc.problem, "--init-store", "backup", "the test store"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestMoveAsideKeepsEveryFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sluice.db")
	for _, suffix := range []string{"", "-wal"} { // no -shm: a missing companion is fine
		if err := os.WriteFile(p+suffix, []byte("x"+suffix), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	aside, err := MoveAside(p, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if aside != p+".damaged-20260102T030405Z" {
		t.Errorf("aside = %s", aside)
	}
	for _, suffix := range []string{"", "-wal"} {
		if _, err := os.Stat(p + suffix); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p+suffix, err)
		}
		if b, err := os.ReadFile(aside + suffix); err != nil || string(b) != "x"+suffix {
			t.Errorf("%s = %q, %v", aside+suffix, b, err)
		}
	}
}

func TestCorrupt(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.db")
	// A SQLite header followed by garbage: past Check, refused by SQLite.
	if err := os.WriteFile(p, append([]byte(header), []byte(strings.Repeat("\xff", 4096))...), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS t (x INTEGER)`)
	if err == nil || !Corrupt(err) {
		t.Errorf("Exec on a damaged file = %v; Corrupt = false, want true", err)
	}
	if Corrupt(errors.New("database is locked")) || Corrupt(nil) {
		t.Error("Corrupt of other errors = true")
	}
}
