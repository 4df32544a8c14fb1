package autoscale

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/serving"
)

// Sample is one version's figures as the source sees them now. Counters
// are cumulative (the loop takes the differences; a counter that went
// backwards — a restarted worker — counts from zero again).
type Sample struct {
	Arrived int64 // instances that arrived, admitted or refused
	Refused int64 // instances refused at admission
	Missed  int64 // instances whose deadline passed in the queue or in flight
	Queued  int   // instances queued now
	// Replicas is the count the version has now (ready and loading, not
	// draining): the loop's starting point for a version it has not seen.
	Replicas   int
	PerReplica float64           // measured instances/s of one replica at the SLO; 0: from Cost
	Cost       serving.CostModel // learned cost model
	ColdStart  time.Duration     // measured load + golden + warmup
	Budget     int               // most replicas the workers' memory can hold for it; 0: no cap
}

// Observation is one autoscaled version: its settings and its sample.
type Observation struct {
	Version string // "fraud@3"
	Config  Config
	Sample  Sample
}

// Source gives the loop what it looks at, once a tick. Versions missing
// from its answer are forgotten (their state starts over if they return).
type Source interface {
	Observe(ctx context.Context) ([]Observation, error)
}

// Actuator makes a replica count happen: it starts the replicas to add
// (taking traffic only when ready) or drains the ones to remove, and
// returns once the change is under way. It must be idempotent: the loop
// asks again after an error.
type Actuator interface {
	SetReplicas(ctx context.Context, version string, n int) error
}

// LoopConfig configures a Loop.
type LoopConfig struct {
	Tick        time.Duration // how often to decide (default 1s)
	CallTimeout time.Duration // bound of one SetReplicas call (default 10s)
	// MaxBackoff bounds the wait between attempts after SetReplicas
	// failures: the first retry is on the next tick, then the wait doubles
	// up to this (default 30s).
	MaxBackoff time.Duration
	Logger     *slog.Logger
	// OnDecision, when set, is told each version's decision every tick
	// (for metrics: desired vs applied). It must not block.
	OnDecision func(version string, d Decision, applied int)
}

// Status is one version's last decision as the loop holds it.
type Status struct {
	Decision Decision
	Applied  int    // the count the actuator last accepted
	Failures int    // consecutive SetReplicas failures
	LastErr  string // the last failure's message, "" after a success
}

// Loop runs the policy for every version the source reports, every tick,
// and asks the actuator for the count when it differs from what it last
// applied. Only Run's goroutine touches the per-version state; Status
// reads a copy under mu.
type Loop struct {
	src Source
	act Actuator
	cfg LoopConfig
	log *slog.Logger

	vs map[string]*versionState // owned by Run

	mu     sync.Mutex
	status map[string]Status // guarded by mu
}

type versionState struct {
	policy  State
	last    Sample // previous sample, for the counters' differences
	applied int
	fails   int
	retryAt time.Time
	lastErr string
}

// NewLoop returns a Loop; Run starts it.
func NewLoop(src Source, act Actuator, cfg LoopConfig) *Loop {
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Loop{src: src, act: act, cfg: cfg, log: log, vs: map[string]*versionState{}, status: map[string]Status{}}
}

// Run decides once at once, then every tick, until ctx ends; it returns
// ctx's error. Run must not be called twice at once.
func (l *Loop) Run(ctx context.Context) error {
	t := time.NewTicker(l.cfg.Tick)
	defer t.Stop()
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.Step(ctx, time.Now())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Status returns a copy of every version's last decision.
func (l *Loop) Status() map[string]Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]Status, len(l.status))
	for k, v := range l.status {
		out[k] = v
	}
	return out
}

// delta is how much a cumulative counter grew; one that went backwards
// (its source restarted) counts from zero.
func delta(cur, last int64) int64 {
	if cur < last {
		return cur
	}
	return cur - last
}

// Step is one tick: observe, decide, actuate. Run calls it; it is exported
// for callers that drive the loop themselves. It must not be called while
// Run runs.
func (l *Loop) Step(ctx context.Context, now time.Time) {
	obs, err := l.src.Observe(ctx)
	if err != nil {
		l.log.Warn("autoscale: observe failed; holding every count", "err", err)
		return
	}
	seen := make(map[string]bool, len(obs))
	status := make(map[string]Status, len(obs))
	for _, o := range obs {
		seen[o.Version] = true
		v := l.vs[o.Version]
		if v == nil {
			v = &versionState{last: o.Sample, applied: o.Sample.Replicas}
			l.vs[o.Version] = v
		}
		s := o.Sample
		sig := Signals{Now: now,
			Arrived: delta(s.Arrived, v.last.Arrived), Refused: delta(s.Refused, v.last.Refused), Missed: delta(s.Missed, v.last.Missed),
			Queued: s.Queued, Replicas: s.Replicas, PerReplica: s.PerReplica, Cost: s.Cost, ColdStart: s.ColdStart, Budget: s.Budget}
		v.last = s
		d, st := Desired(o.Config, sig, v.policy)
		v.policy = st
		if d.Replicas != v.applied && !now.Before(v.retryAt) {
			l.apply(ctx, now, o.Version, v, d)
		}
		if l.cfg.OnDecision != nil {
			l.cfg.OnDecision(o.Version, d, v.applied)
		}
		status[o.Version] = Status{Decision: d, Applied: v.applied, Failures: v.fails, LastErr: v.lastErr}
	}
	for k := range l.vs {
		if !seen[k] {
			delete(l.vs, k)
		}
	}
	l.mu.Lock()
	l.status = status
	l.mu.Unlock()
}

func (l *Loop) apply(ctx context.Context, now time.Time, version string, v *versionState, d Decision) {
	cctx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
	err := l.act.SetReplicas(cctx, version, d.Replicas)
	cancel()
	if err != nil {
		v.fails++
		v.lastErr = err.Error()
		wait := min(l.cfg.Tick<<min(v.fails-1, 16), l.cfg.MaxBackoff)
		v.retryAt = now.Add(wait)
		l.log.Warn("autoscale: set replicas failed", "version", version, "replicas", d.Replicas, "applied", v.applied, "failures", v.fails, "retry_in", wait, "err", err)
		return
	}
	l.log.Info("autoscale: replicas set", "version", version, "replicas", d.Replicas, "from", v.applied, "reason", d.Reason)
	v.applied, v.fails, v.lastErr, v.retryAt = d.Replicas, 0, "", time.Time{}
}
