package control

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/testwait"
)

func TestDue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		st       map[string]dirState
		cur      map[string]string
		wantTodo []string
		want     map[string]dirState
	}{
		{"unchanged", map[string]dirState{"a": {"1", "1"}}, map[string]string{"a": "1"}, nil, map[string]dirState{"a": {"1", "1"}}},
		{"changed: wait one poll", map[string]dirState{"a": {"1", "1"}}, map[string]string{"a": "2"}, nil, map[string]dirState{"a": {"2", "1"}}},
		{"changed and still: read", map[string]dirState{"a": {"2", "1"}}, map[string]string{"a": "2"}, []string{"a"}, map[string]dirState{"a": {"2", "2"}}},
		{"still being copied", map[string]dirState{"a": {"2", "1"}}, map[string]string{"a": "3"}, nil, map[string]dirState{"a": {"3", "1"}}},
		{"new folder: wait one poll", map[string]dirState{}, map[string]string{"b": "1"}, nil, map[string]dirState{"b": {"1", ""}}},
		{"new folder still: read", map[string]dirState{"b": {"1", ""}}, map[string]string{"b": "1"}, []string{"b"}, map[string]dirState{"b": {"1", "1"}}},
		{"changed back before read", map[string]dirState{"a": {"2", "1"}}, map[string]string{"a": "1"}, nil, map[string]dirState{"a": {"1", "1"}}},
		{"gone: forgotten", map[string]dirState{"a": {"1", "1"}, "b": {"2", "2"}}, map[string]string{"b": "2"}, nil, map[string]dirState{"b": {"2", "2"}}},
		{"several, sorted", map[string]dirState{"b": {"2", "1"}, "a": {"5", "4"}}, map[string]string{"a": "5", "b": "2"}, []string{"a", "b"}, map[string]dirState{"a": {"5", "5"}, "b": {"2", "2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, todo := due(tc.st, tc.cur)
			if !reflect.DeepEqual(todo, tc.wantTodo) || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("due = %v %v, want %v %v", got, todo, tc.want, tc.wantTodo)
			}
		})
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The poll loop publishes new and changed packages (moving traffic only
// with a release: plan), reports invalid ones, and stops at Close. In a
// synctest bubble: the polls and the waits for them pass in fake time.
func TestWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		models := t.TempDir()
		writeFiles(t, filepath.Join(models, "calc"), linear("calc", 1))
		h := start(t, t.TempDir())
		fsys := os.DirFS(models)
		h.ctl.Watch(fsys, ".", "models", 10*time.Millisecond)
		if _, err := h.ctl.PublishFS(ctx, fsys, ".", "models"); err != nil {
			t.Fatal(err)
		}
		h.ctl.MarkStarted()
		serving := func(model string) int { return h.ctl.Table.Load().Serving(model) }
		ready := func(model string, n int) bool { st, _ := h.state(model, n); return st == registry.Ready }
		testwait.Until(t, 30*time.Second, func() bool { return serving("calc") == 1 })

		// A changed package without a plan: a new version, no traffic.
		writeFiles(t, filepath.Join(models, "calc"), linear("calc", 2))
		testwait.Until(t, 30*time.Second, func() bool { return ready("calc", 2) })
		if n := serving("calc"); n != 1 {
			t.Fatalf("a changed package without a plan moved traffic to calc@%d", n)
		}
		// A new package: published, its first version serves.
		writeFiles(t, filepath.Join(models, "other"), linear("other", 1))
		testwait.Until(t, 30*time.Second, func() bool { return serving("other") == 1 })
		// An invalid change: reported, the published version keeps serving.
		bad := linear("other", 2)
		bad["model.yaml"] += "sering: {}\n"
		writeFiles(t, filepath.Join(models, "other"), bad)
		testwait.Until(t, 30*time.Second, func() bool { return len(h.ctl.InvalidPackages()) == 1 })
		if p := h.ctl.InvalidPackages()[0]; p.Dir != "models/other" || p.Model != "other" || serving("other") != 1 {
			t.Fatalf("invalid package %+v, other serves @%d", p, serving("other"))
		}
		// A change with a release plan is rolled out with it.
		plan := linear("calc", 3)
		plan["model.yaml"] += "release: {steps: [100]}\n"
		writeFiles(t, filepath.Join(models, "calc"), plan)
		testwait.Until(t, 30*time.Second, func() bool { return serving("calc") == 3 })
		// The folder removed: forgotten, nothing unloaded.
		if err := os.RemoveAll(filepath.Join(models, "other")); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 30*time.Second, func() bool { return len(h.ctl.InvalidPackages()) == 0 })
		if !ready("other", 1) {
			t.Fatal("a removed package's version was unloaded")
		}

		done := make(chan struct{})
		go func() { h.stop(); close(done) }()
		select {
		case <-done: // Close waited for the poll loop
		case <-time.After(30 * time.Second):
			t.Fatal("Close did not stop the poll loop")
		}
	})
}
