package recordsdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/records"
)

// gatedStore holds every Write until the test opens the gate, so a test
// can see what waits for the disk.
type gatedStore struct {
	records.Store
	gate    chan struct{}
	mu      sync.Mutex // guards batches
	batches int
}

func (g *gatedStore) Write(ctx context.Context, ops []records.Op) error {
	<-g.gate
	g.mu.Lock()
	g.batches++
	g.mu.Unlock()
	return g.Store.Write(ctx, ops)
}

// In durable mode Commit returns only after its record is committed; in
// async mode at once, with the record counted as pending until written.
func TestDurableCommitWaitsForTheWrite(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := openTest(t)
				g := &gatedStore{Store: s, gate: make(chan struct{})}
				w := records.NewWriter(g, records.Config{Durable: durable, FlushEvery: time.Hour, Now: func() time.Time { return t0 }})
				stop := runWriter(t, w)
				defer stop()
				done := make(chan error, 1)
				go func() {
					done <- w.Commit(context.Background(), records.Record{RequestID: "r1", Tenant: "acme", Outcome: "ok"})
				}()
				if !durable {
					if err := <-done; err != nil {
						t.Fatalf("async Commit: %v", err)
					}
					if w.Pending() != 1 {
						t.Errorf("async: Pending = %d before the write, want 1", w.Pending())
					}
					close(g.gate)
					return
				}
				// Durable: the write has not happened, so Commit must not have
				// returned; the record is pending (buffered or in the batch).
				synctest.Wait()
				if p := w.Pending(); p != 1 {
					t.Fatalf("durable: Pending = %d with the write held, want 1", p)
				}
				select {
				case err := <-done:
					t.Fatalf("durable Commit returned before its record was written: %v", err)
				default:
				}
				close(g.gate)
				if err := <-done; err != nil {
					t.Fatalf("durable Commit: %v", err)
				}
				rs, err := s.List(context.Background(), records.Filter{RequestID: "r1"})
				if err != nil || len(rs) != 1 {
					t.Fatalf("after Commit returned: %v %v, want the record in the store", rs, err)
				}
				if w.Pending() != 0 || w.Written() != 1 {
					t.Errorf("Pending %d, Written %d after the commit", w.Pending(), w.Written())
				}
			})
		})
	}
}

// Many concurrent commits share batches (group commit) and each returns
// after its own record is in the store.
func TestDurableGroupCommit(t *testing.T) {
	s := openTest(t)
	g := &gatedStore{Store: s, gate: make(chan struct{})}
	close(g.gate)
	w := records.NewWriter(g, records.Config{Durable: true, BatchSize: 50})
	stop := runWriter(t, w)
	defer stop()
	const n = 400
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprint("g-", i)
			if err := w.Commit(context.Background(), records.Record{RequestID: id, Tenant: "acme", Outcome: "ok"}); err != nil {
				errc <- err
				return
			}
			if rs, err := s.List(context.Background(), records.Filter{RequestID: id}); err != nil || len(rs) != 1 {
				errc <- fmt.Errorf("%s: Commit returned but the store has %d records (%v)", id, len(rs), err)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	g.mu.Lock()
	batches := g.batches
	g.mu.Unlock()
	if batches > n || batches < n/50 {
		t.Errorf("%d batches for %d records of at most 50", batches, n)
	}
	t.Logf("%d commits in %d batches", n, batches)
}

// A record that cannot be written in durable mode is an error for the
// caller (which withholds the answer): a failed write, a full buffer, a
// stopped writer.
func TestDurableCommitFailures(t *testing.T) {
	t.Run("write fails", func(t *testing.T) {
		w := records.NewWriter(fullDisk{openTest(t)}, records.Config{Durable: true})
		stop := runWriter(t, w)
		defer stop()
		err := w.Commit(context.Background(), records.Record{RequestID: "r1", Tenant: "acme"})
		if err == nil || !strings.Contains(err.Error(), "no space left") {
			t.Fatalf("Commit on a full disk: %v", err)
		}
		if err := w.CommitBump(context.Background(), "acme", "r1", 0); err == nil {
			t.Fatal("CommitBump on a full disk returned nil")
		}
		if w.Failed() != 2 {
			t.Errorf("Failed = %d, want 2", w.Failed())
		}
	})
	t.Run("buffer full", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := &gatedStore{Store: openTest(t), gate: make(chan struct{})}
			w := records.NewWriter(g, records.Config{Durable: true, Buffer: 1, BatchSize: 1})
			stop := runWriter(t, w)
			defer func() { close(g.gate); stop() }()
			go w.Commit(context.Background(), records.Record{RequestID: "in-batch", Tenant: "acme"})
			synctest.Wait()
			if p, b := w.Pending(), w.Buffered(); p != 1 || b != 0 {
				t.Fatalf("pending %d, buffered %d; want the one record in the batch being written", p, b)
			}
			go w.Commit(context.Background(), records.Record{RequestID: "buffered", Tenant: "acme"})
			synctest.Wait()
			if b := w.Buffered(); b != 1 {
				t.Fatalf("buffered %d, want 1", b)
			}
			if err := w.Commit(context.Background(), records.Record{RequestID: "refused", Tenant: "acme"}); !errors.Is(err, records.ErrNotWritten) {
				t.Fatalf("Commit with a full buffer: %v, want ErrNotWritten", err)
			}
		})
	})
	t.Run("writer stopped", func(t *testing.T) {
		w := records.NewWriter(openTest(t), records.Config{Durable: true})
		stop := runWriter(t, w)
		stop()
		if err := w.Commit(context.Background(), records.Record{RequestID: "late", Tenant: "acme"}); !errors.Is(err, records.ErrNotWritten) {
			t.Fatalf("Commit after Run returned: %v, want ErrNotWritten", err)
		}
	})
	t.Run("caller gives up", func(t *testing.T) {
		g := &gatedStore{Store: openTest(t), gate: make(chan struct{})}
		w := records.NewWriter(g, records.Config{Durable: true})
		stop := runWriter(t, w)
		defer func() { close(g.gate); stop() }()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := w.Commit(ctx, records.Record{RequestID: "gone", Tenant: "acme"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit with a cancelled context: %v", err)
		}
	})
}
