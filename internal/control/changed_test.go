package control

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/testwait"
)

// changes records what Config.Changed is told.
type changes struct {
	mu  sync.Mutex // guards got
	got []Change
}

func (c *changes) add(ch Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, ch)
}

func (c *changes) find(f func(Change) bool) (Change, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.got, f)
	if i < 0 {
		return Change{}, false
	}
	return c.got[i], true
}

// Config.Changed hears of a version's states, a policy made here (and
// its audit entry), and a policy another gateway made, once this one
// adopts it from the store (Adopted, no audit entry of its own).
func TestChangedHearsLocalAndAdoptedChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		data := t.TempDir()
		var seen changes
		a := startWith(t, data, Config{Changed: seen.add})
		b := start(t, data) // another gateway on the same database
		aKick := kicked(make(chan struct{}, 1))
		a.ctl.Follow(aKick)
		ctx := context.Background()

		a.scan(folder(map[string]map[string]string{"calc": linear("calc", 1)}))
		testwait.Until(t, 30*time.Second, func() bool {
			_, ok := seen.find(func(c Change) bool { return c.Kind == "version" && c.Version == 1 && c.State == registry.Ready })
			return ok
		})
		if _, err := a.ctl.SetTargets(ctx, "calc", []registry.Target{{Version: 1, Weight: 100}}, "alice", "here", -1); err != nil {
			t.Fatal(err)
		}
		if c, ok := seen.find(func(c Change) bool { return c.Kind == "deployment" && c.Policy.Reason == "here" }); !ok || c.Adopted || c.Policy.Actor != "alice" {
			t.Errorf("local policy change: %+v, %v", c, ok)
		}
		if _, ok := seen.find(func(c Change) bool {
			return c.Kind == "audit" && c.Audit.Action == "policy" && c.Audit.Reason == "here"
		}); !ok {
			t.Error("no audit change for the local policy")
		}

		if err := b.ctl.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 30*time.Second, func() bool { st, _ := b.state("calc", 1); return st == registry.Ready })
		if _, err := b.ctl.SetTargets(ctx, "calc", []registry.Target{{Version: 1, Weight: 100}}, "bob", "there", -1); err != nil {
			t.Fatal(err)
		}
		aKick <- struct{}{}
		testwait.Until(t, 30*time.Second, func() bool {
			c, ok := seen.find(func(c Change) bool { return c.Kind == "deployment" && c.Policy.Reason == "there" })
			return ok && c.Adopted && c.Policy.Actor == "bob"
		})
		if _, ok := seen.find(func(c Change) bool { return c.Kind == "audit" && c.Audit.Reason == "there" }); ok {
			t.Error("an audit change for a policy another gateway wrote (its audit entry is that gateway's)")
		}
	})
}
