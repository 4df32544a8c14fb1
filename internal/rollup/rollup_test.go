package rollup

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// The sketch's quantiles are within its Alpha of the exact value of the
// same rank, for distributions narrow and wide (the wide ones merge).
func TestSketchAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name     string
		n        int
		draw     func() float64
		maxAlpha float64 // the bound the sketch may have reached
	}{
		{"constant", 1000, func() float64 { return 3.7 }, alpha0},
		{"uniform 1-3 ms", 20000, func() float64 { return 1 + 2*r.Float64() }, alpha0},
		{"lognormal σ=0.5", 50000, func() float64 { return math.Exp(r.NormFloat64() * 0.5) }, 0.04},
		{"lognormal σ=1.5", 50000, func() float64 { return 0.8 * math.Exp(r.NormFloat64()*1.5) }, 0.16}, // a spread of 10⁵: four merges
		{"bimodal 1 ms / 200 ms", 30000, func() float64 {
			if r.Float64() < 0.9 {
				return 0.9 + 0.2*r.Float64()
			}
			return 180 + 40*r.Float64()
		}, 0.08},
		{"pareto tail", 40000, func() float64 { return 0.5 / math.Pow(r.Float64()+1e-12, 0.7) }, 0.16},
		{"with zeros", 5000, func() float64 {
			if r.Float64() < 0.3 {
				return 0
			}
			return 2 + r.Float64()
		}, alpha0},
		{"one value", 1, func() float64 { return 12 }, alpha0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s Sketch
			vals := make([]float64, c.n)
			for i := range vals {
				vals[i] = c.draw()
				s.Add(vals[i])
			}
			sort.Float64s(vals)
			if s.Bins() > MaxBins || s.Count() != uint64(c.n) {
				t.Fatalf("%d bins (max %d), count %d", s.Bins(), MaxBins, s.Count())
			}
			if s.Alpha() > c.maxAlpha {
				t.Errorf("alpha %.4f, more than %.4f for this spread", s.Alpha(), c.maxAlpha)
			}
			for _, q := range []float64{0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1} {
				exact := vals[int(q*float64(c.n-1))]
				got := s.Quantile(q)
				if exact < minValue {
					if got != 0 {
						t.Errorf("q%.3f = %g, want 0", q, got)
					}
					continue
				}
				if err := math.Abs(got-exact) / exact; err > s.Alpha()+1e-9 {
					t.Errorf("q%.3f = %.4f, exact %.4f: error %.4f > alpha %.4f", q, got, exact, err, s.Alpha())
				}
			}
		})
	}
}

func TestSketchEmptyAndMerge(t *testing.T) {
	var s Sketch
	if s.Quantile(0.5) != 0 || s.Count() != 0 {
		t.Error("empty sketch")
	}
	// ⌈k/2⌉ for the merge, negative keys included.
	for k, want := range map[int32]int32{4: 2, 3: 2, 1: 1, 0: 0, -1: 0, -2: -1, -3: -1, -4: -2} {
		s := Sketch{bins: []bin{{key: k, n: 1}}}
		s.merge()
		if s.bins[0].key != want || s.merges != 1 {
			t.Errorf("merge of key %d: %d, want %d", k, s.bins[0].key, want)
		}
	}
	// Neighbours merge into one bucket, their counts summed.
	s = Sketch{bins: []bin{{3, 1}, {4, 2}, {5, 4}}}
	s.merge()
	if len(s.bins) != 2 || s.bins[0] != (bin{2, 3}) || s.bins[1] != (bin{3, 4}) {
		t.Errorf("merged %v", s.bins)
	}
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func TestSeries(t *testing.T) {
	var s Series
	obs := func(at time.Duration, ms float64, ok, failed bool) {
		s.Observe(t0.Add(at), time.Duration(ms*float64(time.Millisecond)), ok, failed)
	}
	for i := range 100 {
		obs(10*time.Second, float64(1+i%10), true, false) // minute 0: 1..10 ms
	}
	obs(20*time.Second, 0, false, true) // a failure: counted, no latency
	obs(61*time.Second, 50, true, false)
	obs(59*time.Second, 2, true, false) // ends in minute 0 after minute 1 began
	obs(3*time.Minute+time.Second, 7, false, false)
	pts := s.Points(t0, t0.Add(time.Hour))
	if len(pts) != 3 {
		t.Fatalf("%d points, want 3 (minute 2 had none): %+v", len(pts), pts)
	}
	for i, want := range []struct {
		t             time.Duration
		count, errors int64
		p50, p99      float64
	}{
		{0, 102, 1, 5, 10},
		{time.Minute, 1, 0, 50, 50},
		{3 * time.Minute, 1, 0, 0, 0},
	} {
		p := pts[i]
		if !p.T.Equal(t0.Add(want.t)) || p.Count != want.count || p.Errors != want.errors ||
			math.Abs(p.P50Ms-want.p50) > want.p50*p.Alpha+1e-9 || math.Abs(p.P99Ms-want.p99) > want.p99*p.Alpha+1e-9 {
			t.Errorf("point %d: %+v, want %+v", i, p, want)
		}
	}
	// The window is [from, to): minute 1 only.
	if pts := s.Points(t0.Add(time.Minute), t0.Add(2*time.Minute)); len(pts) != 1 || pts[0].Count != 1 {
		t.Errorf("window of minute 1: %+v", pts)
	}
}

// A series never holds more than Keep: a day and a half of one request a
// minute leaves MaxMinutes, the oldest a day before the newest; a request
// from before that is not counted.
func TestSeriesBounded(t *testing.T) {
	var s Series
	r := rand.New(rand.NewPCG(3, 4))
	end := t0.Add(36 * time.Hour)
	for at := t0; at.Before(end); at = at.Add(time.Minute) {
		for range 20 {
			s.Observe(at, time.Duration(math.Exp(r.NormFloat64()*3)*float64(time.Millisecond)), true, false)
		}
	}
	if s.Len() != MaxMinutes {
		t.Errorf("%d minutes kept, want %d", s.Len(), MaxMinutes)
	}
	pts := s.Points(t0, end)
	if first := pts[0].T; !first.Equal(end.Add(-Keep)) {
		t.Errorf("oldest minute %v, want %v", first, end.Add(-Keep))
	}
	s.mu.Lock()
	for _, m := range s.minutes {
		if m.lat.Bins() > MaxBins || cap(m.lat.bins) > MaxBins+1 {
			t.Fatalf("a minute holds %d bins (capacity %d)", m.lat.Bins(), cap(m.lat.bins))
		}
	}
	s.mu.Unlock()
	s.Observe(end.Add(-Keep-time.Minute), time.Millisecond, true, false)
	if s.Len() != MaxMinutes {
		t.Errorf("a request older than Keep was kept")
	}
}
