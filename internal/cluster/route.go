package cluster

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/sluiceml/sluice/internal/oip/inferencepb"
)

// This file is the predict path's view of the pool. Each Version holds an
// immutable routing snapshot (a route: the live workers holding it ready)
// behind an atomic pointer. The control plane (Register, Heartbeat,
// placement, eviction, fencing, a worker's death) changes readiness under
// Pool.mu, marks the versions whose route it changed (rerouteLocked,
// rerouteWorkerLocked, setReadyLocked) and swaps in their new routes
// before it lets go of the lock (publishLocked, also from
// broadcastLocked). Submit and pick only load the pointer: they take no
// lock, so a heartbeat that applies a thousand versions' status, or a
// registration that runs placement, never delays a prediction.
//
// What changes at every heartbeat (queue work, the fitted cost model) is
// not in the route's structure but in a slot per version and worker whose
// fields are atomic: a heartbeat stores into them, the predict path loads
// them, and no route is rebuilt for it.

// route is one version's routing snapshot. Never changed once published.
type route struct {
	holders []holder // by worker id
}

// holder is one live worker holding the version ready, as of the route's
// publication.
type holder struct {
	w       *worker
	session int64
	infer   inferencepb.GRPCInferenceServiceClient // the session's connection
	cp      *copyOn                                // nil for a copy the pool did not place
	slot    *slot
}

// slot is what the last heartbeat said of one version on one worker.
type slot struct {
	queued atomic.Int64                 // instances queued there
	state  atomic.Pointer[servingState] // its server there (nil: not reported)

	// guarded by Pool.mu
	key      string // the version's key
	reported bool   // a heartbeat listed it in this session
	busy     bool   // as in worker.busy
	counts   counts // cumulative counters at the last heartbeat
}

// report stores a heartbeat's figures; the state is replaced only when it
// changed (a steady report allocates nothing).
func (s *slot) report(queued int64, st servingState) {
	s.queued.Store(queued)
	if cur := s.state.Load(); cur == nil || *cur != st {
		s.state.Store(&st)
	}
}

// slotLocked is w's slot for version key k, made on first use.
func (w *worker) slotLocked(k string) *slot {
	s := w.slots[k]
	if s == nil {
		s = &slot{key: k}
		w.slots[k] = s
	}
	return s
}

// setReadyLocked sets whether w holds version k ready and marks its route.
// Every change of a copy on w goes through it (w.gen: applyStatusLocked
// then reads w's next report in full).
func (p *Pool) setReadyLocked(w *worker, k string, ok bool) {
	w.gen++
	if ok {
		w.ready[k] = true
	} else {
		delete(w.ready, k)
	}
	if v := p.versions[k]; v != nil {
		p.rerouteLocked(v)
	}
}

// rerouteLocked marks v's route to be rebuilt at the next publishLocked.
func (p *Pool) rerouteLocked(v *Version) {
	if !v.stale {
		v.stale = true
		p.stale = append(p.stale, v)
	}
}

// rerouteWorkerLocked marks the route of every version w holds ready (its
// liveness, session or connection changed).
func (p *Pool) rerouteWorkerLocked(w *worker) {
	for k, ok := range w.ready {
		if v := p.versions[k]; ok && v != nil {
			p.rerouteLocked(v)
		}
	}
}

// publishLocked rebuilds and swaps the marked routes.
func (p *Pool) publishLocked() {
	for _, v := range p.stale {
		v.stale = false
		v.route.Store(p.routeLocked(v))
	}
	clear(p.stale)
	if cap(p.stale) > 1024 {
		p.stale = nil // after a registration marked thousands: do not keep their room
	} else {
		p.stale = p.stale[:0]
	}
}

// routeLocked builds v's route from the pool's state: its copies on live
// workers of the copy's session that hold it ready.
func (p *Pool) routeLocked(v *Version) *route {
	r := &route{}
	for id, cp := range v.on {
		w := p.workers[id]
		if w == nil || !w.live || !w.ready[v.key] || cp.session != w.session {
			continue
		}
		r.holders = append(r.holders, holder{w: w, session: w.session, infer: w.infer, cp: cp, slot: w.slotLocked(v.key)})
	}
	slices.SortFunc(r.holders, func(a, b holder) int { return cmp.Compare(a.w.id, b.w.id) })
	return r
}

// candidate is a worker that can take a version's work now.
type candidate struct {
	w       *worker
	session int64
	infer   inferencepb.GRPCInferenceServiceClient
	cp      *copyOn // nil for a copy the pool did not place
	load    int64
	queued  int64        // the version's instances queued there at the last heartbeat
	state   servingState // its server there at the last heartbeat
}

// candidate reads a holder's live figures.
func (h *holder) candidate() candidate {
	c := candidate{w: h.w, session: h.session, infer: h.infer, cp: h.cp, queued: h.slot.queued.Load()}
	if st := h.slot.state.Load(); st != nil {
		c.state = *st
	}
	c.load = c.queued + h.w.outstanding.Load()
	if c.cp != nil {
		// What this gateway has in flight there is live, where the
		// report is up to a heartbeat old: the larger of the two.
		c.queued = max(c.queued, c.cp.rows.Load())
	}
	return c
}

// usable reports whether the predict path may send to h: not skipped, and
// its session's calls have not failed on the connection since the route
// was published.
func (h *holder) usable(skip *worker) bool {
	return h.w != skip && h.w.gone.Load() != h.session
}

// candidates lists the workers v's route holds, except skip. No lock.
func (p *Pool) candidates(v *Version, skip *worker) []candidate {
	r := v.route.Load()
	if r == nil {
		return nil
	}
	var out []candidate
	for i := range r.holders {
		if h := &r.holders[i]; h.usable(skip) {
			out = append(out, h.candidate())
		}
	}
	return out
}

// pick chooses a worker for v by the power of two choices (PickTwo) among
// the usable holders of its route. No lock, and no allocation.
func (p *Pool) pick(v *Version, skip *worker) (candidate, bool) {
	r := v.route.Load()
	if r == nil {
		return candidate{}, false
	}
	var small [8]int
	idx := small[:0]
	for i := range r.holders {
		if r.holders[i].usable(skip) {
			idx = append(idx, i)
		}
	}
	switch len(idx) {
	case 0:
		return candidate{}, false
	case 1:
		return r.holders[idx[0]].candidate(), true
	}
	i, j := twoOf(len(idx), rand.Uint64())
	ci, cj := r.holders[idx[i]].candidate(), r.holders[idx[j]].candidate()
	if PickTwo([]int64{ci.load, cj.load}, 0, 1) == 1 {
		return cj, true
	}
	return ci, true
}
