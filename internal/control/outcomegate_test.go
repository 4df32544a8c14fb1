package control

import (
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/abstat"
	"github.com/sluiceml/sluice/internal/modelpkg"
)

// TestAdvanceOutcomeGate: a plan with gates.metric rolls back a candidate
// significantly worse at any step, holds the last step until the gate
// says promote, and writes the gate's numbers into the audit events.
func TestAdvanceOutcomeGate(t *testing.T) {
	ms := time.Millisecond
	p := plan(func(p *modelpkg.Release) { p.Gates.Metric = "converted"; p.Gates.MinSamples = 500 })
	r := Rollout{Model: "m", Candidate: 2, Baseline: 1, Plan: p, StepStart: t0, Phase: PhaseCanary}
	good := window(20, 0, 5*ms, 200, 0, 5*ms)
	eval := func(na, ka, nb, kb int64) *abstat.Result {
		res := abstat.Evaluate(abstat.Arm{Units: na, N: na, Sum: float64(ka), SumSq: float64(ka)}, abstat.Arm{Units: nb, N: nb, Sum: float64(kb), SumSq: float64(kb)}, abstat.Config{ShareB: float64(nb) / float64(na+nb)}, 1)
		return &res
	}
	worse := eval(4000, 1200, 4000, 800)  // 30 % → 20 %
	better := eval(4000, 800, 4000, 1200) // 20 % → 30 %
	same := eval(300, 60, 300, 61)
	for _, tc := range []struct {
		name      string
		step      int
		outcome   *abstat.Result
		wantPhase Phase
		wantStep  int
		event     string // in the audit event
	}{
		{"no figures yet, first step baked: next step", 0, nil, PhaseCanary, 1, "canary step 2"},
		{"no figures at the last step: wait", 1, nil, PhaseCanary, 1, ""},
		{"worse at the first step: rolled back", 0, worse, PhaseRolledBack, 0, "significantly worse"},
		{"worse at the last step: rolled back", 1, worse, PhaseRolledBack, 1, "converted: the candidate is significantly worse"},
		{"too few outcomes at the last step: wait", 1, same, PhaseCanary, 1, ""},
		{"better at the last step: promoted with the numbers", 1, better, PhasePromoted, 2, "promoted to 100%: converted: the improvement is above minLift"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := r
			in.Step = tc.step
			next, d := Advance(in, Input{Now: t0.Add(2 * time.Minute), Window: good, Outcome: tc.outcome})
			if next.Phase != tc.wantPhase || next.Step != tc.wantStep {
				t.Fatalf("phase %s step %d, want %s %d (event %q)", next.Phase, next.Step, tc.wantPhase, tc.wantStep, d.Event)
			}
			if !strings.Contains(d.Event, tc.event) || (tc.event == "" && d.Event != "") {
				t.Errorf("event %q, want it to say %q", d.Event, tc.event)
			}
			if tc.wantPhase == PhaseCanary && tc.event == "" {
				var found bool
				for _, g := range next.Gates {
					found = found || g.Name == "outcome_converted"
				}
				if !found {
					t.Errorf("gates %+v lack outcome_converted", next.Gates)
				}
			}
		})
	}
}
