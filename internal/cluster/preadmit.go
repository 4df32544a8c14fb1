package cluster

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
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
// ready replicas) and the version's hop slack before the hop: a request
// that cannot be answered in time there is refused here, at once,
// instead of after a round trip to a worker whose process may be busy
// computing (or run at a lower priority, --worker-nice). It decides only
// deadline_infeasible; the queue bound and everything else stay the
// worker's, which checks again with its live figures. A worker that has
// not reported a fitted cost model (or any replica) is never refused
// here. The report is up to a heartbeat old (250 ms): under a queue that
// just drained, a request may be refused that the worker would have
// taken, for at most that long.
//
// slack is how much later than estimated the version's calls to workers
// have recently answered (hopSlack): the round trip, the worker's
// process waiting for a CPU, the gateway's waiting to read the answer —
// none of which the worker's cost model or its own slack sees, since
// they measure only the time inside its server. Without it a busy
// machine let requests in that then expired (504 deadline_exceeded or
// expired_in_queue) instead of refusing them up front (503).
func preAdmit(c candidate, instances int, maxBatchDelay, remaining, slack time.Duration) error {
	if remaining <= 0 || c.state.replicas <= 0 || (c.state.cost.A <= 0 && c.state.cost.B <= 0) {
		return nil
	}
	in := preAdmitInput(c, instances, maxBatchDelay)
	in.Remaining, in.Slack = remaining, slack
	return serving.Admit(in)
}

func preAdmitInput(c candidate, instances int, maxBatchDelay time.Duration) serving.AdmitInput {
	return serving.AdmitInput{
		Ready: true, Instances: instances, QueuedInstances: int(c.queued), MaxQueue: math.MaxInt32,
		MaxBatch: c.state.maxBatch, MaxBatchDelay: maxBatchDelay, Replicas: c.state.replicas,
		Cost: c.state.cost, Headroom: serving.Headroom, CheckFeasibility: true,
	}
}

// hopEstimate is the time a call of n instances to c is estimated to
// take by the worker's report alone (queue and compute there, as
// preAdmit weighs it): 0 when the worker reported no fitted cost model.
func hopEstimate(c candidate, n int) time.Duration {
	if c.state.replicas <= 0 || (c.state.cost.A <= 0 && c.state.cost.B <= 0) {
		return 0
	}
	return serving.EstimateWait(int(c.queued), n, preAdmitInput(c, n, 0))
}

// hopOutcome is what one call to a worker says about the hop slack.
type hopOutcome int

const (
	hopAnswered hopOutcome = iota // the worker answered (or failed it after its queue)
	hopLate                       // the deadline passed (at the gateway or in the worker's queue)
	hopBounced                    // the worker refused it at once: a round trip with no work
	hopRefused                    // refused here by preAdmit: no call was made
	hopFailed                     // the connection failed: says nothing of the time
)

// hopOutcomeOf classifies a call's result: err and fromPeer as
// Version.call returns them, ctxErr the request context's error after it.
func hopOutcomeOf(err error, fromPeer bool, ctxErr error) hopOutcome {
	switch code := errs.CodeOf(err); {
	case err == nil:
		return hopAnswered
	case errors.Is(ctxErr, context.Canceled):
		return hopFailed // the caller went away: no deadline passed
	case code == errs.DeadlineExceeded || code == errs.ExpiredInQueue:
		return hopLate
	case fromPeer && errs.Lookup(code).Refusal != "":
		return hopBounced
	case fromPeer:
		return hopAnswered // the worker failed it: a round trip
	}
	return hopFailed
}

// hopLateness is the estimation error one call folds into the hop slack
// (serving.UpdateSlack), and whether it is folded at all: the time the
// call took beyond the report's estimate; all of it for a call the
// worker refused before queueing (it did none of the estimated work:
// counted against the estimate, every refusal there would pull the slack
// down); 0 for a refusal here, evidence of nothing late (the slack
// decays, so a burst of lateness cannot refuse everything forever, as in
// process); a failed connection is no evidence either way.
func hopLateness(o hopOutcome, elapsed, estimate time.Duration) (time.Duration, bool) {
	switch o {
	case hopAnswered, hopLate:
		return elapsed - estimate, true
	case hopBounced:
		return elapsed, true
	case hopRefused:
		return 0, true
	}
	return 0, false
}

// hopSlack is a version's slack at the gateway (see preAdmit), updated
// by every call without a lock.
type hopSlack struct{ ns atomic.Int64 }

func (s *hopSlack) get() time.Duration { return time.Duration(s.ns.Load()) }

func (s *hopSlack) observe(o hopOutcome, elapsed, estimate time.Duration) {
	err, ok := hopLateness(o, elapsed, estimate)
	if !ok {
		return
	}
	for {
		old := s.ns.Load()
		if s.ns.CompareAndSwap(old, int64(serving.UpdateSlack(time.Duration(old), err))) {
			return
		}
	}
}
