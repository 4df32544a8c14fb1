package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/abstat"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/vstats"
)

// SystemActor names changes Sluice makes by itself.
const SystemActor = "sluice"

// Policy returns model's current policy (ok false if it has none).
func (c *Controller) Policy(model string) (registry.Policy, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.policies[model]
	return p, ok
}

// History returns model's policies, oldest first, and its audit events.
func (c *Controller) History(ctx context.Context, model string) ([]registry.Policy, []registry.Event, error) {
	ps, err := c.store.Policies(ctx, model)
	if err != nil {
		return nil, nil, err
	}
	es, err := c.store.Events(ctx, model)
	if err != nil {
		return nil, nil, err
	}
	if len(ps) == 0 && len(es) == 0 && !c.knownModel(model) {
		return nil, nil, unknownModel(model)
	}
	return ps, es, nil
}

// knownModel reports whether the registry has a version of model.
func (c *Controller) knownModel(model string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.versions {
		if l.Version.Model == model {
			return true
		}
	}
	return false
}

func unknownModel(model string) error { return errs.New(errs.NotFound, "model %q not found", model) }

// HistoryPage returns at most limit policies of model after policy version
// afterPolicy and at most limit audit events after afterEvent (an
// Event.Seq), oldest first: one page of History. The first page of a model
// with no history and no version is not_found, as History is; a later page
// may be empty.
func (c *Controller) HistoryPage(ctx context.Context, model string, afterPolicy int, afterEvent int64, limit int) ([]registry.Policy, []registry.Event, error) {
	ps, err := c.store.PolicyPage(ctx, model, afterPolicy, limit)
	if err != nil {
		return nil, nil, err
	}
	es, err := c.store.EventPage(ctx, model, afterEvent, limit)
	if err != nil {
		return nil, nil, err
	}
	if afterPolicy == 0 && afterEvent == 0 && len(ps) == 0 && len(es) == 0 && !c.knownModel(model) {
		return nil, nil, unknownModel(model)
	}
	return ps, es, nil
}

// PolicyAt returns the policy of model in force at t.
func (c *Controller) PolicyAt(ctx context.Context, model string, t time.Time) (registry.Policy, error) {
	p, err := c.store.PolicyAt(ctx, model, t)
	if errs.CodeOf(err) == errs.NotFound && !c.knownModel(model) {
		if ps, _ := c.store.PolicyPage(ctx, model, 0, 1); len(ps) == 0 {
			return registry.Policy{}, unknownModel(model)
		}
	}
	return p, err
}

// firstPolicy gives a model's first ready version 100 % when the model has
// no deployment yet.
func (c *Controller) firstPolicy(v registry.Version) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	p, ok := c.Policy(v.Model)
	if ok && len(p.Targets) > 0 {
		return // a deleted model's policy has no targets: its next version is its first
	}
	// Expect the policy version known here (0: none): when another
	// gateway sharing the store wrote the model's first policy meanwhile,
	// this one is refused and that one adopted (Refresh).
	_, err := c.setTargetsLocked(c.ctx, v.Model, []registry.Target{{Version: v.N, Weight: 100}}, SystemActor, "first ready version", p.Version)
	if alreadyExists(err) {
		c.log.Info("first deployment written by another gateway meanwhile; adopting it", "model", v.Model)
		c.kickRefresh()
		return
	}
	if err != nil {
		c.log.Warn("first deployment not recorded; will retry", "model", v.Model, "version", v.N, "err", err)
	}
}

// retryPolicies writes first policies that could not be written while the
// store was down.
func (c *Controller) retryPolicies() {
	c.mu.Lock()
	var todo []registry.Version
	for _, l := range c.versions {
		if p, ok := c.policies[l.Version.Model]; (!ok || len(p.Targets) == 0) && l.State == registry.Ready {
			todo = append(todo, l.Version)
		}
	}
	c.mu.Unlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].N < todo[j].N })
	for _, v := range todo {
		c.firstPolicy(v)
	}
}

// SetTargets makes targets model's new policy. expect >= 0 guards against
// concurrent changes (the policy version the caller read).
func (c *Controller) SetTargets(ctx context.Context, model string, targets []registry.Target, actor, reason string, expect int) (registry.Policy, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if r := c.rollouts[model]; r != nil && r.Phase.Active() {
		return registry.Policy{}, errs.New(errs.AlreadyExists, "a rollout of %s@%d is %s; abort it (sluice rollout abort %s) or promote it before setting traffic by hand", model, r.Candidate, r.Phase, model)
	}
	return c.setTargetsLocked(ctx, model, targets, actor, reason, expect)
}

// checkTargets validates a policy: known, ready versions; weights summing
// to 100 over primaries; no version twice.
func (c *Controller) checkTargets(model string, targets []registry.Target) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(targets) == 0 {
		return errs.Field(errs.InvalidArgument, "targets", "at least one target is required")
	}
	sum, seen := 0, map[int]bool{}
	for i, t := range targets {
		f := fmt.Sprintf("targets[%d]", i)
		if seen[t.Version] {
			return errs.Field(errs.InvalidArgument, f+".version", "%s@%d appears twice", model, t.Version)
		}
		seen[t.Version] = true
		l, ok := c.versions[key(model, t.Version)]
		if !ok {
			return errs.Field(errs.NotFound, f+".version", "%s@%d does not exist", model, t.Version)
		}
		if l.State != registry.Ready {
			why := string(l.State)
			if l.Reason != "" {
				why += ": " + l.Reason
			}
			return errs.Field(errs.NotReady, f+".version", "%s@%d is not ready (%s); only ready versions take traffic", model, t.Version, why)
		}
		switch {
		case t.Shadow && t.Weight != 0:
			return errs.Field(errs.InvalidArgument, f+".weight", "a shadow target takes copies and no weight, got %d", t.Weight)
		case !t.Shadow && (t.Weight < 0 || t.Weight > 100):
			return errs.Field(errs.InvalidArgument, f+".weight", "must be a percent between 0 and 100, got %d", t.Weight)
		}
		sum += t.Weight
	}
	if sum != 100 {
		return errs.Field(errs.InvalidArgument, "targets", "weights of the non-shadow targets must sum to 100, got %d", sum)
	}
	return nil
}

func (c *Controller) setTargetsLocked(ctx context.Context, model string, targets []registry.Target, actor, reason string, expect int) (registry.Policy, error) {
	if err := c.checkTargets(model, targets); err != nil {
		return registry.Policy{}, err
	}
	sorted := append([]registry.Target(nil), targets...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Version < sorted[j].Version })
	old, _ := c.Policy(model)
	p, err := c.store.SetPolicy(ctx, registry.Policy{Model: model, Targets: sorted, Actor: actor, Reason: reason, Diff: Diff(model, old.Targets, sorted)}, expect)
	if err != nil {
		return registry.Policy{}, err
	}
	c.mu.Lock()
	c.policies[model] = p
	c.publishLocked()
	c.mu.Unlock()
	c.policyChanged(p, false)
	c.log.Info("deployment changed", "model", model, "policy", p.Version, "change", p.Diff, "actor", actor, "reason", reason)
	return p, nil
}

// Diff describes a policy change: "fraud@17 100→90, fraud@18 0→10".
func Diff(model string, old, new []registry.Target) string {
	type w struct {
		weight int
		shadow bool
	}
	o, n := map[int]w{}, map[int]w{}
	var vs []int
	for _, t := range old {
		o[t.Version] = w{t.Weight, t.Shadow}
		vs = append(vs, t.Version)
	}
	for _, t := range new {
		if _, ok := o[t.Version]; !ok {
			vs = append(vs, t.Version)
		}
		n[t.Version] = w{t.Weight, t.Shadow}
	}
	sort.Ints(vs)
	var parts []string
	for _, v := range vs {
		a, b := o[v], n[v]
		id := fmt.Sprintf("%s@%d", model, v)
		switch {
		case a == b:
		case b.shadow && !a.shadow:
			parts = append(parts, fmt.Sprintf("%s %d→shadow", id, a.weight))
		case a.shadow && !b.shadow:
			parts = append(parts, fmt.Sprintf("%s shadow→%d", id, b.weight))
		default:
			parts = append(parts, fmt.Sprintf("%s %d→%d", id, a.weight, b.weight))
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

// RolloutStatus returns model's latest rollout (nil if none). It reads a
// copy, so it never waits behind a rollout step that is writing the store.
func (c *Controller) RolloutStatus(model string) *Rollout {
	if v, ok := c.rolloutView.Load(model); ok {
		cp := *v.(*Rollout)
		return &cp
	}
	return nil
}

// setRolloutLocked records r as its model's rollout (rmu held).
func (c *Controller) setRolloutLocked(r *Rollout) {
	c.rollouts[r.Model] = r
	cp := *r
	c.rolloutView.Store(r.Model, &cp)
	ev := cp
	c.changed(Change{Kind: "rollout", Model: r.Model, Rollout: &ev})
}

// Deploy starts a rollout of model@version with plan (nil: the package's
// release plan, else immediate).
func (c *Controller) Deploy(ctx context.Context, model string, version int, plan *modelpkg.Release, actor, reason string) (*Rollout, error) {
	c.mu.Lock()
	l, ok := c.versions[key(model, version)]
	c.mu.Unlock()
	if !ok {
		return nil, errs.New(errs.NotFound, "model version %s@%d not found (push it first)", model, version)
	}
	c.mu.Lock()
	st := l.State
	c.mu.Unlock()
	if st == registry.Archived || st == registry.Deleted {
		return nil, errs.New(errs.NotReady, "%s@%d is %s; load it first (sluice load %s@%d)", model, version, st, model, version)
	}
	if plan == nil {
		if spec, err := modelpkg.Parse(l.Version.ID()+"/model.yaml", l.Version.Manifest); err == nil && spec.Manifest.Release != nil {
			plan = spec.Manifest.Release
		} else {
			im := modelpkg.Immediate()
			plan = &im
		}
	}
	pl := *plan
	if probs := pl.Check("plan"); len(probs) > 0 {
		return nil, errs.Field(errs.InvalidArgument, probs[0].Path, "%s", probs[0].Message)
	}
	pl.Defaults()

	c.rmu.Lock()
	defer c.rmu.Unlock()
	if r := c.rollouts[model]; r != nil && r.Phase.Active() {
		return nil, errs.New(errs.AlreadyExists, "a rollout of %s@%d is already %s; abort it first", model, r.Candidate, r.Phase)
	}
	baseline := c.Table.Load().Serving(model)
	if p, ok := c.Policy(model); ok && baseline == 0 {
		baseline = largest(p.Targets)
	}
	if baseline == version {
		return nil, errs.New(errs.AlreadyExists, "%s@%d already takes most of the traffic", model, version)
	}
	now := time.Now().UTC()
	r := &Rollout{Model: model, Candidate: version, Baseline: baseline, Plan: pl, Phase: PhaseWaiting, Started: now, StepStart: now, Actor: actor}
	if baseline == 0 {
		// Nothing serves yet: the candidate simply becomes the first version.
		r.Plan.Steps, r.Plan.Shadow = []int{100}, nil
	}
	if err := c.saveRolloutLocked(ctx, r, fmt.Sprintf("rollout of %s@%d started (baseline %s@%d, steps %v)", model, version, model, baseline, pl.Steps), actor, reason); err != nil {
		return nil, err
	}
	c.setRolloutLocked(r)
	c.startDriverLocked(model)
	cp := *r
	return &cp, nil
}

func largest(ts []registry.Target) int {
	best, n := -1, 0
	for _, t := range ts {
		if !t.Shadow && t.Weight > best {
			best, n = t.Weight, t.Version
		}
	}
	return n
}

func (c *Controller) saveRolloutLocked(ctx context.Context, r *Rollout, event, actor, reason string) error {
	b, _ := json.Marshal(r)
	if err := c.store.SaveRollout(ctx, r.Model, b); err != nil {
		return err
	}
	if event != "" {
		if err := c.audit(ctx, registry.Event{Model: r.Model, Actor: actor, Action: "rollout", What: event, Reason: reason}); err != nil {
			return err
		}
	}
	return nil
}

// Act applies a manual rollout action (pause, resume, abort, promote).
func (c *Controller) Act(ctx context.Context, model, action, actor, reason string) (*Rollout, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	cur := c.rollouts[model]
	if cur == nil {
		return nil, errs.New(errs.NotFound, "model %s has no rollout", model)
	}
	next, d, err := Act(*cur, action, time.Now().UTC())
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, nil, "%v", err)
	}
	if err := c.applyLocked(ctx, &next, d, actor, reason); err != nil {
		return nil, err
	}
	if next.Phase.Active() && next.Phase != PhasePaused {
		c.startDriverLocked(model)
	}
	cp := next
	return &cp, nil
}

// applyLocked makes a transition durable: policy change first, then the
// rollout state. If the store refuses, nothing changes in memory.
func (c *Controller) applyLocked(ctx context.Context, next *Rollout, d Decision, actor, reason string) error {
	if d.Targets != nil {
		why := d.Event
		if reason != "" {
			why = reason + " (" + d.Event + ")"
		}
		if _, err := c.setTargetsLocked(ctx, next.Model, d.Targets, actor, why, -1); err != nil {
			return err
		}
	}
	if err := c.saveRolloutLocked(ctx, next, d.Event, actor, reason); err != nil {
		return err
	}
	c.setRolloutLocked(next)
	return nil
}

// Rollback sends 100 % of model's traffic to to (0: the baseline: the
// active rollout's, or the last version that held 100 % before the current
// one) as a new policy. The version is loaded already, so it takes effect
// when the snapshot is swapped.
func (c *Controller) Rollback(ctx context.Context, model string, to int, actor, reason string) (registry.Policy, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	r := c.rollouts[model]
	if to == 0 {
		if r != nil && (r.Phase.Active() || r.Phase == PhasePromoted) && r.Baseline != 0 {
			to = r.Baseline
		} else {
			var err error
			if to, err = c.lastFull(ctx, model); err != nil {
				return registry.Policy{}, err
			}
		}
	}
	p, err := c.setTargetsLocked(ctx, model, []registry.Target{{Version: to, Weight: 100}}, actor, rollbackReason+reason, -1)
	if err != nil {
		return p, err
	}
	if r != nil && (r.Phase.Active() || (r.Phase == PhasePromoted && to == r.Baseline)) {
		next := *r
		next.Phase, next.Reason = PhaseRolledBack, "rolled back by hand"
		if err := c.saveRolloutLocked(ctx, &next, fmt.Sprintf("%s@%d rolled back by hand to %s@%d", model, r.Candidate, model, to), actor, reason); err != nil {
			c.log.Warn("record rollout rollback", "model", model, "err", err)
		}
		c.setRolloutLocked(&next)
	}
	return p, nil
}

// lastFull finds the last version that held 100 % before the current one.
func (c *Controller) lastFull(ctx context.Context, model string) (int, error) {
	ps, err := c.store.Policies(ctx, model)
	if err != nil {
		return 0, err
	}
	return rollbackTarget(model, ps)
}

// rollbackReason starts the reason of every policy Rollback writes.
const rollbackReason = "rollback: "

// rollbackTarget is where a plain rollback (no --to) sends the traffic,
// given model's policy history (oldest first): the last version that held
// 100 % before the current one. When the current version got 100 % from a
// rollback by hand, there is nothing to roll back to: a second rollback
// would only undo the first, so going further back needs --to.
func rollbackTarget(model string, ps []registry.Policy) (int, error) {
	if len(ps) == 0 {
		return 0, errs.New(errs.NotFound, "model %s has no deployment", model)
	}
	full := func(p registry.Policy) int {
		for _, t := range p.Targets {
			if !t.Shadow && t.Weight == 100 {
				return t.Version
			}
		}
		return 0
	}
	cur := full(ps[len(ps)-1])
	j := len(ps) - 1 // the policy that gave cur all the traffic
	for cur != 0 && j > 0 && full(ps[j-1]) == cur {
		j--
	}
	if cur != 0 && j > 0 && strings.HasPrefix(ps[j].Reason, rollbackReason) {
		from := largest(ps[j-1].Targets)
		return 0, errs.New(errs.NotFound, "%s@%d already took all the traffic back from %s@%d by a rollback (policy v%d); nothing to roll back to: name a version to go further back (sluice rollback %s --to N)", model, cur, model, from, ps[j].Version, model)
	}
	for i := len(ps) - 2; i >= 0; i-- {
		if v := full(ps[i]); v != 0 && v != cur {
			return v, nil
		}
	}
	return 0, errs.New(errs.NotFound, "no earlier version of %s held 100%% of the traffic; name one with --to", model)
}

// restoreRollouts loads rollout states; one that was active when the server
// stopped is paused, to be resumed by hand.
func (c *Controller) restoreRollouts(ctx context.Context) error {
	rs, err := c.store.Rollouts(ctx)
	if err != nil {
		return err
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for m, b := range rs {
		var r Rollout
		if err := json.Unmarshal(b, &r); err != nil {
			c.log.Warn("unreadable rollout state", "model", m, "err", err)
			continue
		}
		if r.Phase.Active() && r.Phase != PhasePaused {
			r.PausedFrom, r.Phase, r.Reason = r.Phase, PhasePaused, "server restarted mid-rollout; check and run `sluice rollout resume "+m+"`"
		}
		c.setRolloutLocked(&r)
	}
	return nil
}

// startDriverLocked runs the rollout of model until it is no longer
// active, unless a driver of model runs already (rmu held): a rollout
// resumed before its driver saw the pause keeps that one driver.
func (c *Controller) startDriverLocked(model string) {
	if c.driving[model] {
		return
	}
	if c.driving == nil {
		c.driving = map[string]bool{}
	}
	c.driving[model] = true // before drive runs: it clears it (under rmu) when done
	if !c.goUnlessClosing(func() { c.drive(model) }) {
		delete(c.driving, model)
	}
}

// drive evaluates the rollout on every version state change and every tick
// (bake times and gate windows are time-based). One driver per rollout: it
// stops when the rollout is no longer moving by itself.
func (c *Controller) drive(model string) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var stepStart time.Time
	var base Window
	var og outcomeGauge
	for {
		og.refresh(c, model)
		c.rmu.Lock()
		r := c.rollouts[model]
		if r == nil || !r.Phase.Active() || r.Phase == PhasePaused {
			delete(c.driving, model) // under rmu: the next start sees it
			c.rmu.Unlock()
			return
		}
		cand := c.Stats.Get(key(model, r.Candidate))
		basev := c.Stats.Get(key(model, r.Baseline))
		if !r.StepStart.Equal(stepStart) {
			stepStart = r.StepStart
			base = Window{Candidate: cand.Snapshot(), Baseline: basev.Snapshot()}
		}
		c.mu.Lock()
		var st registry.State = registry.Loading
		var why string
		if l := c.versions[key(model, r.Candidate)]; l != nil {
			st, why = l.State, l.Reason
		}
		wake := c.wake
		c.mu.Unlock()
		in := Input{Now: time.Now().UTC(), CandidateState: st, CandidateReason: why,
			Window: Window{Candidate: cand.Snapshot().Sub(base.Candidate), Baseline: basev.Snapshot().Sub(base.Baseline)}, Outcome: og.result(r)}
		next, d := Advance(*r, in)
		if d.Targets != nil || d.Event != "" {
			if err := c.applyLocked(c.ctx, &next, d, SystemActor, ""); err != nil {
				c.log.Warn("rollout step not recorded; will retry", "model", model, "err", err)
			} else {
				c.log.Info("rollout", "model", model, "event", d.Event)
			}
		} else {
			c.setRolloutLocked(&next) // gate observations only
		}
		c.rmu.Unlock()
		select {
		case <-c.ctx.Done():
			c.rmu.Lock()
			delete(c.driving, model)
			c.rmu.Unlock()
			return
		case <-wake:
		case <-tick.C:
		}
	}
}

// ReleaseChanged rolls out the versions that a scan of the models folder
// created for models that already have a deployment, when their package
// declares a release: plan, with that plan. Without a plan a new version
// moves no traffic, like any publish (a new model's first ready version
// gets 100 % by itself).
// One release that cannot start (a rollout already active, say) does not
// stop the others: the error joins every failure.
func (c *Controller) ReleaseChanged(ctx context.Context, pubs []Published) error {
	var fails []error
	for _, p := range pubs {
		if !p.Created || !p.HadPolicy || p.Release == nil {
			continue
		}
		if _, err := c.Deploy(ctx, p.Version.Model, p.Version.N, p.Release, SystemActor, "package changed in the models folder"); err != nil {
			fails = append(fails, fmt.Errorf("release %s: %w", p.Version.ID(), err))
		}
	}
	return errors.Join(fails...)
}

// ShadowFigures returns the shadow comparison figures of model@n.
func (c *Controller) ShadowFigures(model string, n int) vstats.Snapshot {
	return c.Stats.Get(key(model, n)).Snapshot()
}

// outcomeGauge is a rollout driver's view of its outcome gate: the
// comparison of candidate and baseline on gates.metric, read at most
// once a second through Config.Outcomes, outside the driver's locks.
type outcomeGauge struct {
	last      time.Time
	key       string // the rollout it was read for (model, candidate, start)
	res       *abstat.Result
	prevP     float64
	errLogged bool
}

func (g *outcomeGauge) refresh(c *Controller, model string) {
	if c.outcomes == nil || time.Since(g.last) < time.Second {
		return
	}
	c.rmu.Lock()
	r := c.rollouts[model]
	var cp Rollout
	if r != nil {
		cp = *r
	}
	c.rmu.Unlock()
	if r == nil || cp.Plan.Gates.Metric == "" || cp.Phase != PhaseCanary {
		return
	}
	g.last = time.Now()
	k := fmt.Sprintf("%d/%d", cp.Candidate, cp.Started.UnixNano())
	if k != g.key {
		g.key, g.res, g.prevP = k, nil, 1
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	res, err := c.outcomes(ctx, model, cp.Plan.Gates.Metric, cp.Plan.Gates.Direction, cp.Baseline, cp.Candidate, cp.Started, g.prevP)
	if err != nil {
		if !g.errLogged {
			c.log.Warn("rollout: outcome gate not read; it waits", "model", model, "metric", cp.Plan.Gates.Metric, "err", err)
			g.errLogged = true
		}
		return
	}
	g.errLogged = false
	g.res, g.prevP = &res, res.PValue
}

// result is the last comparison for r (nil: none yet, or another rollout's).
func (g *outcomeGauge) result(r *Rollout) *abstat.Result {
	if g.res == nil || g.key != fmt.Sprintf("%d/%d", r.Candidate, r.Started.UnixNano()) {
		return nil
	}
	return g.res
}
