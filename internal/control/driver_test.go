package control

import (
	"context"
	"io"
	"log/slog"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/registry"
)

// rolloutStore keeps rollout states and audit events in memory; the rest of
// registry.Store is not used by these tests (calling it panics).
type rolloutStore struct {
	registry.Store
	mu     sync.Mutex
	states map[string][]byte
	events []registry.Event
}

func (s *rolloutStore) SaveRollout(_ context.Context, model string, state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[model] = state
	return nil
}

func (s *rolloutStore) Audit(_ context.Context, e registry.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	return nil
}

// drivers counts running rollout drivers.
func drivers() int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:goruntime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "(*Controller).drive(") {
			n++
		}
	}
	return n
}

// A rollout paused and resumed within one tick of its driver has one
// driver, not two.
func TestOneDriverPerRollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(Config{Store: &rolloutStore{states: map[string][]byte{}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		defer func() { c.cancel(); c.wg.Wait() }()
		now := time.Now().UTC()
		r := &Rollout{Model: "m", Candidate: 2, Baseline: 1, Plan: plan(nil), Phase: PhaseCanary, Started: now, StepStart: now}
		c.rmu.Lock()
		c.setRolloutLocked(r)
		c.startDriverLocked("m")
		c.rmu.Unlock()
		synctest.Wait() // the driver evaluated once and waits for its tick
		if n := drivers(); n != 1 {
			t.Fatalf("%d drivers after the start, want 1", n)
		}
		ctx := context.Background()
		if _, err := c.Act(ctx, "m", ActionPause, "op", ""); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := c.Act(ctx, "m", ActionResume, "op", ""); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := drivers(); n != 1 {
			t.Fatalf("%d drivers after pause and resume within one tick, want 1", n)
		}
		time.Sleep(time.Second) // fake time: ten ticks
		synctest.Wait()
		if n := drivers(); n != 1 {
			t.Fatalf("%d drivers ten ticks later, want 1", n)
		}
		if got := c.RolloutStatus("m"); got.Phase != PhaseCanary {
			t.Fatalf("phase %s, want canary", got.Phase)
		}

		// Paused for longer than a tick: the driver stops, and resume starts
		// one again.
		if _, err := c.Act(ctx, "m", ActionPause, "op", ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := drivers(); n != 0 {
			t.Fatalf("%d drivers while paused, want 0", n)
		}
		if _, err := c.Act(ctx, "m", ActionResume, "op", ""); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := drivers(); n != 1 {
			t.Fatalf("%d drivers after resume, want 1", n)
		}
	})
}

func (s *rolloutStore) Policies(context.Context, string) ([]registry.Policy, error) { return nil, nil }
func (s *rolloutStore) Events(context.Context, string) ([]registry.Event, error)    { return nil, nil }
func (s *rolloutStore) PolicyPage(context.Context, string, int, int) ([]registry.Policy, error) {
	return nil, nil
}
func (s *rolloutStore) EventPage(context.Context, string, int64, int) ([]registry.Event, error) {
	return nil, nil
}
func (s *rolloutStore) PolicyAt(_ context.Context, model string, t time.Time) (registry.Policy, error) {
	return registry.Policy{}, errs.New(errs.NotFound, "model %s had no deployment at %s", model, t)
}

// The history of a model nobody published is a 404, like its deployment:
// whole (History), its first page (HistoryPage, what the API and the CLI
// read) and at a time (PolicyAt).
func TestHistoryOfUnknownModel(t *testing.T) {
	c := New(Config{Store: &rolloutStore{states: map[string][]byte{}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	notFound := func(what string, err error) {
		t.Helper()
		if errs.CodeOf(err) != errs.NotFound || !strings.Contains(err.Error(), `model "nope" not found`) {
			t.Errorf("%s = %v, want not_found naming the model", what, err)
		}
	}
	_, _, err := c.History(ctx, "nope")
	notFound("History(nope)", err)
	_, _, err = c.HistoryPage(ctx, "nope", 0, 0, 100)
	notFound("HistoryPage(nope) first page", err)
	_, err = c.PolicyAt(ctx, "nope", time.Now())
	notFound("PolicyAt(nope)", err)
}

func TestRollbackTarget(t *testing.T) {
	full := func(v int, reason string) registry.Policy {
		return registry.Policy{Targets: []registry.Target{{Version: v, Weight: 100}}, Reason: reason}
	}
	split := func(a, b, pct int) registry.Policy {
		return registry.Policy{Targets: []registry.Target{{Version: a, Weight: 100 - pct}, {Version: b, Weight: pct}}}
	}
	for _, c := range []struct {
		name string
		ps   []registry.Policy
		want int
		err  string
	}{
		{"none", nil, 0, "has no deployment"},
		{"first version only", []registry.Policy{full(1, "first ready version")}, 0, "no earlier version"},
		{"promoted", []registry.Policy{full(1, ""), split(1, 2, 10), full(2, "")}, 1, ""},
		{"mid canary", []registry.Policy{full(1, ""), split(1, 2, 10)}, 1, ""},
		// The second rollback would undo the first: refused, --to goes further.
		{"after a rollback", []registry.Policy{full(1, ""), full(2, ""), full(1, "rollback: bad")}, 0, "m@1 already took all the traffic back from m@2 by a rollback"},
		{"after a rollback, traffic re-set", []registry.Policy{full(1, ""), full(2, ""), full(1, "rollback: bad"), full(1, "same")}, 0, "by a rollback"},
		{"three versions", []registry.Policy{full(1, ""), full(2, ""), full(3, "")}, 2, ""},
		{"rollback then a new release", []registry.Policy{full(1, ""), full(2, ""), full(1, "rollback: "), full(3, "")}, 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.ps {
				c.ps[i].Version = i + 1
			}
			got, err := rollbackTarget("m", c.ps)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || errs.CodeOf(err) != errs.NotFound {
					t.Fatalf("got %d, %v; want not_found %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %d, %v; want %d", got, err, c.want)
			}
		})
	}
}
