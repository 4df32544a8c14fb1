package placement

import (
	"fmt"
	"time"
)

// DefaultLoadTime is a version's load time before any load of it was
// measured and without a hint (the synthetic runtime's loadTime).
const DefaultLoadTime = time.Second

// ColdWait says whether a request for a version that is not loaded waits
// for its load: when it has no deadline, or when what is left of its
// deadline covers the load time with a margin (a quarter of the load time,
// at least 20ms, for routing and the call itself). Otherwise the request
// is refused at once with cold_start (the load goes on for the next one).
func ColdWait(left time.Duration, hasDeadline bool, loadTime time.Duration) bool {
	if !hasDeadline {
		return true
	}
	loadTime = max(loadTime, 0)
	return left >= loadTime+max(loadTime/4, 20*time.Millisecond)
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
// would take rate requests per second, after evicting every version that
// may go for it: Free plus what Victims could free among the residents
// it displaces.
func (p Policy) Room(w Worker, key string, rate float64, now time.Time) int64 {
	var others []Resident
	for _, r := range w.Loaded {
		if r.Key != key && Displaces(rate, r) {
			others = append(others, r)
		}
	}
	ev := p.Victims(others, 1<<62, now)
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
