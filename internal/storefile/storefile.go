// Package storefile guards the SQLite files of Sluice's stores (sluice.db,
// records.db) against being silently replaced: a file that exists but is
// empty or is not a SQLite database is refused with the fix, instead of
// being initialised as a new, empty store; when told to, the damaged file
// is moved aside (never deleted) so that a new store can start.
package storefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// header starts every SQLite 3 database file.
const header = "SQLite format 3\x00"

// Damaged says an existing store file cannot be used as it is.
type Damaged struct {
	Path    string // the file
	Problem string // "is empty (0 bytes)", "is not a SQLite database", …
	Store   string // what the file holds, for the message: "the registry (versions, deployments)"
	Flag    string // the flag that re-initialises it, e.g. "--init-store"
	Err     error  // the cause, if any
}

func (d *Damaged) Error() string {
	return fmt.Sprintf("%s %s: refusing to start on it, which would replace %s with an empty one. "+
		"Restore the file from a backup, or start with %s to move it aside and begin again with an empty store",
		d.Path, d.Problem, d.Store, d.Flag)
}

func (d *Damaged) Unwrap() error { return d.Err }

// Check returns nil when path does not exist (a fresh store) or starts like
// a SQLite database, and a *Damaged (store and flag name it in the
// message) when it exists but is empty, cannot be read, or is not a SQLite
// database.
func Check(path, store, flag string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	dmg := func(problem string, err error) error {
		return &Damaged{Path: path, Problem: problem, Store: store, Flag: flag, Err: err}
	}
	if err != nil {
		why := err.Error()
		var pe *os.PathError
		if errors.As(err, &pe) {
			why = pe.Err.Error() // the path is already in the message
		}
		return dmg("cannot be read ("+why+")", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return dmg("cannot be read", err)
	}
	if fi.IsDir() {
		return dmg("is a directory, not a database file", nil)
	}
	if fi.Size() == 0 {
		return dmg("is empty (0 bytes; was it truncated?)", nil)
	}
	buf := make([]byte, len(header))
	if _, err := io.ReadFull(f, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return dmg(fmt.Sprintf("is %d bytes, too short for a SQLite database", fi.Size()), err)
		}
		return dmg("cannot be read", err)
	}
	if string(buf) != header {
		return dmg("is not a SQLite database (its first bytes are not the SQLite header)", nil)
	}
	return nil
}

// MoveAside renames path, and the write-ahead log and shared-memory files
// SQLite keeps beside it, to path.damaged-<UTC time>[-wal|-shm], and
// returns the new name of path. Nothing is deleted.
func MoveAside(path string, now time.Time) (string, error) {
	aside := path + ".damaged-" + now.UTC().Format("20060102T150405Z")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		err := os.Rename(path+suffix, aside+suffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("move %s aside: %w", path+suffix, err)
		}
	}
	return aside, nil
}

// SQLite result codes (the primary code, the low byte of an extended one).
const (
	sqliteCorrupt = 11 // SQLITE_CORRUPT: "database disk image is malformed"
	sqliteFull    = 13 // SQLITE_FULL: "database or disk is full"
	sqliteNotADB  = 26 // SQLITE_NOTADB: "file is not a database"
)

// Corrupt says whether err is SQLite's verdict that the file is damaged or
// not a database.
func Corrupt(err error) bool {
	var c interface{ Code() int }
	if !errors.As(err, &c) {
		return false
	}
	switch c.Code() & 0xff {
	case sqliteCorrupt, sqliteNotADB:
		return true
	}
	return false
}

// Full says whether err is a full disk: ENOSPC from the file system, or
// SQLite's SQLITE_FULL.
func Full(err error) bool {
	if errors.Is(err, syscall.ENOSPC) {
		return true
	}
	var c interface{ Code() int }
	return errors.As(err, &c) && c.Code()&0xff == sqliteFull
}
