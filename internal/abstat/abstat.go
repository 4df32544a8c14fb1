package abstat

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Decisions of an experiment (Result.Decision).
const (
	Running      = "running"       // no conclusion yet
	BBetter      = "b_better"      // B significantly better in Config.Direction
	ABetter      = "a_better"      // A significantly better (B worse)
	NoDifference = "no_difference" // the interval rules out MinEffect both ways
)

// Directions (Config.Direction): which way of the metric is better.
const (
	Increase = "increase"
	Decrease = "decrease"
)

// Kinds of outcome (Config.Kind).
const (
	KindAuto       = ""           // binary when both arms' outcomes are all 0 or 1
	KindBinary     = "binary"     // 0/1 outcomes: Wilson intervals per arm, p(1−p) variances
	KindContinuous = "continuous" // any value: sample variances, normal intervals
)

// Denominators (Config.Denominator): what an arm's mean is over.
const (
	PerOutcome = ""      // Σv / N: the mean of the outcomes posted
	PerUnit    = "units" // Σv / Units: a unit without an outcome counts as 0
)

// Defaults.
const (
	DefaultAlpha  = 0.05
	DefaultShareB = 0.5
	// DefaultEffectSD is the standard deviation, in units of the outcome's
	// own standard deviation, of the normal mixture over effects that the
	// mSPRT averages over when Config.Tau2 is 0: τ² = (DefaultEffectSD·σ̂)²
	// with σ̂² the mean of the two arms' per-unit variances. Standardized
	// effects of A/B tests on conversion-like metrics are 0.005–0.05 (a 10 %
	// relative lift on a 10 % rate is 0.033); 0.05 keeps the test powerful
	// for those at tens of thousands of units per arm. docs/releases.md
	// ("Statistics") says how the choice moves power.
	DefaultEffectSD = 0.05
	// SRMAlpha is the chi-square p-value under which the split is flagged.
	SRMAlpha = 0.001
	// minN is the fewest outcomes per arm before a variance, an interval
	// or a sequential update is computed.
	minN = 2
)

// z95 is the standard normal's 0.975 quantile (1.959964…).
var z95 = distuv.UnitNormal.Quantile(0.975)

// Arm is what one arm of an experiment has seen so far.
type Arm struct {
	Units int64   // units (routing keys) assigned to the arm
	N     int64   // outcomes of the metric
	Sum   float64 // Σ v over the outcomes
	SumSq float64 // Σ v² over the outcomes
}

// Config says what an experiment tests. Zero fields take the defaults.
type Config struct {
	ShareB    float64 // expected share of units on arm B, (0,1); 0 = 0.5
	Alpha     float64 // significance level of the sequential test; 0 = 0.05
	MinEffect float64 // relative lift that matters, e.g. 0.01; 0 = none (no no_difference)
	Direction string  // "increase" (default) or "decrease": which way is better
	Tau2      float64 // mSPRT mixing variance of the absolute lift; 0 = (DefaultEffectSD·σ̂)²

	Kind        string // "" (detect), "binary" or "continuous"
	Denominator string // "" (per outcome) or "units" (per unit assigned)
}

// Validate returns every problem of c, each naming its field and the fix.
func (c Config) Validate() error {
	var errs []error
	if c.ShareB != 0 && !(c.ShareB > 0 && c.ShareB < 1) {
		errs = append(errs, fmt.Errorf("shareB: must be between 0 and 1 (exclusive), got %v", c.ShareB))
	}
	if c.Alpha != 0 && !(c.Alpha > 0 && c.Alpha < 0.5) {
		errs = append(errs, fmt.Errorf("alpha: must be between 0 and 0.5 (exclusive), e.g. 0.05, got %v", c.Alpha))
	}
	if !(c.MinEffect >= 0) || math.IsInf(c.MinEffect, 0) {
		errs = append(errs, fmt.Errorf("minEffect: must be a relative lift ≥ 0, e.g. 0.01 for 1 %%, got %v", c.MinEffect))
	}
	if c.Direction != "" && c.Direction != Increase && c.Direction != Decrease {
		errs = append(errs, fmt.Errorf("direction: must be %q or %q, got %q", Increase, Decrease, c.Direction))
	}
	if !(c.Tau2 >= 0) || math.IsInf(c.Tau2, 0) {
		errs = append(errs, fmt.Errorf("tau2: must be ≥ 0 (0 for the default), got %v", c.Tau2))
	}
	if c.Kind != KindAuto && c.Kind != KindBinary && c.Kind != KindContinuous {
		errs = append(errs, fmt.Errorf("kind: must be empty, %q or %q, got %q", KindBinary, KindContinuous, c.Kind))
	}
	if c.Denominator != PerOutcome && c.Denominator != PerUnit {
		errs = append(errs, fmt.Errorf("denominator: must be empty or %q, got %q", PerUnit, c.Denominator))
	}
	return errors.Join(errs...)
}

// ArmSummary is one arm's figures in a Result.
type ArmSummary struct {
	Units  int64
	N      int64   // outcomes the mean is over (Units with Config.Denominator "units")
	Mean   float64 // Σv / N; 0 when N is 0
	StdErr float64 // standard error of Mean
	Low    float64 // 95 % interval of the mean (Wilson for binary outcomes)
	High   float64
}

// Result is an experiment's statistics at one moment. Every number is
// finite (it encodes as JSON); an undefined one is 0 with its Defined flag
// false and a note.
type Result struct {
	A, B ArmSummary

	Lift, LiftLow, LiftHigh  float64 // absolute, B − A, fixed-horizon 95 % interval
	RelLift, RelLow, RelHigh float64 // relative, (B − A)/A, 95 % interval (delta method)
	SeqLow, SeqHigh          float64 // always-valid (1 − Alpha) interval of Lift (mSPRT confidence sequence)
	SeqRelLow, SeqRelHigh    float64 // always-valid (1 − Alpha) interval of RelLift
	LiftDefined, RelDefined  bool    // both arms have ≥ 2 outcomes and a variance; and A's mean is not 0
	PValue                   float64 // always-valid: the running minimum of 1/Λ (pass it back as prevP)
	Significant              bool    // PValue < Alpha
	SRMPValue                float64 // chi-square test of Units against ShareB
	SRM                      bool    // SRMPValue < 0.001: the split is broken
	Decision                 string  // running | b_better | a_better | no_difference
	Binary                   bool    // outcomes treated as 0/1
	ShareB, Alpha, MinEffect float64 // the configuration used (defaults filled in)
	Tau2                     float64 // the mixing variance used
	Direction                string
	Notes                    []string // why a figure is undefined or a setting was replaced
}

// Evaluate computes the experiment's statistics. prevP is the PValue of
// the previous evaluation of the same experiment (1 at the start): the
// sequential p-value is the running minimum, so it never rises. A prevP
// outside [0, 1] (or NaN) is taken as 1.
func Evaluate(a, b Arm, c Config, prevP float64) Result {
	if !(prevP >= 0 && prevP <= 1) {
		prevP = 1
	}
	r := evaluate(a, b, c, prevP)
	r.finite(prevP)
	return r
}

func evaluate(a, b Arm, c Config, prevP float64) Result {
	var r Result
	c = r.fill(c)
	a, b = r.clean(a, "A"), r.clean(b, "B")
	if c.Denominator == PerUnit {
		a, b = perUnit(a, &r, "A"), perUnit(b, &r, "B")
	}
	switch c.Kind {
	case KindBinary:
		r.Binary = true
	case KindContinuous:
	default:
		r.Binary = looksBinary(a) && looksBinary(b)
	}
	va, okA := r.arm(&r.A, a, "A")
	vb, okB := r.arm(&r.B, b, "B")

	r.SRMPValue = srm(a.Units, b.Units, c.ShareB)
	r.SRM = r.SRMPValue < SRMAlpha
	r.PValue = prevP
	r.Significant = prevP < r.Alpha // the decision needs a defined lift: running until then
	r.Decision = Running
	if !okA || !okB {
		return r
	}
	// Variances of the two means.
	sa, sb := va/float64(a.N), vb/float64(b.N)
	v := sa + sb
	if !(v > 0) {
		r.note("lift: both arms' outcomes have no variance yet")
		return r
	}
	r.LiftDefined = true
	r.Lift = r.B.Mean - r.A.Mean
	h := z95 * math.Sqrt(v)
	r.LiftLow, r.LiftHigh = r.Lift-h, r.Lift+h

	tau2 := c.Tau2
	if tau2 == 0 {
		tau2 = DefaultEffectSD * DefaultEffectSD * (va + vb) / 2
	}
	r.Tau2 = tau2
	hs := seqHalfWidth(v, tau2, r.Alpha)
	r.SeqLow, r.SeqHigh = r.Lift-hs, r.Lift+hs
	r.PValue = math.Min(prevP, msprtP(r.Lift, v, tau2))
	r.Significant = r.PValue < r.Alpha

	if r.A.Mean != 0 {
		ma, mb := r.A.Mean, r.B.Mean
		r.RelDefined = true
		r.RelLift = r.Lift / ma
		vr := sb/(ma*ma) + mb*mb*sa/(ma*ma*ma*ma)
		hr := z95 * math.Sqrt(vr)
		r.RelLow, r.RelHigh = r.RelLift-hr, r.RelLift+hr
		if ma*mb > 0 {
			// On the log scale, log(m_B/m_A) with the delta method's
			// variance σ_B²/(n_B m_B²) + σ_A²/(n_A m_A²): the ratio's skew
			// is gone, and the interval is exp(·) − 1 of the log one.
			l := math.Log(mb / ma)
			vl := sb/(mb*mb) + sa/(ma*ma)
			hsl := seqHalfWidth(vl, tau2/(ma*ma), r.Alpha)
			r.SeqRelLow, r.SeqRelHigh = math.Expm1(l-hsl), math.Expm1(l+hsl)
		} else {
			hsr := seqHalfWidth(vr, tau2/(ma*ma), r.Alpha)
			r.SeqRelLow, r.SeqRelHigh = r.RelLift-hsr, r.RelLift+hsr
		}
	} else {
		r.note("relative lift: arm A's mean is 0")
	}

	switch {
	case r.Significant && (r.Lift > 0) == (r.Direction == Increase):
		r.Decision = BBetter
	case r.Significant:
		r.Decision = ABetter
	case r.MinEffect > 0 && r.RelDefined && r.SeqRelLow > -r.MinEffect && r.SeqRelHigh < r.MinEffect:
		r.Decision = NoDifference
	}
	return r
}

// fill records c with its defaults in r and returns it; an invalid field
// is replaced by its default with a note (Validate reports it).
func (r *Result) fill(c Config) Config {
	if !(c.ShareB > 0 && c.ShareB < 1) {
		if c.ShareB != 0 {
			r.note(fmt.Sprintf("shareB %v is not in (0, 1): %v used", c.ShareB, DefaultShareB))
		}
		c.ShareB = DefaultShareB
	}
	if !(c.Alpha > 0 && c.Alpha < 0.5) {
		if c.Alpha != 0 {
			r.note(fmt.Sprintf("alpha %v is not in (0, 0.5): %v used", c.Alpha, DefaultAlpha))
		}
		c.Alpha = DefaultAlpha
	}
	if !(c.MinEffect >= 0) || math.IsInf(c.MinEffect, 0) {
		r.note(fmt.Sprintf("minEffect %v is not ≥ 0: none used", c.MinEffect))
		c.MinEffect = 0
	}
	if c.Direction != Decrease {
		if c.Direction != "" && c.Direction != Increase {
			r.note(fmt.Sprintf("direction %q is unknown: %q used", c.Direction, Increase))
		}
		c.Direction = Increase
	}
	if !(c.Tau2 >= 0) || math.IsInf(c.Tau2, 0) {
		r.note(fmt.Sprintf("tau2 %v is not ≥ 0: the default used", c.Tau2))
		c.Tau2 = 0
	}
	r.ShareB, r.Alpha, r.MinEffect, r.Direction = c.ShareB, c.Alpha, c.MinEffect, c.Direction
	return c
}

func (r *Result) note(s string) { r.Notes = append(r.Notes, s) }

// clean makes a's counts usable: negative counts are 0, and an arm whose
// sums are not finite numbers has no outcomes.
func (r *Result) clean(a Arm, name string) Arm {
	if a.Units < 0 {
		r.note(fmt.Sprintf("arm %s: %d units taken as 0", name, a.Units))
		a.Units = 0
	}
	if a.N < 0 || math.IsNaN(a.Sum) || math.IsInf(a.Sum, 0) || math.IsNaN(a.SumSq) || math.IsInf(a.SumSq, 0) || a.SumSq < 0 {
		r.note(fmt.Sprintf("arm %s: outcomes ignored: n %d, sum %v, sum of squares %v", name, a.N, a.Sum, a.SumSq))
		a.N, a.Sum, a.SumSq = 0, 0, 0
	}
	return a
}

// finite keeps the promise that every number of r is finite: a group of
// figures that overflowed (sums near the float64 limits, a mean of A near
// 0) is dropped to undefined, with a note, and the decision with it.
func (r *Result) finite(prevP float64) {
	ok := func(xs ...float64) bool {
		for _, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
		}
		return true
	}
	for _, arm := range []struct {
		s    *ArmSummary
		name string
	}{{&r.A, "A"}, {&r.B, "B"}} {
		if s := arm.s; !ok(s.Mean, s.StdErr, s.Low, s.High) {
			r.note(fmt.Sprintf("arm %s: the figures overflow", arm.name))
			s.Mean, s.StdErr, s.Low, s.High = 0, 0, 0, 0
			r.LiftDefined = false
		}
	}
	if !r.LiftDefined || !ok(r.Lift, r.LiftLow, r.LiftHigh, r.SeqLow, r.SeqHigh, r.Tau2, r.PValue) {
		if r.LiftDefined {
			r.note("lift: the figures overflow")
		}
		r.LiftDefined, r.Lift, r.LiftLow, r.LiftHigh, r.SeqLow, r.SeqHigh, r.Tau2 = false, 0, 0, 0, 0, 0, 0
		r.RelDefined = false
		r.PValue, r.Significant, r.Decision = prevP, prevP < r.Alpha, Running
	}
	if !r.RelDefined || !ok(r.RelLift, r.RelLow, r.RelHigh, r.SeqRelLow, r.SeqRelHigh) {
		if r.RelDefined {
			r.note("relative lift: the figures overflow")
		}
		r.RelDefined, r.RelLift, r.RelLow, r.RelHigh, r.SeqRelLow, r.SeqRelHigh = false, 0, 0, 0, 0, 0
		if r.Decision == NoDifference {
			r.Decision = Running
		}
	}
	if !ok(r.SRMPValue) {
		r.SRMPValue, r.SRM = 1, false
	}
}

// perUnit makes the arm's outcomes per unit assigned: N becomes Units,
// the units without an outcome counting as 0.
func perUnit(a Arm, r *Result, name string) Arm {
	if a.Units < a.N {
		r.note(fmt.Sprintf("arm %s: %d outcomes for %d units: the mean is over the outcomes", name, a.N, a.Units))
		return a
	}
	a.N = a.Units
	return a
}

// looksBinary says whether every outcome can be 0 or 1: for v ∈ {0, 1},
// v² = v, so Σv² = Σv and 0 ≤ Σv ≤ N (sums of 0/1 values are exact
// integers in float64 below 2⁵³).
func looksBinary(a Arm) bool {
	if a.N == 0 {
		return true
	}
	return a.Sum >= 0 && a.Sum <= float64(a.N) && a.Sum == math.Round(a.Sum) && a.SumSq == a.Sum
}

// arm fills s from a and returns the per-outcome variance (p(1−p) for
// binary outcomes, the sample variance otherwise) and whether a has
// enough outcomes for it.
func (r *Result) arm(s *ArmSummary, a Arm, name string) (float64, bool) {
	s.Units, s.N = a.Units, a.N
	if a.N <= 0 {
		r.note(fmt.Sprintf("arm %s: no outcomes yet", name))
		return 0, false
	}
	n := float64(a.N)
	s.Mean = a.Sum / n
	s.Low, s.High = s.Mean, s.Mean
	if a.N < minN {
		r.note(fmt.Sprintf("arm %s: fewer than %d outcomes, no interval", name, minN))
		return 0, false
	}
	var v float64
	if r.Binary {
		p := math.Min(1, math.Max(0, s.Mean))
		v = p * (1 - p)
		s.Low, s.High = wilson(p, n)
	} else {
		v = math.Max(0, (a.SumSq-a.Sum*a.Sum/n)/(n-1))
		h := z95 * math.Sqrt(v/n)
		s.Low, s.High = s.Mean-h, s.Mean+h
	}
	s.StdErr = math.Sqrt(v / n)
	return v, true
}

// wilson is the Wilson score interval of a proportion p over n trials at
// 95 %.
func wilson(p, n float64) (lo, hi float64) {
	z2 := z95 * z95
	den := 1 + z2/n
	mid := (p + z2/(2*n)) / den
	h := z95 / den * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return math.Max(0, mid-h), math.Min(1, mid+h)
}

// srm is the p-value of Pearson's chi-square test (1 degree of freedom)
// of the units assigned against the expected share of B. With one degree
// of freedom χ² is the square of a standard normal, so the tail is
// 2·(1 − Φ(√χ²)): the same number as distuv.ChiSquared{K: 1}.Survival
// (the test checks both), through math.Erfc instead of the incomplete
// gamma function, 20 times faster.
func srm(ua, ub int64, shareB float64) float64 {
	u := float64(ua + ub)
	if u <= 0 {
		return 1
	}
	ea, eb := (1-shareB)*u, shareB*u
	da, db := float64(ua)-ea, float64(ub)-eb
	chi2 := da*da/ea + db*db/eb
	return 2 * distuv.UnitNormal.Survival(math.Sqrt(chi2))
}

// logLambda is the log of the mSPRT's likelihood ratio for H0: θ = 0,
// mixed over θ ~ N(0, τ²), of an estimate θ̂ whose variance is v
// (Johari, Koomen, Pekelis, Walsh, eq. (9) in the normal case):
//
//	Λ = √(v/(v+τ²)) · exp(θ̂² τ² / (2 v (v+τ²)))
func logLambda(theta, v, tau2 float64) float64 {
	return 0.5*math.Log(v/(v+tau2)) + theta*theta*tau2/(2*v*(v+tau2))
}

// msprtP is 1/Λ capped at 1, and floored at the smallest positive
// float64: overwhelming evidence (log Λ > 745) would underflow to 0, and
// a caller may take a stored 0 for "unset" and restart the running
// minimum at 1.
func msprtP(theta, v, tau2 float64) float64 {
	return math.Max(math.SmallestNonzeroFloat64, math.Min(1, math.Exp(-logLambda(theta, v, tau2))))
}

// seqHalfWidth is the half-width of the mSPRT's confidence sequence: the
// θ0 with Λ(θ0) < 1/α are θ̂ ± √(2v(v+τ²)/τ² · (log(1/α) + ½ log((v+τ²)/v))).
func seqHalfWidth(v, tau2, alpha float64) float64 {
	return math.Sqrt(2 * v * (v + tau2) / tau2 * (math.Log(1/alpha) + 0.5*math.Log((v+tau2)/v)))
}
