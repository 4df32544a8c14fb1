package abstat

import (
	"flag"
	"math/rand/v2"
	"testing"
)

var sweep = flag.Bool("sweep", false, "TestSweepEffectSD: log false positive rate and power for several mixing standard deviations (docs/benchmarks.md)")

func BenchmarkEvaluate(b *testing.B) {
	for _, c := range []struct {
		name string
		a, b Arm
	}{
		{"binary", conv(25000, 2500), conv(25000, 2750)},
		{"continuous", Arm{Units: 20000, N: 20000, Sum: 400000, SumSq: 12500000}, Arm{Units: 20000, N: 20000, Sum: 420000, SumSq: 13300000}},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := 1.0
			for b.Loop() {
				p = Evaluate(c.a, c.b, Config{MinEffect: 0.01}, p).PValue
			}
		})
	}
}

func BenchmarkAUC(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ps := make([]Pair, 10000)
	for i := range ps {
		y := float64(rng.IntN(2))
		ps[i] = Pair{Pred: 0.3*y + 0.7*rng.Float64(), Label: y}
	}
	for b.Loop() {
		if _, err := AUC(ps); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSweepEffectSD (with -args -sweep) logs what the mixing standard
// deviation does to the A/A false positive rate and the A/B power of the
// simulations, at two horizons: how DefaultEffectSD was chosen.
func TestSweepEffectSD(t *testing.T) {
	if !*sweep {
		t.Skip("a measurement, not a check: go test ./internal/abstat -run TestSweepEffectSD -v -args -sweep")
	}
	const v = 0.1 * 0.9 // the per-unit variance of a 10 % rate
	for _, d := range []float64{0.01, 0.02, 0.05, 0.1, 0.2} {
		for _, h := range []int{20000, 50000} {
			cfg := Config{Tau2: d * d * v}
			aa := simulate(simConfig{experiments: simExperiments, horizon: h, every: simEvery, pA: 0.1, pB: 0.1, seed: 22, cfg: cfg})
			ab := simulate(simConfig{experiments: simExperiments, horizon: h, every: simEvery, pA: 0.1, pB: 0.11, seed: 23, cfg: cfg})
			t.Logf("| %.2f | %d | %.1f %% | %.1f %% |", d, h, 100*float64(aa.msprt)/simExperiments, 100*float64(ab.bBetter)/simExperiments)
		}
	}
	// The default over 10,000 A/A experiments (seeds 100–109, not the
	// test's): the false positive rate with a tighter error bar.
	var fp, fixed, fixed10 int
	for seed := uint64(100); seed < 110; seed++ {
		r := simulate(simConfig{experiments: simExperiments, horizon: simHorizon, every: simEvery, pA: 0.1, pB: 0.1, seed: seed})
		fp, fixed, fixed10 = fp+r.msprt, fixed+r.fixed, fixed10+r.fixed10
	}
	t.Logf("10,000 A/A experiments, default τ: always-valid %.2f %%, t-test at every look %.2f %%, at 10 looks %.2f %%", float64(fp)/100, float64(fixed)/100, float64(fixed10)/100)
}
