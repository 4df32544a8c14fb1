package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/autoscale"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// The pool is the autoscaler's Source and Actuator for versions on
// workers: Observe reports what the gateway saw (instances arrived,
// refused, missed) and what the workers report (queued work, ready
// replicas, the learned cost model); SetReplicas spreads a count over the
// workers that hold the version. Only versions whose placement lets the
// count move (maxReplicas above the floor) are reported.

// floorLocked is the fewest replicas a version keeps: its minReplicas, and
// one on every worker that holds it (a worker keeps at least one; fewer
// replicas means unloading, which is placement's business).
func (p *Pool) floorLocked(v *Version, holders int) int {
	return max(v.spec.Spec.Manifest.Placement.Min(), holders, 1)
}

// holdersLocked lists the live workers holding v ready, by id.
func (p *Pool) holdersLocked(v *Version) []*worker {
	var out []*worker
	for _, w := range p.workers {
		if w.live && w.ready[v.key] {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// MaxAutoscaled bounds the replicas one worker's free memory can add to a
// version's budget in one observation.
const MaxAutoscaled = 64

// Observe implements autoscale.Source.
func (p *Pool) Observe(context.Context) ([]autoscale.Observation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []autoscale.Observation
	for _, v := range p.versions {
		pl := v.spec.Spec.Manifest.Placement
		holders := p.holdersLocked(v)
		floor := p.floorLocked(v, len(holders))
		if len(holders) == 0 || pl.MaxReplicas <= floor {
			continue // nothing to scale
		}
		sv := v.spec.Spec.Manifest.Serving
		smp := autoscale.Sample{Arrived: v.arrived.Load(), Refused: v.refused.Load(), Missed: v.missed.Load(),
			ColdStart: v.timing.Load + v.timing.Golden + v.timing.Warmup}
		for _, w := range holders {
			for _, vs := range w.status.GetVersions() {
				if key(vs.Model, vs.Version) != v.key {
					continue
				}
				smp.Queued += int(vs.QueuedInstances)
				smp.Replicas += int(vs.ReadyReplicas)
				// A fixed-cost model (maxBatchSize 1, or no per-instance
				// cost) is fitted with B = 0: its A alone is the figure.
				if c := (serving.CostModel{A: time.Duration(vs.CostANs), B: time.Duration(vs.CostBNs)}); c.A+c.B > 0 && smp.Cost.A+smp.Cost.B == 0 {
					smp.Cost = c
				}
			}
		}
		// The workers' budgets cap the count: what the holders run now plus
		// the replicas their free memory can still take.
		per := max(p.replicaMemoryLocked(v), 1)
		smp.Budget = smp.Replicas
		for _, w := range holders {
			used, _ := p.heldLocked(w, nil, p.now())
			if free := budgetOf(w) - used; free > 0 {
				smp.Budget += int(min(free/per, int64(MaxAutoscaled)))
			}
		}
		out = append(out, autoscale.Observation{Version: v.key, Sample: smp, Config: autoscale.Config{
			MinReplicas: floor, MaxReplicas: pl.MaxReplicas, SLO: sv.DefaultDeadline.Duration, MaxBatch: sv.MaxBatchSize}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Spread splits n replicas over h workers, the first ones taking the
// remainder, each at least one.
func Spread(n, h int) []int {
	if h <= 0 {
		return nil
	}
	out := make([]int, h)
	for i := range out {
		out[i] = max(1, n/h)
		if i < n%h && n >= h {
			out[i]++
		}
	}
	return out
}

// SetReplicas implements autoscale.Actuator: it spreads n over the workers
// holding the version and asks each for its share. New replicas take work
// only once loaded and checked (the worker adds them then); removed ones
// finish their batch first.
func (p *Pool) SetReplicas(ctx context.Context, version string, n int) error {
	p.mu.Lock()
	v := p.versions[version]
	if v == nil {
		p.mu.Unlock()
		return fmt.Errorf("set replicas of %s: not placed on workers", version)
	}
	holders := p.holdersLocked(v)
	type call struct {
		ctl workerpb.WorkerClient
		id  string
		n   int
	}
	var calls []call
	for i, k := range Spread(n, len(holders)) {
		calls = append(calls, call{holders[i].ctl, holders[i].id, k})
	}
	p.mu.Unlock()
	if len(calls) == 0 {
		return fmt.Errorf("set replicas of %s: no worker holds it ready", version)
	}
	// Every holder at once: a step up costs one load time, not one per worker.
	errList := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.ctl.SetReplicas(ctx, &workerpb.SetReplicasRequest{Model: v.spec.Model, Version: int64(v.spec.N), Replicas: int32(c.n)})
			if err != nil {
				e, _ := hop.FromStatus(err)
				errList[i] = fmt.Errorf("worker %s: %s", c.id, e.Message)
				return
			}
			// The copy's memory follows its replicas, so placement and the
			// next budget see what the worker holds now.
			p.mu.Lock()
			if cp := v.on[c.id]; cp != nil {
				cp.memory = int64(resp.ReadyReplicas) * p.replicaMemoryLocked(v)
			}
			p.mu.Unlock()
		}()
	}
	wg.Wait()
	errList = slices.DeleteFunc(errList, func(err error) bool { return err == nil })
	if len(errList) == 0 {
		p.log.Info("replicas set", "version", version, "replicas", n, "workers", len(calls))
	}
	return errors.Join(errList...)
}

// Demand is what one version asks of the workers: the replicas it wants
// before the workers' memory caps them, how many workers hold a copy (its
// shard), and one replica's memory. A pool of workers that Kubernetes
// runs is sized from it (internal/kube.DesiredWorkers).
type Demand struct {
	Version       string
	Replicas      int
	Copies        int
	ReplicaMemory int64
}

// Demand lists every version's demand. desired is the autoscaler's last
// decision per version (autoscale.Loop.Status; nil: none): an autoscaled
// version wants its decided count, or more when the unclamped figure
// (Raw, bounded by maxReplicas) says the workers' budget is what holds it
// back; any other version wants its fixed replicas on each copy.
func (p *Pool) Demand(desired map[string]autoscale.Status) []Demand {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Demand
	for _, v := range p.sortedVersionsLocked() {
		if v.quarantined != "" {
			continue
		}
		d := Demand{Version: v.key, Copies: v.want, ReplicaMemory: p.replicaMemoryLocked(v)}
		if v.want > 0 {
			d.Replicas = p.replicasPerWorkerLocked(v) * v.want
		}
		if st, ok := desired[v.key]; ok {
			n := max(st.Decision.Replicas, st.Decision.Raw)
			if m := v.spec.Spec.Manifest.Placement.MaxReplicas; m > 0 {
				n = min(n, m)
			}
			d.Replicas = max(n, st.Decision.Replicas)
		}
		out = append(out, d)
	}
	return out
}
