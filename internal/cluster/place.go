package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/placement"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// This file is the pool's placement loop: it asks internal/placement where
// a version's copies go and what to evict first (Choose), acts on the
// answer (Unload RPCs, then Load), loads versions that are not loaded when
// a request needs them (one load per version, shared), and quarantines
// poison versions. Decisions are placement's; this file only gathers their
// inputs under Pool.mu and runs the RPCs without it.

// VersionSpec is one version to place on workers.
type VersionSpec struct {
	Model         string
	N             int
	Manifest      []byte
	ArtifactSHA   string
	ArtifactBytes int64
	Spec          *modelpkg.Spec
	// LoadTime is what a load is expected to take before one was measured
	// (the synthetic runtime's loadTime; 0: none declared, see
	// placement.LoadEstimate).
	LoadTime time.Duration
	// Memory is one replica's memory as the artifact declares it (the
	// synthetic runtime's memory; 0: none): the reservation before a load
	// was measured when the manifest sets no serving.memory.
	Memory int64
	// Observer is told of replica crashes and expired requests on the
	// workers (from their heartbeats' counters; nil: nobody).
	Observer serving.Observer
}

func key(model string, n int64) string { return model + "@" + strconv.FormatInt(n, 10) }

// copyOn is one worker's copy of a version: placed there by the pool,
// loading or loaded. Its atomic fields are touched on the request path.
type copyOn struct {
	session  int64 // the worker's session it was loaded in
	replicas int
	// guarded by Pool.mu
	loading  bool
	onDemand bool // loaded for a request (placement.Resident.OnDemand)
	loadedAt time.Time
	memory   int64 // reserved (the estimate) while loading; then measured
	loadTime time.Duration
	// listed is the worker's report (worker.beats) that last listed it;
	// missed counts the reports in a row since its load answered that
	// did not (applyStatusLocked places it again at 2).
	listed uint64
	missed int

	lastUsed atomic.Int64 // unix ns of the last call sent
	inflight atomic.Int64 // calls in flight now
	rows     atomic.Int64 // their instances
}

// Start places v on the workers placement chooses (and again on workers
// that register later, while it has fewer copies than it wants) and
// returns once one of them has it ready, or with the reason it cannot be
// placed or every load failed. A cold version (placement.tier: cold) is
// returned at once, loaded on no worker: its first request loads it. A
// warm one that finds no room now (everything else is too young or busy
// to evict) is returned the same way, loaded on demand later; it fails
// only when no live worker could hold it even empty, or when it is hot.
func (p *Pool) Start(ctx context.Context, vs VersionSpec) (*Version, hosting.Timings, error) {
	v := newVersion(p, vs)
	p.mu.Lock()
	p.versions[v.key] = v
	if v.tier == modelpkg.TierCold {
		p.mu.Unlock()
		p.log.Info("cold version: loaded by its first request", "version", v.key)
		return v, hosting.Timings{}, nil
	}
	v.want = p.copiesWantedLocked(v)
	p.mu.Unlock()
	wait := time.NewTimer(p.cfg.WaitForWorker)
	defer wait.Stop()
	for {
		now := p.now()
		p.mu.Lock()
		jobs, noRoom := p.reconcileLocked(v, now)
		live := 0
		var reasons []string
		ready := false
		for _, w := range p.workers {
			if !w.live {
				continue
			}
			live++
			ready = ready || w.ready[v.key]
			if why, ok := w.failed[v.key]; ok {
				reasons = append(reasons, why)
			}
		}
		pending := len(v.on) > 0
		tm := v.timing
		var fail error
		deferred := false
		if !ready && !pending && live > 0 {
			switch {
			case noRoom != "" && (v.tier == modelpkg.TierHot || !p.fitsEmptyLocked(v)):
				fail = errors.New(noRoom)
			case noRoom != "":
				deferred = true
			case len(reasons) > 0:
				sort.Strings(reasons)
				fail = errors.New(reasons[0])
			}
		}
		ch := p.changed
		p.mu.Unlock()
		p.run(jobs)
		switch {
		case ready:
			return v, tm, nil
		case fail != nil:
			p.forget(v)
			return nil, hosting.Timings{}, fail
		case deferred:
			p.log.Warn("no room for the version now; it loads on demand", "version", v.key, "reason", noRoom)
			return v, hosting.Timings{}, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			p.forget(v)
			return nil, hosting.Timings{}, ctx.Err()
		case <-wait.C:
			if live == 0 {
				p.forget(v)
				return nil, hosting.Timings{}, fmt.Errorf("load %s: no worker registered within %s (start workers with sluice serve --workers N, or attach one with sluice worker --join ADDR)", v.key, p.cfg.WaitForWorker)
			}
			wait.Reset(p.cfg.WaitForWorker)
		}
	}
}

// SetWant sets how many workers should hold a copy of model@n (the place
// where an autoscaler's desired replicas will be applied) and places the
// missing copies; copies beyond it are left to eviction.
func (p *Pool) SetWant(model string, n, copies int) {
	p.mu.Lock()
	v := p.versions[key(model, int64(n))]
	var jobs []func()
	if v != nil {
		v.want = max(copies, 0)
		jobs, _ = p.reconcileLocked(v, p.now())
	}
	p.mu.Unlock()
	p.run(jobs)
}

func (p *Pool) forget(v *Version) {
	p.mu.Lock()
	if p.versions[v.key] == v {
		delete(p.versions, v.key)
	}
	p.mu.Unlock()
}

// now is the placement clock (Config.Now).
func (p *Pool) now() time.Time {
	if p.cfg.Now != nil {
		return p.cfg.Now()
	}
	return time.Now()
}

// run starts each action on its own goroutine, owned by the pool.
func (p *Pool) run(acts []func()) {
	for _, f := range acts {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			f()
		}()
	}
}

// sortedVersionsLocked lists the versions, hot first, then by key.
func (p *Pool) sortedVersionsLocked() []*Version {
	out := make([]*Version, 0, len(p.versions))
	for _, v := range p.versions {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b *Version) int {
		if ah, bh := a.tier == modelpkg.TierHot, b.tier == modelpkg.TierHot; ah != bh {
			if ah {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.key, b.key)
	})
	return out
}

// idsLocked is every worker id: the known ones and the registered ones.
func (p *Pool) idsLocked() []string {
	seen := map[string]bool{}
	var ids []string
	for _, id := range p.cfg.Known {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for id := range p.workers {
		if !seen[id] && p.fenced[id] == "" {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// copiesWantedLocked is how many workers hold a copy of a version that
// is not cold: its shard (ShardSize, at most the workers there are), so a
// worker's death leaves a copy to fail over to.
func (p *Pool) copiesWantedLocked(*Version) int {
	return max(1, min(p.cfg.ShardSize, len(p.idsLocked())))
}

// replicasPerWorkerLocked spreads a version's replicas over its copies.
func (p *Pool) replicasPerWorkerLocked(v *Version) int {
	r := max(v.spec.Spec.Manifest.Serving.Replicas, v.spec.Spec.Manifest.Placement.Min(), 1)
	n := max(v.want, 1)
	return max(1, (r+n-1)/n)
}

// replicaMemoryLocked is one replica's memory: measured on a worker, else
// serving.memory, else placement.Estimate.
//
// Measured is the least that the workers holding a copy measured: a
// worker can only lower the figure (its loads elsewhere are then refused
// for the budget, and placed again), never raise it until the version
// fits nowhere.
func (p *Pool) replicaMemoryLocked(v *Version) int64 {
	var measured int64
	for _, w := range p.workers {
		if w.status == nil {
			continue
		}
		for _, vs := range w.status.Versions {
			if vs.MemoryMeasured && vs.ReplicaMemoryBytes > 0 && key(vs.Model, vs.Version) == v.key && (measured == 0 || vs.ReplicaMemoryBytes < measured) {
				measured = vs.ReplicaMemoryBytes
			}
		}
	}
	if measured > 0 {
		return measured
	}
	override := v.spec.Memory
	if m := v.spec.Spec.Manifest.Serving.Memory; m != nil {
		override = m.Bytes
	}
	return placement.Estimate(v.spec.Spec.Manifest.Runtime, v.spec.ArtifactBytes, override)
}

// budgetOf is a worker's memory budget (unbounded when it reports none).
func budgetOf(w *worker) int64 {
	if w.budget > 0 {
		return w.budget
	}
	return 1 << 60
}

// heldLocked is what worker w holds as placement sees it: the memory used
// (the pool's copies there, measured or reserved, plus versions the worker
// reports that the pool did not place: w.foreign, and the entries of its
// last report whose copy left since) and, when loaded is not nil, its
// residents (a copy still loading is busy: never a victim).
func (p *Pool) heldLocked(w *worker, loaded *[]placement.Resident, now time.Time) (int64, []string) {
	var used int64
	var keys []string
	placed := map[string]bool{}
	for v := range w.copies {
		cp := v.on[w.id]
		if cp == nil || p.versions[v.key] != v {
			delete(w.copies, v) // gone since: evicted, failed, closed
			continue
		}
		if cp.session != w.session {
			continue
		}
		placed[v.key] = true
		keys = append(keys, v.key)
		used += cp.memory
		if loaded == nil {
			continue
		}
		lt, _ := p.loadTimeLocked(v)
		r := placement.Resident{Key: v.key, Memory: cp.memory, Replicas: 1, LoadedAt: cp.loadedAt, LoadTime: lt,
			Busy: cp.loading || cp.inflight.Load() > 0 || w.busy[v.key], Hot: v.tier == modelpkg.TierHot, OnDemand: cp.onDemand}
		if ns := cp.lastUsed.Load(); ns > 0 {
			r.LastUsed = time.Unix(0, ns)
		}
		// The version's request rate, shared by its copies: evicting one
		// of two copies delays half as many requests.
		r.Rate = p.rateLocked(v, now) / float64(max(len(v.on), 1))
		if p.cfg.Protected != nil {
			r.RollbackTarget = p.cfg.Protected(v.spec.Model, v.spec.N)
		}
		*loaded = append(*loaded, r)
	}
	used += w.foreign
	if w.status != nil {
		for _, vs := range w.status.Versions {
			// A version being unloaded left the accounting when its
			// eviction was booked: the load it made room for starts only
			// once its Unload answered (the job runs them in order).
			var buf [64]byte
			if k := strconv.AppendInt(append(append(buf[:0], vs.Model...), '@'), vs.Version, 10); !placed[string(k)] {
				if _, unl := w.unloading[string(k)]; !unl {
					used += vs.MemoryBytes
				}
			}
		}
	}
	sort.Strings(keys)
	return used, keys
}

// viewLocked is the live workers as placement sees them for v (workers
// where v's load failed in this session are left out).
func (p *Pool) viewLocked(v *Version, now time.Time) []placement.Worker {
	var out []placement.Worker
	for _, w := range p.workers {
		if !w.live {
			continue
		}
		if _, failed := w.failed[v.key]; failed || w.lost[v.key] {
			continue
		}
		if answered, unl := w.unloading[v.key]; unl && !answered {
			continue // v is still being unloaded there: it would refuse the load
		}
		pw := placement.Worker{ID: w.id, Budget: budgetOf(w)}
		pw.Used, _ = p.heldLocked(w, &pw.Loaded, now)
		if w.full {
			// It refused a load for its budget: it holds more than its
			// reports said. Nothing more goes there without evicting
			// until its next report.
			pw.Used = max(pw.Used, pw.Budget)
		}
		out = append(out, pw)
	}
	return out
}

// fitsEmptyLocked reports whether some live worker could hold a copy of v
// if it held nothing but its hot versions.
func (p *Pool) fitsEmptyLocked(v *Version) bool {
	mem := p.replicaMemoryLocked(v) * int64(p.replicasPerWorkerLocked(v))
	for _, w := range p.workers {
		if !w.live {
			continue
		}
		room := budgetOf(w)
		for _, u := range p.versions {
			if cp := u.on[w.id]; cp != nil && u.tier == modelpkg.TierHot && u != v {
				room -= cp.memory
			}
		}
		if room >= mem {
			return true
		}
	}
	return false
}

// reconcileLocked places the copies v is short of (v.want minus the copies
// it has) with placement.Choose. It books the decision at once (victims
// out of routing and of the accounting, the new copies reserved at their
// estimate) and returns the RPCs to run without the lock: on each chosen
// worker, the victims' unloads, then the load. noRoom is the reason when
// no copy could be placed.
func (p *Pool) reconcileLocked(v *Version, now time.Time) (jobs []func(), noRoom string) {
	have := p.liveCopiesLocked(v)
	if v.quarantined != "" || p.versions[v.key] != v || have >= v.want {
		return nil, ""
	}
	view := p.viewLocked(v, now)
	if len(view) == 0 {
		return nil, ""
	}
	reps := p.replicasPerWorkerLocked(v)
	mem := p.replicaMemoryLocked(v) * int64(reps)
	// A worker that broke its copy of v in this session is not of v's
	// shard until it restarts: the next one takes its place.
	ids := slices.DeleteFunc(p.idsLocked(), func(id string) bool { w := p.workers[id]; return w != nil && w.lost[v.key] })
	ranked := Shard(v.spec.Model, ids, len(ids))
	grow := ranked
	for _, id := range ranked[:min(p.cfg.ShardSize, len(ranked))] {
		if w := p.workers[id]; w == nil || !w.live {
			// A member of the shard is not up (yet): the shard grows only
			// for memory, never because a member is still starting or
			// restarting, so a model stays off the workers of others.
			grow = ranked[:min(p.cfg.ShardSize, len(ranked))]
			break
		}
	}
	// A hot version, and a load a request waits for (its deadline covers
	// the load), displace by cost whatever is evictable; otherwise
	// admission compares request rates (placement.Displaces).
	rate := placement.Priceless
	if v.tier != modelpkg.TierHot && !v.waited {
		rate = p.rateLocked(v, now) / float64(have+1)
	}
	dec := p.cfg.Placement.Choose(placement.Request{Key: v.key, Memory: mem, Replicas: v.want - have, Ranked: grow, ShardSize: p.cfg.ShardSize, Rate: rate, ForRequest: v.onDemand}, view, now)
	for _, a := range dec.Assignments {
		w := p.workers[a.Worker]
		if w == nil || v.on[w.id] != nil {
			continue // one copy per worker: its replicas are the copy's
		}
		var victims []*Version
		for _, k := range a.Evict {
			u := p.versions[k]
			if u == nil || u.on[w.id] == nil {
				continue
			}
			victims = append(victims, u)
			p.evictLocked(u, w, v.key)
		}
		cp := &copyOn{session: w.session, replicas: reps, loading: true, memory: mem, onDemand: v.onDemand}
		p.placeCopyLocked(v, w, cp)
		session := w.session
		jobs = append(jobs, func() {
			for _, u := range victims {
				p.unloadOn(w, u, "evicted for "+v.key)
			}
			p.load(w, session, v, cp)
		})
	}
	if len(v.on) == 0 && len(jobs) == 0 {
		var best int64
		for _, w := range view {
			best = max(best, p.cfg.Placement.Room(w, v.key, rate, v.onDemand, now))
		}
		noRoom = placement.NoRoom(v.key, ranked[:min(p.cfg.ShardSize, len(ranked))], mem, best)
	}
	if len(jobs) > 0 {
		p.broadcastLocked()
	}
	return jobs, noRoom
}

// reconcileForRequestLocked is reconcileLocked for a request that found v
// loaded nowhere: its copy is placed for a request (KeepFor's rules: start
// copies nobody called may go) and, when the request waits for it
// (waits: its deadline covers the load), it displaces by cost alone, not
// only residents called less: a request whose deadline covers the load
// is served, not refused with cold_start (issue 17).
func (p *Pool) reconcileForRequestLocked(v *Version, waits bool, now time.Time) ([]func(), string) {
	v.onDemand, v.waited = true, waits
	defer func() { v.onDemand, v.waited = false, false }()
	return p.reconcileLocked(v, now)
}

// evictLocked books u's eviction from w (for: the version it makes room
// for, or why): out of routing and of the accounting at once.
func (p *Pool) evictLocked(u *Version, w *worker, for_ string) {
	mem := u.on[w.id].memory
	delete(u.on, w.id)
	w.unloading[u.key] = false
	u.want = min(u.want, len(u.on)) // loaded again on demand
	p.setReadyLocked(w, u.key, false)
	w.evictions[u.key]++
	u.evictions++
	if p.cfg.Metrics != nil {
		p.cfg.Metrics.VersionEvicted(u.spec.Model, u.ver)
	}
	p.log.Info("evicting", "version", u.key, "worker", w.id, "for", for_, "memory_mb", mem>>20)
}

// load loads v's copy cp on w and books the answer.
func (p *Pool) load(w *worker, session int64, v *Version, cp *copyOn) {
	p.mu.Lock()
	ctl := w.ctl
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Minute)
	defer cancel()
	resp, err := ctl.Load(ctx, &workerpb.LoadRequest{Model: v.spec.Model, Version: int64(v.spec.N), Manifest: v.spec.Manifest,
		ArtifactSha256: v.spec.ArtifactSHA, ArtifactBytes: v.spec.ArtifactBytes, Replicas: int32(cp.replicas)})
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.broadcastLocked()
	defer p.settleLocked(v)
	if w.session != session {
		return // the worker restarted meanwhile
	}
	if cur := p.versions[v.key]; cur != v || v.on[w.id] != cp {
		// Closed or quarantined while it loaded: do not leave it there
		// (unless a newer start of the same version took its place).
		if err == nil && (cur == nil || cur == v) {
			p.run([]func(){func() { p.unloadOn(w, v, "no longer wanted") }})
		}
		return
	}
	now := p.now()
	if status.Code(err) == codes.ResourceExhausted {
		// The worker refused the load: what it holds (measured) leaves no
		// room for the reservation. Not the version's failure: the copy
		// goes, the worker counts as full until it reports again (trim
		// brings it back within its budget), and a request waiting for
		// this load gets another placement once.
		delete(v.on, w.id)
		w.full = true
		p.log.Warn("worker refused a load: over its memory budget", "worker", w.id, "version", v.key, "err", status.Convert(err).Message())
		p.run(p.trimLocked(w, now))
		if v.pending != nil && v.replaced < maxReplacements {
			v.replaced++
			v.want = max(v.want, 1)
			jobs, _ := p.reconcileForRequestLocked(v, true, now)
			p.run(jobs)
		}
		return
	}
	if err != nil {
		e, _ := hop.FromStatus(err)
		delete(v.on, w.id)
		w.failed[v.key] = e.Message
		v.failed, v.failedAt = e.Message, now
		p.log.Error("load on worker failed", "worker", w.id, "version", v.key, "err", e.Message)
		return
	}
	cp.loading, cp.loadedAt, cp.missed = false, now, 0
	cp.loadTime = clampDuration(resp.LoadNs) + clampDuration(resp.GoldenNs) + clampDuration(resp.WarmupNs)
	if resp.MemoryBytes > 0 {
		cp.memory = min(resp.MemoryBytes, maxMemory)
	}
	p.setReadyLocked(w, v.key, true)
	delete(w.failed, v.key)
	v.failed, v.failedAt, v.lastLoad = "", time.Time{}, cp.loadTime
	v.replaced = 0
	rt := v.spec.Spec.Manifest.Runtime
	lr := p.loadRates[rt]
	lr.Add(v.spec.ArtifactBytes, cp.loadTime)
	p.loadRates[rt] = lr
	v.loads++
	w.loads[v.key]++
	if p.cfg.Metrics != nil {
		p.cfg.Metrics.VersionLoaded(v.spec.Model, v.ver)
	}
	if v.timing == (hosting.Timings{}) {
		v.timing = hosting.Timings{Load: clampDuration(resp.LoadNs), Golden: clampDuration(resp.GoldenNs), Warmup: clampDuration(resp.WarmupNs)}
	}
	p.run(p.trimLocked(w, now))
	p.log.Info("version ready on worker", "worker", w.id, "version", v.key, "replicas", cp.replicas, "artifact", resp.ArtifactSource,
		"load", cp.loadTime.String(), "memory_mb", cp.memory>>20, "rss_mb", resp.RssBytes>>20)
}

// unloadOn unloads v from w (an eviction, a quarantine), its queued work
// drained within EvictDrain.
func (p *Pool) unloadOn(w *worker, v *Version, why string) {
	p.mu.Lock()
	ctl, session := w.ctl, w.session
	if v.on[w.id] == nil {
		w.unloading[v.key] = false
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.EvictDrain+2*time.Second)
	defer cancel()
	_, err := ctl.Unload(ctx, &workerpb.UnloadRequest{Model: v.spec.Model, Version: int64(v.spec.N), DrainMs: p.cfg.EvictDrain.Milliseconds()})
	p.mu.Lock()
	if w.session == session {
		if _, ok := w.unloading[v.key]; ok {
			if err != nil {
				delete(w.unloading, v.key) // it may still be there: its report counts again
			} else {
				w.unloading[v.key] = true
			}
		}
	}
	p.mu.Unlock()
	if err != nil {
		p.log.Warn("unload failed", "worker", w.id, "version", v.key, "why", why, "err", err)
		return
	}
	p.log.Info("version unloaded", "worker", w.id, "version", v.key, "why", why)
}

// trimLocked brings worker w back within its memory budget when what it
// holds grew past it after placement decided (a load measured larger
// than its reservation): it books evictions for the excess, chosen by
// placement's Trim (the minimum residency does not hold a worker over
// its budget; hot versions and rollback targets stay), and returns their
// unloads. A worker with nothing evictable stays over its budget until
// something is (the next call finds it), and refuses loads meanwhile.
func (p *Pool) trimLocked(w *worker, now time.Time) []func() {
	if !w.live || w.budget <= 0 {
		return nil
	}
	var loaded []placement.Resident
	used, _ := p.heldLocked(w, &loaded, now)
	over := used - w.budget
	if over <= 0 {
		return nil
	}
	ev := p.cfg.Placement.Trim(loaded, over, now)
	if !ev.Enough {
		return nil
	}
	var jobs []func()
	for _, k := range ev.Victims {
		u := p.versions[k]
		if u == nil || u.on[w.id] == nil {
			continue
		}
		p.evictLocked(u, w, "over budget")
		jobs = append(jobs, func() { p.unloadOn(w, u, "over its memory budget after a load measured larger than its reservation") })
	}
	if len(jobs) > 0 {
		p.broadcastLocked()
	}
	return jobs
}

// settleLocked ends the wait of requests for v's on-demand load once a
// copy is ready or none is loading any more.
func (p *Pool) settleLocked(v *Version) {
	if v.pending == nil {
		return
	}
	if !p.readyAnywhereLocked(v) && p.loadingLocked(v) && v.quarantined == "" {
		return
	}
	p.publishLocked() // the requests it wakes read the route at once
	close(v.pending)
	v.pending = nil
}

// liveCopiesLocked counts v's copies that serve or will again: on live
// workers, and on known (supervised) workers that are down, which come
// back as a new session (their copies are then dropped and placed again,
// on them first: they are the shard). A copy on an attached worker that
// went away is replaced elsewhere. So a poison model stays on its shard.
func (p *Pool) liveCopiesLocked(v *Version) int {
	n := 0
	for id := range v.on {
		if w := p.workers[id]; w != nil && (w.live || slices.Contains(p.cfg.Known, id)) {
			n++
		}
	}
	return n
}

func (p *Pool) readyAnywhereLocked(v *Version) bool {
	for _, w := range p.workers {
		if w.live && w.ready[v.key] {
			return true
		}
	}
	return false
}

func (p *Pool) loadingLocked(v *Version) bool {
	for _, cp := range v.on {
		if cp.loading {
			return true
		}
	}
	return false
}

// rateLocked is v's request rate now (requests per second, decayed with
// the placement policy's half-life), its new requests folded in first.
func (p *Pool) rateLocked(v *Version, now time.Time) float64 {
	n := v.requests.Load()
	v.demand.Add(now, float64(n-v.folded), p.cfg.Placement.HalfLife)
	v.folded = n
	return v.demand.PerSecond(now, p.cfg.Placement.HalfLife)
}

// loadTimeLocked is what loading v is expected to take and where the
// figure comes from (placement.LoadEstimate): its last measured load on
// any worker, else the artifact's declared load time, else its size at
// the speed loads of its runtime were measured at, else unknown.
func (p *Pool) loadTimeLocked(v *Version) (time.Duration, placement.LoadSource) {
	var rt string
	if v.spec.Spec != nil {
		rt = v.spec.Spec.Manifest.Runtime
	}
	return placement.LoadEstimate(v.lastLoad, v.spec.LoadTime, v.spec.ArtifactBytes, p.loadRates[rt])
}

// maxReplacements bounds how often one on-demand load is placed again
// after workers refused it for their budgets.
const maxReplacements = 2

// ensure is called by a request for v when no worker has it ready: it
// starts one load (shared by every request that comes meanwhile) and
// waits for it when the request's deadline covers the load time
// (placement.ColdWait); otherwise it refuses with cold_start. A load that
// failed less than FailureMemory ago is not tried again: the request gets
// the failure.
func (p *Pool) ensure(ctx context.Context, v *Version) error {
	now := p.now()
	dl, has := ctx.Deadline()
	p.mu.Lock()
	if v.quarantined != "" {
		p.mu.Unlock()
		return &errs.Error{Code: errs.NotReady, Message: fmt.Sprintf("%s is not ready (failed: %s)", v.key, v.quarantined), RetryAfter: time.Second}
	}
	if p.readyAnywhereLocked(v) {
		p.mu.Unlock()
		return nil
	}
	lt, src := p.loadTimeLocked(v)
	waits := placement.ColdWait(time.Until(dl), has, lt, src)
	var jobs []func()
	if v.pending == nil {
		if !p.loadingLocked(v) {
			if !placement.RetryLoad(v.failedAt, now, p.cfg.FailureMemory) {
				why, ago := v.failed, now.Sub(v.failedAt).Round(time.Second)
				p.mu.Unlock()
				return &errs.Error{Code: errs.NotReady, RetryAfter: time.Second,
					Message: fmt.Sprintf("%s is not loaded: its load failed %s ago (%s); it is not tried again for %s, or load it again by hand", v.key, ago, why, p.cfg.FailureMemory)}
			}
			if !v.failedAt.IsZero() {
				for _, w := range p.workers {
					delete(w.failed, v.key) // the failure memory passed: try them again
				}
			}
			v.want = max(v.want, 1)
			var noRoom string
			jobs, noRoom = p.reconcileForRequestLocked(v, waits, now)
			if len(jobs) == 0 {
				p.mu.Unlock()
				if noRoom == "" {
					return &errs.Error{Code: errs.NotReady, Message: v.key + " is not ready on any worker", RetryAfter: time.Second}
				}
				p.coldStart(v, "refused")
				return &errs.Error{Code: errs.ColdStart, Message: v.key + " is not loaded and cannot be now: " + noRoom, RetryAfter: max(lt, time.Second)}
			}
		}
		v.pending = make(chan struct{})
	}
	ch := v.pending
	p.mu.Unlock()
	p.run(jobs)
	if !waits {
		p.coldStart(v, "refused")
		return &errs.Error{Code: errs.ColdStart, RetryAfter: max(lt, time.Second),
			Message: fmt.Sprintf("%s is not loaded: its load takes about %s (%s), more than the request's deadline leaves; the load has started", v.key, lt.Round(time.Millisecond), src)}
	}
	p.coldStart(v, "waited")
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return &errs.Error{Code: errs.ColdStart, RetryAfter: max(lt, time.Second), Message: v.key + " is still loading"}
	case <-p.ctx.Done():
		return &errs.Error{Code: errs.ShuttingDown, Message: "shutting down"}
	}
}

func (p *Pool) coldStart(v *Version, outcome string) {
	if p.cfg.Metrics != nil {
		p.cfg.Metrics.ColdStart(v.spec.Model, v.ver, outcome)
	}
}

// exitedLocked charges v with the exit of worker w's process (session):
// once per session. When placement.Quarantine says v is poison, v is
// quarantined: returned are the unloads and the OnQuarantine callback.
func (p *Pool) exitedLocked(v *Version, w *worker, session int64, now time.Time) []func() {
	if v.quarantined != "" || v.exitSeen[w.id] == session {
		return nil
	}
	v.exitSeen[w.id] = session
	v.exits = append(v.exits, now)
	poison, n := p.cfg.Quarantine.Poison(v.exits, now)
	v.exits = v.exits[len(v.exits)-min(len(v.exits), 2*max(n, 1)):] // the older ones no longer count
	p.log.Warn("worker exited with calls of the version in flight", "worker", w.id, "version", v.key, "exits_in_window", n)
	if !poison {
		return nil
	}
	q := p.cfg.Quarantine
	m, t := cmp.Or(q.Exits, placement.DefaultQuarantineExits), cmp.Or(q.Window, placement.DefaultQuarantineWindow)
	v.quarantined = fmt.Sprintf("quarantined: made its worker exit %d times in %s", m, shortDuration(t))
	v.want = 0
	var acts []func()
	for id := range v.on {
		ww := p.workers[id]
		delete(v.on, id)
		if ww == nil {
			continue
		}
		p.setReadyLocked(ww, v.key, false)
		acts = append(acts, func() { p.unloadOn(ww, v, "quarantined") })
	}
	p.settleLocked(v)
	p.broadcastLocked()
	p.log.Error("version quarantined", "version", v.key, "reason", v.quarantined)
	if p.cfg.Metrics != nil {
		p.cfg.Metrics.VersionQuarantined(v.spec.Model, v.ver)
	}
	if f := p.cfg.OnQuarantine; f != nil {
		model, n, why := v.spec.Model, v.spec.N, v.quarantined
		acts = append(acts, func() { f(model, n, why) })
	}
	return acts
}

// shortDuration renders 5m0s as 5m and 1h30m0s as 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if len(s) > 2 && s[len(s)-2:] == "0s" && s != "0s" {
		s = s[:len(s)-2]
		if len(s) > 2 && s[len(s)-2:] == "0m" {
			s = s[:len(s)-2]
		}
	}
	return s
}

// unload removes v from every worker (best effort, bounded by ctx).
func (p *Pool) unload(ctx context.Context, v *Version) error {
	p.mu.Lock()
	if p.versions[v.key] == v {
		delete(p.versions, v.key)
	}
	var ctls []workerpb.WorkerClient
	for _, w := range p.workers {
		if w.live {
			ctls = append(ctls, w.ctl)
		}
		p.setReadyLocked(w, v.key, false)
	}
	v.on = map[string]*copyOn{}
	p.rerouteLocked(v)
	p.settleLocked(v)
	p.broadcastLocked()
	p.mu.Unlock()
	var errList []error
	drain := int64(10_000)
	if dl, ok := ctx.Deadline(); ok {
		drain = max(1, time.Until(dl).Milliseconds())
	}
	for _, c := range ctls {
		if _, err := c.Unload(ctx, &workerpb.UnloadRequest{Model: v.spec.Model, Version: int64(v.spec.N), DrainMs: drain}); err != nil {
			errList = append(errList, err)
		}
	}
	return errors.Join(errList...)
}

// WorkerInfo is one worker as the API lists it.
type WorkerInfo struct {
	ID        string
	Address   string
	PID       int64
	State     string // ready, down
	Reason    string
	RSS       int64
	CacheSize int64
	LastBeat  time.Time
	Started   time.Time
	// Budget is the memory its versions may hold (and where the figure
	// came from); MemoryUsed what they hold as placement counts it.
	Budget       int64
	BudgetSource string
	MemoryUsed   int64
	// Loads and Evictions count loads onto and evictions from this worker
	// since the gateway started.
	Loads, Evictions int64
	Versions         []WorkerVersion
}

// WorkerVersion is one version on a worker.
type WorkerVersion struct {
	ID                 string
	Tier               string
	State              string
	Reason             string
	ReadyReplicas      int
	RestartingReplicas int
	QueuedInstances    int64
	InflightBatches    int
	Batches, Rows      int64
	Crashes            int64
	Memory             int64
	MemoryMeasured     bool
	LastUsed           time.Time
	LoadTime           time.Duration
	Loads, Evictions   int64
}

// Workers lists the registered workers by id.
func (p *Pool) Workers() []WorkerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]WorkerInfo, 0, len(p.workers))
	for _, w := range p.workers {
		wi := WorkerInfo{ID: w.id, Address: w.addr, PID: w.pid, State: "ready", LastBeat: w.lastBeat}
		if !w.live {
			wi.State, wi.Reason = "down", w.why
		}
		for _, n := range w.loads {
			wi.Loads += n
		}
		for _, n := range w.evictions {
			wi.Evictions += n
		}
		if st := w.status; st != nil {
			wi.RSS, wi.CacheSize = st.RssBytes, st.CacheBytes
			if st.StartedUnixMs > 0 {
				wi.Started = time.UnixMilli(st.StartedUnixMs)
			}
			wi.Budget, wi.BudgetSource = w.budget, w.budgetSource
			wi.MemoryUsed, _ = p.heldLocked(w, nil, p.now())
			for _, vs := range st.Versions {
				k := key(vs.Model, vs.Version)
				wv := WorkerVersion{ID: k, State: vs.State, Reason: vs.Reason,
					ReadyReplicas: int(vs.ReadyReplicas), RestartingReplicas: int(vs.RestartingReplicas), QueuedInstances: vs.QueuedInstances,
					InflightBatches: int(vs.InflightBatches), Batches: vs.Batches, Rows: vs.Rows, Crashes: vs.Crashes,
					Memory: vs.MemoryBytes, MemoryMeasured: vs.MemoryMeasured, Loads: w.loads[k], Evictions: w.evictions[k]}
				if v := p.versions[k]; v != nil {
					wv.Tier = v.tier
					if cp := v.on[w.id]; cp != nil {
						wv.LoadTime = cp.loadTime
						if ns := cp.lastUsed.Load(); ns > 0 {
							wv.LastUsed = time.Unix(0, ns)
						}
					}
				}
				wi.Versions = append(wi.Versions, wv)
			}
		}
		out = append(out, wi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
