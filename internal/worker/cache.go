package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Cache is a worker's bounded local disk cache of artifacts, named by
// SHA-256. Bytes are verified when they arrive and again whenever they are
// read; the least recently used artifacts are deleted to keep the total
// under the bound (the one just added is kept, even alone over it).
type Cache struct {
	dir string
	max int64

	mu      sync.Mutex // guards entries and total
	entries map[string]*cacheEntry
	total   int64
}

type cacheEntry struct {
	size int64
	used time.Time
}

// OpenCache opens (creating it if needed) the cache folder dir holding at
// most maxBytes. Leftover partial downloads are deleted.
func OpenCache(dir string, maxBytes int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("artifact cache %s: %w", dir, err)
	}
	c := &Cache{dir: dir, max: maxBytes, entries: map[string]*cacheEntry{}}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("artifact cache %s: %w", dir, err)
	}
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() {
			continue
		}
		if !validSHA(name) {
			_ = os.Remove(filepath.Join(dir, name)) // a partial download
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		c.entries[name] = &cacheEntry{size: fi.Size(), used: fi.ModTime()}
		c.total += fi.Size()
	}
	return c, nil
}

func validSHA(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// Bytes is how much the cache holds now.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Fetch opens an artifact at its source; size is its length when known (-1: unknown).
type Fetch func(ctx context.Context) (r io.ReadCloser, size int64, err error)

// Get returns the verified bytes of artifact sha, from the cache or else
// from fetch (then kept). source is "cache" or "fetched". An artifact of
// more than limit bytes is refused.
func (c *Cache) Get(ctx context.Context, sha string, limit int64, fetch Fetch) (data []byte, source string, err error) {
	if !validSHA(sha) {
		return nil, "", fmt.Errorf("artifact %q: not a sha256", sha)
	}
	path := filepath.Join(c.dir, sha)
	if b, err := os.ReadFile(path); err == nil {
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) == sha {
			c.touch(sha, int64(len(b)))
			return b, "cache", nil
		}
		// Damaged on disk: fetch it again.
		c.forget(sha)
		_ = os.Remove(path)
	}
	r, size, err := fetch(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("fetch artifact %s: %w", sha[:12], err)
	}
	defer r.Close()
	if size > limit {
		return nil, "", fmt.Errorf("fetch artifact %s: %d bytes exceeds the limit of %d", sha[:12], size, limit)
	}
	tmp, err := os.CreateTemp(c.dir, "partial-*")
	if err != nil {
		return nil, "", fmt.Errorf("artifact cache: %w", noPath(err))
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	h := sha256.New()
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(size))
	}
	n, err := io.Copy(io.MultiWriter(tmp, h, &buf), io.LimitReader(r, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, "", fmt.Errorf("fetch artifact %s: %w", sha[:12], noPath(err))
	}
	if n > limit {
		return nil, "", fmt.Errorf("fetch artifact %s: more than the limit of %d bytes", sha[:12], limit)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sha {
		return nil, "", fmt.Errorf("fetch artifact %s: artifact sha256 mismatch (got %s)", sha[:12], got[:12])
	}
	if size >= 0 && n != size {
		return nil, "", fmt.Errorf("fetch artifact %s: got %d bytes, expected %d", sha[:12], n, size)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, "", fmt.Errorf("artifact cache: %w", noPath(err))
	}
	c.touch(sha, n)
	c.evict(sha)
	return buf.Bytes(), "fetched", nil
}

func (c *Cache) touch(sha string, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[sha]; ok {
		e.used = time.Now()
		return
	}
	c.entries[sha] = &cacheEntry{size: size, used: time.Now()}
	c.total += size
}

func (c *Cache) forget(sha string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[sha]; ok {
		c.total -= e.size
		delete(c.entries, sha)
	}
}

// evict deletes least recently used artifacts, never keep, until the
// total is within the bound.
func (c *Cache) evict(keep string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total <= c.max {
		return
	}
	shas := make([]string, 0, len(c.entries))
	for s := range c.entries {
		if s != keep {
			shas = append(shas, s)
		}
	}
	sort.Slice(shas, func(i, j int) bool { return c.entries[shas[i]].used.Before(c.entries[shas[j]].used) })
	for _, s := range shas {
		if c.total <= c.max {
			return
		}
		if err := os.Remove(filepath.Join(c.dir, s)); err != nil && !errors.Is(err, os.ErrNotExist) {
			continue
		}
		c.total -= c.entries[s].size
		delete(c.entries, s)
	}
}

// noPath drops the file path from an OS error: load failures reach clients
// as a version's reason, and server paths never do (the worker logs them).
func noPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s: %w", le.Op, le.Err)
	}
	return err
}
