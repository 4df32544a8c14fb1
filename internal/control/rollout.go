package control

import (
	"fmt"
	"time"

	"github.com/sluiceml/sluice/internal/abstat"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/vstats"
)

// Phase is where a rollout is.
type Phase string

// Rollout phases. Waiting → [Shadow] → Canary (steps) → Promoted, or
// RolledBack / Paused / Aborted / Failed.
const (
	PhaseWaiting    Phase = "waiting" // candidate loading (hash, load, golden, warmup)
	PhaseShadow     Phase = "shadow"
	PhaseCanary     Phase = "canary"
	PhasePaused     Phase = "paused"
	PhasePromoted   Phase = "promoted"
	PhaseRolledBack Phase = "rolled_back"
	PhaseAborted    Phase = "aborted"
	PhaseFailed     Phase = "failed" // candidate never became ready: it got no traffic
)

// Active reports whether the phase still moves by itself or by hand.
func (p Phase) Active() bool {
	return p == PhaseWaiting || p == PhaseShadow || p == PhaseCanary || p == PhasePaused
}

// Rollout is the state of one release of a candidate version.
type Rollout struct {
	Model      string           `json:"model"`
	Candidate  int              `json:"candidate"`
	Baseline   int              `json:"baseline"`
	Plan       modelpkg.Release `json:"plan"`
	Phase      Phase            `json:"phase"`
	Step       int              `json:"step"`      // index into Plan.Steps while in canary
	StepStart  time.Time        `json:"stepStart"` // when the current step began; once promoted, when it was promoted
	PausedFrom Phase            `json:"pausedFrom,omitempty"`
	Reason     string           `json:"reason,omitempty"` // why it stopped, paused or failed
	Started    time.Time        `json:"started"`
	Actor      string           `json:"actor"`
	Gates      []GateResult     `json:"gates,omitempty"` // last evaluation
}

// GateResult is one gate's last evaluation.
type GateResult struct {
	Name     string  `json:"name"`
	Observed float64 `json:"observed"`
	Limit    float64 `json:"limit"`
	Samples  int64   `json:"samples"`
	Pass     bool    `json:"pass"`
	Ready    bool    `json:"ready"` // enough samples to judge
}

// Window is what was observed since the step began.
type Window struct {
	Candidate, Baseline vstats.Snapshot
}

// Input is everything Advance looks at.
type Input struct {
	Now             time.Time
	CandidateState  registry.State
	CandidateReason string
	Window          Window
	// Outcome compares candidate (B) and baseline (A) on the plan's
	// gates.metric since the rollout started (nil: no figures yet).
	Outcome *abstat.Result
}

// Decision tells the driver what to do after a transition.
type Decision struct {
	Targets []registry.Target // non-nil: make this the new policy
	Event   string            // non-empty: an audit event to record
}

func weights(baseline, candidate, pct int, shadow bool) []registry.Target {
	switch {
	case shadow:
		return []registry.Target{{Version: baseline, Weight: 100}, {Version: candidate, Shadow: true}}
	case pct >= 100:
		return []registry.Target{{Version: candidate, Weight: 100}}
	case pct <= 0:
		return []registry.Target{{Version: baseline, Weight: 100}}
	}
	return []registry.Target{{Version: baseline, Weight: 100 - pct}, {Version: candidate, Weight: pct}}
}

// Advance is the rollout state machine: a pure function of the current
// state and what was observed. It never touches a clock, store or router.
func Advance(r Rollout, in Input) (Rollout, Decision) {
	switch r.Phase {
	case PhaseWaiting:
		switch in.CandidateState {
		case registry.Failed:
			r.Phase, r.Reason = PhaseFailed, fmt.Sprintf("%s@%d failed before ready: %s", r.Model, r.Candidate, in.CandidateReason)
			return r, Decision{Event: r.Reason}
		case registry.Ready:
			r.StepStart = in.Now
			if r.Plan.Shadow != nil {
				r.Phase = PhaseShadow
				return r, Decision{Targets: weights(r.Baseline, r.Candidate, 0, true), Event: fmt.Sprintf("%s@%d ready: shadow for %d requests", r.Model, r.Candidate, r.Plan.Shadow.Requests)}
			}
			return enterStep(r, 0, in.Now)
		}
		return r, Decision{}
	case PhaseShadow:
		sh := in.Window.Candidate.Shadow
		r.Gates = shadowGates(r.Plan, sh)
		if sh.Requests < int64(r.Plan.Shadow.Requests) {
			if failed := failing(r.Gates); failed != "" && sh.Requests >= int64(r.Plan.MinSamples) {
				return fail(r, failed)
			}
			return r, Decision{}
		}
		if failed := failing(r.Gates); failed != "" {
			return fail(r, failed)
		}
		return enterStep(r, 0, in.Now)
	case PhaseCanary:
		r.Gates = canaryGates(r.Plan, in.Window)
		if failed := failing(r.Gates); failed != "" {
			return fail(r, failed)
		}
		ready := allReady(r.Gates)
		og, action, why := outcomeGate(r.Plan, in.Outcome)
		if og != nil {
			r.Gates = append(r.Gates, *og)
		}
		if action == abstat.Abort {
			return fail(r, why)
		}
		if !ready || in.Now.Sub(r.StepStart) < r.Plan.Bake.Duration {
			return r, Decision{}
		}
		last := r.Step+1 >= len(r.Plan.Steps) || r.Plan.Steps[r.Step+1] >= 100
		if og != nil && last && action != abstat.Promote {
			return r, Decision{} // promoted only when the outcome gate holds
		}
		next, d := enterStep(r, r.Step+1, in.Now)
		if og != nil && next.Phase == PhasePromoted {
			d.Event += ": " + why
		}
		return next, d
	}
	return r, Decision{}
}

// enterStep moves to canary step i, or promotes at the last step (100 %).
func enterStep(r Rollout, i int, now time.Time) (Rollout, Decision) {
	r.Gates = nil
	r.StepStart = now
	if i >= len(r.Plan.Steps) || r.Plan.Steps[i] >= 100 {
		r.Phase, r.Step = PhasePromoted, len(r.Plan.Steps)-1
		return r, Decision{Targets: weights(r.Baseline, r.Candidate, 100, false), Event: fmt.Sprintf("%s@%d promoted to 100%%", r.Model, r.Candidate)}
	}
	r.Phase, r.Step = PhaseCanary, i
	pct := r.Plan.Steps[i]
	return r, Decision{Targets: weights(r.Baseline, r.Candidate, pct, false), Event: fmt.Sprintf("%s@%d canary step %d: %d%%", r.Model, r.Candidate, i+1, pct)}
}

func fail(r Rollout, why string) (Rollout, Decision) {
	r.Reason = "gate failed: " + why
	if r.Plan.OnFail == "pause" {
		r.PausedFrom, r.Phase = r.Phase, PhasePaused
		return r, Decision{Event: fmt.Sprintf("%s@%d paused: %s", r.Model, r.Candidate, r.Reason)}
	}
	r.Phase = PhaseRolledBack
	return r, Decision{Targets: weights(r.Baseline, r.Candidate, 0, false), Event: fmt.Sprintf("%s@%d rolled back to %s@%d: %s", r.Model, r.Candidate, r.Model, r.Baseline, r.Reason)}
}

// Manual actions.
const (
	ActionPause   = "pause"
	ActionResume  = "resume"
	ActionAbort   = "abort"
	ActionPromote = "promote"
)

// Act applies a manual action; it is pure like Advance.
func Act(r Rollout, action string, now time.Time) (Rollout, Decision, error) {
	if !r.Phase.Active() {
		return r, Decision{}, fmt.Errorf("rollout of %s@%d is %s; nothing to %s", r.Model, r.Candidate, r.Phase, action)
	}
	switch action {
	case ActionPause:
		if r.Phase == PhasePaused {
			return r, Decision{}, fmt.Errorf("rollout of %s@%d is already paused", r.Model, r.Candidate)
		}
		r.PausedFrom, r.Phase, r.Reason = r.Phase, PhasePaused, "paused by hand"
		return r, Decision{Event: fmt.Sprintf("%s@%d paused", r.Model, r.Candidate)}, nil
	case ActionResume:
		if r.Phase != PhasePaused {
			return r, Decision{}, fmt.Errorf("rollout of %s@%d is not paused (%s)", r.Model, r.Candidate, r.Phase)
		}
		r.Phase, r.PausedFrom, r.Reason, r.StepStart, r.Gates = r.PausedFrom, "", "", now, nil
		if r.Phase == "" {
			r.Phase = PhaseWaiting
		}
		return r, Decision{Event: fmt.Sprintf("%s@%d resumed (%s)", r.Model, r.Candidate, r.Phase)}, nil
	case ActionAbort:
		r.Phase, r.Reason = PhaseAborted, "aborted by hand"
		return r, Decision{Targets: weights(r.Baseline, r.Candidate, 0, false), Event: fmt.Sprintf("%s@%d aborted: traffic back to %s@%d", r.Model, r.Candidate, r.Model, r.Baseline)}, nil
	case ActionPromote:
		if r.Phase == PhaseWaiting || (r.Phase == PhasePaused && r.PausedFrom == PhaseWaiting) {
			return r, Decision{}, fmt.Errorf("%s@%d is not ready yet; it cannot be promoted", r.Model, r.Candidate)
		}
		r.Phase, r.Reason, r.Step, r.StepStart = PhasePromoted, "promoted by hand", len(r.Plan.Steps)-1, now // keepWarm counts from here
		return r, Decision{Targets: weights(r.Baseline, r.Candidate, 100, false), Event: fmt.Sprintf("%s@%d promoted by hand", r.Model, r.Candidate)}, nil
	}
	return r, Decision{}, fmt.Errorf("unknown action %q (pause, resume, abort, promote)", action)
}

func shadowGates(p modelpkg.Release, sh vstats.ShadowSnapshot) []GateResult {
	ready := sh.Requests >= int64(p.MinSamples) || (p.Shadow != nil && sh.Requests >= int64(p.Shadow.Requests))
	var dis, errRate float64
	if sh.Rows > 0 {
		dis = float64(sh.Disagreements) / float64(sh.Rows)
	}
	if sh.Requests > 0 {
		errRate = float64(sh.Errors+sh.Incompatible) / float64(sh.Requests)
	}
	return []GateResult{
		{Name: "shadow_disagreement", Observed: dis, Limit: *p.Gates.MaxDisagreement, Samples: sh.Rows, Ready: ready, Pass: dis <= *p.Gates.MaxDisagreement},
		{Name: "shadow_error_rate", Observed: errRate, Limit: *p.Gates.MaxErrorRate, Samples: sh.Requests, Ready: ready, Pass: errRate <= *p.Gates.MaxErrorRate},
	}
}

func canaryGates(p modelpkg.Release, w Window) []GateResult {
	c, b := w.Candidate, w.Baseline
	min := int64(p.MinSamples)
	ready := c.Requests >= min && b.Requests >= min
	rate := func(s vstats.Snapshot) float64 {
		if s.Requests == 0 {
			return 0
		}
		return float64(s.Errors) / float64(s.Requests)
	}
	excess := rate(c) - rate(b)
	var ratio float64
	cp, bp := c.Latency.Quantile(0.99), b.Latency.Quantile(0.99)
	if bp > 0 {
		ratio = float64(cp) / float64(bp)
	}
	return []GateResult{
		{Name: "error_rate_excess", Observed: excess, Limit: *p.Gates.MaxErrorRate, Samples: c.Requests, Ready: ready, Pass: excess <= *p.Gates.MaxErrorRate},
		// Sub-millisecond p99s differ by large ratios from noise alone: a p99
		// within the slack of the baseline's passes.
		{Name: "p99_ratio", Observed: ratio, Limit: *p.Gates.MaxP99Ratio, Samples: c.Requests, Ready: ready,
			Pass: ratio <= *p.Gates.MaxP99Ratio || cp-bp <= p.Gates.P99Slack.Duration},
	}
}

// outcomeGate evaluates the plan's outcome gate (nil, "": the plan has
// none): its result for the status, abstat.Decide's action and why (the
// numbers, for the audit trail).
func outcomeGate(p modelpkg.Release, res *abstat.Result) (*GateResult, string, string) {
	gs := p.Gates
	if gs.Metric == "" {
		return nil, "", ""
	}
	minLift := 0.0
	if gs.MinLift != nil {
		minLift = *gs.MinLift
	}
	g := GateResult{Name: "outcome_" + gs.Metric, Limit: minLift}
	if res == nil {
		return &g, abstat.Wait, gs.Metric + ": no outcome figures yet"
	}
	action, why := abstat.Decide(*res, abstat.Gate{Metric: gs.Metric, MinLift: minLift, MinSamples: gs.MinSamples})
	g.Observed, g.Samples = res.RelLift, min(res.A.N, res.B.N)
	g.Ready = g.Samples >= gs.MinSamples || action != abstat.Wait
	g.Pass = action != abstat.Abort
	return &g, action, why
}

// failing names the first gate that has enough samples and fails.
func failing(gs []GateResult) string {
	for _, g := range gs {
		if g.Ready && !g.Pass {
			return fmt.Sprintf("%s %s > %s over %d samples", g.Name, FormatSig(g.Observed, 4), FormatSig(g.Limit, 4), g.Samples)
		}
	}
	return ""
}

func allReady(gs []GateResult) bool {
	for _, g := range gs {
		if !g.Ready {
			return false
		}
	}
	return true
}
