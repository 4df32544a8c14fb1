package placement

import (
	"math"
	"time"
)

// Admission: a version that needs room may displace only residents
// called less than it would be. Without it, a worker under constant
// pressure evicts every copy the moment its minimum residency ends,
// whatever its traffic (the copy just old enough is the only candidate),
// so eviction degenerates into first-in first-out and the hottest models
// are reloaded every residency period (measured: docs/benchmarks.md, the
// 300-model run of issue 11). Caches answer the same question with an
// admission policy that compares frequencies, not sizes (TinyLFU in
// Caffeine; Ristretto admits a newcomer only if it is hit more than its
// victims): a newcomer called less than the victim it would need is
// refused. Here a refusal is 503 cold_start for the colder version's
// request, and its demand keeps counting, so once it is called more than
// what it would displace it gets in. Comparing rates per byte instead
// (the knapsack answer, best for the hit ratio) was measured and let
// small, rarely used models push the big hot ones out: their requests
// then waited for reloads (the same run, first attempt). Sizes still
// choose among the residents that may go (Victims: reload cost per byte).

// Priceless is the rate of a version that must be placed whatever it
// displaces (tier hot): every evictable resident may go for it.
var Priceless = math.Inf(1)

// AdmitMargin is how many times more a newcomer must be called than a
// resident to displace it: hysteresis, so two versions called about as
// much (their decayed rates cross back and forth with the noise of their
// arrivals) do not evict each other in turn. Measured without it: models
// at the edge of the working set were loaded 4–5 times in 10 minutes.
const AdmitMargin = 1.5

// Displaces reports whether a new copy that would take rate requests per
// second may evict r to make room: r is not called at all, r is idle (not
// called for the minimum residency: Idle; its decayed rate still
// remembers old traffic, but its memory serves nobody now), or it is
// called less than rate / AdmitMargin (r.Rate, per copy). Keep's rules
// (hot, busy, young, rollback target) still apply on top.
func (p Policy) Displaces(rate float64, r Resident, now time.Time) bool {
	if r.Rate <= 0 || p.Idle(r, now) {
		return true
	}
	return r.Rate*AdmitMargin < rate
}

// Rate is a request rate that forgets: a count decayed exponentially
// with a half-life, read as requests per second. Arrivals are added when
// they are folded in (not at their exact instants), which is exact enough
// for eviction's comparisons and keeps the request path to one atomic
// add. The zero value is a rate of 0. Rates of versions compared with
// each other must use one half-life, so they are on one time base.
type Rate struct {
	count float64
	at    time.Time
}

// DefaultHalfLife is the half-life of the request rates placement uses.
const DefaultHalfLife = time.Minute

// Add counts n requests at now.
func (r *Rate) Add(now time.Time, n float64, halfLife time.Duration) {
	r.count = r.decayed(now, halfLife) + max(n, 0)
	if r.at.IsZero() || now.After(r.at) {
		r.at = now
	}
}

// PerSecond is the rate at now: the decayed count divided by the mean
// age of what it holds (halfLife / ln 2), so a steady rate of x per second
// reads x once the rate has run for a few half-lives.
func (r Rate) PerSecond(now time.Time, halfLife time.Duration) float64 {
	if halfLife <= 0 {
		halfLife = DefaultHalfLife
	}
	return r.decayed(now, halfLife) * math.Ln2 / halfLife.Seconds()
}

func (r Rate) decayed(now time.Time, halfLife time.Duration) float64 {
	if halfLife <= 0 {
		halfLife = DefaultHalfLife
	}
	if r.at.IsZero() || !now.After(r.at) {
		return r.count
	}
	return r.count * math.Exp2(-now.Sub(r.at).Seconds()/halfLife.Seconds())
}
