// Package rollup keeps a version's requests as per-minute rollups for the
// last 24 hours: per minute the requests that ended in it, the errors
// among them, and a latency sketch of bounded size that answers p50 and
// p99 within a known relative error. It is pure: every call takes the
// time it happened, and nothing here reads a clock, starts a goroutine
// or knows what a version or HTTP is (vstats feeds it, the server reads
// it for GET /v1/models/{name}/stats).
//
// The sketch is a log-bucketed histogram (DDSketch, Masson et al., VLDB
// 2019) that, when it would pass MaxBins buckets, merges every pair of
// neighbours into one bucket of twice the log-width (UDDSketch, Epicoco
// et al., 2020): its size is bounded, and every quantile keeps a relative
// error bound (Alpha) that starts at 1 % and doubles (about) with each
// merge, instead of a collapse of the lowest buckets that would lose the
// low quantiles.
package rollup

import (
	"math"
	"sort"
)

// MaxBins bounds a sketch's buckets: 64 buckets of 8 bytes. At the start
// resolution (1 %) they span a ratio of 3.6 between the smallest and the
// largest latency of a minute; each merge squares that (13, 170, 28,000):
// 1 % error for a minute whose latencies stay within 3.6x, 2 % within
// 13x, 4 % within 170x.
const MaxBins = 64

// alpha0 is the relative error of a sketch that never merged.
const alpha0 = 0.01

// minValue is the smallest value told apart from zero (1 µs in ms).
const minValue = 1e-3

type bin struct {
	key int32  // the bucket (γ^(key−1), γ^key]
	n   uint32 // values in it
}

// Sketch is a bounded quantile sketch of non-negative values (latencies
// in milliseconds). The zero value is an empty sketch.
type Sketch struct {
	merges uint8  // how many times the buckets were merged: γ = γ0^(2^merges)
	zero   uint32 // values below minValue
	n      uint64
	bins   []bin // sorted by key, ≤ MaxBins
}

// gamma is the bucket ratio after merges merges.
func gamma(merges uint8) float64 {
	g := (1 + alpha0) / (1 - alpha0)
	for range merges {
		g *= g
	}
	return g
}

// Alpha is the sketch's relative error bound now: every quantile it
// returns is within Alpha × the true value of the value of that rank.
func (s *Sketch) Alpha() float64 {
	g := gamma(s.merges)
	return (g - 1) / (g + 1)
}

// Count is how many values were added.
func (s *Sketch) Count() uint64 { return s.n }

// Bins is how many buckets it holds (≤ MaxBins).
func (s *Sketch) Bins() int { return len(s.bins) }

// Add adds the value v (negative and NaN count as zero).
func (s *Sketch) Add(v float64) {
	s.n++
	if !(v >= minValue) {
		s.zero++
		return
	}
	k := keyOf(v, s.merges)
	i := sort.Search(len(s.bins), func(i int) bool { return s.bins[i].key >= k })
	if i < len(s.bins) && s.bins[i].key == k {
		s.bins[i].n++
		return
	}
	s.bins = append(s.bins, bin{})
	copy(s.bins[i+1:], s.bins[i:])
	s.bins[i] = bin{key: k, n: 1}
	for len(s.bins) > MaxBins {
		s.merge()
	}
}

// keyOf is v's bucket at the resolution of merges merges.
func keyOf(v float64, merges uint8) int32 {
	k := math.Ceil(math.Log(v) / math.Log(gamma(merges)))
	return int32(max(min(k, math.MaxInt32/2), math.MinInt32/2))
}

// merge halves the resolution: the bucket k of ratio γ lies inside the
// bucket ⌈k/2⌉ of ratio γ², so neighbours merge exactly.
func (s *Sketch) merge() {
	s.merges++
	out := s.bins[:0]
	for _, b := range s.bins {
		k := (b.key + 1) >> 1 // ⌈k/2⌉, negative keys too (arithmetic shift floors)
		if len(out) > 0 && out[len(out)-1].key == k {
			out[len(out)-1].n += b.n
			continue
		}
		out = append(out, bin{key: k, n: b.n})
	}
	s.bins = out
}

// Quantile returns the value of rank ⌊q·(n−1)⌋ (0-based) among the values
// added, within Alpha of it; 0 for an empty sketch.
func (s *Sketch) Quantile(q float64) float64 {
	if s.n == 0 {
		return 0
	}
	q = max(0, min(1, q))
	rank := uint64(q * float64(s.n-1))
	if rank < uint64(s.zero) {
		return 0
	}
	cum := uint64(s.zero)
	g := gamma(s.merges)
	for _, b := range s.bins {
		cum += uint64(b.n)
		if cum > rank {
			// The point of (γ^(k−1), γ^k] whose relative distance to both
			// ends is the same: 2γ^k/(γ+1).
			return 2 * math.Pow(g, float64(b.key)) / (g + 1)
		}
	}
	return 2 * math.Pow(g, float64(s.bins[len(s.bins)-1].key)) / (g + 1)
}

// compact returns a copy of s holding no spare capacity (a minute that
// ended keeps only what it uses).
func (s *Sketch) compact() Sketch {
	c := *s
	c.bins = append([]bin(nil), s.bins...)
	return c
}
