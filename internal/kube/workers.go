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
	CPUSlots               int   // replicas one worker runs at once usefully (its CPU limit in cores, ≥ 1)
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

// Need is the fewest workers that hold every version's demand: each
// version on at least its Copies workers and on enough workers that its
// replicas fit (a worker takes as many as its memory holds and its CPU
// runs, at least one), and all of them together within the workers'
// memory and CPU. It names the binding constraint.
func Need(s Shape, demand []Demand) (int, string) {
	slots := max(s.CPUSlots, 1)
	need, why := 0, "no demand"
	var mem, reps int64
	ds := append([]Demand(nil), demand...)
	sort.Slice(ds, func(i, j int) bool { return ds[i].Version < ds[j].Version })
	for _, d := range ds {
		if d.Replicas <= 0 && d.Copies <= 0 {
			continue
		}
		per := slots
		if s.WorkerMemory > 0 && d.ReplicaMemory > 0 {
			per = min(per, max(1, int(s.WorkerMemory/d.ReplicaMemory)))
		}
		n := max(d.Copies, (d.Replicas+per-1)/per)
		if n > need {
			need = n
			why = fmt.Sprintf("%s: %d replicas on %d copies, %d per worker", d.Version, d.Replicas, d.Copies, per)
		}
		mem += int64(d.Replicas) * d.ReplicaMemory
		reps += int64(d.Replicas)
	}
	if s.WorkerMemory > 0 {
		if n := int((mem + s.WorkerMemory - 1) / s.WorkerMemory); n > need {
			need = n
			why = fmt.Sprintf("memory: %d MiB of replicas over workers of %d MiB", mem>>20, s.WorkerMemory>>20)
		}
	}
	if n := int((reps + int64(slots) - 1) / int64(slots)); n > need {
		need = n
		why = fmt.Sprintf("cpu: %d replicas over workers of %d cores", reps, slots)
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
