// Package gcfloor keeps the Go heap's collection target at or above a
// floor, so that a server whose live heap is small does not collect
// garbage dozens of times a second.
//
// Go starts a collection when the heap reaches the live heap of the last
// one times 1+GOGC/100 (GOGC 100 by default). A gateway serving small
// models holds a live heap of some megabytes and allocates about 10 KB per
// 1-row request, so at 25,000 requests/s it collected about 25 times a
// second; GC and its write barriers and assists were the largest share
// of its CPU after the system calls (docs/benchmarks.md, "session 5").
// The floor sets GOGC after every collection so that the next target is
// the floor while the live heap is small (at most floor bytes of garbage
// are kept) and GOGC's own 2x once the live heap passes half the floor:
// with models on the heap, memory is what it was without the floor.
//
// This is the GOGC tuner Uber and ByteDance described and ship in their
// own code (bytedance/gopkg's gctuner is one package of a large
// grab-bag module): the mechanism is a finalizer re-armed at every
// collection and one formula (Percent), small enough to own, and a
// dependency would bring the rest of that module.
//
// An operator's GOGC wins: with GOGC set in the environment Start does
// nothing. A memory limit (GOMEMLIMIT, or a worker's limit from its
// budget) still applies: near it the runtime collects sooner whatever
// GOGC says.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Percent is the GOGC that makes the next collection's target the floor
// for a live heap of live bytes: (floor-live)*100/live, never below base
// (the GOGC without a floor) and never above maxPercent. A floor of 0 or
// less, or an unknown live heap, is base.
func Percent(live, floor int64, base int) int {
	if floor <= 0 || live <= 0 || floor <= live {
		return base
	}
	floor = min(floor, 1<<50) // (1 PiB: the product below cannot overflow)
	p := (floor - live) * 100 / live
	return int(min(max(p, int64(base)), maxPercent))
}

// maxPercent bounds GOGC for a nearly empty heap (a live heap of 1 MiB
// and a floor of 64 MiB would otherwise be 6,300).
const maxPercent = 2000

// base is the GOGC without a floor: Go's default.
const base = 100

// Tuner sets GOGC after every collection; Stop ends it.
type Tuner struct {
	floor   int64
	stopped atomic.Bool
	sample  []metrics.Sample
	last    atomic.Int64 // the GOGC set last
}

// Start sets GOGC from the floor after every collection until Stop, and
// once now. It returns nil (nothing to stop) when floor is 0 or less or
// GOGC is set in the environment.
func Start(floor int64) *Tuner {
	if floor <= 0 || os.Getenv("GOGC") != "" {
		return nil
	}
	t := &Tuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.tune()
	t.arm()
	return t
}

// Stop ends the tuning and puts GOGC back to its default. A nil Tuner's
// Stop does nothing.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.stopped.Store(true)
	debug.SetGCPercent(base)
}

// GOGC is the GOGC the tuner set last (0 for a nil Tuner).
func (t *Tuner) GOGC() int {
	if t == nil {
		return 0
	}
	return int(t.last.Load())
}

// sentinel is garbage from birth: its finalizer runs after the collection
// that finds it. It holds a pointer so that it is not a tiny allocation
// (whose finalizer may never run).
type sentinel struct {
	t *Tuner
	_ [2]int64
}

// arm makes the next collection call tune and arm again (the runtime's
// finalizer goroutine runs it; the chain ends after Stop).
func (t *Tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.tune()
		s.t.arm()
	})
}

// tune reads the live heap the last collection marked and sets GOGC.
func (t *Tuner) tune() {
	metrics.Read(t.sample)
	var live int64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = int64(t.sample[0].Value.Uint64())
	}
	p := Percent(live, t.floor, base)
	if int64(p) != t.last.Load() {
		debug.SetGCPercent(p)
		t.last.Store(int64(p))
	}
}
