// Package serving runs one model version's admission, bounded work queue,
// dynamic batcher and replica pool. Rows arrive already validated and
// preprocessed; one Server never holds another version's rows. It knows
// nothing of HTTP, tenants or the registry.
package serving

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/runtime"
)

// Priority is a class of queued work. Online and Low (shadows, the
// controller's own checks) are foreground work: Low is taken only when no
// Online work is queued, and both share batches. BatchJob is the lowest
// class (batch prediction jobs): it has a queue bound of its own below
// the online one (Config.MaxBatchQueueInstances), is taken only into
// batches of its own and only when no foreground work is queued, and a
// batch of it still forming runs at once when foreground work arrives
// (see PickTake, AdmitBatchWork, BatchInput.Yield).
type Priority int

// Priorities.
const (
	Online Priority = iota
	Low
	BatchJob

	NumPriorities = 3
)

// String is the class's metric label: online, low or batch.
func (p Priority) String() string {
	switch p {
	case Online:
		return "online"
	case Low:
		return "low"
	case BatchJob:
		return "batch"
	}
	return "priority(" + fmt.Sprint(int(p)) + ")"
}

// Valid reports whether p is one of the classes.
func (p Priority) Valid() bool { return p >= Online && p < NumPriorities }

// Work is one request's rows.
type Work struct {
	Rows     runtime.Batch
	Priority Priority
}

// Timing splits a request's time in the server into stages.
type Timing struct {
	Queue     time.Duration // enqueue → first row taken into a batch
	BatchWait time.Duration // taken → its first batch starts computing
	Compute   time.Duration // first batch starts → last batch ends (split requests span batches)
}

// Result is a request's output rows and timing.
type Result struct {
	Out    runtime.Output
	Timing Timing
	// Attempts is how many workers were tried for it (set by backends that
	// retry elsewhere; 0 from a Server in this process: one attempt).
	Attempts int
}

// Loader loads (and checks) one replica's model.
type Loader func(ctx context.Context) (runtime.Model, error)

// Config configures a Server.
type Config struct {
	Name              string // "fraud@3", for logs
	MaxBatchSize      int
	MaxBatchDelay     time.Duration
	MaxQueueInstances int
	// MaxBatchQueueInstances bounds the queued instances of BatchJob work;
	// see BatchQueueBound (0: a quarter of MaxQueueInstances).
	MaxBatchQueueInstances int
	Cost                   CostModel // seed of the service-time model
	Logger                 *slog.Logger
	// Load replaces a crashed replica. Nil: crashed replicas are not replaced.
	Load Loader
	// Observer is told about batches and replica events (nil: nobody).
	Observer Observer
	// LengthBuckets are increasing length boundaries for sequence models
	// (model.yaml serving.lengthBuckets). A request of token rows falls in
	// the bucket of the smallest boundary >= its longest row; a batch only
	// holds rows of one bucket, so it is never padded beyond that boundary.
	// Empty: one bucket. Float rows are always in one bucket.
	LengthBuckets []int
	// SeqInputs is how many sequence inputs a token row packs end to end
	// (runtime.Batch; 0 or 1: one): a row's length for its bucket is its
	// length over SeqInputs (runtime.SeqLen).
	SeqInputs int
	// CPUs, when set, bounds the batches that compute at once across
	// every Server sharing it (the process's model CPUs): a batch waits
	// for a slot within its deadline. Nil: no bound.
	CPUs *CPUs
}

// CPUs is a process-wide bound on the batches computing at once, so the
// front end (admission, refusals, health, decoding) always has a core
// the models cannot take: with GOMAXPROCS P's and CPUs of P−1, one P is
// left to everything else however busy the models are. Go has no way to
// reserve a P for some goroutines; bounding the model side is the part
// that is in Sluice's hands (ONNX Runtime's own threads are bounded by
// its intra-op setting, one by default).
type CPUs struct {
	slots chan struct{}
	// thread, when set, runs on each replica loop's own OS thread, which
	// the loop locks for its whole life (WithThread).
	thread func() error
}

// WithThread makes every replica loop lock its goroutine to an OS thread
// and call f on it first: sluice serve --model-sched idle gives those
// threads SCHED_IDLE (cpuprio.IdleThread), so that the process's other
// threads (HTTP and gRPC handlers, admission, refusals, health) preempt a
// computing model at once. The loop never unlocks: when it ends, its
// thread ends with it rather than going back to the runtime's pool with
// the lowered policy. The price is a thread hand-off each time a loop
// blocks and wakes, a few microseconds a batch: for models that compute
// for a while, not for a 2 µs tree ensemble. A runtime's own threads
// (ONNX Runtime's intra-op pool) are not covered.
func (c *CPUs) WithThread(f func() error) *CPUs {
	c.thread = f
	return c
}

// NewCPUs is a bound of n batches at once; n <= 0 is no bound (nil).
func NewCPUs(n int) *CPUs {
	if n <= 0 {
		return nil
	}
	return &CPUs{slots: make(chan struct{}, n)}
}

// Size is the bound (0 for none).
func (c *CPUs) Size() int {
	if c == nil {
		return 0
	}
	return cap(c.slots)
}

func (c *CPUs) acquire(ctx context.Context) error {
	if c == nil {
		return nil
	}
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *CPUs) release() {
	if c != nil {
		<-c.slots
	}
}

// BucketOf returns the index of the smallest boundary >= length, or
// len(bounds) when length exceeds them all.
func BucketOf(bounds []int, length int) int {
	for i, b := range bounds {
		if length <= b {
			return i
		}
	}
	return len(bounds)
}

// Observer receives a Server's events, for metrics. Calls are made off the
// lock and must not block.
type Observer interface {
	Batch(rows int, d time.Duration)
	ExpiredInQueue()
	ReplicaCrash()
	ReplicaRestart()
}

// PaddingObserver is an optional extension of Observer: it is told the
// padding ratio of every batch of token rows (sequence models).
type PaddingObserver interface {
	Padding(ratio float64)
}

type nopObserver struct{}

func (nopObserver) Batch(int, time.Duration) {}
func (nopObserver) ExpiredInQueue()          {}
func (nopObserver) ReplicaCrash()            {}
func (nopObserver) ReplicaRestart()          {}

// Stats are cumulative counters of a Server.
type Stats struct {
	Batches, Rows   int64
	ExpiredInQueue  int64
	Crashes         int64
	Restarts        int64
	QueuedInstances int
	QueuedHighWater int // most instances ever queued at once
	InflightBatches int
	Restarting      int // crashed replicas being replaced
	ReadyReplicas   int // live replicas taking batches: what admission counts
	Draining        int // replicas being removed, finishing their last batch
	Cost            CostModel
	// Sequence models: PaddingRatioSum sums, over PaddedBatches batches of
	// token rows, each batch's padded cells / (rows × longest row); the mean
	// padding ratio is PaddingRatioSum / PaddedBatches.
	PaddingRatioSum float64
	PaddedBatches   int64
	// Classes are the queued and served instances of each Priority,
	// indexed by it (nil from a backend that does not count them, such as
	// a cluster version whose figures come from worker heartbeats).
	Classes []ClassStats
}

// ClassStats are one Priority's instances: queued now, and computed and
// answered so far.
type ClassStats struct {
	Queued int
	Served int64
}

type item struct {
	ctx      context.Context
	rows     runtime.Batch
	prio     Priority
	bucket   int // length bucket (0 for float rows): a batch holds one bucket
	enq      time.Time
	est      time.Duration // estimated time in the server at admission
	due      time.Time     // zero: no deadline
	next     int           // rows taken into batches so far
	pending  int           // pieces taken and not yet answered
	out      []float32
	cols     int
	err      error
	timing   Timing    // set when the last piece finishes
	taken    time.Time // first piece taken into a batch
	started  time.Time // first piece's batch started computing
	finished bool
	done     chan struct{}
}

type piece struct {
	it      *item
	lo, hi  int
	retried bool
	taken   time.Time
}

// Headroom is the share of a request's remaining deadline admission keeps
// free (see AdmitInput.Headroom): measured under 2× overload it trades a
// little throughput for answers that land inside their deadline.
const Headroom = 0.2

// Server is one version's data plane.
type Server struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex // guards everything below, and the replicas' fields marked so
	online   []*item
	low      []*item
	retry    []piece            // pieces of a crashed batch, run first
	batch    []*item            // BatchJob work
	queued   int                // untaken instances in online+low+batch+retry
	classQ   [NumPriorities]int // queued, by the work's class
	highQ    int                // high-water mark of queued
	changed  chan struct{}
	closing  bool
	live     []*replica // replicas taking batches, oldest first: len(live) is what admission counts
	reload   int        // crashed replicas being replaced
	draining int        // replicas removed from live, finishing their last batch
	cost     CostModel
	slack    time.Duration // see AdmitInput.Slack
	fitted   bool
	samples  []sample
	sampleAt int
	padSum   float64 // see Stats.PaddingRatioSum
	padN     int64
	// unreported counts expirations not yet told to the Observer, which is
	// never called under mu (see reportExpired).
	unreported int
	// running counts replica loops (each with the replacement loads it
	// runs); exited is closed when it is 0 after Close began.
	running int
	exited  chan struct{}

	stats struct {
		batches, rows, expired, crashes, restarts, inflight atomic.Int64
		served                                              [NumPriorities]atomic.Int64
	}
	stop    chan struct{} // closed by Close: stops replacement loads
	nextRep atomic.Int64
}

type sample struct {
	n int
	d time.Duration
}

type replica struct {
	id    int64
	model runtime.Model
	// lastEnd is when this replica finished its previous batch; busy says
	// whether work was already waiting then (so the next batch's cycle,
	// end to end, is what one batch really costs the replica).
	lastEnd time.Time
	busy    bool

	// Guarded by Server.mu:
	working  bool // holds taken rows: forming or computing a batch
	retiring bool // removed: finish the batch it holds, take no new one, close the model
	// gone is closed when a retiring replica has left and its model is closed.
	gone chan struct{}
}

// New starts a Server with the given loaded replicas. With none it refuses
// work with not_ready until AddReplica gives it one.
func New(cfg Config, models []runtime.Model) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBatchSize <= 0 {
		cfg.MaxBatchSize = 1
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("version", cfg.Name), changed: make(chan struct{}),
		cost: cfg.Cost, fitted: cfg.Cost != (CostModel{}), stop: make(chan struct{}), exited: make(chan struct{})}
	s.mu.Lock()
	for _, m := range models {
		s.startReplicaLocked(m)
	}
	s.mu.Unlock()
	return s
}

// startReplicaLocked starts a replica loop for m. It is counted in running
// under the lock, so Close (which sets closing under it) cannot already have
// seen a zero count. A replacement is started by the crashed replica's own
// loop, while that loop is still counted.
func (s *Server) startReplicaLocked(m runtime.Model) *replica {
	r := &replica{id: s.nextRep.Add(1), model: m, gone: make(chan struct{})}
	s.live = append(s.live, r)
	s.broadcastLocked()
	s.running++
	go func() {
		defer s.loopExited()
		s.replicaLoop(r)
	}()
	return r
}

// loopExited uncounts a replica loop that returned.
func (s *Server) loopExited() {
	s.mu.Lock()
	s.running--
	s.exitedLocked()
	s.mu.Unlock()
}

// exitedLocked closes exited once Close began and no replica loop runs.
func (s *Server) exitedLocked() {
	if s.closing && s.running == 0 {
		select {
		case <-s.exited:
		default:
			close(s.exited)
		}
	}
}

// reportExpired tells the Observer about expirations counted under the
// lock. It is called without mu held.
func (s *Server) reportExpired() {
	s.mu.Lock()
	n := s.unreported
	s.unreported = 0
	s.mu.Unlock()
	for range n {
		s.cfg.Observer.ExpiredInQueue()
	}
}

// AddReplica makes m, a loaded and checked model, a replica that takes
// batches at once. The Server owns m from this call on: it closes it when
// the replica is removed, crashes or the Server closes. A closing Server
// refuses it (shutting_down) and closes m at once.
func (s *Server) AddReplica(m runtime.Model) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = m.Close()
		return &errs.Error{Code: errs.ShuttingDown, Message: "add a replica to " + s.cfg.Name + ": the server is shutting down", RetryAfter: time.Second}
	}
	r := s.startReplicaLocked(m)
	s.mu.Unlock()
	s.log.Info("replica added", "replica", r.id)
	return nil
}

// RemoveReplica drains one replica and removes it: it takes no new batch,
// finishes the batch it holds (a batch is never cut), then its model is
// closed. An idle replica is chosen before a busy one (see PickRemoval).
// Admission stops counting it at once.
//
// The last live replica is refused (failed precondition, see CheckRemove)
// while work is queued, since nothing would run it, unless the server is
// closing: the queued work is then answered with shutting_down. A Server
// left without replicas refuses new work with not_ready.
//
// RemoveReplica returns when the replica has left. If ctx ends first it
// returns ctx's error, and the replica still leaves when its batch is done.
func (s *Server) RemoveReplica(ctx context.Context) error {
	s.mu.Lock()
	if err := CheckRemove(RemoveInput{Live: len(s.live), Queued: s.queued, Closing: s.closing}); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("remove a replica of %s: %w", s.cfg.Name, err)
	}
	working := make([]bool, len(s.live))
	for i, r := range s.live {
		working[i] = r.working
	}
	i := PickRemoval(working)
	r := s.live[i]
	s.live = removeAt(s.live, i)
	r.retiring = true
	s.draining++
	s.strandedLocked()
	s.broadcastLocked()
	s.mu.Unlock()
	s.log.Info("replica removing", "replica", r.id, "busy", working[i])
	select {
	case <-r.gone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("remove replica %d of %s: %w (it leaves when its batch is done)", r.id, s.cfg.Name, ctx.Err())
	}
}

// ReplicaCounts is how many replicas a Server has, by state.
type ReplicaCounts struct {
	Ready      int // live, taking batches: admission admits only while > 0
	Restarting int // crashed, their replacement loading
	Draining   int // being removed, finishing their last batch
}

// Replicas returns the replica counts now.
func (s *Server) Replicas() ReplicaCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ReplicaCounts{Ready: len(s.live), Restarting: s.reload, Draining: s.draining}
}

// dropLiveLocked takes r out of the live replicas.
func (s *Server) dropLiveLocked(r *replica) {
	for i, x := range s.live {
		if x == r {
			s.live = removeAt(s.live, i)
			return
		}
	}
}

// strandedLocked answers the queued work when no replica, live or being
// reloaded, is left to run it: waiting could only end at its deadline, or
// never.
func (s *Server) strandedLocked() {
	if len(s.live) > 0 || s.reload > 0 || s.queued == 0 && len(s.retry) == 0 {
		return
	}
	err := &errs.Error{Code: errs.Unavailable, Message: "no replica of " + s.cfg.Name + " is left to run this request", RetryAfter: time.Second}
	if s.closing {
		err = &errs.Error{Code: errs.ShuttingDown, Message: "the server shut down before this request ran", RetryAfter: time.Second}
	}
	for _, q := range [][]*item{s.online, s.low, s.batch} {
		for _, it := range q {
			it.next = it.rows.Rows
			s.finishLocked(it, err)
		}
	}
	for _, p := range s.retry {
		s.finishLocked(p.it, err)
	}
	s.online, s.low, s.batch, s.retry, s.queued, s.classQ = nil, nil, nil, nil, 0, [NumPriorities]int{}
}

func (s *Server) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Submit admits the work or refuses it at once, then waits for its result or
// the context's end. A request of token rows whose rows fall in several
// length buckets (SplitBuckets) goes into the queue as one part per
// bucket, each batched with other work of its bucket, and is answered
// once every part is; a refusal of any part refuses the whole request.
func (s *Server) Submit(ctx context.Context, w Work) (Result, error) {
	n := w.Rows.Rows
	if !w.Priority.Valid() {
		return Result{}, errs.New(errs.Internal, "work of unknown priority %d", int(w.Priority))
	}
	if n <= 0 || len(w.Rows.Data) != n*w.Rows.Cols {
		return Result{}, errs.New(errs.InvalidArgument, "no instances")
	}
	if w.Rows.Tokens == nil {
		it, err := s.enqueue(ctx, w, 0)
		if err != nil {
			return Result{}, err
		}
		return s.wait(ctx, it)
	}
	if len(w.Rows.Tokens) != n || w.Rows.Cols != 0 {
		return Result{}, errs.New(errs.Internal, "batch of %d token rows has %d rows and %d columns", len(w.Rows.Tokens), n, w.Rows.Cols)
	}
	lengths := make([]int, n)
	for i, r := range w.Rows.Tokens {
		lengths[i] = runtime.SeqLen(r, s.cfg.SeqInputs)
	}
	parts := SplitBuckets(s.cfg.LengthBuckets, lengths)
	if len(parts) == 1 {
		it, err := s.enqueue(ctx, w, parts[0].Bucket)
		if err != nil {
			return Result{}, err
		}
		return s.wait(ctx, it)
	}
	items := make([]*item, 0, len(parts))
	for _, p := range parts {
		sub := w
		sub.Rows = runtime.Batch{Rows: len(p.Rows), Tokens: make([][]int64, len(p.Rows))}
		for j, i := range p.Rows {
			sub.Rows.Tokens[j] = w.Rows.Tokens[i]
		}
		it, err := s.enqueue(ctx, sub, p.Bucket)
		if err != nil {
			for _, done := range items {
				s.abandon(done, err)
			}
			return Result{}, err
		}
		items = append(items, it)
	}
	var res Result
	for k, it := range items {
		r, err := s.wait(ctx, it)
		if err != nil {
			for _, rest := range items[k+1:] {
				s.abandon(rest, err)
			}
			return Result{}, err
		}
		if k == 0 {
			res.Out = runtime.Output{Rows: n, Cols: r.Out.Cols, Data: make([]float32, n*r.Out.Cols)}
		}
		for j, i := range parts[k].Rows {
			copy(res.Out.Row(i), r.Out.Row(j))
		}
		// The request waited for its slowest part.
		res.Timing.Queue = max(res.Timing.Queue, r.Timing.Queue)
		res.Timing.BatchWait = max(res.Timing.BatchWait, r.Timing.BatchWait)
		res.Timing.Compute = max(res.Timing.Compute, r.Timing.Compute)
	}
	return res, nil
}

// Part is the rows of a request that fall in one length bucket.
type Part struct {
	Bucket int
	Rows   []int // indices into the request's rows, in order
}

// SplitBuckets groups a request's rows by their length bucket (BucketOf
// each row's length): one Part per bucket that holds rows, in the order
// of each bucket's first row. Without buckets (bounds empty) every row is
// in one Part of bucket 0.
func SplitBuckets(bounds []int, lengths []int) []Part {
	if len(bounds) == 0 {
		p := Part{Rows: make([]int, len(lengths))}
		for i := range p.Rows {
			p.Rows[i] = i
		}
		return []Part{p}
	}
	var parts []Part
	for i, l := range lengths {
		b := BucketOf(bounds, l)
		k := slices.IndexFunc(parts, func(p Part) bool { return p.Bucket == b })
		if k < 0 {
			parts = append(parts, Part{Bucket: b})
			k = len(parts) - 1
		}
		parts[k].Rows = append(parts[k].Rows, i)
	}
	return parts
}

// enqueue admits w (its rows in bucket) or refuses it at once, and queues
// its item.
func (s *Server) enqueue(ctx context.Context, w Work, bucket int) (*item, error) {
	n := w.Rows.Rows
	now := time.Now()
	due, _ := ctx.Deadline()
	it := &item{ctx: ctx, rows: w.Rows, prio: w.Priority, bucket: bucket, enq: now, due: due, done: make(chan struct{})}
	s.mu.Lock()
	in := AdmitInput{
		// Only live replicas count: a crashed one being reloaded may take
		// long or never come back. Queued work and retried pieces still
		// wait for it, each within its own deadline.
		Ready: len(s.live) > 0, Closing: s.closing, Instances: n, QueuedInstances: s.queued,
		MaxQueue: s.cfg.MaxQueueInstances, MaxBatch: s.cfg.MaxBatchSize, MaxBatchDelay: s.cfg.MaxBatchDelay,
		Replicas: len(s.live), Cost: s.cost, Slack: s.slack, Headroom: Headroom, CheckFeasibility: s.fitted,
	}
	if !due.IsZero() {
		in.Remaining = due.Sub(now)
		if in.Remaining <= 0 {
			s.mu.Unlock()
			return nil, errs.New(errs.DeadlineExceeded, "deadline already passed")
		}
	}
	var err error
	switch w.Priority {
	case Online:
		// Low and batch work queued behind does not delay online work.
		in.QueuedInstances -= s.classQ[Low] + s.classQ[BatchJob]
		err = Admit(in)
	case Low:
		in.QueuedInstances -= s.classQ[BatchJob]
		err = Admit(in)
	default:
		// Everything queued runs first: batch work only takes what is left.
		err = AdmitBatchWork(in, s.classQ[BatchJob], BatchQueueBound(s.cfg.MaxQueueInstances, s.cfg.MaxBatchQueueInstances))
	}
	if err != nil {
		if errs.CodeOf(err) == errs.DeadlineInfeasible {
			// A refusal is evidence of nothing late: let the slack decay,
			// or a burst of lateness could refuse everything forever.
			s.slack = UpdateSlack(s.slack, 0)
		}
		s.mu.Unlock()
		return nil, err
	}
	it.est = EstimateWait(in.QueuedInstances, n, in)
	switch w.Priority {
	case Online:
		s.online = append(s.online, it)
	case Low:
		s.low = append(s.low, it)
	default:
		s.batch = append(s.batch, it)
	}
	s.addQueuedLocked(w.Priority, n)
	s.highQ = max(s.highQ, s.queued)
	s.broadcastLocked()
	s.mu.Unlock()
	return it, nil
}

// wait waits for the item's result or the context's end.
func (s *Server) wait(ctx context.Context, it *item) (Result, error) {
	n := it.rows.Rows
	select {
	case <-it.done:
	case <-ctx.Done():
		s.mu.Lock()
		if !it.finished {
			expired := it.next == 0
			s.addQueuedLocked(it.prio, -(it.rows.Rows - it.next))
			it.next = it.rows.Rows // nothing more is taken
			if expired {
				s.finishLocked(it, errs.New(errs.ExpiredInQueue, "deadline passed while queued"))
				s.stats.expired.Add(1)
				s.unreported++
			} else {
				s.finishLocked(it, errs.New(errs.DeadlineExceeded, "deadline passed during compute"))
			}
		}
		s.mu.Unlock()
		s.reportExpired()
		<-it.done
	}
	if it.err != nil {
		return Result{}, it.err
	}
	return Result{Out: runtime.Output{Rows: n, Cols: it.cols, Data: it.out}, Timing: it.timing}, nil
}

// abandon ends a queued item whose request failed elsewhere (another part
// of it was refused or failed): its untaken rows are taken out of the
// queue, and a batch computing some of them answers no one.
func (s *Server) abandon(it *item, err error) {
	s.mu.Lock()
	if !it.finished {
		s.addQueuedLocked(it.prio, -(it.rows.Rows - it.next))
		it.next = it.rows.Rows
		s.finishLocked(it, err)
	}
	s.mu.Unlock()
}

// addQueuedLocked counts n more (or, negative, fewer) untaken instances
// of class p.
func (s *Server) addQueuedLocked(p Priority, n int) {
	s.queued += n
	s.classQ[p] += n
}

// BatchQueueBound is the most BatchJob instances this server queues at
// once: a batch caller sizes its requests at most this.
func (s *Server) BatchQueueBound() int {
	return BatchQueueBound(s.cfg.MaxQueueInstances, s.cfg.MaxBatchQueueInstances)
}

func (s *Server) finishLocked(it *item, err error) {
	if it.finished {
		return
	}
	it.finished = true
	if it.prio == Online && it.est > 0 {
		s.slack = UpdateSlack(s.slack, time.Since(it.enq)-it.est)
	}
	if err != nil {
		it.err = err
		it.out = nil
	}
	close(it.done)
}

// foregroundQueuedLocked is the online and low instances queued.
func (s *Server) foregroundQueuedLocked() int { return s.classQ[Online] + s.classQ[Low] }

// holdsBatch reports whether the batch b holds BatchJob rows (a batch
// never mixes them with foreground rows).
func holdsBatch(b []piece) bool { return len(b) > 0 && b[0].it.prio == BatchJob }

// takeLocked moves up to room rows from the queues into the batch, from
// the class PickTake chooses. A batch holds one length bucket: the bucket
// of its first piece, or else of the oldest queued work (retries first);
// work of other buckets is passed over and stays queued in order.
func (s *Server) takeLocked(b []piece, room int, now time.Time) ([]piece, int) {
	took := 0
	key := -1
	if len(b) > 0 {
		key = b[0].it.bucket
	}
	take := PickTake(PickInput{HoldsForeground: len(b) > 0 && !holdsBatch(b), HoldsBatch: holdsBatch(b),
		Foreground: s.foregroundQueuedLocked(), Batch: s.classQ[BatchJob]})
	if take == TakeNone {
		return b, 0
	}
	wantBatch := take == TakeBatch
	for i := 0; i < len(s.retry) && took < room; {
		p := s.retry[i]
		if p.it.finished {
			s.retry = removeAt(s.retry, i)
			s.addQueuedLocked(p.it.prio, -(p.hi - p.lo))
			continue
		}
		if key >= 0 && p.it.bucket != key || (p.it.prio == BatchJob) != wantBatch {
			i++
			continue
		}
		if p.hi-p.lo > room-took && took > 0 {
			break
		}
		key = p.it.bucket
		s.retry = removeAt(s.retry, i)
		s.addQueuedLocked(p.it.prio, -(p.hi - p.lo))
		p.taken = now
		b = append(b, p)
		took += p.hi - p.lo
	}
	queues := []*[]*item{&s.online, &s.low}
	if wantBatch {
		queues = []*[]*item{&s.batch}
	}
	for _, q := range queues {
		if q == &s.low && len(s.online) > 0 {
			break
		}
		for i := 0; i < len(*q) && took < room; {
			it := (*q)[i]
			if it.finished || it.next >= it.rows.Rows {
				*q = removeAt(*q, i)
				continue
			}
			if !it.due.IsZero() && !now.Before(it.due) {
				s.addQueuedLocked(it.prio, -(it.rows.Rows - it.next))
				expired := it.next == 0
				it.next = it.rows.Rows
				*q = removeAt(*q, i)
				if expired {
					s.stats.expired.Add(1)
					s.unreported++ // told to the observer off the lock (reportExpired)
					s.finishLocked(it, errs.New(errs.ExpiredInQueue, "deadline passed while queued"))
				} else {
					s.finishLocked(it, errs.New(errs.DeadlineExceeded, "deadline passed while parts were queued"))
				}
				continue
			}
			if key >= 0 && it.bucket != key {
				i++
				continue
			}
			left := it.rows.Rows - it.next
			if left > room-took && left <= s.cfg.MaxBatchSize && (took > 0 || room < s.cfg.MaxBatchSize) {
				// A request that fits in one batch is never split: it waits
				// for the next batch, and the queue stays in order.
				break
			}
			key = it.bucket
			k := min(left, room-took)
			b = append(b, piece{it: it, lo: it.next, hi: it.next + k, taken: now})
			it.next += k
			it.pending++
			s.addQueuedLocked(it.prio, -k)
			took += k
			if it.next >= it.rows.Rows {
				*q = removeAt(*q, i)
			}
		}
	}
	if took == 0 && len(b) == 0 && !wantBatch && s.foregroundQueuedLocked() == 0 && s.classQ[BatchJob] > 0 {
		// What was counted as foreground work was finished retries, now
		// reaped: batch work may run.
		return s.takeLocked(b, room, now)
	}
	return b, took
}

// removeAt removes xs[i], keeping the order; removing the head is O(1).
// The vacated slot is cleared (no reference is kept), and a queue that
// empties restarts at the front of its array, so a queue that drains
// between requests appends without allocating.
func removeAt[T any](xs []T, i int) []T {
	var zero T
	if i == 0 {
		xs[0] = zero
		if len(xs) == 1 {
			return xs[:0]
		}
		return xs[1:]
	}
	copy(xs[i:], xs[i+1:])
	xs[len(xs)-1] = zero
	return xs[:len(xs)-1]
}

// nextBatch blocks until a batch is ready to run on r, or returns false
// when the server is closing and the queue is empty, or r is retiring and
// holds no rows. A retiring replica runs the rows it already took at once.
func (s *Server) nextBatch(r *replica) ([]piece, bool) {
	var batch []piece
	rows := 0
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if r.retiring {
			return batch, rows > 0
		}
		now := time.Now()
		var took int
		batch, took = s.takeLocked(batch, s.cfg.MaxBatchSize-rows, now)
		rows += took
		r.working = rows > 0
		if rows == 0 && s.closing && s.queued == 0 {
			return nil, false
		}
		if rows > 0 {
			ci := closeInput(now, batch, rows, s.cfg, s.cost)
			ci.Yield = holdsBatch(batch) && s.foregroundQueuedLocked() > 0
			// takeLocked took every row of the batch's class it could:
			// what is still queued of that class, it will not take.
			if holdsBatch(batch) {
				ci.QueuedMore = s.classQ[BatchJob] > 0
			} else {
				ci.QueuedMore = s.foregroundQueuedLocked() > 0
			}
			closeNow, until := CloseBatch(ci)
			if closeNow || s.closing {
				return batch, true
			}
			if timer == nil {
				timer = time.NewTimer(until.Sub(now))
			} else {
				timer.Reset(until.Sub(now))
			}
			ch := s.changed
			s.mu.Unlock()
			select {
			case <-ch:
			case <-timer.C:
			}
			s.mu.Lock()
			continue
		}
		ch := s.changed
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
}

// closeInput is what closing the batch b (rows instances) looks at: its
// oldest request's arrival and its tightest deadline, over every piece.
// The first piece taken need not be the oldest: online work is taken
// before older low-priority work, and retried pieces before both.
func closeInput(now time.Time, b []piece, rows int, cfg Config, cost CostModel) BatchInput {
	in := BatchInput{Now: now, Rows: rows, MaxBatch: cfg.MaxBatchSize, MaxBatchDelay: cfg.MaxBatchDelay, Cost: cost}
	for i, p := range b {
		if i == 0 || p.it.enq.Before(in.OldestArrival) {
			in.OldestArrival = p.it.enq
		}
		if !p.it.due.IsZero() && (in.EarliestDue.IsZero() || p.it.due.Before(in.EarliestDue)) {
			in.EarliestDue = p.it.due
		}
	}
	return in
}

func (s *Server) replicaLoop(r *replica) {
	if c := s.cfg.CPUs; c != nil && c.thread != nil {
		goruntime.LockOSThread() // never unlocked: the thread exits with the loop
		if err := c.thread(); err != nil {
			s.log.Warn("replica thread setup failed; the replica computes at the process's priority", "replica", r.id, "err", err)
		}
	}
	for {
		batch, ok := s.nextBatch(r)
		s.reportExpired()
		if !ok {
			break
		}
		if crashed := s.run(r, batch); crashed {
			s.replace(r)
			return
		}
		// A CPU-bound model would otherwise keep its core from batch to
		// batch and starve the goroutines that admit (or refuse) requests.
		goruntime.Gosched()
	}
	s.mu.Lock()
	retiring := r.retiring
	if !retiring {
		// The server is closing and the queue is drained: the replica
		// leaves live (RemoveReplica can no longer pick it).
		s.dropLiveLocked(r)
	}
	s.mu.Unlock()
	if retiring {
		s.retire(r)
		return
	}
	// The replica closes its own model: at once when it was idle, after its
	// last batch when Close's ctx ended while it computed.
	_ = r.model.Close()
}

// retire closes a removed replica's model and tells RemoveReplica.
func (s *Server) retire(r *replica) {
	_ = r.model.Close()
	s.mu.Lock()
	s.draining--
	s.mu.Unlock()
	s.log.Info("replica removed", "replica", r.id)
	close(r.gone)
}

// ReportedMemory is the memory the live replicas' models say they hold
// (runtime.MemoryReporter), and whether every one of them says.
func (s *Server) ReportedMemory() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum int64
	for _, r := range s.live {
		mr, ok := r.model.(runtime.MemoryReporter)
		if !ok {
			return 0, false
		}
		sum += mr.MemoryBytes()
	}
	return sum, len(s.live) > 0
}

// run computes one batch. It reports whether the replica crashed.
func (s *Server) run(r *replica, batch []piece) (crashed bool) {
	start := time.Now()
	live := s.dropFinished(r, batch)
	if len(live) == 0 {
		return false
	}
	seq := live[0].it.rows.Tokens != nil
	in, padRatio := gather(live)
	out, err, panicked := s.compute(r.model, in, batchDeadline(live))
	elapsed := time.Since(start)
	if panicked {
		s.cfg.Observer.ReplicaCrash()
	} else if err == nil {
		s.cfg.Observer.Batch(in.Rows, elapsed)
		if po, ok := s.cfg.Observer.(PaddingObserver); ok && seq {
			po.Padding(padRatio)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	r.working = false
	if panicked {
		s.crashedLocked(r, live, err)
		return true
	}
	if err == nil && (out.Rows != in.Rows || len(out.Data) != out.Rows*out.Cols) {
		err = fmt.Errorf("runtime returned %d rows for a batch of %d", out.Rows, in.Rows)
	}
	if err != nil {
		s.failLocked(live, err)
		return false
	}
	s.stats.batches.Add(1)
	s.stats.rows.Add(int64(in.Rows))
	if seq {
		s.padSum += padRatio
		s.padN++
	}
	s.observeLocked(in.Rows, batchCost(elapsed, r.busy, r.lastEnd, time.Now()))
	s.deliverLocked(live, out, start, elapsed)
	r.lastEnd, r.busy = time.Now(), s.queued > 0
	return false
}

// dropFinished returns the pieces of batch whose request still waits (in
// batch's array); with none, the replica holds no work any more.
func (s *Server) dropFinished(r *replica, batch []piece) []piece {
	live := batch[:0]
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range batch {
		if !p.it.finished {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		r.working = false
	}
	return live
}

// batchDeadline is the deadline of the model call for the pieces of one
// batch: the latest of their requests' deadlines — the batch outlives any
// single request — and none when one of them has none.
func batchDeadline(live []piece) time.Time {
	var due time.Time
	for _, p := range live {
		if p.it.due.IsZero() {
			return time.Time{}
		}
		if p.it.due.After(due) {
			due = p.it.due
		}
	}
	return due
}

// gather builds the model's input from the pieces' rows: float rows in
// one array (the request's own when the batch is one piece), token rows
// side by side with the share of padding their longest row implies.
func gather(live []piece) (in runtime.Batch, padRatio float64) {
	cols := live[0].it.rows.Cols
	n := 0
	for _, p := range live {
		n += p.hi - p.lo
	}
	in = runtime.Batch{Rows: n, Cols: cols}
	switch {
	case live[0].it.rows.Tokens != nil:
		in.Tokens = make([][]int64, 0, n)
		longest, cells := 0, 0
		for _, p := range live {
			for _, r := range p.it.rows.Tokens[p.lo:p.hi] {
				in.Tokens = append(in.Tokens, r)
				longest = max(longest, len(r))
				cells += len(r)
			}
		}
		if total := n * longest; total > 0 {
			padRatio = float64(total-cells) / float64(total)
		}
	case len(live) == 1:
		p := live[0]
		in.Data = p.it.rows.Data[p.lo*cols : p.hi*cols]
	default:
		in.Data = make([]float32, 0, n*cols)
		for _, p := range live {
			in.Data = append(in.Data, p.it.rows.Data[p.lo*cols:p.hi*cols]...)
		}
	}
	return in, padRatio
}

// compute calls the model on in within due (zero: no deadline), holding a
// model CPU slot (Config.CPUs) while it runs. panicked: the runtime
// panicked, and the replica is to be replaced.
func (s *Server) compute(m runtime.Model, in runtime.Batch, due time.Time) (out runtime.Output, err error, panicked bool) {
	ctx := context.Background() // the batch outlives any single request
	if !due.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, due)
		defer cancel()
	}
	s.stats.inflight.Add(1)
	defer s.stats.inflight.Add(-1)
	if err := s.cfg.CPUs.acquire(ctx); err != nil {
		return out, fmt.Errorf("waiting for a model CPU (--model-cpus %d): %w", s.cfg.CPUs.Size(), err), false
	}
	defer s.cfg.CPUs.release()
	return safePredict(ctx, m, in)
}

// crashedLocked handles a replica whose model panicked on live: it leaves
// the live replicas (to be replaced when the server can load one), and each
// piece is queued again once if its request's deadline leaves room for
// it, else answered unavailable.
func (s *Server) crashedLocked(r *replica, live []piece, err error) {
	s.stats.crashes.Add(1)
	if !r.retiring { // a retiring replica already left live and is not replaced
		s.dropLiveLocked(r)
		if s.cfg.Load != nil {
			s.reload++ // queued work waits for the replacement
		}
	}
	s.log.Error("replica crashed", "replica", r.id, "err", err)
	now := time.Now()
	for _, p := range live {
		p.it.pending--
		if p.it.finished {
			continue
		}
		if retryCrashed(p, now, s.cost) {
			p.retried = true
			p.it.pending++
			s.retry = append(s.retry, p)
			s.addQueuedLocked(p.it.prio, p.hi-p.lo)
			continue
		}
		s.finishLocked(p.it, &errs.Error{Code: errs.Unavailable, Message: "replica crashed while computing this request; it was not retried in time", RetryAfter: time.Second})
	}
	s.strandedLocked()
	s.broadcastLocked()
}

// retryCrashed decides whether a piece of a crashed batch is queued
// again: once only, and only when its request's deadline (if any) leaves
// more than the estimated cost of computing it.
func retryCrashed(p piece, now time.Time, cost CostModel) bool {
	return !p.retried && (p.it.due.IsZero() || p.it.due.Sub(now) > cost.Batch(p.hi-p.lo))
}

// failLocked answers every request of live with the model call's error:
// deadline_exceeded when the batch's deadline ended it, else internal.
func (s *Server) failLocked(live []piece, err error) {
	code := errs.Internal
	if errors.Is(err, context.DeadlineExceeded) {
		code = errs.DeadlineExceeded
	}
	for _, p := range live {
		p.it.pending--
		s.finishLocked(p.it, errs.Wrap(code, err, "predict %s", s.cfg.Name))
	}
}

// batchCost is the service time a batch that took elapsed is fitted as:
// when the replica was busy since it ended its previous batch at lastEnd,
// the whole cycle — the model call plus what surrounds it (batch forming,
// wakeups, copying) — unless that is implausibly long (over 4× the call
// and a millisecond: the replica was idle after all).
func batchCost(elapsed time.Duration, busy bool, lastEnd, now time.Time) time.Duration {
	if busy && !lastEnd.IsZero() {
		if cycle := now.Sub(lastEnd); cycle > elapsed && cycle < 4*elapsed+time.Millisecond {
			return cycle
		}
	}
	return elapsed
}

// deliverLocked copies the batch's output rows into each piece's request
// and finishes a request when its last piece is answered, with its
// timing: queued until its first piece was taken, waiting for its batch
// to start, computing until the end of its last batch.
func (s *Server) deliverLocked(live []piece, out runtime.Output, start time.Time, elapsed time.Duration) {
	row := 0
	for _, p := range live {
		it := p.it
		k := p.hi - p.lo
		it.pending--
		if it.finished {
			row += k
			continue
		}
		if it.out == nil {
			it.cols = out.Cols
			it.out = make([]float32, it.rows.Rows*out.Cols)
		}
		copy(it.out[p.lo*out.Cols:p.hi*out.Cols], out.Data[row*out.Cols:(row+k)*out.Cols])
		row += k
		s.stats.served[it.prio].Add(int64(k))
		if it.taken.IsZero() || p.taken.Before(it.taken) {
			it.taken = p.taken
		}
		if it.started.IsZero() || start.Before(it.started) {
			it.started = start
		}
		if it.pending == 0 && it.next >= it.rows.Rows {
			end := start.Add(elapsed)
			it.timing = Timing{Queue: it.taken.Sub(it.enq), BatchWait: it.started.Sub(it.taken), Compute: end.Sub(it.started)}
			s.finishLocked(it, nil)
		}
	}
}

func safePredict(ctx context.Context, m runtime.Model, in runtime.Batch) (out runtime.Output, err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in runtime: %v", p)
			panicked = true
		}
	}()
	out, err = m.Predict(ctx, in)
	return out, err, false
}

// observeLocked feeds the service-time model: a least-squares fit of
// latency = A + B·n over the last 64 batches.
func (s *Server) observeLocked(n int, d time.Duration) {
	const window = 64
	if len(s.samples) < window {
		s.samples = append(s.samples, sample{n, d})
	} else {
		s.samples[s.sampleAt] = sample{n, d}
		s.sampleAt = (s.sampleAt + 1) % window
	}
	s.cost = Fit(s.samples, s.cost)
	s.fitted = true
}

// Fit refits the cost model. With too little spread in batch sizes it keeps
// the prior per-instance cost and refits only the fixed part.
func Fit(samples []sample, prior CostModel) CostModel {
	if len(samples) == 0 {
		return prior
	}
	var sn, sd, snn, snd float64
	for _, x := range samples {
		n, d := float64(x.n), float64(x.d)
		sn += n
		sd += d
		snn += n * n
		snd += n * d
	}
	k := float64(len(samples))
	den := k*snn - sn*sn
	var a, b float64
	if len(samples) >= 8 && den > 1e-9*k*k {
		b = (k*snd - sn*sd) / den
		a = (sd - b*sn) / k
	}
	if b <= 0 || a < 0 || len(samples) < 8 || den <= 1e-9*k*k {
		b = float64(prior.B)
		a = (sd - b*sn) / k
		if a < 0 {
			a = 0
			b = sd / sn
		}
	}
	return CostModel{A: time.Duration(a), B: time.Duration(b)}
}

// Observe feeds one measured batch into the cost model (warmup uses it).
func (s *Server) Observe(n int, d time.Duration) {
	s.mu.Lock()
	s.observeLocked(n, d)
	s.mu.Unlock()
}

// replace loads a new model for a crashed replica, retrying with backoff
// until it succeeds or the server closes. A retiring replica that crashed
// is not replaced.
func (s *Server) replace(old *replica) {
	_ = old.model.Close() // a crashed model may still hold resources
	s.mu.Lock()
	retiring := old.retiring
	if retiring {
		s.draining--
	}
	s.mu.Unlock()
	if retiring {
		s.log.Info("replica removed (it crashed on its last batch)", "replica", old.id)
		close(old.gone)
		return
	}
	if s.cfg.Load == nil {
		return
	}
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		m, err := s.cfg.Load(ctx)
		cancel()
		if err == nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing && s.queuedNow() == 0 {
				_ = m.Close()
				s.mu.Lock()
				s.reload--
				s.strandedLocked()
				s.mu.Unlock()
				return
			}
			s.stats.restarts.Add(1)
			s.cfg.Observer.ReplicaRestart()
			s.log.Info("replica replaced", "replica", old.id)
			s.mu.Lock()
			s.reload--
			// Even if Close began meanwhile: this goroutine is counted in
			// running, so Close is still waiting, and the replacement drains.
			s.startReplicaLocked(m)
			s.mu.Unlock()
			return
		}
		s.log.Error("replica reload failed", "err", err, "retry_in", backoff)
		select {
		case <-s.stop:
			s.mu.Lock()
			s.reload--
			s.strandedLocked()
			s.broadcastLocked()
			s.mu.Unlock()
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (s *Server) queuedNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}

// Stats returns current counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := Stats{QueuedInstances: s.queued, QueuedHighWater: s.highQ, ReadyReplicas: len(s.live), Restarting: s.reload, Draining: s.draining, Cost: s.cost,
		PaddingRatioSum: s.padSum, PaddedBatches: s.padN, Classes: make([]ClassStats, NumPriorities)}
	for p := range st.Classes {
		st.Classes[p].Queued = s.classQ[p]
	}
	s.mu.Unlock()
	for p := range st.Classes {
		st.Classes[p].Served = s.stats.served[p].Load()
	}
	st.Batches = s.stats.batches.Load()
	st.Rows = s.stats.rows.Load()
	st.ExpiredInQueue = s.stats.expired.Load()
	st.Crashes = s.stats.crashes.Load()
	st.Restarts = s.stats.restarts.Load()
	st.InflightBatches = int(s.stats.inflight.Load())
	return st
}

// Close stops admitting, lets the replicas finish queued work (each request
// still bounded by its own deadline), then unloads the models: each replica
// closes its model when it leaves. If ctx ends first, what is still queued
// is answered with shutting_down and Close returns ctx's error at once; a
// replica computing a batch then closes its model when the batch is done.
// Close leaves no goroutine of its own behind.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.stop)
		s.broadcastLocked()
	}
	s.exitedLocked()
	s.mu.Unlock()
	var err error
	select {
	case <-s.exited:
	case <-ctx.Done():
		err = ctx.Err()
		s.mu.Lock()
		for _, q := range [][]*item{s.online, s.low, s.batch} {
			for _, it := range q {
				s.finishLocked(it, errs.New(errs.ShuttingDown, "the server shut down before this request ran"))
			}
		}
		for _, p := range s.retry {
			s.finishLocked(p.it, errs.New(errs.ShuttingDown, "the server shut down before this request ran"))
		}
		s.online, s.low, s.batch, s.retry, s.queued, s.classQ = nil, nil, nil, nil, 0, [NumPriorities]int{}
		s.broadcastLocked()
		s.mu.Unlock()
	}
	return err
}
