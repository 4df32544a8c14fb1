package control

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/testwait"
)

// kicked is a registry.Changes whose changes the test announces: the
// PostgreSQL store's LISTEN/NOTIFY and polling, by hand.
type kicked chan struct{}

func (k kicked) WatchChanges(ctx context.Context, changed func()) error {
	changed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-k:
			changed()
		}
	}
}

// servingVersion is the version the routing snapshot sends calc's
// traffic to (0 if none).
func servingVersion(c *Controller, model string) int {
	tg, _, err := c.Table.Load().Pick(model, "")
	if err != nil || tg == nil {
		return 0
	}
	return tg.N
}

// Two controllers on one store (two gateways): a version published
// through one is loaded by the other, and each one's deployment changes
// (a new version's traffic, a rollback) reach the other's routing
// snapshot when the store announces them.
func TestFollowTheOtherGateway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		data := t.TempDir()
		a := start(t, data)
		b := start(t, data) // a second connection to the same database
		kick := kicked(make(chan struct{}, 1))
		b.ctl.Follow(kick)
		aKick := kicked(make(chan struct{}, 1))
		a.ctl.Follow(aKick)
		ctx := context.Background()

		a.scan(folder(map[string]map[string]string{"calc": linear("calc", 1)}))
		kick <- struct{}{}
		testwait.Until(t, 30*time.Second, func() bool { return servingVersion(b.ctl, "calc") == 1 }) // b serves calc@1 published through a
		if p, ok := b.ctl.Policy("calc"); !ok || p.Version != 1 {
			t.Fatalf("b's policy = %+v, %v; want a's first policy", p, ok)
		}

		a.scan(folder(map[string]map[string]string{"calc": linear("calc", 2)}))
		if _, err := a.ctl.SetTargets(ctx, "calc", []registry.Target{{Version: 2, Weight: 100}}, "alice", "v2", -1); err != nil {
			t.Fatal(err)
		}
		kick <- struct{}{}
		testwait.Until(t, 30*time.Second, func() bool { return servingVersion(b.ctl, "calc") == 2 }) // b serves calc@2 after a's traffic change

		p, err := b.ctl.Rollback(ctx, "calc", 0, "bob", "bad")
		if err != nil || p.Version != 3 {
			t.Fatalf("rollback through b = %+v, %v; want policy 3", p, err)
		}
		aKick <- struct{}{}
		testwait.Until(t, 30*time.Second, func() bool { return servingVersion(a.ctl, "calc") == 1 }) // a serves calc@1 after b's rollback
		if p, _ := a.ctl.Policy("calc"); p.Version != 3 || p.Actor != "bob" {
			t.Errorf("a's policy = %+v; want b's rollback (v3, bob)", p)
		}
		// calc@2 archived through b leaves a's snapshot too.
		if _, err := b.ctl.Archive(ctx, "calc", 2, "bob", "old"); err != nil {
			t.Fatal(err)
		}
		aKick <- struct{}{}
		testwait.Until(t, 30*time.Second, func() bool { st, _ := a.state("calc", 2); return st == registry.Archived }) // calc@2 archived on a after b archived it
		if _, ok := a.ctl.Table.Load().Models["calc"].Versions[2]; ok {
			t.Error("a still routes pinned calls to calc@2 archived through b")
		}
		// A stale write through a is refused, not lost: the store numbers
		// policies for both.
		if _, err := a.ctl.SetTargets(ctx, "calc", []registry.Target{{Version: 2, Weight: 100}}, "alice", "again", 2); err == nil {
			t.Error("a SetTargets expecting policy 2 after b wrote 3 succeeded")
		}
	})
}

// flaky fails List while down is set, as a stopped database does.
type flaky struct {
	registry.Store
	down atomic.Bool
}

func (f *flaky) List(ctx context.Context) ([]registry.Version, error) {
	if f.down.Load() {
		return nil, errors.New("connection refused")
	}
	return f.Store.List(ctx)
}

// A refresh that fails (the store is down) is tried again until one
// succeeds, without another announcement.
func TestFollowRetriesWhileTheStoreIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		data := t.TempDir()
		a := start(t, data)
		a.scan(folder(map[string]map[string]string{"calc": linear("calc", 1)}))
		store, err := registry.Open(data)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		f := &flaky{Store: store}
		f.down.Store(true)
		c := New(Config{Store: f, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		defer c.Close(context.Background())
		c.Follow(kicked(make(chan struct{}))) // one announcement, at start, while the store is down
		if servingVersion(c, "calc") != 0 {
			t.Fatal("served calc before the store answered")
		}
		f.down.Store(false)
		testwait.Until(t, 30*time.Second, func() bool { return servingVersion(c, "calc") == 1 }) // calc served once the store answers
	})
}

// Follow and Watch racing Close: each either starts its goroutines before
// Close waits for them, or starts none (wg.Add is under the lock Close
// takes; the race detector reports an Add that could follow the Wait). A
// call after Close starts nothing (goleak, in TestMain, sees a leak).
func TestFollowWatchRaceClose(t *testing.T) {
	store, err := registry.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fsys := folder(map[string]map[string]string{"calc": linear("calc", 1)})
	for range 20 {
		c := New(Config{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Follow(kicked(make(chan struct{})))
			c.Watch(fsys, ".", "models", time.Hour)
		}()
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-done
		c.Follow(kicked(make(chan struct{})))
		c.Watch(fsys, ".", "models", time.Hour)
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if !closing {
			t.Fatal("closing not set by Close")
		}
		c.wg.Wait() // returns at once: nothing was added after Close
	}
}
