package bench

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Percentiles summarises a latency distribution.
type Percentiles struct {
	N    int // samples the percentiles were computed from
	Mean time.Duration
	P50  time.Duration
	P90  time.Duration
	P99  time.Duration
	P999 time.Duration
	Max  time.Duration // exact, even when samples were thinned
}

// MarshalJSON renders durations as milliseconds.
func (p Percentiles) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		N      int     `json:"n"`
		MeanMs float64 `json:"meanMs"`
		P50Ms  float64 `json:"p50Ms"`
		P90Ms  float64 `json:"p90Ms"`
		P99Ms  float64 `json:"p99Ms"`
		P999Ms float64 `json:"p999Ms"`
		MaxMs  float64 `json:"maxMs"`
	}{p.N, ms(p.Mean), ms(p.P50), ms(p.P90), ms(p.P99), ms(p.P999), ms(p.Max)})
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// samples keeps up to max values; past that it keeps a uniform random
// sample of everything seen (reservoir sampling), so memory stays bounded
// while percentiles stay unbiased. The maximum is tracked exactly.
type samples struct {
	max  int
	seen int64
	vals []time.Duration
	top  time.Duration
	sum  float64
	rng  *rand.Rand
}

func newSamples(max int, seed int64) *samples {
	return &samples{max: max, rng: rand.New(rand.NewPCG(uint64(seed), 0xd15c))}
}

func (s *samples) add(d time.Duration) {
	s.seen++
	s.sum += float64(d)
	if d > s.top {
		s.top = d
	}
	if len(s.vals) < s.max {
		s.vals = append(s.vals, d)
		return
	}
	if j := s.rng.Int64N(s.seen); j < int64(s.max) {
		s.vals[j] = d
	}
}

func (s *samples) percentiles() Percentiles {
	if len(s.vals) == 0 {
		return Percentiles{}
	}
	v := slices.Clone(s.vals)
	slices.Sort(v)
	return Percentiles{
		N:    int(s.seen),
		Mean: time.Duration(s.sum / float64(s.seen)),
		P50:  quantile(v, 0.50),
		P90:  quantile(v, 0.90),
		P99:  quantile(v, 0.99),
		P999: quantile(v, 0.999),
		Max:  s.top,
	}
}

// quantile returns the nearest-rank q-quantile of sorted v: the smallest
// value with at least q of the samples at or below it.
func quantile(v []time.Duration, q float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(v)))) - 1
	k = max(0, min(k, len(v)-1))
	return v[k]
}
