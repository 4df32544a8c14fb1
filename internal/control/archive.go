package control

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/registry"
)

// DefaultDeleteQuiet is how long a model must have answered no predict
// call before it may be deleted (Config.DeleteQuiet).
const DefaultDeleteQuiet = 5 * time.Minute

// unloadTimeout bounds how long archiving waits for a version's queue to
// drain before its replicas are closed.
const unloadTimeout = 30 * time.Second

// archiveRefusal says why model@n may not be archived now, or "" if it may.
// It is pure: targets is the model's policy in force, r its latest rollout
// (nil if none). A version is held when it takes a share of the traffic or
// shadow copies, when it is the candidate or baseline of an active rollout,
// or when it is the baseline of a promoted rollout inside the plan's
// keepWarm window after promotion (the rollback target: `sluice rollback`
// sends traffic back to it at once because it is still loaded).
func archiveRefusal(model string, n int, targets []registry.Target, r *Rollout, now time.Time) string {
	id := key(model, n)
	for _, t := range targets {
		switch {
		case t.Version != n:
		case t.Shadow:
			return fmt.Sprintf("%s is a shadow target of %s's deployment; remove it first (sluice shadow %s --off)", id, model, id)
		case t.Weight > 0:
			return fmt.Sprintf("%s takes %d%% of %s's traffic; move its traffic to another version first (sluice traffic, sluice rollback)", id, t.Weight, model)
		}
	}
	if r == nil || r.Model != model {
		return ""
	}
	switch {
	case r.Phase.Active() && r.Candidate == n:
		return fmt.Sprintf("%s is the candidate of %s's rollout (%s); abort it first (sluice rollout abort %s)", id, model, r.Phase, model)
	case r.Phase.Active() && r.Baseline == n:
		return fmt.Sprintf("%s is the baseline of %s's rollout of %s@%d (%s); promote or abort the rollout first", id, model, model, r.Candidate, r.Phase)
	case r.Phase == PhasePromoted && r.Baseline == n:
		until := r.StepStart.Add(r.Plan.KeepWarm.Duration)
		if now.Before(until) {
			return fmt.Sprintf("%s is the rollback target of %s@%d, promoted at %s, until %s (release keepWarm %s); archive it after that, or roll back", id, model, r.Candidate,
				r.StepStart.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339), r.Plan.KeepWarm.Duration)
		}
	}
	return ""
}

// deleteRefusal says why model may not be deleted now, or "" if it may. It
// is pure: r is the model's latest rollout (nil if none), lastRequest when
// the controller last saw a predict call of any of its versions (the
// controller's start when it saw none), quiet how long the model must have
// been without one.
func deleteRefusal(model string, r *Rollout, lastRequest, now time.Time, quiet time.Duration) string {
	if r != nil && r.Phase.Active() {
		return fmt.Sprintf("a rollout of %s@%d is %s; abort it first (sluice rollout abort %s)", model, r.Candidate, r.Phase, model)
	}
	if quiet > 0 && now.Sub(lastRequest) < quiet {
		return fmt.Sprintf("%s had traffic %s ago (or the server started then); a model is deleted only after %s without predict calls (sluice serve --delete-quiet)",
			model, now.Sub(lastRequest).Round(time.Second), quiet)
	}
	return ""
}

// seenTraffic samples the request counters of every version and returns
// when each model was last seen answering (or the controller's start).
func (c *Controller) seenTraffic(now time.Time) map[string]time.Time {
	c.mu.Lock()
	ids := map[string][]string{}
	for _, l := range c.versions {
		ids[l.Version.Model] = append(ids[l.Version.Model], l.Version.ID())
	}
	c.mu.Unlock()
	c.tmu.Lock()
	defer c.tmu.Unlock()
	out := make(map[string]time.Time, len(ids))
	for m, vs := range ids {
		var n int64
		for _, id := range vs {
			s := c.Stats.Get(id).Snapshot()
			n += s.Requests + s.Shadow.Requests
		}
		seen, ok := c.traffic[m]
		if !ok {
			seen = trafficSeen{count: n, at: c.born}
		} else if n != seen.count {
			seen = trafficSeen{count: n, at: now}
		}
		c.traffic[m] = seen
		out[m] = seen.at
	}
	return out
}

// trafficSeen is a model's request count when it last changed.
type trafficSeen struct {
	count int64
	at    time.Time
}

// Archive unloads model@n everywhere it runs (this process or its
// workers) and records it archived: it stays listed with its record and
// never serves until loaded again (Load) or published again.
func (c *Controller) Archive(ctx context.Context, model string, n int, actor, reason string) (Status, error) {
	servers, st, err := c.archiveLocked(ctx, model, n, actor, reason)
	if err != nil {
		return st, err
	}
	c.closeAll(ctx, servers) // out of the routing snapshot already, and rmu released
	c.log.Info("version archived", "model", model, "version", n, "actor", actor, "reason", reason)
	return st, nil
}

// archiveLocked judges and records the archive under rmu (no policy may
// change meanwhile) and returns the servers to close.
func (c *Controller) archiveLocked(ctx context.Context, model string, n int, actor, reason string) ([]Hosted, Status, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.mu.Lock()
	l, ok := c.versions[key(model, n)]
	var st registry.State
	var tm registry.Timings
	if ok {
		st, tm = l.State, l.Timings
	}
	c.mu.Unlock()
	switch {
	case !ok || st == registry.Deleted:
		return nil, Status{}, errs.New(errs.NotFound, "model version %s@%d not found", model, n)
	case st == registry.Archived:
		return nil, c.statusOf(l), nil // archived already: nothing to do
	case !isDone(l):
		return nil, Status{}, errs.New(errs.AlreadyExists, "%s@%d is %s; archive it once it is ready or failed", model, n, st)
	}
	p, _ := c.Policy(model)
	if why := archiveRefusal(model, n, p.Targets, c.rollouts[model], time.Now().UTC()); why != "" {
		return nil, Status{}, errs.New(errs.AlreadyExists, "%s", why)
	}
	where := c.host.Name()
	why := "archived by " + actor
	if reason != "" {
		why += ": " + reason
	}
	if err := c.store.SetState(ctx, model, n, registry.Archived, why, tm); err != nil {
		return nil, Status{}, err
	}
	if err := c.audit(ctx, registry.Event{Model: model, Actor: actor, Action: "archive", What: fmt.Sprintf("%s@%d archived (was %s, unloaded from %s)", model, n, st, where), Reason: reason}); err != nil {
		c.log.Warn("archive: audit event not recorded", "model", model, "version", n, "err", err)
	}
	servers := c.unrouteLocked([]*Loaded{l}, registry.Archived, why)
	return servers, c.statusOf(l), nil
}

// DeleteModel archives every version of model and hides them from
// listings, and ends its deployment (a policy with no targets, in the
// history). It refuses while a rollout is active or while the model had
// predict calls in the last DeleteQuiet. The versions stay in the registry:
// publishing one again, or a new one, brings the model back.
func (c *Controller) DeleteModel(ctx context.Context, model, actor, reason string) ([]int, error) {
	nums, servers, err := c.deleteLocked(ctx, model, actor, reason)
	c.closeAll(ctx, servers) // those unrouted before any error, too
	if err != nil {
		return nil, err
	}
	c.log.Info("model deleted", "model", model, "versions", fmt.Sprint(nums), "actor", actor, "reason", reason)
	return nums, nil
}

// deleteLocked judges and records the delete under rmu and returns the
// servers to close.
func (c *Controller) deleteLocked(ctx context.Context, model, actor, reason string) ([]int, []Hosted, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.mu.Lock()
	var ls []*Loaded
	for _, l := range c.versions {
		if l.Version.Model == model && l.State != registry.Deleted {
			ls = append(ls, l)
		}
	}
	c.mu.Unlock()
	if len(ls) == 0 {
		return nil, nil, errs.New(errs.NotFound, "model %q not found", model)
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Version.N < ls[j].Version.N })
	var ns []string
	var nums []int
	for _, l := range ls {
		if !isDone(l) {
			return nil, nil, errs.New(errs.AlreadyExists, "%s is loading; delete %s once it is ready or failed", l.Version.ID(), model)
		}
		ns = append(ns, strconv.Itoa(l.Version.N))
		nums = append(nums, l.Version.N)
	}
	now := time.Now().UTC()
	last := c.seenTraffic(now)[model]
	if why := deleteRefusal(model, c.rollouts[model], last, now, c.deleteQuiet); why != "" {
		return nil, nil, errs.New(errs.AlreadyExists, "%s", why)
	}
	why := "model deleted by " + actor
	if reason != "" {
		why += ": " + reason
	}
	// The deployment ends first: from here nothing routes to the model, and
	// a version published later is its first again.
	if p, ok := c.Policy(model); ok && len(p.Targets) > 0 {
		np, err := c.store.SetPolicy(ctx, registry.Policy{Model: model, Targets: []registry.Target{}, Actor: actor, Reason: why, Diff: Diff(model, p.Targets, nil)}, -1)
		if err != nil {
			return nil, nil, err
		}
		c.mu.Lock()
		c.policies[model] = np
		c.publishLocked()
		c.mu.Unlock()
		c.policyChanged(np, false)
	}
	var servers []Hosted
	for _, l := range ls {
		c.mu.Lock()
		tm := l.Timings
		c.mu.Unlock()
		if err := c.store.SetState(ctx, model, l.Version.N, registry.Deleted, why, tm); err != nil {
			return nil, servers, fmt.Errorf("delete %s: %w (the versions before it are deleted; delete again to finish)", l.Version.ID(), err)
		}
		servers = append(servers, c.unrouteLocked([]*Loaded{l}, registry.Deleted, why)...)
	}
	if err := c.audit(ctx, registry.Event{Model: model, Actor: actor, Action: "delete", What: fmt.Sprintf("model %s deleted: versions %s archived and hidden", model, strings.Join(ns, ", ")), Reason: reason}); err != nil {
		c.log.Warn("delete: audit event not recorded", "model", model, "err", err)
	}
	return nums, servers, nil
}

// Load loads model@n again when it failed, was archived or belongs to a
// deleted model (an explicit call: startup never retries those). A version
// that is ready or loading is left as it is.
func (c *Controller) Load(ctx context.Context, model string, n int, actor, reason string) (Status, error) {
	v, err := c.store.Get(ctx, model, n)
	if err != nil {
		return Status{}, err
	}
	c.mu.Lock()
	l, ok := c.versions[v.ID()]
	var st registry.State
	if ok {
		st = l.State
	}
	c.mu.Unlock()
	if ok && (!isDone(l) || !dormant(st)) {
		return c.statusOf(l), nil
	}
	if err := c.audit(ctx, registry.Event{Model: model, Actor: actor, Action: "load", What: fmt.Sprintf("%s@%d loaded again (was %s)", model, n, st), Reason: reason}); err != nil {
		return Status{}, err
	}
	return c.statusOf(c.startLoad(v, true)), nil
}

// unrouteLocked takes versions out of the routing snapshot and records
// their new state in memory (it is in the store already); it returns their
// servers for closeAll. rmu held.
func (c *Controller) unrouteLocked(ls []*Loaded, st registry.State, reason string) []Hosted {
	var servers []Hosted
	c.mu.Lock()
	for _, l := range ls {
		l.State, l.Reason = st, reason
		if l.Server != nil {
			servers = append(servers, l.Server)
		}
		l.Server, l.Drift = nil, nil
	}
	c.publishLocked()
	close(c.wake)
	c.wake = make(chan struct{})
	c.mu.Unlock()
	for _, l := range ls {
		if c.metrics != nil {
			c.metrics.SetVersionState(l.Version.Model, strconv.Itoa(l.Version.N), string(st))
		}
		if c.unrouted != nil {
			c.unrouted(l.Version.ID())
		}
		c.changed(Change{Kind: "version", Model: l.Version.Model, Version: l.Version.N, State: st, Reason: reason})
	}
	return servers
}

// closeAll closes servers that no snapshot routes to any more, draining
// what they queued (bounded by unloadTimeout): in this process, or on every
// worker that holds them.
func (c *Controller) closeAll(ctx context.Context, servers []Hosted) {
	if len(servers) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unloadTimeout)
	defer cancel()
	for _, s := range servers {
		if err := s.Close(cctx); err != nil {
			c.log.Warn("unload: close", "err", err)
		}
	}
}

func isDone(l *Loaded) bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

func (c *Controller) statusOf(l *Loaded) Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Status{Version: l.Version, State: l.State, Reason: l.Reason, Timings: l.Timings, Spec: l.Spec}
}

// versionDeleteRefusal says why model@n may not be deleted now, or "" if it
// may: only a version that never served is deleted. It is pure: st is the
// version's state, served whether the deployment's history ever gave it
// traffic or shadow copies, requests the predict calls this server counted
// for it, r the model's latest rollout (nil if none).
func versionDeleteRefusal(model string, n int, st registry.State, served bool, requests int64, r *Rollout) string {
	id := key(model, n)
	switch {
	case st == registry.Loading:
		return fmt.Sprintf("%s is loading; delete it once it is ready or failed", id)
	case r != nil && r.Phase.Active() && (r.Candidate == n || r.Baseline == n):
		return fmt.Sprintf("%s is in %s's rollout (%s); abort it first (sluice rollout abort %s)", id, model, r.Phase, model)
	case served:
		return fmt.Sprintf("%s has served: the deployment's history gave it traffic; only a version that never served can be deleted (archive it instead: sluice archive %s)", id, id)
	case requests > 0:
		return fmt.Sprintf("%s has answered %d predict call(s); only a version that never served can be deleted (archive it instead: sluice archive %s)", id, requests, id)
	}
	return ""
}

// everTargeted reports whether any policy in model's history routes
// traffic or shadow copies to version n (read a page at a time).
func (c *Controller) everTargeted(ctx context.Context, model string, n int) (bool, error) {
	const page = 500
	after := 0
	for {
		ps, err := c.store.PolicyPage(ctx, model, after, page)
		if err != nil {
			return false, err
		}
		for _, p := range ps {
			for _, t := range p.Targets {
				if t.Version == n && (t.Weight > 0 || t.Shadow) {
					return true, nil
				}
			}
			after = p.Version
		}
		if len(ps) < page {
			return false, nil
		}
	}
}

// DeleteVersion deletes model@n, a version that never served (failed at
// load, or ready but never given traffic and never called): it is unloaded
// and hidden from listings, with an audit event. Publishing the same
// package again brings it back. Any other version is refused: archive it.
func (c *Controller) DeleteVersion(ctx context.Context, model string, n int, actor, reason string) (Status, error) {
	servers, st, err := c.deleteVersionLocked(ctx, model, n, actor, reason)
	if err != nil {
		return st, err
	}
	c.closeAll(ctx, servers)
	c.log.Info("version deleted", "model", model, "version", n, "actor", actor, "reason", reason)
	return st, nil
}

func (c *Controller) deleteVersionLocked(ctx context.Context, model string, n int, actor, reason string) ([]Hosted, Status, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.mu.Lock()
	l, ok := c.versions[key(model, n)]
	var st registry.State
	var tm registry.Timings
	if ok {
		st, tm = l.State, l.Timings
	}
	c.mu.Unlock()
	if !ok || st == registry.Deleted {
		return nil, Status{}, errs.New(errs.NotFound, "model version %s@%d not found", model, n)
	}
	if !isDone(l) {
		st = registry.Loading
	}
	served, err := c.everTargeted(ctx, model, n)
	if err != nil {
		return nil, Status{}, err
	}
	s := c.Stats.Get(l.Version.ID()).Snapshot()
	if why := versionDeleteRefusal(model, n, st, served, s.Requests+s.Shadow.Requests, c.rollouts[model]); why != "" {
		return nil, Status{}, errs.New(errs.AlreadyExists, "%s", why)
	}
	why := "deleted by " + actor
	if reason != "" {
		why += ": " + reason
	}
	if err := c.store.SetState(ctx, model, n, registry.Deleted, why, tm); err != nil {
		return nil, Status{}, err
	}
	if err := c.audit(ctx, registry.Event{Model: model, Actor: actor, Action: "delete", What: fmt.Sprintf("%s@%d deleted (was %s, never served): hidden from listings", model, n, st), Reason: reason}); err != nil {
		c.log.Warn("delete: audit event not recorded", "model", model, "version", n, "err", err)
	}
	servers := c.unrouteLocked([]*Loaded{l}, registry.Deleted, why)
	return servers, c.statusOf(l), nil
}
