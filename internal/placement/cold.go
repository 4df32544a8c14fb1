package placement

import (
	"fmt"
	"time"
)

// ColdWait says whether a request for a version that is not loaded waits
// for its load: when it has no deadline, or when what is left of its
// deadline covers the expected load time (LoadEstimate) with a margin (a
// quarter of the load time, at least ColdMargin, for routing, the
// evictions that make room and the call itself). A load time nobody knows
// yet (LoadUnknown: no load of the version measured, no hint, no load of
// its runtime to estimate from) is not assumed: the request waits for as
// long as its deadline allows (it is answered cold_start when the deadline
// ends first). Otherwise the request is refused at once with cold_start
// (the load goes on for the next one).
func ColdWait(left time.Duration, hasDeadline bool, loadTime time.Duration, src LoadSource) bool {
	if !hasDeadline {
		return true
	}
	if src == LoadUnknown {
		return left >= ColdMargin
	}
	loadTime = max(loadTime, 0)
	return left >= loadTime+max(loadTime/4, ColdMargin)
}

// ColdMargin is the least time ColdWait leaves beyond a load.
const ColdMargin = 20 * time.Millisecond

// LoadSource says where a load time came from.
type LoadSource string

const (
	// LoadMeasured: the version's own last load, on any worker.
	LoadMeasured LoadSource = "measured"
	// LoadDeclared: the artifact declares it (the synthetic runtime's
	// loadTime).
	LoadDeclared LoadSource = "declared"
	// LoadEstimated: the artifact's size at the bytes per second that
	// loads of its runtime were measured at.
	LoadEstimated LoadSource = "estimated from the artifact size"
	// LoadUnknown: nothing to go on yet.
	LoadUnknown LoadSource = "unknown"
)

// LoadRate is what measured loads of one runtime say of their speed: the
// artifact bytes and the time they took, summed. The zero value has seen
// no load.
type LoadRate struct {
	Bytes int64
	Took  time.Duration
	Loads int
}

// Add counts one measured load of an artifact of bytes that took took
// (load, golden examples and warmup). Loads that took no time or of
// artifacts of unknown size tell nothing and are left out.
func (r *LoadRate) Add(bytes int64, took time.Duration) {
	if bytes <= 0 || took <= 0 {
		return
	}
	r.Bytes += bytes
	r.Took += took
	r.Loads++
}

// BytesPerSecond is the measured speed (0: none measured).
func (r LoadRate) BytesPerSecond() float64 {
	if r.Loads == 0 || r.Took <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Took.Seconds()
}

// LoadEstimate is how long a version's next load is expected to take and
// where the figure comes from, first that applies: its own last load
// (measured > 0, on any worker), the artifact's declaration (hint > 0),
// its artifact's size at the speed its runtime's loads were measured at
// (rate; at least a millisecond), else LoadUnknown (0). Nothing is
// assumed: a default of a second refused the first request of a version
// that loads in 7 ms whenever its deadline was under 1.25 s.
func LoadEstimate(measured, hint time.Duration, artifactBytes int64, rate LoadRate) (time.Duration, LoadSource) {
	switch {
	case measured > 0:
		return measured, LoadMeasured
	case hint > 0:
		return hint, LoadDeclared
	}
	if bps := rate.BytesPerSecond(); bps > 0 && artifactBytes > 0 {
		d := time.Duration(float64(artifactBytes) / bps * float64(time.Second))
		return max(d, time.Millisecond), LoadEstimated
	}
	return 0, LoadUnknown
}

// FailureMemory is how long a failed load is remembered: requests in that
// time get the failure's reason instead of loading again, so a version
// whose load fails is not loaded in a loop by its traffic.
const FailureMemory = 30 * time.Second

// RetryLoad says whether a version whose last load failed at failedAt
// (zero: it did not fail) may be loaded again on demand at now.
func RetryLoad(failedAt, now time.Time, memory time.Duration) bool {
	if failedAt.IsZero() {
		return true
	}
	if memory <= 0 {
		memory = FailureMemory
	}
	return now.Sub(failedAt) >= memory
}

// Room is the most memory a worker could give a new copy of key that
// would take rate requests per second (for a request's load or not:
// VictimsFor), after evicting every version that may go for it: Free
// plus what VictimsFor could free among the residents it displaces.
func (p Policy) Room(w Worker, key string, rate float64, forRequest bool, now time.Time) int64 {
	var others []Resident
	for _, r := range w.Loaded {
		if r.Key != key && p.Displaces(rate, r, now) {
			others = append(others, r)
		}
	}
	ev := p.VictimsFor(others, 1<<62, now, forRequest)
	return w.Free() + ev.Freed
}

// NoRoom is the reason a version cannot be placed: no worker of the shard
// (ids, in rendezvous order) can hold one copy of mem bytes even after
// evicting what may be evicted; best is the most room any of them has.
func NoRoom(key string, ids []string, mem, best int64) string {
	return fmt.Sprintf("no worker of shard %v can hold %s: needs %s, free after evicting what may go for it (idle or called less, past the minimum residency) %s", ids, key, Bytes(mem), Bytes(max(best, 0)))
}

// Bytes renders a size in binary units ("512MiB", "2.0GiB").
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
