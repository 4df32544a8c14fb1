package control

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/testwait"
)

func TestArchiveRefusal(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	keep := modelpkg.Immediate() // keepWarm 15m
	split := []registry.Target{{Version: 1, Weight: 90}, {Version: 2, Weight: 10}, {Version: 3, Shadow: true}}
	for _, tc := range []struct {
		name    string
		n       int
		targets []registry.Target
		r       *Rollout
		now     time.Time
		want    string // substring; "" means allowed
	}{
		{"weight", 1, split, nil, t0, "fraud@1 takes 90% of fraud's traffic"},
		{"small weight", 2, split, nil, t0, "fraud@2 takes 10%"},
		{"shadow", 3, split, nil, t0, "fraud@3 is a shadow target"},
		{"no traffic", 4, split, nil, t0, ""},
		{"weight 0 listed", 2, []registry.Target{{Version: 1, Weight: 100}, {Version: 2, Weight: 0}}, nil, t0, ""},
		{"candidate of active rollout", 4, split, &Rollout{Model: "fraud", Candidate: 4, Baseline: 1, Phase: PhaseWaiting}, t0, "candidate of fraud's rollout (waiting)"},
		{"baseline of paused rollout", 5, split, &Rollout{Model: "fraud", Candidate: 4, Baseline: 5, Phase: PhasePaused}, t0, "baseline of fraud's rollout of fraud@4 (paused)"},
		{"rollback target inside keepWarm", 5, split, &Rollout{Model: "fraud", Candidate: 4, Baseline: 5, Phase: PhasePromoted, StepStart: t0, Plan: keep}, t0.Add(14 * time.Minute), "rollback target of fraud@4, promoted at 2026-12-01T08:00:00Z, until 2026-12-01T08:15:00Z"},
		{"rollback target after keepWarm", 5, split, &Rollout{Model: "fraud", Candidate: 4, Baseline: 5, Phase: PhasePromoted, StepStart: t0, Plan: keep}, t0.Add(15 * time.Minute), ""},
		{"candidate of a failed rollout", 4, split, &Rollout{Model: "fraud", Candidate: 4, Baseline: 1, Phase: PhaseFailed}, t0, ""},
		{"baseline of rolled back rollout, not serving", 5, split, &Rollout{Model: "fraud", Candidate: 4, Baseline: 5, Phase: PhaseRolledBack, StepStart: t0, Plan: keep}, t0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := archiveRefusal("fraud", tc.n, tc.targets, tc.r, tc.now)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("archiveRefusal = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDeleteRefusal(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		r     *Rollout
		last  time.Time
		quiet time.Duration
		want  string
	}{
		{"quiet long enough", nil, t0.Add(-10 * time.Minute), 5 * time.Minute, ""},
		{"traffic 2m ago", nil, t0.Add(-2 * time.Minute), 5 * time.Minute, "fraud had traffic 2m0s ago"},
		{"no quiet check", nil, t0, 0, ""},
		{"active rollout", &Rollout{Candidate: 2, Phase: PhaseCanary}, t0.Add(-time.Hour), 5 * time.Minute, "a rollout of fraud@2 is canary"},
		{"finished rollout", &Rollout{Candidate: 2, Phase: PhasePromoted}, t0.Add(-time.Hour), 5 * time.Minute, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := deleteRefusal("fraud", tc.r, tc.last, t0, tc.quiet)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("deleteRefusal = %q, want %q", got, tc.want)
			}
		})
	}
}

func code(err error) errs.Code {
	if err == nil {
		return ""
	}
	return errs.As(err).Code
}

func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	nh := start(h.t, h.data)
	*h = *nh
	h.ctl.MarkStarted()
	h.waitAll()
}

func (h *harness) events(model, action string) []registry.Event {
	h.t.Helper()
	_, es, err := h.ctl.History(context.Background(), model)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []registry.Event
	for _, e := range es {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

// Archive unloads a version without traffic, keeps its record, survives a
// restart, refuses a version that holds traffic, and Load brings it back.
func TestArchive(t *testing.T) {
	ctx := context.Background()
	h := start(t, t.TempDir())
	h.scan(folder(map[string]map[string]string{"calc": linear("calc", 1)}))
	h.scan(folder(map[string]map[string]string{"calc": linear("calc", 2)})) // calc@2: no traffic
	if st, why := h.state("calc", 2); st != registry.Ready {
		t.Fatalf("calc@2 is %s: %s", st, why)
	}
	if _, err := h.ctl.Archive(ctx, "calc", 1, "ops", "keep"); code(err) != errs.AlreadyExists || !strings.Contains(err.Error(), "calc@1 takes 100% of calc's traffic") {
		t.Fatalf("archive of the serving version: %v", err)
	}
	st, err := h.ctl.Archive(ctx, "calc", 2, "ops", "superseded")
	if err != nil || st.State != registry.Archived || st.Reason != "archived by ops: superseded" {
		t.Fatalf("archive calc@2: %+v, %v", st, err)
	}
	if tg := h.ctl.Table.Load().Models["calc"]; tg.Versions[2] != nil || !strings.Contains(tg.NotReady[2], "archived") {
		t.Fatalf("calc@2 still routable: %+v", tg)
	}
	if v, _ := h.store.Get(ctx, "calc", 2); v.State != registry.Archived {
		t.Fatalf("stored state %s", v.State)
	}
	if es := h.events("calc", "archive"); len(es) != 1 || es[0].Actor != "ops" || es[0].Reason != "superseded" || !strings.Contains(es[0].What, "calc@2 archived (was ready, unloaded from in-process)") {
		t.Fatalf("audit: %+v", es)
	}
	if _, err := h.ctl.Archive(ctx, "calc", 2, "ops", "again"); err != nil || len(h.events("calc", "archive")) != 1 {
		t.Fatalf("archiving twice: %v (events %d)", err, len(h.events("calc", "archive")))
	}
	if _, err := h.ctl.Deploy(ctx, "calc", 2, nil, "ops", ""); code(err) != errs.NotReady {
		t.Fatalf("deploy of an archived version: %v", err)
	}
	if _, err := h.ctl.Archive(ctx, "calc", 9, "ops", ""); code(err) != errs.NotFound {
		t.Fatalf("archive of an unknown version: %v", err)
	}

	h.restart()
	if st, _ := h.state("calc", 2); st != registry.Archived {
		t.Fatalf("after restart calc@2 is %s", st)
	}
	// Identical package in the folder: it stays archived.
	h.scan(folder(map[string]map[string]string{"calc": linear("calc", 2)}))
	if st, _ := h.state("calc", 2); st != registry.Archived {
		t.Fatalf("after a scan calc@2 is %s", st)
	}
	if _, err := h.ctl.Load(ctx, "calc", 2, "ops", "needed again"); err != nil {
		t.Fatal(err)
	}
	h.waitAll()
	if st, why := h.state("calc", 2); st != registry.Ready {
		t.Fatalf("after load calc@2 is %s: %s", st, why)
	}
	if es := h.events("calc", "load"); len(es) != 1 || es[0].Reason != "needed again" {
		t.Fatalf("load audit: %+v", es)
	}
}

// A failed version is not retried at every start; Load (or publishing it
// again) retries it.
func TestFailedVersionNotRetriedAtStart(t *testing.T) {
	ctx := context.Background()
	h := start(t, t.TempDir())
	pkg := folder(map[string]map[string]string{"calc": linear("calc", 1)})
	sc := h.scan(pkg)
	sha := sc.Published[0].Version.ArtifactSHA
	file := filepath.Join(h.data, "artifacts", "sha256", sha[:2], sha)
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(`{"weights":[[9]],"bias":[0]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	h.restart() // calc@1 was ready: it is loaded, and fails
	if st, why := h.state("calc", 1); st != registry.Failed || !strings.Contains(why, "sha256 mismatch") {
		t.Fatalf("corrupt calc@1 is %s: %s", st, why)
	}
	if err := os.WriteFile(file, good, 0o644); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.scan(fstest.MapFS{}) // the folder no longer holds it either way
	if st, why := h.state("calc", 1); st != registry.Failed || !strings.Contains(why, "sha256 mismatch") {
		t.Fatalf("after restart calc@1 is %s (%s): a failed version was retried at start", st, why)
	}
	if _, err := h.ctl.Load(ctx, "calc", 1, "ops", "artifact restored"); err != nil {
		t.Fatal(err)
	}
	h.waitAll()
	if st, why := h.state("calc", 1); st != registry.Ready {
		t.Fatalf("after load calc@1 is %s: %s", st, why)
	}
}

// DeleteModel archives and hides every version, ends the deployment, and a
// later publish brings the model back as new.
func TestDeleteModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		// The controller just started: traffic before it is unknown, so a
		// quiet window refuses the delete.
		h := startWith(t, t.TempDir(), Config{DeleteQuiet: time.Hour})
		h.scan(folder(map[string]map[string]string{"calc": linear("calc", 1), "other": linear("other", 1)}))
		h.scan(folder(map[string]map[string]string{"calc": linear("calc", 2), "other": linear("other", 1)}))
		if _, err := h.ctl.DeleteModel(ctx, "calc", "ops", "retired"); code(err) != errs.AlreadyExists || !strings.Contains(err.Error(), "without predict calls") {
			t.Fatalf("delete inside the quiet window: %v", err)
		}
		h.restart() // DeleteQuiet 0: no check
		ns, err := h.ctl.DeleteModel(ctx, "calc", "ops", "retired")
		if err != nil || len(ns) != 2 {
			t.Fatalf("delete: %v %v", ns, err)
		}
		if _, ok := h.ctl.Table.Load().Models["calc"]; ok {
			t.Fatal("calc is still in the routing table")
		}
		for n := 1; n <= 2; n++ {
			if v, _ := h.store.Get(ctx, "calc", n); v.State != registry.Deleted || v.Reason != "model deleted by ops: retired" {
				t.Fatalf("stored calc@%d: %s %q", n, v.State, v.Reason)
			}
		}
		if p, _ := h.ctl.Policy("calc"); len(p.Targets) != 0 || p.Actor != "ops" {
			t.Fatalf("policy after delete: %+v", p)
		}
		if es := h.events("calc", "delete"); len(es) != 1 || es[0].Actor != "ops" || es[0].What != "model calc deleted: versions 1, 2 archived and hidden" {
			t.Fatalf("audit: %+v", es)
		}
		if _, err := h.ctl.DeleteModel(ctx, "calc", "ops", ""); code(err) != errs.NotFound {
			t.Fatalf("delete twice: %v", err)
		}
		if st, _ := h.state("other", 1); st != registry.Ready {
			t.Fatalf("other is %s", st)
		}

		h.restart()
		h.scan(folder(map[string]map[string]string{"calc": linear("calc", 2), "other": linear("other", 1)}))
		if st, _ := h.state("calc", 2); st != registry.Deleted {
			t.Fatalf("after restart and scan calc@2 is %s", st)
		}
		if _, ok := h.ctl.Table.Load().Models["calc"]; ok {
			t.Fatal("calc came back after restart")
		}
		// A changed package is a new version: the model's first again.
		h.scan(folder(map[string]map[string]string{"calc": linear("calc", 3)}))
		testwait.Until(t, 30*time.Second, func() bool { return h.ctl.Table.Load().Serving("calc") == 3 })
	})
}

// Config.Unrouted hears of a version that leaves the routing for good
// (the gateway drops its prediction cache).
func TestUnroutedOnArchive(t *testing.T) {
	var mu sync.Mutex
	var got []string
	h := startWith(t, t.TempDir(), Config{Unrouted: func(id string) { mu.Lock(); got = append(got, id); mu.Unlock() }})
	h.scan(folder(map[string]map[string]string{"calc": linear("calc", 1)}))
	h.scan(folder(map[string]map[string]string{"calc": linear("calc", 2)}))
	if _, err := h.ctl.Archive(context.Background(), "calc", 2, "ops", ""); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[calc@2]" {
		t.Fatalf("unrouted %v, want [calc@2]", got)
	}
}

func TestVersionDeleteRefusal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		st       registry.State
		served   bool
		requests int64
		r        *Rollout
		want     string // substring; "" means allowed
	}{
		{"failed, never served", registry.Failed, false, 0, nil, ""},
		{"ready, never a target", registry.Ready, false, 0, nil, ""},
		{"archived, never a target", registry.Archived, false, 0, nil, ""},
		{"loading", registry.Loading, false, 0, nil, "fraud@3 is loading"},
		{"a target once", registry.Failed, true, 0, nil, "fraud@3 has served"},
		{"called pinned", registry.Ready, false, 2, nil, "fraud@3 has answered 2 predict call(s)"},
		{"candidate of an active rollout", registry.Ready, false, 0, &Rollout{Candidate: 3, Baseline: 1, Phase: PhaseWaiting}, "in fraud's rollout (waiting)"},
		{"candidate of a failed rollout", registry.Failed, false, 0, &Rollout{Candidate: 3, Baseline: 1, Phase: PhaseFailed}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := versionDeleteRefusal("fraud", 3, tc.st, tc.served, tc.requests, tc.r)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("versionDeleteRefusal = %q, want %q", got, tc.want)
			}
		})
	}
}
