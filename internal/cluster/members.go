package cluster

import "time"

// Membership from outside: when workers run as Kubernetes pods, the
// Kubernetes API knows before any heartbeat that a worker is leaving (its
// pod is terminating), is not ready, or is gone for good. A caller that
// watches the pods (internal/kube) tells the pool through these three
// methods. Registration and heartbeats stay the source of what a worker
// holds; these only say whether it may take traffic.
//
// A fenced worker is out of routing (at once, its in-flight calls finish)
// and out of every model's shard, and its heartbeats do not bring it back
// until Unfence. Unlike MarkDead, fencing charges no version with an
// exit: a pod leaving on purpose is not a crash, so a rolling update
// never quarantines a model. Versions whose copies were on it are placed
// again on the others at once.

// Fence takes worker id out of routing and out of the shards until
// Unfence, whatever its heartbeats say. The id need not be registered
// yet: a pod that is not ready is fenced before its worker registers.
func (p *Pool) Fence(id, why string) {
	if why == "" {
		why = "fenced"
	}
	p.mu.Lock()
	if p.fenced[id] == why {
		p.mu.Unlock()
		return
	}
	p.fenced[id] = why
	if w := p.workers[id]; w != nil {
		p.downLocked(w, why)
	}
	jobs := p.reconcileAllLocked(time.Now())
	p.mu.Unlock()
	p.run(jobs)
}

// Unfence lets worker id take traffic again once it is registered and
// heartbeating; its shard's versions are placed on it.
func (p *Pool) Unfence(id string) {
	p.mu.Lock()
	if _, ok := p.fenced[id]; !ok {
		p.mu.Unlock()
		return
	}
	delete(p.fenced, id)
	var jobs []func()
	if w := p.workers[id]; w != nil && w.conn != nil && !w.live &&
		!Silent(time.Now(), w.lastBeat, time.Unix(0, w.seen.Load()), time.Duration(p.cfg.MissedHeartbeats)*p.cfg.HeartbeatInterval) {
		w.live, w.why = true, ""
		w.gone.Store(0)
		p.rerouteWorkerLocked(w)
		p.log.Info("worker unfenced: back in routing", "worker", id, "pid", w.pid)
		p.broadcastLocked()
	}
	jobs = p.reconcileAllLocked(time.Now())
	p.mu.Unlock()
	p.run(jobs)
}

// Forget drops worker id for good (its pod is deleted): its connection is
// closed, its copies are no longer counted anywhere, and the versions it
// held are placed again. A process with that id that registers later is
// a new worker.
func (p *Pool) Forget(id string) {
	p.mu.Lock()
	delete(p.fenced, id)
	w := p.workers[id]
	if w == nil {
		p.mu.Unlock()
		return
	}
	p.forgetLocked(w, "forgotten")
	jobs := p.reconcileAllLocked(time.Now())
	p.mu.Unlock()
	p.forgetSeries([]string{id})
	p.run(jobs)
}

// forgetLocked drops w from the registry (and so from every model's
// shard), closes its connection and takes its copies out of the
// accounting; the caller places the versions again (reconcileAllLocked)
// and deletes its series (forgetSeries) without the lock.
func (p *Pool) forgetLocked(w *worker, why string) {
	delete(p.workers, w.id)
	if w.conn != nil {
		_ = w.conn.Close()
	}
	w.live, w.why = false, why
	w.gone.Store(w.session) // a route still holding it skips it
	for _, v := range p.versions {
		if v.on[w.id] != nil {
			delete(v.on, w.id)
			p.rerouteLocked(v)
			p.settleLocked(v)
		}
		delete(v.exitSeen, w.id)
	}
	p.log.Info("worker forgotten", "worker", w.id, "why", why)
	p.broadcastLocked()
}

// forgetSeries deletes the metric series of forgotten workers.
func (p *Pool) forgetSeries(ids []string) {
	if p.cfg.Metrics == nil {
		return
	}
	for _, id := range ids {
		p.cfg.Metrics.ForgetWorker(id)
	}
}

// fencedLocked reports why worker id is fenced ("" when it is not).
func (p *Pool) fencedLocked(id string) string { return p.fenced[id] }

// reconcileAllLocked places every version short of the copies it wants,
// hot ones first, and returns the RPCs to run without the lock.
func (p *Pool) reconcileAllLocked(now time.Time) []func() {
	var jobs []func()
	for _, v := range p.sortedVersionsLocked() {
		js, _ := p.reconcileLocked(v, now)
		jobs = append(jobs, js...)
	}
	return jobs
}
