package placement

import "time"

// Quarantine decides when a version is poison: a version whose calls were
// in flight when worker processes exited M times within T is quarantined
// (marked failed and unloaded everywhere by the caller), so it cannot take
// its shard down again and again.
type Quarantine struct {
	Exits  int           // M (default DefaultQuarantineExits)
	Window time.Duration // T (default DefaultQuarantineWindow)
}

// Quarantine defaults: 3 exits in 5 minutes.
const (
	DefaultQuarantineExits  = 3
	DefaultQuarantineWindow = 5 * time.Minute
)

// Poison reports whether the exits attributed to one version (the times
// worker processes exited with its calls in flight, on any worker, in any
// order) make it poison at now: at least M of them in (now-T, now]. Exits
// after now (another clock) count as at now; older ones are forgotten, so
// a version that crashed a worker now and then over days is not poison.
// It also returns how many exits fell in the window.
func (q Quarantine) Poison(exits []time.Time, now time.Time) (bool, int) {
	m, t := q.Exits, q.Window
	if m <= 0 {
		m = DefaultQuarantineExits
	}
	if t <= 0 {
		t = DefaultQuarantineWindow
	}
	from := now.Add(-t)
	n := 0
	for _, e := range exits {
		if e.After(from) {
			n++
		}
	}
	return n >= m, n
}
