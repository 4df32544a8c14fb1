// Package placement decides where a version's replicas go and what to
// evict to make room, and when a version is poison: pure functions of the
// state they are given (no goroutines, no I/O, no clock: now is an
// argument), so the cluster's loop that acts on them stays small and the
// decisions are tested with tables.
//
// It owns three decisions:
//   - Choose: which workers of a version's shard take its replicas, what
//     to evict on them first, and whether the shard must grow (fit.go);
//   - Victims: which loaded versions a worker unloads to free N bytes,
//     cheapest to reload per byte first, with anti-thrash rules
//     (victims.go);
//   - Poison: whether a version that worker processes died under is
//     quarantined (quarantine.go).
//
// Memory figures come from the workers' reports (the RSS delta of each
// load) or, before a first load, from Estimate (estimate.go).
package placement

import (
	"cmp"
	"slices"
	"time"
)

// Resident is one version loaded on a worker, as eviction sees it.
type Resident struct {
	Key string // "model@n"
	// Memory is the bytes unloading it here gives back (all its replicas
	// on this worker).
	Memory int64
	// Replicas is how many of its replicas this worker runs.
	Replicas int
	// LoadedAt is when its load here finished; LastUsed when it last took
	// a request here (zero: never).
	LoadedAt, LastUsed time.Time
	// LoadTime is what loading it again costs (measured, else estimated).
	LoadTime time.Duration
	// Rate is its recent request rate (requests per second, smoothed by
	// the caller).
	Rate float64
	// Busy: it has queued or running work here.
	Busy bool
	// Hot versions are never evicted (tier: hot).
	Hot bool
	// RollbackTarget: a deployment may roll back to it and its window has
	// not ended.
	RollbackTarget bool
	// OnDemand: it was loaded for a request (a cold request's load), not
	// placed ahead of traffic. Such a copy is used the moment it is ready,
	// so the minimum residency protects it even before its first call.
	OnDemand bool
}

// Policy holds eviction's anti-thrash rule.
type Policy struct {
	// MinResidency: a version loaded less than this long ago is not
	// evictable, so a burst of loads cannot push each other out in turn
	// (default DefaultMinResidency).
	MinResidency time.Duration
	// HalfLife is the half-life of the request rates eviction and
	// admission compare (default DefaultHalfLife).
	HalfLife time.Duration
}

// DefaultMinResidency is Policy.MinResidency's default.
const DefaultMinResidency = 2 * time.Minute

func (p Policy) minResidency() time.Duration {
	if p.MinResidency <= 0 {
		return DefaultMinResidency
	}
	return p.MinResidency
}

// ReloadCost is what evicting r is expected to cost: the seconds of load
// its next requests would wait for, at its request rate —
// LoadTime (s) × Rate (1/s), a dimensionless "requests delayed by a load"
// figure; 0 for a version nobody calls.
func ReloadCost(r Resident) float64 {
	return r.LoadTime.Seconds() * max(r.Rate, 0)
}

// Why a resident cannot be evicted ("" when it can).
const (
	KeepHot      = "hot"
	KeepBusy     = "busy"
	KeepRollback = "rollback target"
	KeepYoung    = "loaded less than the minimum residency ago"
	KeepEmpty    = "frees no memory"
)

// Keep says why r must stay on its worker at now ("" when it may go) to
// make room for a placement ahead of traffic (a warm version at start, a
// shard growing, an autoscaler's copy): a copy loaded less than the
// minimum residency ago stays, so such placements cannot push each
// other out in turn. KeepFor says it for a request's load.
func (p Policy) Keep(r Resident, now time.Time) string { return p.KeepFor(r, now, false) }

// KeepFor is Keep for a load a request waits for (forRequest) or not.
// For a request the minimum residency protects only a copy that serves:
// one loaded on demand or called since its load. A copy placed ahead of
// traffic that nobody has called is speculation no request paid for: it
// may go at once for a request that needs its room (the 80-model run of
// issue 17: every start copy was young for two minutes, so no cold
// request could evict anything and 1,728 were refused with cold_start
// while idle copies held the memory).
func (p Policy) KeepFor(r Resident, now time.Time, forRequest bool) string {
	switch {
	case r.Hot:
		return KeepHot
	case r.Busy:
		return KeepBusy
	case r.RollbackTarget:
		return KeepRollback
	case now.Sub(r.LoadedAt) < p.minResidency() && (!forRequest || r.OnDemand || !r.LastUsed.IsZero()):
		return KeepYoung
	case r.Memory <= 0:
		return KeepEmpty
	}
	return ""
}

// Idle reports whether r has not been called for the minimum residency
// (or never since its load): its copy holds memory nobody is using.
// Admission lets any request displace an idle resident, whatever its
// decayed rate still says (Displaces).
func (p Policy) Idle(r Resident, now time.Time) bool {
	if r.Busy {
		return false
	}
	return r.LastUsed.IsZero() || now.Sub(r.LastUsed) >= p.minResidency()
}

// Eviction is Victims' answer.
type Eviction struct {
	// Victims are the keys to unload, in the order chosen; nil when
	// Enough is false (nothing is evicted for a load that cannot happen).
	Victims []string
	// Freed is what unloading Victims gives back; when Enough is false,
	// the most that the evictable versions could give back.
	Freed  int64
	Enough bool
}

// Victims chooses versions to unload from a worker to free need bytes.
// Evictable residents (Policy.Keep == "") are taken by expected reload
// cost per byte freed, ReloadCost(r) / r.Memory, lowest first; ties go to
// the one unused (or, never used, loaded) longest ago, then the larger, then by key. Once enough
// is chosen, a pass from the last chosen back drops any victim the others
// already cover, so no more is unloaded than needed. need <= 0 needs no
// victims.
func (p Policy) Victims(loaded []Resident, need int64, now time.Time) Eviction {
	return p.VictimsFor(loaded, need, now, false)
}

// VictimsFor is Victims for a request's load (forRequest: KeepFor's
// rules) or a placement ahead of traffic.
func (p Policy) VictimsFor(loaded []Resident, need int64, now time.Time, forRequest bool) Eviction {
	return victims(loaded, need, func(r Resident) bool { return p.KeepFor(r, now, forRequest) == "" })
}

// Trim chooses what a worker over its memory budget unloads to free over
// bytes: the budget is a promise, so when what may go by Victims' rules
// cannot free enough, the minimum residency does not protect a copy
// either (a load that measured larger than its reservation must not leave
// the worker over its budget for minutes), and then a busy copy goes too
// (its queued work drains first). Hot versions and rollback targets
// always stay. Within each step the order is Victims' (reload cost per
// byte, then least recently used).
func (p Policy) Trim(loaded []Resident, over int64, now time.Time) Eviction {
	if ev := p.Victims(loaded, over, now); ev.Enough {
		return ev
	}
	may := func(busy bool) func(Resident) bool {
		return func(r Resident) bool {
			return !r.Hot && !r.RollbackTarget && r.Memory > 0 && (busy || !r.Busy)
		}
	}
	if ev := victims(loaded, over, may(false)); ev.Enough {
		return ev
	}
	return victims(loaded, over, may(true))
}

// recency is when r was last used, or loaded when it was never used: the
// least recently used or loaded goes first (a copy just loaded is not
// the first victim for being uncalled yet).
func recency(r Resident) time.Time {
	if r.LastUsed.IsZero() {
		return r.LoadedAt
	}
	return r.LastUsed
}

// victims is Victims over the residents ok says may go.
func victims(loaded []Resident, need int64, ok func(Resident) bool) Eviction {
	if need <= 0 {
		return Eviction{Enough: true}
	}
	var cands []Resident
	var avail int64
	for _, r := range loaded {
		if ok(r) {
			cands = append(cands, r)
			avail += r.Memory
		}
	}
	if avail < need {
		return Eviction{Freed: avail}
	}
	slices.SortFunc(cands, func(a, b Resident) int {
		// a.cost/a.mem vs b.cost/b.mem without dividing: both memories > 0.
		if c := cmp.Compare(ReloadCost(a)*float64(b.Memory), ReloadCost(b)*float64(a.Memory)); c != 0 {
			return c
		}
		if c := recency(a).Compare(recency(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Memory, a.Memory); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	var chosen []Resident
	var freed int64
	for _, r := range cands {
		if freed >= need {
			break
		}
		chosen = append(chosen, r)
		freed += r.Memory
	}
	for i := len(chosen) - 2; i >= 0; i-- { // the last one was needed
		if freed-chosen[i].Memory >= need {
			freed -= chosen[i].Memory
			chosen = slices.Delete(chosen, i, i+1)
		}
	}
	keys := make([]string, len(chosen))
	for i, r := range chosen {
		keys[i] = r.Key
	}
	return Eviction{Victims: keys, Freed: freed, Enough: true}
}
