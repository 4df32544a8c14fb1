package serving

import (
	"math"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

// CostModel estimates the latency of one batch of n instances as A + B·n.
type CostModel struct {
	A time.Duration // fixed cost per batch
	B time.Duration // cost per instance
}

// Batch returns the estimated latency of a batch of n instances.
func (c CostModel) Batch(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return c.A + time.Duration(n)*c.B
}

// AdmitInput is everything admission looks at. It is a plain value so the
// decision is a pure function, table-tested without goroutines or clocks.
type AdmitInput struct {
	Ready           bool
	Closing         bool
	Instances       int           // instances in this request
	QueuedInstances int           // instances already queued (all priorities ahead of it)
	MaxQueue        int           // serving.maxQueueInstances
	MaxBatch        int           // serving.maxBatchSize
	MaxBatchDelay   time.Duration // serving.maxBatchDelay
	Replicas        int           // ready replicas
	Remaining       time.Duration // time left until the request's deadline; <= 0 means no deadline
	Cost            CostModel
	// Slack is how much later than estimated requests have recently
	// finished (scheduling, GC, a busy machine): added to every estimate.
	Slack time.Duration
	// Headroom is the share of the remaining deadline kept free of
	// estimated work (0.2: admit only what is estimated to finish within
	// 80 % of it), against the estimate's own error.
	Headroom         float64
	CheckFeasibility bool // false until the cost model has been seeded
}

// Admit decides whether a request may enter the queue. It never blocks: a
// request is refused at once with a stable code and a Retry-After hint.
func Admit(in AdmitInput) error {
	switch {
	case in.Closing:
		return &errs.Error{Code: errs.ShuttingDown, Message: "the server is shutting down", RetryAfter: time.Second}
	case !in.Ready || in.Replicas <= 0:
		return &errs.Error{Code: errs.NotReady, Message: "no ready replica for this version", RetryAfter: time.Second}
	}
	if in.QueuedInstances+in.Instances > in.MaxQueue {
		wait := EstimateWait(in.QueuedInstances, in.Instances, in) + in.MaxBatchDelay
		return &errs.Error{Code: errs.QueueFull,
			Message:    "work queue is full (" + strconv.Itoa(in.QueuedInstances) + " of " + strconv.Itoa(in.MaxQueue) + " instances queued, request has " + strconv.Itoa(in.Instances) + ")",
			RetryAfter: retryAfter(wait)}
	}
	if in.CheckFeasibility && in.Remaining > 0 {
		// The batcher closes a batch early when a deadline needs it, so the
		// batch delay is not part of what must fit.
		est := EstimateWait(in.QueuedInstances, in.Instances, in) + in.Slack
		if est > in.Remaining-time.Duration(float64(in.Remaining)*in.Headroom) {
			return &errs.Error{Code: errs.DeadlineInfeasible,
				Message:    "deadline cannot be met: " + in.Remaining.Round(time.Microsecond).String() + " left, estimated queue + compute " + est.Round(time.Microsecond).String(),
				RetryAfter: retryAfter(est + in.MaxBatchDelay)}
		}
	}
	return nil
}

// EstimateWait is the estimated time until a request of n instances, behind
// queued instances, is answered: the batches ahead of it, shared by the
// ready replicas, and its own.
func EstimateWait(queued, n int, in AdmitInput) time.Duration {
	b := in.MaxBatch
	if b <= 0 {
		b = 1
	}
	r := in.Replicas
	if r <= 0 {
		r = 1
	}
	total := queued + n
	batches := (total + b - 1) / b
	// Work ahead is spread across replicas; this request's own last batch
	// is not.
	ahead := time.Duration(batches-1)*in.Cost.A + time.Duration(queued)*in.Cost.B
	own := in.Cost.Batch(min(n, b))
	if n > b {
		own = in.Cost.Batch(n) // split parts run one after another at worst
	}
	return ahead/time.Duration(r) + own
}

func retryAfter(d time.Duration) time.Duration {
	if d < time.Second {
		return time.Second
	}
	return time.Duration(math.Ceil(d.Seconds())) * time.Second
}

// BatchInput is what the batcher knows when deciding whether to close the
// batch it is forming.
type BatchInput struct {
	Now  time.Time
	Rows int // instances gathered so far (> 0)
	// QueuedMore: instances of the batch's class are queued that this
	// batch did not take (rows of another length bucket, or a request
	// that does not fit its room): waiting for more rows would idle the
	// replica while they wait, so the batch runs now.
	QueuedMore    bool
	OldestArrival time.Time // enqueue time of the batch's oldest request
	EarliestDue   time.Time // earliest deadline in the batch (zero: none)
	MaxBatch      int
	MaxBatchDelay time.Duration
	Cost          CostModel
	// Yield: the batch holds only batch-class rows and online or low work
	// is waiting. It runs now with what it holds, so batch work delays
	// online work by at most the batch already formed.
	Yield bool
}

// CloseBatch decides whether the batch being formed runs now. If not, it
// returns the time at which it must run even if no more rows arrive: the
// earlier of its oldest request's arrival + maxBatchDelay and the latest
// start its tightest deadline allows. maxBatchDelay 0 is opportunistic:
// run with whatever is queued, never wait. A batch that cannot take the
// work still queued (QueuedMore) runs now too: the batcher is work
// conserving, so a bucket's short batch never holds the replica while
// another bucket's rows wait.
func CloseBatch(in BatchInput) (now bool, until time.Time) {
	if in.Rows >= in.MaxBatch || in.MaxBatchDelay <= 0 || in.Yield || in.QueuedMore {
		return true, time.Time{}
	}
	until = in.OldestArrival.Add(in.MaxBatchDelay)
	if !in.EarliestDue.IsZero() {
		// Leave room to compute the batch at its full size.
		latest := in.EarliestDue.Add(-in.Cost.Batch(in.MaxBatch))
		if latest.Before(until) {
			until = latest
		}
	}
	if !in.Now.Before(until) {
		return true, time.Time{}
	}
	return false, until
}

// UpdateSlack folds one request's estimation error (actual − estimated
// time in the server) into the slack: it rises quickly when requests run
// late and decays slowly, tracking a high percentile of the lateness.
func UpdateSlack(slack, err time.Duration) time.Duration {
	if err > slack {
		slack += (err - slack) * 3 / 10
	} else {
		slack += (err - slack) / 50
	}
	if slack < 0 {
		slack = 0
	}
	return slack
}

// RemoveInput is what removing a replica looks at.
type RemoveInput struct {
	Live    int  // replicas taking batches (not crashed, not already draining)
	Queued  int  // instances queued and not yet taken, retried pieces included
	Closing bool // the server is shutting down
}

// CheckRemove decides whether one live replica may be removed. The rule:
// while another live replica stays, always. The last one only when nothing
// is queued — queued work would have no replica to run it — or when the
// server is closing, in which case the queued work is answered with
// shutting_down. A replica being reloaded after a crash does not count: it
// may never come back. Refusals are unavailable with a Retry-After: the
// queue drains, or a replica is added, and the call can be made again.
func CheckRemove(in RemoveInput) error {
	switch {
	case in.Live <= 0:
		return errs.New(errs.NotFound, "no live replica to remove")
	case in.Live == 1 && in.Queued > 0 && !in.Closing:
		return &errs.Error{Code: errs.Unavailable,
			Message:    "refusing to remove the last live replica while " + strconv.Itoa(in.Queued) + " instances are queued: nothing would run them (add a replica first, or wait for the queue to drain)",
			RetryAfter: time.Second}
	}
	return nil
}

// PickRemoval chooses which replica to remove, given which ones hold work
// (forming or computing a batch), oldest first: the newest idle one, so the
// removal is immediate; if all are busy, the newest.
func PickRemoval(working []bool) int {
	for i := len(working) - 1; i >= 0; i-- {
		if !working[i] {
			return i
		}
	}
	return len(working) - 1
}

// BatchQueueBound is the bound on queued instances of batch-class work
// (Config.MaxBatchQueueInstances) for a queue bound of maxQueue: the
// configured value when it is set and below maxQueue, else a quarter of
// maxQueue (at least 1). It is always below maxQueue when maxQueue > 1,
// so batch work can never fill the queue online work is admitted into.
func BatchQueueBound(maxQueue, configured int) int {
	if maxQueue <= 1 {
		return max(maxQueue, 0)
	}
	if configured > 0 && configured < maxQueue {
		return configured
	}
	return max(maxQueue/4, 1)
}

// AdmitBatchWork decides whether a request of the batch class may enter
// the queue: only into capacity online work leaves. in.QueuedInstances is
// every class's queued instances (all of it runs before batch work), so a
// batch request is refused queue_full whenever an online one of the same
// size would be, and also once the batch class's own bound (batchQueued
// of maxBatchQueue instances) is reached.
func AdmitBatchWork(in AdmitInput, batchQueued, maxBatchQueue int) error {
	if err := Admit(in); err != nil {
		return err
	}
	if batchQueued+in.Instances > maxBatchQueue {
		wait := EstimateWait(in.QueuedInstances, in.Instances, in) + in.MaxBatchDelay
		return &errs.Error{Code: errs.QueueFull,
			Message:    "batch work queue is full (" + strconv.Itoa(batchQueued) + " of " + strconv.Itoa(maxBatchQueue) + " batch instances queued, request has " + strconv.Itoa(in.Instances) + "); batch work only takes capacity online work leaves",
			RetryAfter: retryAfter(wait)}
	}
	return nil
}

// Take is which class of queued work the batcher may take into the batch
// it is forming.
type Take int

// What PickTake returns.
const (
	TakeNone       Take = iota // take nothing (run what the batch holds, or wait)
	TakeForeground             // online work, then low work (shadows): never batch work
	TakeBatch                  // batch-class work only
)

// PickInput is what the batcher's pick looks at.
type PickInput struct {
	HoldsForeground bool // the batch already holds online or low rows
	HoldsBatch      bool // the batch already holds batch-class rows (batches never mix the two)
	Foreground      int  // online and low instances queued (retried pieces included)
	Batch           int  // batch-class instances queued (retried pieces included)
}

// PickTake decides which class the batcher takes rows from. Batch work is
// taken only into a batch of its own and only when no online or low work
// is queued; a batch holding batch rows is not extended once foreground
// work waits (it yields: see BatchInput.Yield), and a batch holding
// foreground rows never takes batch rows, which would lengthen its compute.
func PickTake(in PickInput) Take {
	switch {
	case in.HoldsForeground:
		return TakeForeground
	case in.HoldsBatch:
		if in.Foreground > 0 {
			return TakeNone
		}
		return TakeBatch
	case in.Foreground > 0:
		return TakeForeground
	case in.Batch > 0:
		return TakeBatch
	}
	return TakeNone
}
