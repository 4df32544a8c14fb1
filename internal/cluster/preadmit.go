package cluster

import (
	"math"
	"time"

	"github.com/sluiceml/sluice/internal/serving"
)

// servingState is what a worker's last heartbeat said of one version's
// server there.
type servingState struct {
	cost     serving.CostModel
	maxBatch int
	replicas int
}

// preAdmit is the deadline check of admission, made at the gateway from
// a worker's last report (its queued instances, or this gateway's own
// instances in flight there when more, its cost model, batch bound and
// ready replicas) before the hop: a request that cannot be answered
// in time there is refused here, at once, instead of after a round trip
// to a worker whose process may be busy computing (or run at a lower
// priority, --worker-nice). It decides only deadline_infeasible; the
// queue bound and everything else stay the worker's, which checks again
// with its live figures. A worker that has not reported a fitted cost
// model (or any replica) is never refused here. The report is up to a
// heartbeat old (250 ms): under a queue that just drained, a request may
// be refused that the worker would have taken, for at most that long.
func preAdmit(c candidate, instances int, maxBatchDelay, remaining time.Duration) error {
	if remaining <= 0 || c.state.replicas <= 0 || (c.state.cost.A <= 0 && c.state.cost.B <= 0) {
		return nil
	}
	return serving.Admit(serving.AdmitInput{
		Ready: true, Instances: instances, QueuedInstances: int(c.queued), MaxQueue: math.MaxInt32,
		MaxBatch: c.state.maxBatch, MaxBatchDelay: maxBatchDelay, Replicas: c.state.replicas,
		Remaining: remaining, Cost: c.state.cost, Headroom: serving.Headroom, CheckFeasibility: true,
	})
}
