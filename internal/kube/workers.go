package kube

import (
	"fmt"
	"sort"
	"time"
)

// Demand is what one model version asks of a pool's workers, as its
// gateway reports it (GET /v1/workers, "demand"): the replicas the
// autoscaler wants before the workers' memory caps them, how many
// workers must hold a copy (its shard), and one replica's memory.
type Demand struct {
	Version       string
	Replicas      int
	Copies        int
	ReplicaMemory int64
}

// Shape is what one pool's workers can hold and its bounds.
type Shape struct {
	MinWorkers, MaxWorkers int
	WorkerMemory           int64 // each worker's memory budget (its memory limit)
	Cooldown               time.Duration
}

// WorkerState is what DesiredWorkers carries from one call to the next.
type WorkerState struct {
	LowSince time.Time // since when the need stayed below the current count; zero: it has not
	LastDown time.Time // when the count last went down
}

// WorkerDecision is one decision: the pod count, the unclamped need and why.
type WorkerDecision struct {
	Workers int
	Need    int
	Reason  string
}

// Need is the fewest workers that hold every version's demand as the
// gateway's placement would: each version on at least its Copies workers,
// one copy per worker, each copy holding its share of the replicas
// (ceil(Replicas/Copies) × ReplicaMemory), packed first-fit decreasing
// into workers of WorkerMemory. It names the binding constraint. A copy
// bigger than a worker counts one worker (it fits nowhere: placement
// says so when it tries).
//
// Memory, not CPU, is what more pods give the gateway's pool today: the
// replicas the autoscaler adds go to the workers that hold the model (up
// to their memory), and a shard grows past its size only when its
// workers have no room. So the autoscaler's demand reaches the pod count
// through memory: a version whose replicas its holders cannot take asks
// for the memory, and the new pods take the copies that did not fit.
func Need(s Shape, demand []Demand) (int, string) {
	type item struct {
		version string
		size    int64
	}
	var items []item
	need, why := 0, "no demand"
	for _, d := range demand {
		if d.Replicas <= 0 && d.Copies <= 0 {
			continue
		}
		copies := max(d.Copies, 1)
		per := int64((max(d.Replicas, copies)+copies-1)/copies) * d.ReplicaMemory
		for range copies {
			items = append(items, item{d.Version, per})
		}
		if copies > need {
			need, why = copies, fmt.Sprintf("%s: %d copies", d.Version, copies)
		}
	}
	if s.WorkerMemory <= 0 {
		return need, why
	}
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].size != items[j].size {
			return items[i].size > items[j].size
		}
		return items[i].version < items[j].version
	})
	type bin struct {
		free int64
		has  map[string]bool
	}
	var bins []*bin
	var total int64
	for _, it := range items {
		total += it.size
		placed := false
		for _, b := range bins {
			if !b.has[it.version] && b.free >= it.size {
				b.free -= it.size
				b.has[it.version] = true
				placed = true
				break
			}
		}
		if !placed {
			bins = append(bins, &bin{free: s.WorkerMemory - it.size, has: map[string]bool{it.version: true}})
		}
	}
	if len(bins) > need {
		need = len(bins)
		why = fmt.Sprintf("memory: %d copies of %d MiB in all, packed into workers of %d MiB", len(items), total>>20, s.WorkerMemory>>20)
	}
	return need, why
}

// DesiredWorkers is the pool's scaling policy, a pure function of its
// shape, the demand, the current pod count and the state the previous
// call left:
//
//  1. need = Need(shape, demand), clamped to MinWorkers..MaxWorkers.
//  2. Up at once, to the need.
//  3. Down only after the need stayed below the current count for a
//     whole Cooldown, by one pod; each further step waits another
//     Cooldown (a draining pod's versions are reloaded elsewhere first:
//     the pool shrinks slower than it grows).
//  4. With no demand figure at all (demand nil: the gateway did not
//     answer) it holds the current count, within the bounds.
func DesiredWorkers(s Shape, demand []Demand, current int, st WorkerState, now time.Time) (WorkerDecision, WorkerState) {
	lo, hi := max(s.MinWorkers, 0), max(s.MaxWorkers, s.MinWorkers, 1)
	clamp := func(n int) int { return min(max(n, lo), hi) }
	if demand == nil {
		n := clamp(current)
		st.LowSince = time.Time{}
		return WorkerDecision{Workers: n, Need: n, Reason: "holding: no demand from the gateway"}, st
	}
	raw, why := Need(s, demand)
	need := clamp(raw)
	if need != raw {
		why = fmt.Sprintf("%s (need %d, clamped to %d..%d)", why, raw, lo, hi)
	}
	d := WorkerDecision{Workers: current, Need: raw}
	switch {
	case current < lo || current > hi:
		d.Workers, d.Reason = clamp(current), fmt.Sprintf("bounds: %d pods outside %d..%d", current, lo, hi)
		st.LowSince = time.Time{}
	case need > current:
		d.Workers, d.Reason = need, "up: "+why
		st.LowSince = time.Time{}
	case need < current:
		if st.LowSince.IsZero() {
			st.LowSince = now
		}
		since := st.LowSince
		if st.LastDown.After(since) {
			since = st.LastDown
		}
		if waited := now.Sub(since); waited < s.Cooldown {
			d.Reason = fmt.Sprintf("holding %d: need %d (%s); waiting for the cooldown (%v of %v)", current, need, why, waited.Round(time.Second), s.Cooldown)
		} else {
			d.Workers, d.Reason = current-1, fmt.Sprintf("down by one: need %d (%s) for %v", need, why, s.Cooldown)
			st.LastDown = now
		}
	default:
		d.Reason = "holding: " + why
		st.LowSince = time.Time{}
	}
	return d, st
}
