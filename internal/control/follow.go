package control

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/registry"
)

// Follow keeps the controller in step with the other gateways that share
// its store (registry.Changes: PostgreSQL). Whenever the store says
// something changed, Refresh reads it again: versions published elsewhere
// are loaded here too, a newer policy (weights, rollback, a new
// deployment) is adopted and the routing snapshot rebuilt, rollouts
// driven elsewhere are shown and respected. A refresh that fails (the
// store is down) is tried again every second until one succeeds;
// meanwhile the data plane serves on the last snapshot. It runs until
// Close.
func (c *Controller) Follow(ch registry.Changes) {
	kick := make(chan struct{}, 1) // 1-slot: changes coalesce into one refresh
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.refreshKick = kick
	// Both under mu with closing false: Close's wg.Wait comes after.
	c.goLocked(func() {
		_ = ch.WatchChanges(c.ctx, func() {
			select {
			case kick <- struct{}{}:
			default:
			}
		})
	})
	c.goLocked(func() { c.follow(kick) })
}

// followRetry is how long a failed refresh waits before the next try.
const followRetry = time.Second

func (c *Controller) follow(kick chan struct{}) {
	var retry <-chan time.Time
	failing := false
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-kick:
		case <-retry:
		}
		retry = nil
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		err := c.Refresh(ctx)
		cancel()
		switch {
		case err != nil && c.ctx.Err() == nil:
			if !failing {
				c.log.Warn("store unreachable: cannot read the other gateways' changes; serving on the last routing snapshot, retrying every second", "err", err)
			}
			failing = true
			retry = time.After(followRetry)
		case err == nil && failing:
			failing = false
			c.log.Info("store back: following the other gateways' changes again")
		}
	}
}

// kickRefresh asks Follow's loop for a refresh (no-op without Follow).
func (c *Controller) kickRefresh() {
	c.mu.Lock()
	k := c.refreshKick
	c.mu.Unlock()
	if k != nil {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

// Refresh reads versions, current policies and rollouts from the store and
// adopts what other gateways changed: new versions start loading here, a
// policy newer than this controller's replaces it (the routing snapshot is
// rebuilt), and the rollouts this controller does not drive, or that
// another gateway moved to another phase, replace this controller's view.
// What this controller loads stays its own: a version's load state here
// is not taken from the store.
func (c *Controller) Refresh(ctx context.Context) error {
	vs, err := c.store.List(ctx)
	if err != nil {
		return err
	}
	cur, err := c.store.Current(ctx)
	if err != nil {
		return err
	}
	rs, err := c.store.Rollouts(ctx)
	if err != nil {
		return err
	}
	for _, v := range vs {
		c.mu.Lock()
		_, known := c.versions[v.ID()]
		c.mu.Unlock()
		if !known && v.State != registry.Deleted {
			c.log.Info("version published through another gateway: loading it", "model", v.Model, "version", v.N)
			c.startLoad(v, false)
		}
	}
	servers := c.adoptLocked(vs, cur, rs)
	c.closeAll(ctx, servers) // out of the snapshot already
	return nil
}

// adoptLocked applies what Refresh read (it takes rmu) and returns the
// servers of versions archived elsewhere, for closeAll.
func (c *Controller) adoptLocked(vs []registry.Version, cur []registry.Policy, rs map[string][]byte) []Hosted {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	// Versions archived (or whose model was deleted) through another
	// gateway leave this one's snapshot too. Only a version done loading
	// here is judged: one loading now records its own state when it ends.
	var servers []Hosted
	for _, v := range vs {
		if v.State != registry.Archived && v.State != registry.Deleted {
			continue
		}
		c.mu.Lock()
		l := c.versions[v.ID()]
		c.mu.Unlock()
		if l == nil || !isDone(l) {
			continue
		}
		c.mu.Lock()
		st := l.State
		c.mu.Unlock()
		if st == registry.Archived || st == registry.Deleted {
			continue
		}
		c.log.Info("version "+string(v.State)+" through another gateway: unloading it here", "model", v.Model, "version", v.N, "reason", v.Reason)
		servers = append(servers, c.unrouteLocked([]*Loaded{l}, v.State, v.Reason)...)
	}
	c.mu.Lock()
	changed := false
	for _, p := range cur {
		if old, ok := c.policies[p.Model]; !ok || p.Version > old.Version {
			c.policies[p.Model] = p
			changed = true
			c.policyChanged(p, true)
			c.log.Info("deployment changed through another gateway", "model", p.Model, "policy", p.Version, "change", p.Diff, "actor", p.Actor, "reason", p.Reason)
		}
	}
	if changed {
		c.publishLocked()
	}
	c.mu.Unlock()
	for m, b := range rs {
		var r Rollout
		if err := json.Unmarshal(b, &r); err != nil {
			continue
		}
		// A rollout this controller drives is its own unless another
		// gateway moved it (paused, aborted, rolled back there).
		if local := c.rollouts[m]; local == nil || !c.driving[m] || local.Phase != r.Phase || local.Candidate != r.Candidate {
			c.setRolloutLocked(&r)
		}
	}
	return servers
}

// alreadyExists reports a policy write refused because the stored policy
// version moved (another gateway wrote one).
func alreadyExists(err error) bool { return errs.CodeOf(err) == errs.AlreadyExists }
