package registry

import (
	"context"
	"io"
	"sync"
)

// holds counts the publishes under way in this process that stored each
// artifact, so that a publish that fails deletes only the blobs nobody
// else's publish is about to name. Both stores keep one.
type holds struct {
	mu sync.Mutex
	n  map[string]int // sha -> publishes under way that stored it
}

// hold marks shas as used by one more publish.
func (h *holds) hold(shas []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	for _, sha := range shas {
		h.n[sha]++
	}
}

// release ends one publish's hold and calls free, still under the lock
// (so no new hold can start between the count and what free does), for
// each sha no other publish holds.
func (h *holds) release(shas []string, free func(sha string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, sha := range shas {
		h.n[sha]--
		if h.n[sha] > 0 {
			continue
		}
		delete(h.n, sha)
		free(sha)
	}
}

// putBlob stores the bytes open gives as blob sha in a.
func putBlob(ctx context.Context, a Artifacts, sha string, open func() (io.ReadCloser, error)) error {
	rc, err := open()
	if err != nil {
		return StorageError("store", sha, err)
	}
	defer rc.Close()
	if err := a.Put(ctx, sha, rc); err != nil {
		return StorageError("store", sha, err)
	}
	return nil
}
