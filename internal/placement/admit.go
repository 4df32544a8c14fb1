package placement

import (
	"math"
	"time"
)

// Admission: a version that needs room may displace only residents that
// are worth less per byte than it is. Without it, a worker under constant
// pressure evicts every copy the moment its minimum residency ends,
// whatever its traffic (the copy just old enough is the only candidate),
// so eviction degenerates into first-in first-out and the hottest models
// are reloaded every residency period (measured: docs/benchmarks.md, the
// 300-model run of issue 11). A cache's admission policy (TinyLFU in
// Caffeine and Ristretto; size-aware, GreedyDual-Size-Frequency) answers
// the same question: a newcomer less valuable than the victim it would
// need is refused instead. Here a refusal is 503 cold_start for the
// colder version's request, and its demand keeps counting: once it is
// called more than what it would displace, it gets in.

// Worth is what a version is worth keeping loaded per byte: the requests
// its absence would delay (rate × load time, as ReloadCost) per byte of
// memory it takes. A version nobody calls is worth 0.
func Worth(rate float64, loadTime time.Duration, memory int64) float64 {
	if rate <= 0 {
		return 0
	}
	return rate * max(loadTime.Seconds(), 0) / float64(max(memory, 1))
}

// Priceless is the worth of a version that must be placed whatever it
// displaces (tier hot): every evictable resident may go for it.
var Priceless = math.Inf(1)

// Displaces reports whether a version worth worth (Worth) may evict r to
// make room: r is not called at all, or it is worth strictly less per
// byte. Keep's rules (hot, busy, young, rollback target) still apply on
// top.
func Displaces(worth float64, r Resident) bool {
	if r.Rate <= 0 {
		return true
	}
	return Worth(r.Rate, r.LoadTime, r.Memory) < worth
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
