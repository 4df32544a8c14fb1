package abstat

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func conv(units, conversions int64) Arm {
	return Arm{Units: units, N: units, Sum: float64(conversions), SumSq: float64(conversions)}
}

// Evaluate on data too thin for a test: every figure finite, the
// decision running, the p-value unchanged, a note saying why.
func TestEvaluateUndefined(t *testing.T) {
	for _, c := range []struct {
		name        string
		a, b        Arm
		cfg         Config
		prevP       float64
		wantP       float64
		liftDefined bool
		relDefined  bool
		note        string
	}{
		{name: "nothing yet", prevP: 1, wantP: 1, note: "arm A: no outcomes yet"},
		{name: "one outcome on B", a: conv(10, 1), b: Arm{Units: 10, N: 1, Sum: 3, SumSq: 9}, prevP: 0.5, wantP: 0.5, note: "arm B: fewer than 2 outcomes"},
		{name: "no conversions anywhere", a: conv(500, 0), b: conv(500, 0), prevP: 1, wantP: 1, note: "no variance yet"},
		{name: "A's mean is 0", a: conv(500, 0), b: conv(500, 5), prevP: 1, wantP: -1, liftDefined: true, note: "arm A's mean is 0"},
		{name: "prevP NaN is 1", a: conv(100, 10), b: conv(100, 10), prevP: math.NaN(), wantP: 1, liftDefined: true, relDefined: true},
		{name: "prevP above 1 is 1", a: conv(100, 10), b: conv(100, 10), prevP: 7, wantP: 1, liftDefined: true, relDefined: true},
		{name: "prevP 0 stays 0", a: conv(100, 10), b: conv(100, 10), prevP: 0, wantP: 0, liftDefined: true, relDefined: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Evaluate(c.a, c.b, c.cfg, c.prevP)
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("the result does not encode as JSON: %v", err)
			}
			if c.wantP >= 0 && r.PValue != c.wantP {
				t.Errorf("PValue = %v, want %v", r.PValue, c.wantP)
			}
			if r.LiftDefined != c.liftDefined || r.RelDefined != c.relDefined {
				t.Errorf("LiftDefined %v RelDefined %v, want %v %v", r.LiftDefined, r.RelDefined, c.liftDefined, c.relDefined)
			}
			if c.note != "" && !strings.Contains(strings.Join(r.Notes, "; "), c.note) {
				t.Errorf("notes %q, want one with %q", r.Notes, c.note)
			}
			if !c.liftDefined && (r.Decision != Running || r.Significant) {
				t.Errorf("Decision %q Significant %v on undefined data", r.Decision, r.Significant)
			}
		})
	}
}

// The decision of Evaluate, across directions and the minimum effect.
func TestEvaluateDecision(t *testing.T) {
	big, bigUp, bigDown := conv(40000, 4000), conv(40000, 4600), conv(40000, 3400)
	for _, c := range []struct {
		name string
		a, b Arm
		cfg  Config
		want string
	}{
		{"B up, increase is better", big, bigUp, Config{}, BBetter},
		{"B down, increase is better", big, bigDown, Config{}, ABetter},
		{"B up, decrease is better", big, bigUp, Config{Direction: Decrease}, ABetter},
		{"B down, decrease is better", big, bigDown, Config{Direction: Decrease}, BBetter},
		{"equal, no minimum effect: running for ever", conv(2000000, 200000), conv(2000000, 200000), Config{}, Running},
		{"equal, 2 % ruled out both ways", conv(2000000, 200000), conv(2000000, 200000), Config{MinEffect: 0.02}, NoDifference},
		{"equal, 0.1 % not ruled out", conv(2000000, 200000), conv(2000000, 200000), Config{MinEffect: 0.001}, Running},
		{"equal but few units", conv(1000, 100), conv(1000, 100), Config{MinEffect: 0.02}, Running},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Evaluate(c.a, c.b, c.cfg, 1)
			if r.Decision != c.want {
				t.Errorf("Decision = %q, want %q (p %g, rel %g [%g, %g])", r.Decision, c.want, r.PValue, r.RelLift, r.SeqRelLow, r.SeqRelHigh)
			}
		})
	}
}

// The p-value is a running minimum: it never rises from one look to the
// next, and Significant, once true, stays true.
func TestEvaluateRunningMinimum(t *testing.T) {
	prev := 1.0
	a, b := conv(0, 0), conv(0, 0)
	sig := false
	// B converts more at first, then the same as A: the evidence fades.
	for i := int64(1); i <= 200; i++ {
		a = conv(a.Units+100, int64(a.Sum)+10)
		cb := int64(10)
		if i <= 40 {
			cb = 14
		}
		b = conv(b.Units+100, int64(b.Sum)+cb)
		r := Evaluate(a, b, Config{}, prev)
		if r.PValue > prev {
			t.Fatalf("look %d: p rose from %g to %g", i, prev, r.PValue)
		}
		if sig && !r.Significant {
			t.Fatalf("look %d: significant, then not", i)
		}
		now := msprtP(r.Lift, (r.A.StdErr*r.A.StdErr + r.B.StdErr*r.B.StdErr), r.Tau2)
		if now < r.PValue*(1-1e-12) {
			t.Fatalf("look %d: p %g above this look's own 1/Λ %g", i, r.PValue, now)
		}
		prev, sig = r.PValue, r.Significant
	}
	if !sig {
		t.Fatalf("the early lift was never significant (p %g): the test shows nothing", prev)
	}
}

// The per-unit denominator: units without an outcome count as 0.
func TestEvaluatePerUnit(t *testing.T) {
	a := Arm{Units: 1000, N: 100, Sum: 100, SumSq: 100} // 100 conversions posted as 1, no zeros posted
	b := Arm{Units: 1000, N: 150, Sum: 150, SumSq: 150}
	r := Evaluate(a, b, Config{Denominator: PerUnit}, 1)
	if r.A.N != 1000 || r.A.Mean != 0.1 || r.B.Mean != 0.15 || !r.Binary {
		t.Errorf("per unit: A n %d mean %g, B mean %g, binary %v; want 1000, 0.1, 0.15, true", r.A.N, r.A.Mean, r.B.Mean, r.Binary)
	}
	r = Evaluate(a, b, Config{}, 1)
	if r.A.Mean != 1 || r.LiftDefined {
		t.Errorf("per outcome: A mean %g LiftDefined %v; want 1 and false (no variance)", r.A.Mean, r.LiftDefined)
	}
	bad := Arm{Units: 10, N: 20, Sum: 5, SumSq: 5}
	r = Evaluate(bad, bad, Config{Denominator: PerUnit}, 1)
	if r.A.N != 20 || !strings.Contains(strings.Join(r.Notes, ";"), "20 outcomes for 10 units") {
		t.Errorf("more outcomes than units: n %d notes %q", r.A.N, r.Notes)
	}
}

func TestEvaluateKind(t *testing.T) {
	a, b := conv(1000, 100), conv(1000, 130)
	if r := Evaluate(a, b, Config{}, 1); !r.Binary {
		t.Error("0/1 sums not detected as binary")
	}
	if r := Evaluate(a, b, Config{Kind: KindContinuous}, 1); r.Binary {
		t.Error("kind continuous ignored")
	}
	c := Arm{Units: 100, N: 100, Sum: 30.5, SumSq: 20}
	if r := Evaluate(c, c, Config{}, 1); r.Binary {
		t.Error("non-integer sums detected as binary")
	}
	// Wilson keeps the interval inside [0, 1] where a normal one would not.
	r := Evaluate(conv(20, 0), conv(20, 1), Config{}, 1)
	if r.A.Low != 0 || !(r.A.High > 0 && r.A.High < 0.2) || r.B.Low < 0 {
		t.Errorf("Wilson: A [%g, %g], B [%g, %g]", r.A.Low, r.A.High, r.B.Low, r.B.High)
	}
}

func TestEvaluateSRM(t *testing.T) {
	for _, c := range []struct {
		name   string
		ua, ub int64
		share  float64
		want   bool
	}{
		{"50/50 at 10k", 5000, 5000, 0.5, false},
		{"60/40 for 50/50 at 10k (issue 22's goal)", 6000, 4000, 0.5, true},
		{"51/49 at 10k: chance", 5100, 4900, 0.5, false},
		{"52/48 at 100k", 52000, 48000, 0.5, true},
		{"90/10 as configured", 9000, 1000, 0.1, false},
		{"50/50 when 90/10 configured", 5000, 5000, 0.1, true},
		{"no units", 0, 0, 0.5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Evaluate(Arm{Units: c.ua}, Arm{Units: c.ub}, Config{ShareB: c.share}, 1)
			if r.SRM != c.want {
				t.Errorf("SRM = %v (p %g), want %v", r.SRM, r.SRMPValue, c.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	if err := (Config{ShareB: 0.2, Alpha: 0.01, MinEffect: 0.02, Direction: Decrease, Tau2: 0.1, Kind: KindBinary, Denominator: PerUnit}).Validate(); err != nil {
		t.Errorf("full config: %v", err)
	}
	err := Config{ShareB: 1, Alpha: 0.7, MinEffect: -1, Direction: "up", Tau2: math.NaN(), Kind: "counts", Denominator: "users"}.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, field := range []string{"shareB:", "alpha:", "minEffect:", "direction:", "tau2:", "kind:", "denominator:"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
	// Evaluate replaces them by the defaults, saying so.
	r := Evaluate(conv(100, 10), conv(100, 12), Config{ShareB: 1, Alpha: 0.7, Direction: "up"}, 1)
	if r.ShareB != DefaultShareB || r.Alpha != DefaultAlpha || r.Direction != Increase || len(r.Notes) < 3 {
		t.Errorf("defaults: shareB %v alpha %v direction %q notes %q", r.ShareB, r.Alpha, r.Direction, r.Notes)
	}
}

func TestDecide(t *testing.T) {
	base := func(f func(*Result)) Result {
		r := Result{
			A: ArmSummary{Units: 5000, N: 5000, Mean: 0.1}, B: ArmSummary{Units: 5000, N: 5000, Mean: 0.11},
			LiftDefined: true, RelDefined: true, Lift: 0.01, RelLift: 0.1, SeqRelLow: -0.05, SeqRelHigh: 0.25,
			PValue: 0.3, SRMPValue: 0.9, Decision: Running, Alpha: 0.05, ShareB: 0.5, Direction: Increase,
		}
		f(&r)
		return r
	}
	for _, c := range []struct {
		name string
		r    Result
		g    Gate
		want string
		why  string
	}{
		{"inside the interval: wait", base(func(*Result) {}), Gate{Metric: "conversion"}, Wait, "minLift +0 % is inside"},
		{"too few samples: wait", base(func(r *Result) { r.SeqRelLow = 0.01 }), Gate{MinSamples: 10000}, Wait, "minSamples 10000"},
		{"better: promote", base(func(r *Result) { r.SeqRelLow, r.Decision, r.PValue = 0.01, BBetter, 0.01 }), Gate{MinSamples: 1000}, Promote, "above minLift +0 %"},
		{"better but below minLift 5 %: wait", base(func(r *Result) { r.SeqRelLow, r.Decision = 0.01, BBetter }), Gate{MinLift: 0.05}, Wait, "inside"},
		{"non-inferior within 10 %: promote", base(func(r *Result) { r.SeqRelLow, r.SeqRelHigh = -0.04, 0.05 }), Gate{MinLift: -0.1}, Promote, "above minLift -10 %"},
		{"cannot reach minLift 30 %: abort", base(func(*Result) {}), Gate{MinLift: 0.3}, Abort, "cannot reach minLift +30 %"},
		{"cannot reach, but few samples: wait", base(func(*Result) {}), Gate{MinLift: 0.3, MinSamples: 6000}, Wait, "minSamples 6000"},
		{"significantly worse: abort at any count", base(func(r *Result) {
			r.Decision, r.PValue, r.Lift, r.RelLift, r.SeqRelLow, r.SeqRelHigh = ABetter, 0.001, -0.01, -0.1, -0.2, -0.02
		}), Gate{MinSamples: 1000000}, Abort, "significantly worse"},
		{"broken split: abort", base(func(r *Result) { r.SRM, r.SRMPValue, r.SeqRelLow = true, 1e-9, 0.05 }), Gate{}, Abort, "sample ratio mismatch"},
		{"decrease is better, B lower: promote", base(func(r *Result) {
			r.Direction, r.Lift, r.RelLift, r.SeqRelLow, r.SeqRelHigh, r.Decision = Decrease, -0.01, -0.1, -0.2, -0.03, BBetter
		}), Gate{}, Promote, "better: decrease"},
		{"decrease is better, B higher: abort (cannot reach)", base(func(r *Result) {
			r.Direction, r.SeqRelLow, r.SeqRelHigh = Decrease, 0.02, 0.2
		}), Gate{}, Abort, "cannot reach"},
		{"no relative lift: wait", base(func(r *Result) {
			r.RelDefined, r.A.Mean, r.Notes = false, 0, []string{"relative lift: arm A's mean is 0"}
		}), Gate{}, Wait, "arm A's mean is 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			action, why := Decide(c.r, c.g)
			if action != c.want || !strings.Contains(why, c.why) {
				t.Errorf("Decide = %s, %q; want %s with %q", action, why, c.want, c.why)
			}
			if !strings.Contains(why, "p = ") {
				t.Errorf("why %q has no p-value", why)
			}
		})
	}
}

// Decide on what Evaluate says of real counts, end to end.
func TestDecideEvaluated(t *testing.T) {
	g := Gate{Metric: "conversion", MinSamples: 1000}
	for _, c := range []struct {
		name string
		a, b Arm
		want string
	}{
		{"candidate 15 % better", conv(30000, 3000), conv(30000, 3450), Promote},
		{"candidate 15 % worse", conv(30000, 3000), conv(30000, 2550), Abort},
		{"too early", conv(800, 80), conv(800, 120), Wait},
		{"broken split", conv(6000, 600), conv(4000, 480), Abort},
	} {
		t.Run(c.name, func(t *testing.T) {
			action, why := Decide(Evaluate(c.a, c.b, Config{}, 1), g)
			if action != c.want {
				t.Errorf("Decide = %s (%s), want %s", action, why, c.want)
			}
		})
	}
}

func TestQualityErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		fn   func([]Pair) (Estimate, error)
		ps   []Pair
		want string
	}{
		{"empty", LogLoss, nil, "log loss: no (prediction, label) pairs"},
		{"NaN prediction", MAE, []Pair{{1, 1}, {math.NaN(), 1}}, "mae: pair 1: prediction NaN"},
		{"infinite label", RMSE, []Pair{{1, math.Inf(1)}}, "rmse: pair 0: label +Inf"},
		{"probability above 1", LogLoss, []Pair{{1.2, 1}}, "not a probability"},
		{"label 2", AUC, []Pair{{0.2, 2}}, "label 2 is not 0 or 1"},
		{"one class", AUC, []Pair{{0.2, 1}, {0.3, 1}, {0.4, 0}}, "at least 2 pairs of each label, got 2 with label 1 and 1 with label 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.fn(c.ps)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestAUCExtremes(t *testing.T) {
	perfect := []Pair{{0.9, 1}, {0.8, 1}, {0.2, 0}, {0.1, 0}}
	if e, _ := AUC(perfect); e.Value != 1 || e.High != 1 {
		t.Errorf("perfect ranking: %+v", e)
	}
	flat := []Pair{{0.5, 1}, {0.5, 1}, {0.5, 0}, {0.5, 0}}
	if e, _ := AUC(flat); e.Value != 0.5 {
		t.Errorf("all ties: %+v, want 0.5", e)
	}
	inverted := []Pair{{0.1, 1}, {0.2, 1}, {0.8, 0}, {0.9, 0}}
	if e, _ := AUC(inverted); e.Value != 0 || e.Low != 0 {
		t.Errorf("inverted ranking: %+v", e)
	}
}

// FuzzEvaluate: whatever the counts, every number of the result is
// finite (it encodes as JSON), the p-value is in [0, 1] and never above
// prevP, and the decision is one of the four.
func FuzzEvaluate(f *testing.F) {
	f.Add(int64(5000), int64(5000), 500.0, 500.0, int64(5000), int64(5000), 550.0, 550.0, 0.5, 0.01, 1.0)
	f.Add(int64(10), int64(3), 1e300, 1e308, int64(10), int64(3), -1e300, 1e308, 0.1, 0.0, 0.3)
	f.Add(int64(-1), int64(-5), math.NaN(), math.Inf(1), int64(0), int64(2), 1e-300, 1e-300, 2.0, -1.0, math.NaN())
	f.Add(int64(100), int64(100), 1e-310, 1e-310, int64(100), int64(100), 3.0, 5.0, 0.5, 0.02, 1.0)
	f.Fuzz(func(t *testing.T, ua, na int64, sa, qa float64, ub, nb int64, sb, qb float64, share, minEffect, prevP float64) {
		r := Evaluate(Arm{ua, na, sa, qa}, Arm{ub, nb, sb, qb}, Config{ShareB: share, MinEffect: minEffect}, prevP)
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if !(r.PValue >= 0 && r.PValue <= 1) || (prevP >= 0 && prevP <= 1 && r.PValue > prevP) {
			t.Fatalf("p = %v with prevP %v", r.PValue, prevP)
		}
		switch r.Decision {
		case Running, BBetter, ABetter, NoDifference:
		default:
			t.Fatalf("decision %q", r.Decision)
		}
		if (r.Decision == BBetter || r.Decision == ABetter) && !r.Significant {
			t.Fatalf("decision %s without significance", r.Decision)
		}
		Decide(r, Gate{MinLift: minEffect, MinSamples: na})
	})
}

// Overwhelming evidence does not underflow the p-value to 0 (which a
// caller could take for "unset").
func TestPValueNeverZero(t *testing.T) {
	r := Evaluate(conv(1000000, 100000), conv(1000000, 200000), Config{}, 1)
	if !(r.PValue > 0) || r.Decision != BBetter {
		t.Errorf("p = %g decision %s, want a tiny positive p and b_better", r.PValue, r.Decision)
	}
}
