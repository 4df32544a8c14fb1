package control

import (
	"context"
	"time"

	"github.com/sluiceml/sluice/internal/registry"
)

// RollbackWindow is how long after a rollout ends (promoted) its baseline
// stays a rollback target that placement never evicts.
const RollbackWindow = 10 * time.Minute

// RollbackTarget reports whether model@n is the baseline of a rollout that
// may still roll back to it: one in progress, or promoted less than
// RollbackWindow ago. It reads the rollouts' copy for readers only (no
// controller lock), so the cluster pool may call it under its own lock
// (cluster.Config.Protected).
func (c *Controller) RollbackTarget(model string, n int) bool {
	x, ok := c.rolloutView.Load(model)
	if !ok {
		return false
	}
	r := x.(*Rollout)
	if r.Baseline != n {
		return false
	}
	switch r.Phase {
	case PhaseWaiting, PhaseShadow, PhaseCanary, PhasePaused:
		return true
	case PhasePromoted:
		return time.Since(r.StepStart) < RollbackWindow
	}
	return false
}

// Quarantine marks model@n failed with reason (a poison version the
// cluster pool has unloaded everywhere: cluster.Config.OnQuarantine),
// takes it out of routing, whose not_ready answers then name the reason,
// and writes an audit event (actor SystemActor, action "quarantine"). It
// stays failed until it is published or loaded again by hand.
func (c *Controller) Quarantine(model string, n int, reason string) {
	c.mu.Lock()
	l := c.versions[key(model, n)]
	c.mu.Unlock()
	if l == nil {
		return
	}
	c.setState(l, registry.Failed, reason)
	c.mu.Lock()
	c.publishLocked()
	c.mu.Unlock()
	if c.unrouted != nil {
		c.unrouted(l.Version.ID())
	}
	c.log.Error("version quarantined", "model", model, "version", n, "reason", reason)
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	e := registry.Event{Model: model, At: time.Now().UTC(), Actor: SystemActor, Action: "quarantine",
		What: key(model, n) + " quarantined, unloaded from every worker and marked failed", Reason: reason}
	if err := c.audit(ctx, e); err != nil {
		c.log.Error("quarantine: audit event not written", "model", model, "version", n, "err", err)
	}
}
