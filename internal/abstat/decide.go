package abstat

import (
	"fmt"
	"strings"
)

// Actions of a rollout gate (Decide).
const (
	Wait    = "wait"
	Promote = "promote"
	Abort   = "abort"
)

// Gate is a rollout's condition on an outcome metric: arm A is the
// current version, B the candidate.
type Gate struct {
	Metric string
	// MinLift is the relative improvement, in the metric's better
	// direction, the candidate must be known to have: promote once the
	// always-valid interval's lower end of the improvement is above it.
	// 0: significantly better; 0.02: at least 2 % better; −0.01: not more
	// than 1 % worse (non-inferiority).
	MinLift float64
	// MinSamples is the fewest outcomes on each arm before a promotion (or
	// an abort because MinLift is out of reach). A candidate significantly
	// worse is aborted at any count: the sequential test is valid at every
	// look.
	MinSamples int64
}

// Decide turns an experiment's Result into a rollout gate's action: abort
// when the split is broken (SRM), when the candidate is significantly
// worse, or (with MinSamples on each arm) when the interval rules out
// MinLift; promote when, with MinSamples on each arm, the interval's lower
// end of the improvement is above MinLift; wait otherwise. why says the
// action with its numbers, for the audit trail.
func Decide(r Result, g Gate) (action string, why string) {
	metric := g.Metric
	if metric == "" {
		metric = "metric"
	}
	action, reason, lo, hi := gate(r, g)
	nums := figures(r)
	switch reason {
	case reasonSRM:
		why = fmt.Sprintf("sample ratio mismatch: %d units on A and %d on B for a share of B of %s, chi-square p = %s < %v: the split is broken, no result can be trusted",
			r.A.Units, r.B.Units, pct(r.ShareB), num(r.SRMPValue), SRMAlpha)
	case reasonWorse:
		why = "the candidate is significantly worse: " + nums
	case reasonSamples:
		why = fmt.Sprintf("%d outcomes on A and %d on B, minSamples %d: %s", r.A.N, r.B.N, g.MinSamples, nums)
	case reasonNoRel:
		why = fmt.Sprintf("no relative lift yet (%s): %s", strings.Join(r.Notes, "; "), nums)
	case reasonAbove:
		why = fmt.Sprintf("the improvement is above minLift %s (always-valid interval %s to %s): %s", pctSigned(g.MinLift), pctSigned(lo), pctSigned(hi), nums)
	case reasonBelow:
		why = fmt.Sprintf("the improvement cannot reach minLift %s (always-valid interval %s to %s): %s", pctSigned(g.MinLift), pctSigned(lo), pctSigned(hi), nums)
	default:
		why = fmt.Sprintf("minLift %s is inside the improvement's always-valid interval %s to %s: %s", pctSigned(g.MinLift), pctSigned(lo), pctSigned(hi), nums)
	}
	return action, metric + ": " + why
}

// Why a gate acts (gate's reason).
const (
	reasonSRM     = iota // abort: the split is broken
	reasonWorse          // abort: significantly worse
	reasonSamples        // wait: fewer than MinSamples
	reasonNoRel          // wait: no relative lift
	reasonAbove          // promote: the improvement's interval is above MinLift
	reasonBelow          // abort: the interval is below MinLift
	reasonInside         // wait: MinLift inside the interval
)

// gate is Decide's decision without the words: the action, its reason,
// and the always-valid interval of the improvement (the relative lift in
// the better direction) it compared with MinLift.
func gate(r Result, g Gate) (action string, reason int, lo, hi float64) {
	switch {
	case r.SRM:
		return Abort, reasonSRM, 0, 0
	case r.Decision == ABetter:
		return Abort, reasonWorse, 0, 0
	case r.A.N < g.MinSamples || r.B.N < g.MinSamples:
		return Wait, reasonSamples, 0, 0
	case !r.RelDefined:
		return Wait, reasonNoRel, 0, 0
	}
	lo, hi = r.SeqRelLow, r.SeqRelHigh
	if r.Direction == Decrease {
		lo, hi = -r.SeqRelHigh, -r.SeqRelLow
	}
	switch {
	case lo > g.MinLift:
		return Promote, reasonAbove, lo, hi
	case hi < g.MinLift:
		return Abort, reasonBelow, lo, hi
	}
	return Wait, reasonInside, lo, hi
}

// figures is the numbers of r in one line.
func figures(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mean A %s (n %d), B %s (n %d)", num(r.A.Mean), r.A.N, num(r.B.Mean), r.B.N)
	if r.LiftDefined {
		fmt.Fprintf(&b, ", lift %s", numSigned(r.Lift))
	}
	if r.RelDefined {
		fmt.Fprintf(&b, " (%s, always-valid %s interval %s to %s)", pctSigned(r.RelLift), pct(1-r.Alpha), pctSigned(r.SeqRelLow), pctSigned(r.SeqRelHigh))
	}
	fmt.Fprintf(&b, ", always-valid p = %s, alpha %v, better: %s", num(r.PValue), r.Alpha, r.Direction)
	return b.String()
}

func num(x float64) string       { return fmt.Sprintf("%.4g", x) }
func numSigned(x float64) string { return fmt.Sprintf("%+.4g", x) }
func pct(x float64) string       { return fmt.Sprintf("%.4g %%", 100*x) }
func pctSigned(x float64) string { return fmt.Sprintf("%+.3g %%", 100*x) }
