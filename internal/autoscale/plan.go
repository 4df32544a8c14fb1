package autoscale

import (
	"fmt"
	"math"
)

// PlanInput is what the capacity formula needs.
type PlanInput struct {
	Peak       float64 // instances/s to serve at peak
	PerReplica float64 // instances/s one replica serves within the SLO
	// TargetUtilisation is the share of PerReplica to plan on (0 or
	// out of (0, 1]: DefaultTargetUtilisation).
	TargetUtilisation float64
	// Workers is how many workers the version's replicas are spread over,
	// evenly; with fewer than 2 a failed worker cannot be covered.
	Workers int
}

// PlanResult is the capacity plan. Each figure includes the ones before it.
type PlanResult struct {
	TargetUtilisation float64
	// AtPeak = ceil(Peak / (PerReplica × TargetUtilisation)).
	AtPeak int
	// WithFailure is the fewest replicas that, spread evenly over Workers,
	// still leave AtPeak when the worker holding the most of them fails:
	// the least T with T − ceil(T/Workers) >= AtPeak. AtPeak when Workers < 2.
	WithFailure int
	// PerWorker = ceil(WithFailure / Workers): what each worker must hold.
	PerWorker int
	// DuringRollout = WithFailure + AtPeak: while a candidate rolls out,
	// it and the baseline are both loaded, and either must be able to take
	// all the traffic at once (a promotion to 100 %, or a rollback), so
	// the other side holds a full peak set beside the serving one.
	DuringRollout int
	// FailureCovered is false when Workers < 2: one process, a failed
	// worker is an outage whatever the count.
	FailureCovered bool
}

// Plan is the design documents' capacity formula: replicas =
// ceil(peak / (per-replica throughput × target utilisation)), plus
// headroom for one failed worker and for a rollout.
func Plan(in PlanInput) (PlanResult, error) {
	u := in.TargetUtilisation
	if u <= 0 || u > 1 {
		u = DefaultTargetUtilisation
	}
	switch {
	case !(in.Peak > 0) || math.IsInf(in.Peak, 0):
		return PlanResult{}, fmt.Errorf("peak must be > 0 instances/s, got %g", in.Peak)
	case !(in.PerReplica > 0) || math.IsInf(in.PerReplica, 0):
		return PlanResult{}, fmt.Errorf("per-replica throughput must be > 0 instances/s, got %g", in.PerReplica)
	}
	r := PlanResult{TargetUtilisation: u}
	x := in.Peak / (in.PerReplica * u)
	if x > 1e9 {
		return PlanResult{}, fmt.Errorf("peak %g instances/s over %g per replica needs more than 10^9 replicas", in.Peak, in.PerReplica)
	}
	r.AtPeak = int(math.Ceil(x - 1e-9)) // 2.0000000001 from float error is 2
	r.WithFailure, r.PerWorker = r.AtPeak, r.AtPeak
	if in.Workers >= 2 {
		r.FailureCovered = true
		w := in.Workers
		t := r.AtPeak
		for t-ceilDiv(t, w) < r.AtPeak {
			t++
		}
		r.WithFailure, r.PerWorker = t, ceilDiv(t, w)
	}
	r.DuringRollout = r.WithFailure + r.AtPeak
	return r, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
