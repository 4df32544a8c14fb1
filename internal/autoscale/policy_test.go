package autoscale

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/serving"
)

var t0 = time.Unix(1_800_000_000, 0).UTC()

// phase is a stretch of ticks (one a second) at one arrival rate.
type phase struct {
	secs     int
	rate     float64 // instances/s; with ramp, the rate at the phase's start
	ramp     float64 // rate added per second
	noise    float64 // ± share of the rate, uniform, seeded
	refused  int64   // per tick
	missed   int64   // per tick
	queued   int
	budget   int
	want     int  // replicas at the phase's end
	hold     bool // and at every tick of it
	atMostUp int  // >0: the count never exceeds this during the phase
}

// sim drives Desired tick by tick, as the loop would.
type sim struct {
	cfg     Config
	per     float64
	cost    serving.CostModel
	cold    time.Duration
	st      State
	now     time.Time
	frac    float64
	rng     *rand.Rand
	changes []time.Time
	counts  []int
}

func newSim(cfg Config, replicas int) *sim {
	s := &sim{cfg: cfg, per: 100, now: t0, rng: rand.New(rand.NewPCG(1, 2))}
	d, st := Desired(cfg, Signals{Now: t0, Replicas: replicas, PerReplica: s.per}, State{})
	s.st = st
	s.counts = append(s.counts, d.Replicas)
	return s
}

func (s *sim) tick(rate float64, p phase) Decision {
	s.now = s.now.Add(time.Second)
	r := rate
	if p.noise > 0 {
		r *= 1 + p.noise*(2*s.rng.Float64()-1)
	}
	s.frac += r
	n := math.Floor(s.frac)
	s.frac -= n
	prev := s.st.Target
	d, st := Desired(s.cfg, Signals{Now: s.now, Arrived: int64(n) + p.refused, Refused: p.refused, Missed: p.missed, Queued: p.queued,
		Replicas: prev, PerReplica: s.per, Cost: s.cost, ColdStart: s.cold, Budget: p.budget}, s.st)
	s.st = st
	if d.Replicas != prev {
		s.changes = append(s.changes, s.now)
	}
	s.counts = append(s.counts, d.Replicas)
	return d
}

func (s *sim) run(t *testing.T, ps []phase) {
	t.Helper()
	for i, p := range ps {
		var d Decision
		for k := 0; k < p.secs; k++ {
			d = s.tick(p.rate+p.ramp*float64(k), p)
			if p.hold && d.Replicas != p.want {
				t.Fatalf("phase %d tick %d: %d replicas, want %d throughout (%s)", i, k, d.Replicas, p.want, d.Reason)
			}
			if p.atMostUp > 0 && d.Replicas > p.atMostUp {
				t.Fatalf("phase %d tick %d: %d replicas, want at most %d (%s)", i, k, d.Replicas, p.atMostUp, d.Reason)
			}
		}
		if d.Replicas != p.want {
			t.Fatalf("phase %d end: %d replicas, want %d (%s)", i, d.Replicas, p.want, d.Reason)
		}
	}
}

// With 100 instances/s per replica and a target of 0.7, one replica plans
// for 70/s.
func TestDesired(t *testing.T) {
	cd := DefaultCooldown
	warm := func(rate float64, n int) phase { return phase{secs: 120, rate: rate, want: n} }
	cases := []struct {
		name     string
		cfg      Config
		replicas int
		phases   []phase
	}{
		{"steady load holds", Config{MinReplicas: 1}, 2, []phase{{secs: 600, rate: 120, want: 2, hold: true}}},
		{"first tick clamps up to minReplicas", Config{MinReplicas: 2}, 0, []phase{{secs: 1, rate: 0, want: 2}}},
		{"surge steps up at once, by as much as needed", Config{MinReplicas: 1}, 2, []phase{
			warm(120, 2), {secs: 1, rate: 360, want: 6}, {secs: 120, rate: 360, want: 6, hold: true}}},
		{"above the target but inside the hysteresis band holds", Config{MinReplicas: 1}, 3, []phase{
			{secs: 600, rate: 225, want: 3, hold: true}}}, // 225/300 = 0.75 < 0.77, though ceil(225/70) = 4
		{"a rise past the band steps up", Config{MinReplicas: 1}, 3, []phase{
			warm(200, 3), {secs: 300, rate: 240, want: 4}}}, // 0.8 > 0.77: ceil(240/70) = 4
		{"no flapping on noise (±20 %) near the boundary", Config{MinReplicas: 1}, 3, []phase{
			{secs: 1800, rate: 205, noise: 0.2, want: 3, hold: true}}},
		{"refusals force up even when the rate estimate is low", Config{MinReplicas: 1}, 1, []phase{
			warm(10, 1), {secs: 1, rate: 10, refused: 5, want: 2}}},
		{"deadline misses force up", Config{MinReplicas: 1}, 2, []phase{
			warm(100, 2), {secs: 1, rate: 100, missed: 3, want: 3}}},
		{"refusals below 1 % of arrivals do not", Config{MinReplicas: 1}, 2, []phase{
			warm(120, 2), {secs: 60, rate: 120, refused: 1, want: 2, hold: true}}},
		{"queued work adds to the rate", Config{MinReplicas: 1}, 1, []phase{
			warm(50, 1), {secs: 1, rate: 50, queued: 500, want: 3}}}, // 50 + 500/5s = 150/s → ceil(150/70) = 3
		{"clamped to maxReplicas", Config{MinReplicas: 1, MaxReplicas: 4}, 2, []phase{
			warm(120, 2), {secs: 60, rate: 1000, want: 4, atMostUp: 4}}},
		{"clamped to the budget", Config{MinReplicas: 1, MaxReplicas: 10}, 2, []phase{
			warm(120, 2), {secs: 60, rate: 1000, budget: 3, want: 3, atMostUp: 3}}},
		{"a budget below the count clamps at once", Config{MinReplicas: 1}, 4, []phase{
			warm(250, 4), {secs: 1, rate: 250, budget: 2, want: 2}}},
		{"a count above maxReplicas clamps at once", Config{MinReplicas: 1, MaxReplicas: 3}, 6, []phase{
			{secs: 1, rate: 350, want: 3}}},
		{"zero traffic goes to minReplicas, not below", Config{MinReplicas: 2}, 5, []phase{
			warm(300, 5), {secs: int(5 * cd / time.Second), rate: 0, want: 2}, {secs: 600, rate: 0, want: 2, hold: true}}},
		{"arrivals with no replica start one", Config{MinReplicas: 0}, 0, []phase{{secs: 1, rate: 5, want: 1}}},
		{"cold tier: the last replica goes only after idle", Config{MinReplicas: 0}, 1, []phase{
			warm(10, 1),
			{secs: int((DefaultIdleAfter - time.Second) / time.Second), rate: 0, want: 1, hold: true},
			{secs: 2, rate: 0, want: 0},
			{secs: 60, rate: 0, want: 0, hold: true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			newSim(c.cfg, c.replicas).run(t, c.phases)
		})
	}
}

func TestDesiredScaleDownAfterCooldownOneStepAtATime(t *testing.T) {
	s := newSim(Config{MinReplicas: 1}, 6)
	s.run(t, []phase{{secs: 120, rate: 360, want: 6}})
	start := s.now
	s.run(t, []phase{{secs: 600, rate: 60, want: 1}})
	if len(s.changes) != 5 {
		t.Fatalf("%d changes, want 5 steps of one (6 → 1): %v", len(s.changes), s.counts)
	}
	last := start
	for i, at := range s.changes {
		if gap := at.Sub(last); gap < DefaultCooldown {
			t.Errorf("change %d came %v after the previous one (or the drop), want >= the cooldown %v", i, gap, DefaultCooldown)
		}
		last = at
	}
	for i := 1; i < len(s.counts); i++ {
		if d := s.counts[i-1] - s.counts[i]; d > 1 {
			t.Fatalf("tick %d: down by %d at once, want one step", i, d)
		}
	}
}

func TestDesiredUpResetsTheCooldown(t *testing.T) {
	s := newSim(Config{MinReplicas: 1}, 4)
	s.run(t, []phase{
		{secs: 120, rate: 250, want: 4},
		{secs: 50, rate: 60, want: 4, hold: true}, // lower, cooldown running
		{secs: 1, rate: 600, want: 9},             // surge: up at once
		{secs: 30, rate: 60, want: 9, hold: true}, // lower again: the cooldown starts over
	})
}

// The same ramp, with and without lookahead over a 30 s cold start: the
// lookahead reaches each count earlier and never later.
func TestDesiredLookaheadOnARisingSlope(t *testing.T) {
	firstAt := func(cold time.Duration) map[int]int {
		s := newSim(Config{MinReplicas: 1}, 2)
		s.cold = cold
		s.run(t, []phase{{secs: 120, rate: 100, want: 2}})
		at := map[int]int{}
		for k := 0; k < 120; k++ {
			d := s.tick(100+2*float64(k), phase{}) // +2/s per second: 100 → 340
			if _, ok := at[d.Replicas]; !ok {
				at[d.Replicas] = k
			}
		}
		return at
	}
	without, with := firstAt(0), firstAt(30*time.Second)
	earlier := 0
	for n, k := range without {
		kw, ok := with[n]
		if !ok {
			continue // lookahead jumped past n
		}
		if kw > k {
			t.Errorf("%d replicas at tick %d with lookahead, %d without", n, kw, k)
		}
		if kw < k {
			earlier++
		}
	}
	if earlier == 0 {
		t.Errorf("lookahead reached no count earlier: without %v, with %v", without, with)
	}
	// 30 s ahead on a +2/s ramp is +60/s: at least one more replica at the top.
	top := func(m map[int]int) int {
		x := 0
		for n := range m {
			x = max(x, n)
		}
		return x
	}
	if top(with) <= top(without) {
		t.Errorf("top count %d with lookahead, %d without", top(with), top(without))
	}
}

func TestDesiredWithoutThroughputHoldsButRefusalsStillCount(t *testing.T) {
	cfg := Config{MinReplicas: 1}
	_, st := Desired(cfg, Signals{Now: t0, Replicas: 2}, State{})
	d, st := Desired(cfg, Signals{Now: t0.Add(time.Second), Arrived: 5000, Replicas: 2}, st)
	if d.Replicas != 2 {
		t.Fatalf("no throughput figure: %d replicas, want 2 held (%s)", d.Replicas, d.Reason)
	}
	d, _ = Desired(cfg, Signals{Now: t0.Add(2 * time.Second), Arrived: 5000, Refused: 900, Replicas: 2}, st)
	if d.Replicas != 3 {
		t.Fatalf("refusals with no throughput figure: %d replicas, want 3 (%s)", d.Replicas, d.Reason)
	}
}

func TestDesiredDerivesThroughputFromTheCostModel(t *testing.T) {
	// A 2ms + 0.5ms·n, batch ≤ 64, SLO 50ms: n = 46 in 25ms, 1840/s.
	cfg := Config{MinReplicas: 1, SLO: 50 * time.Millisecond, MaxBatch: 64}
	cost := serving.CostModel{A: 2 * time.Millisecond, B: 500 * time.Microsecond}
	_, st := Desired(cfg, Signals{Now: t0, Replicas: 1, Cost: cost}, State{})
	d, _ := Desired(cfg, Signals{Now: t0.Add(time.Second), Arrived: 5000, Replicas: 1, Cost: cost}, st)
	if math.Abs(d.PerReplica-1840) > 0.01 {
		t.Fatalf("per replica %.2f, want 1840", d.PerReplica)
	}
	if want := int(math.Ceil(5000 / (1840 * 0.7))); d.Replicas != want { // a surge: sized on the tick's rate
		t.Fatalf("%d replicas, want %d (%s)", d.Replicas, want, d.Reason)
	}
}

func TestThroughput(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name     string
		cost     serving.CostModel
		maxBatch int
		slo      time.Duration
		rate     float64
		n        int
	}{
		{"per-instance cost bounds the batch", serving.CostModel{A: 2 * ms, B: ms / 2}, 64, 50 * ms, 46 / 0.025, 46},
		{"maxBatch bounds the batch", serving.CostModel{A: 2 * ms, B: ms / 2}, 8, 50 * ms, 8 / 0.006, 8},
		{"fixed cost only", serving.CostModel{A: 5 * ms}, 8, 50 * ms, 8 / 0.005, 8},
		{"not even one fits: batch of one", serving.CostModel{A: 30 * ms, B: ms / 2}, 8, 50 * ms, 1 / 0.0305, 1},
		{"no cost model", serving.CostModel{}, 8, 50 * ms, 0, 0},
		{"no SLO", serving.CostModel{A: ms}, 8, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rate, n := Throughput(c.cost, c.maxBatch, c.slo)
			if n != c.n || math.Abs(rate-c.rate) > 1e-6*max(1, c.rate) {
				t.Fatalf("Throughput = %.3f/s at n=%d, want %.3f/s at n=%d", rate, n, c.rate, c.n)
			}
		})
	}
}
