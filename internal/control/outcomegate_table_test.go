package control

import (
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/abstat"
	"github.com/sluiceml/sluice/internal/modelpkg"
)

func convResult(na, ka, nb, kb int64, dir string) *abstat.Result {
	r := abstat.Evaluate(abstat.Arm{Units: na, N: na, Sum: float64(ka), SumSq: float64(ka)}, abstat.Arm{Units: nb, N: nb, Sum: float64(kb), SumSq: float64(kb)},
		abstat.Config{ShareB: float64(nb) / float64(na+nb), Direction: dir}, 1)
	return &r
}

// outcomeGate: the gate row the status shows, and Decide's action.
func TestOutcomeGateTable(t *testing.T) {
	minus := -0.1
	for _, c := range []struct {
		name    string
		edit    func(*modelpkg.Release)
		res     *abstat.Result
		action  string
		ready   bool
		pass    bool
		samples int64
		why     string
	}{
		{"no figures yet", nil, nil, abstat.Wait, false, false, 0, "no outcome figures yet"},
		{"better, enough outcomes: promote", nil, convResult(4000, 800, 4000, 1200, ""), abstat.Promote, true, true, 4000, "above minLift"},
		{"worse: abort, ready whatever the count", func(p *modelpkg.Release) { p.Gates.MinSamples = 1_000_000 }, convResult(4000, 1200, 4000, 800, ""), abstat.Abort, true, false, 4000, "significantly worse"},
		{"equal, few outcomes: wait, not ready", nil, convResult(300, 60, 300, 61, ""), abstat.Wait, false, true, 300, "minSamples 1000"},
		{"equal, many, minLift 0: wait", nil, convResult(200000, 20000, 200000, 20000, ""), abstat.Wait, true, true, 200000, "inside"},
		{"equal, many, minLift -10 %: promote (non-inferior)", func(p *modelpkg.Release) { p.Gates.MinLift = &minus }, convResult(200000, 20000, 200000, 20000, ""), abstat.Promote, true, true, 200000, "above minLift -10 %"},
		{"lower is better and B lower: promote", func(p *modelpkg.Release) { p.Gates.Direction = "decrease" }, convResult(4000, 1200, 4000, 800, "decrease"), abstat.Promote, true, true, 4000, "better: decrease"},
		{"a broken split: abort", nil, func() *abstat.Result {
			r := convResult(6000, 1200, 4000, 1200, "")
			r.SRM, r.SRMPValue = true, 1e-20
			return r
		}(), abstat.Abort, true, false, 4000, "sample ratio mismatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := plan(func(p *modelpkg.Release) {
				p.Gates.Metric = "converted"
				if c.edit != nil {
					c.edit(p)
				}
			})
			g, action, why := outcomeGate(p, c.res)
			if g == nil || g.Name != "outcome_converted" || g.Limit != *p.Gates.MinLift {
				t.Fatalf("gate %+v", g)
			}
			if action != c.action || g.Ready != c.ready || (c.res != nil && g.Pass != c.pass) || g.Samples != c.samples || !strings.Contains(why, c.why) {
				t.Errorf("action %s ready %v pass %v samples %d why %q; want %s %v %v %d %q", action, g.Ready, g.Pass, g.Samples, why, c.action, c.ready, c.pass, c.samples, c.why)
			}
			if c.res != nil && g.Observed != c.res.RelLift {
				t.Errorf("observed %v, want the relative lift %v", g.Observed, c.res.RelLift)
			}
		})
	}
	if g, action, why := outcomeGate(plan(nil), convResult(10, 1, 10, 1, "")); g != nil || action != "" || why != "" {
		t.Errorf("a plan without gates.metric: %+v %q %q", g, action, why)
	}
}

// Advance with an outcome gate that only waits: the canary steps go on
// until the last, which holds (promotion needs the gate), and a
// non-inferiority gate lets the same figures through.
func TestAdvanceOutcomeGateHolds(t *testing.T) {
	same := convResult(200000, 20000, 200000, 20000, "")
	good := window(20, 0, 5*time.Millisecond, 200, 0, 5*time.Millisecond)
	minus := -0.1
	for _, c := range []struct {
		name      string
		minLift   *float64
		step      int
		wantPhase Phase
		wantStep  int
	}{
		{"minLift 0, first step: next step", nil, 0, PhaseCanary, 1},
		{"minLift 0, last step: holds", nil, 1, PhaseCanary, 1},
		{"minLift -10 %, last step: promoted", &minus, 1, PhasePromoted, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := plan(func(p *modelpkg.Release) { p.Gates.Metric = "converted"; p.Gates.MinLift = c.minLift })
			r := Rollout{Model: "m", Candidate: 2, Baseline: 1, Plan: p, StepStart: t0, Phase: PhaseCanary, Step: c.step}
			next, d := Advance(r, Input{Now: t0.Add(2 * time.Minute), Window: good, Outcome: same})
			if next.Phase != c.wantPhase || next.Step != c.wantStep {
				t.Fatalf("phase %s step %d, want %s %d (event %q)", next.Phase, next.Step, c.wantPhase, c.wantStep, d.Event)
			}
			if next.Phase == PhasePromoted && !strings.Contains(d.Event, "above minLift -10 %") {
				t.Errorf("event %q lacks the gate's numbers", d.Event)
			}
		})
	}
}
