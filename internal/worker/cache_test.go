package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func shaOf(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func source(b []byte, calls *int) Fetch {
	return func(context.Context) (io.ReadCloser, int64, error) {
		*calls++
		return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
	}
}

func TestCacheFetchesOnceAndVerifies(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	art := []byte("model bytes")
	sha := shaOf(art)
	calls := 0
	for i, want := range []string{"fetched", "cache"} {
		b, src, err := c.Get(t.Context(), sha, 100, source(art, &calls))
		if err != nil || !bytes.Equal(b, art) || src != want {
			t.Fatalf("get %d: %q %s %v", i, b, src, err)
		}
	}
	if calls != 1 {
		t.Errorf("%d fetches", calls)
	}
	// Damaged on disk: fetched again, not served.
	if err := os.WriteFile(filepath.Join(dir, sha), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, src, err := c.Get(t.Context(), sha, 100, source(art, &calls))
	if err != nil || !bytes.Equal(b, art) || src != "fetched" || calls != 2 {
		t.Fatalf("after damage: %q %s %v (%d fetches)", b, src, err, calls)
	}
	// The source lies: refused, nothing kept.
	other := shaOf([]byte("other"))
	if _, _, err := c.Get(t.Context(), other, 100, source([]byte("not other"), &calls)); err == nil || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Errorf("lying source: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, other)); !os.IsNotExist(err) {
		t.Error("a mismatching artifact was kept")
	}
	// Too big.
	big := bytes.Repeat([]byte("x"), 200)
	if _, _, err := c.Get(t.Context(), shaOf(big), 100, source(big, &calls)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("cache folder holds %d files, want 1 (no partial downloads left)", len(ents))
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCache(dir, 25)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	a, b, d := bytes.Repeat([]byte("a"), 10), bytes.Repeat([]byte("b"), 10), bytes.Repeat([]byte("d"), 10)
	for _, x := range [][]byte{a, b} {
		if _, _, err := c.Get(t.Context(), shaOf(x), 100, source(x, &calls)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Get(t.Context(), shaOf(a), 100, source(a, &calls)); err != nil { // a is now the most recent
		t.Fatal(err)
	}
	if _, _, err := c.Get(t.Context(), shaOf(d), 100, source(d, &calls)); err != nil {
		t.Fatal(err)
	}
	if c.Bytes() > 25 {
		t.Errorf("cache holds %d bytes over its bound of 25", c.Bytes())
	}
	for x, want := range map[string]bool{shaOf(a): true, shaOf(b): false, shaOf(d): true} {
		_, err := os.Stat(filepath.Join(dir, x))
		if (err == nil) != want {
			t.Errorf("%s kept=%v, want %v", x[:6], err == nil, want)
		}
	}
	// A reopened cache knows what is on disk and drops partial downloads.
	if err := os.WriteFile(filepath.Join(dir, "partial-123"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c2, err := OpenCache(dir, 25)
	if err != nil || c2.Bytes() != 20 {
		t.Fatalf("reopened: %d bytes, %v", c2.Bytes(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "partial-123")); !os.IsNotExist(err) {
		t.Error("partial download kept")
	}
}
