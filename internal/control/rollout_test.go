package control

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/vstats"
)

var t0 = time.Unix(1_800_000_000, 0).UTC()

func plan(f func(*modelpkg.Release)) modelpkg.Release {
	p := modelpkg.Release{Steps: []int{1, 25, 100}, Bake: modelpkg.Duration{Duration: time.Minute}, MinSamples: 10}
	if f != nil {
		f(&p)
	}
	p.Defaults()
	return p
}

// window builds a step window: requests, errors and a latency for each side.
func window(cReq, cErr int, cLat time.Duration, bReq, bErr int, bLat time.Duration) Window {
	var s vstats.Set
	c, b := s.Get("c"), s.Get("b")
	for i := 0; i < cReq; i++ {
		c.Record(cLat, i >= cErr, i < cErr)
	}
	for i := 0; i < bReq; i++ {
		b.Record(bLat, i >= bErr, i < bErr)
	}
	return Window{Candidate: c.Snapshot(), Baseline: b.Snapshot()}
}

func shadowWindow(requests, rows, flips, errors int) Window {
	var s vstats.Set
	c := s.Get("c")
	for i := 0; i < requests; i++ {
		p, q := make([]float32, rows/requests), make([]float32, rows/requests)
		c.Compare(p, q, 1, time.Millisecond)
	}
	c.Shadow.Disagreements.Add(int64(flips))
	c.Shadow.Errors.Add(int64(errors))
	return Window{Candidate: c.Snapshot()}
}

func TestAdvance(t *testing.T) {
	ms := time.Millisecond
	base := Rollout{Model: "m", Candidate: 2, Baseline: 1, Plan: plan(nil), StepStart: t0}
	at := func(r Rollout, f func(*Rollout)) Rollout { f(&r); return r }
	canary := func(step int) Rollout {
		return at(base, func(r *Rollout) { r.Phase, r.Step = PhaseCanary, step })
	}
	good := window(20, 0, 5*ms, 200, 0, 5*ms)
	cases := []struct {
		name      string
		r         Rollout
		in        Input
		phase     Phase
		step      int
		targets   string // fmt of Decision.Targets ("" = none)
		reasonHas string
	}{
		{"waits while loading", at(base, func(r *Rollout) { r.Phase = PhaseWaiting }), Input{Now: t0, CandidateState: registry.Loading}, PhaseWaiting, 0, "", ""},
		{"failed before ready: no traffic", at(base, func(r *Rollout) { r.Phase = PhaseWaiting }), Input{Now: t0, CandidateState: registry.Failed, CandidateReason: "golden example 0 …"}, PhaseFailed, 0, "", "failed before ready"},
		{"ready: first canary step", at(base, func(r *Rollout) { r.Phase = PhaseWaiting }), Input{Now: t0, CandidateState: registry.Ready}, PhaseCanary, 0, "[{1 99 false} {2 1 false}]", ""},
		{"ready with shadow plan: shadow first", at(base, func(r *Rollout) {
			r.Phase = PhaseWaiting
			r.Plan = plan(func(p *modelpkg.Release) { p.Shadow = &modelpkg.ShadowPlan{Requests: 50} })
		}),
			Input{Now: t0, CandidateState: registry.Ready}, PhaseShadow, 0, "[{1 100 false} {2 0 true}]", ""},
		{"immediate plan promotes at once", at(base, func(r *Rollout) { r.Phase = PhaseWaiting; r.Plan = modelpkg.Immediate() }), Input{Now: t0, CandidateState: registry.Ready}, PhasePromoted, 0, "[{2 100 false}]", ""},
		{"shadow collecting", at(base, func(r *Rollout) {
			r.Phase = PhaseShadow
			r.Plan = plan(func(p *modelpkg.Release) { p.Shadow = &modelpkg.ShadowPlan{Requests: 50} })
		}),
			Input{Now: t0, Window: shadowWindow(5, 5, 0, 0)}, PhaseShadow, 0, "", ""},
		{"shadow passes: canary", at(base, func(r *Rollout) {
			r.Phase = PhaseShadow
			r.Plan = plan(func(p *modelpkg.Release) { p.Shadow = &modelpkg.ShadowPlan{Requests: 50} })
		}),
			Input{Now: t0, Window: shadowWindow(50, 100, 2, 0)}, PhaseCanary, 0, "[{1 99 false} {2 1 false}]", ""},
		{"shadow disagreement fails: rollback", at(base, func(r *Rollout) {
			r.Phase = PhaseShadow
			r.Plan = plan(func(p *modelpkg.Release) { p.Shadow = &modelpkg.ShadowPlan{Requests: 50} })
		}),
			Input{Now: t0, Window: shadowWindow(50, 100, 30, 0)}, PhaseRolledBack, 0, "[{1 100 false}]", "shadow_disagreement 0.3 > 0.05"},
		{"canary: bake not over", canary(0), Input{Now: t0.Add(30 * time.Second), Window: good}, PhaseCanary, 0, "", ""},
		{"canary: too few samples after bake", canary(0), Input{Now: t0.Add(2 * time.Minute), Window: window(5, 0, 5*ms, 200, 0, 5*ms)}, PhaseCanary, 0, "", ""},
		{"canary: next step", canary(0), Input{Now: t0.Add(2 * time.Minute), Window: good}, PhaseCanary, 1, "[{1 75 false} {2 25 false}]", ""},
		{"canary: last step promotes", canary(1), Input{Now: t0.Add(2 * time.Minute), Window: good}, PhasePromoted, 2, "[{2 100 false}]", ""},
		{"a fast candidate's p99 within the slack passes", canary(0), Input{Now: t0.Add(2 * time.Minute), Window: window(20, 0, 900*time.Microsecond, 200, 0, 300*time.Microsecond)}, PhaseCanary, 1, "[{1 75 false} {2 25 false}]", ""},
		{"errors fail the gate early", canary(0), Input{Now: t0.Add(time.Second), Window: window(20, 5, 5*ms, 200, 0, 5*ms)}, PhaseRolledBack, 0, "[{1 100 false}]", "error_rate_excess 0.25 > 0.01"},
		{"baseline errors are not the candidate's fault", canary(0), Input{Now: t0.Add(2 * time.Minute), Window: window(20, 2, 5*ms, 200, 20, 5*ms)}, PhaseCanary, 1, "[{1 75 false} {2 25 false}]", ""},
		{"slow candidate fails p99 ratio", canary(0), Input{Now: t0.Add(time.Second), Window: window(20, 0, 50*ms, 200, 0, 5*ms)}, PhaseRolledBack, 0, "[{1 100 false}]", "p99_ratio"},
		{"onFail pause keeps weights", at(canary(0), func(r *Rollout) { r.Plan.OnFail = "pause" }), Input{Now: t0.Add(time.Second), Window: window(20, 5, 5*ms, 200, 0, 5*ms)}, PhasePaused, 0, "", "error_rate_excess"},
		{"paused does not move", at(canary(0), func(r *Rollout) { r.Phase = PhasePaused }), Input{Now: t0.Add(time.Hour), Window: good}, PhasePaused, 0, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, d := Advance(c.r, c.in)
			targets := ""
			if d.Targets != nil {
				targets = fmt.Sprint(d.Targets)
			}
			if got.Phase != c.phase || got.Step != c.step || targets != c.targets || !strings.Contains(got.Reason, c.reasonHas) {
				t.Fatalf("got phase %s step %d targets %q reason %q; want %s %d %q reason ~%q", got.Phase, got.Step, targets, got.Reason, c.phase, c.step, c.targets, c.reasonHas)
			}
			if (d.Targets != nil || got.Phase != c.r.Phase) && d.Event == "" {
				t.Error("a transition without an audit event")
			}
		})
	}
}

func TestAct(t *testing.T) {
	r := Rollout{Model: "m", Candidate: 2, Baseline: 1, Plan: plan(nil), Phase: PhaseCanary, Step: 1}
	p, d, err := Act(r, ActionPause, t0)
	if err != nil || p.Phase != PhasePaused || d.Targets != nil {
		t.Fatalf("pause: %+v %v", p, err)
	}
	if _, _, err := Act(p, ActionPause, t0); err == nil {
		t.Error("pausing twice must fail")
	}
	res, _, err := Act(p, ActionResume, t0.Add(time.Hour))
	if err != nil || res.Phase != PhaseCanary || res.Step != 1 || !res.StepStart.Equal(t0.Add(time.Hour)) {
		t.Fatalf("resume: %+v %v", res, err)
	}
	ab, d, err := Act(r, ActionAbort, t0)
	if err != nil || ab.Phase != PhaseAborted || fmt.Sprint(d.Targets) != "[{1 100 false}]" {
		t.Fatalf("abort: %+v %v %v", ab, d, err)
	}
	pr, d, err := Act(r, ActionPromote, t0)
	if err != nil || pr.Phase != PhasePromoted || fmt.Sprint(d.Targets) != "[{2 100 false}]" {
		t.Fatalf("promote: %+v %v", pr, err)
	}
	if _, _, err := Act(pr, ActionAbort, t0); err == nil {
		t.Error("acting on a finished rollout must fail")
	}
	w := Rollout{Model: "m", Candidate: 2, Baseline: 1, Phase: PhaseWaiting}
	if _, _, err := Act(w, ActionPromote, t0); err == nil {
		t.Error("promoting a candidate that is not ready must fail")
	}
}

func TestDiff(t *testing.T) {
	got := Diff("fraud", []registry.Target{{Version: 17, Weight: 100}}, []registry.Target{{Version: 17, Weight: 90}, {Version: 18, Weight: 10}, {Version: 19, Shadow: true}})
	if got != "fraud@17 100→90, fraud@18 0→10, fraud@19 0→shadow" {
		t.Errorf("diff %q", got)
	}
}
