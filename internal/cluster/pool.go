// Package cluster is the gateway's side of worker processes. A Pool is the
// control plane's registry of workers (they register and heartbeat over
// the worker control protocol; one that misses heartbeats, dies or fails a
// call is taken out of routing), the place versions are loaded onto them
// (where internal/placement decides, within the workers' memory budgets,
// evicting what may go; cold versions on demand: place.go), and the source
// of artifacts they fetch by SHA-256. A Version is the data plane's backend for one version
// whose replicas live on workers: it picks a worker by the power of two
// choices on reported queue work, from a routing snapshot that it reads
// without a lock (route.go), sends the preprocessed rows over the Open
// Inference Protocol, and tries one other worker when the first refuses
// (queue_full, deadline_infeasible, not_ready) or dies, inside the
// request's deadline. A Supervisor starts and restarts local worker
// processes. Admission, queues and batching are the workers' (serving runs
// there); this package keeps no queue.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/placement"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// ArtifactSource opens an artifact by SHA-256 (the registry's artifact store).
type ArtifactSource interface {
	OpenArtifact(ctx context.Context, sha string) (io.ReadCloser, int64, error)
}

// Config configures a Pool.
type Config struct {
	Artifacts ArtifactSource
	// Join is how workers prove on Register that they may join (auth.go):
	// the zero value refuses every registration.
	Join JoinAuth
	// HeartbeatInterval is how often workers report (default 250ms); a
	// worker silent for MissedHeartbeats intervals (default 4) is out of
	// routing until it reports again.
	HeartbeatInterval time.Duration
	MissedHeartbeats  int
	// Known are the ids of workers expected to register (the local
	// workers a supervisor starts): they count in every model's shard
	// from the start, so shards do not move while workers boot.
	Known []string
	// MaxWorkers bounds the registered workers (sluice serve
	// --max-workers, default 256): a Register of a new id beyond it is
	// refused (too_many_workers) before anything is dialled. Known ids
	// are always admitted.
	MaxWorkers int
	// ForgetAfter is how long a worker that is not Known may be out of
	// routing and silent before it is forgotten (--forget-after, default
	// 1m): out of the registry and every model's shard, its connection
	// closed and its metric series deleted.
	ForgetAfter time.Duration
	// AllowAddr, when set, says whether Register may dial worker id at
	// ip (one of its address's IPs; every one must be allowed): the
	// dial policy (internal/app builds it from --workers, --kube-workers
	// and --worker-cidrs). Nil allows loopback only.
	AllowAddr func(id string, ip netip.Addr) error
	// ShardSize is how many workers hold each model (default 2): each
	// model's versions go to the ShardSize workers chosen by rendezvous
	// hashing of the model name (Shard); its replicas are spread over them.
	ShardSize int
	// WaitForWorker bounds how long a version waits for a first worker to
	// register before it fails (default 2 minutes).
	WaitForWorker time.Duration
	// MaxMessageBytes bounds gRPC messages to workers (default 64 MiB).
	MaxMessageBytes int
	// Placement is eviction's anti-thrash rule (its MinResidency; default
	// placement.DefaultMinResidency).
	Placement placement.Policy
	// Quarantine says when a version that worker processes died under is
	// poison (default 3 exits in 5 minutes).
	Quarantine placement.Quarantine
	// FailureMemory is how long a failed load is remembered before a
	// request may load the version again (default placement.FailureMemory).
	FailureMemory time.Duration
	// EvictDrain bounds how long an evicted version's queued work may take
	// to drain on its worker (default 5s).
	EvictDrain time.Duration
	// Protected, when set, says whether model@n is the rollback target of a
	// deployment inside its window: it is never evicted. It is called with
	// the pool's lock held and must not call the pool.
	Protected func(model string, n int) bool
	// OnQuarantine, when set, is told (on its own goroutine) that a version
	// was quarantined, with the reason: the controller marks it failed and
	// writes an audit event.
	OnQuarantine func(model string, n int, reason string)
	// Metrics receives placement events (nil: none).
	Metrics Metrics
	// Now is the clock of placement's decisions (residency, request
	// rates, failure memory, quarantine windows; default time.Now), so
	// tests can move it.
	Now    func() time.Time
	Logger *slog.Logger
}

// Metrics receives the pool's placement events (telemetry.Metrics).
type Metrics interface {
	VersionLoaded(model, version string)
	VersionEvicted(model, version string)
	ColdStart(model, version, outcome string) // outcome: waited, refused
	VersionQuarantined(model, version string)
	WorkerMemory(worker string, budget, used int64)
	// ForgetWorker deletes a forgotten worker's series.
	ForgetWorker(worker string)
}

// Flow-control windows of the hop, both ways (the gateway's client and the
// worker's server use the same): static, so gRPC does not estimate the
// bandwidth-delay product with a PING per received message. 4 MiB per
// stream carries a batch of ~30k rows of 32 float32 without waiting for a
// window update; 16 MiB per connection is where BDP estimation would stop.
const (
	StreamWindowBytes = 4 << 20
	ConnWindowBytes   = 16 << 20
)

// Pool tracks workers and the versions they hold.
type Pool struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the control plane's state: workers, versions, changed,
	// stale and every field marked "guarded by Pool.mu". The predict path
	// never takes it: it reads each version's routing snapshot
	// (Version.route, route.go), which the holders of mu rebuild and swap
	// (publishLocked) whenever what routing depends on changes.
	mu       sync.Mutex
	workers  map[string]*worker
	versions map[string]*Version // desired: loaded on every worker
	changed  chan struct{}       // closed and replaced on every change of readiness
	fenced   map[string]string   // worker id → why it is fenced (members.go)
	stale    []*Version          // versions whose route is to be rebuilt (route.go)
	// loadRates are the measured loads per runtime, for the load time of
	// versions not loaded yet (placement.LoadEstimate).
	loadRates map[string]placement.LoadRate
	refusals  refusals // refused registrations and sessions, for the log (auth.go)

	workerpb.UnimplementedControlPlaneServer
}

// worker is one registered worker process.
type worker struct {
	id    string
	infer inferencepb.GRPCInferenceServiceClient
	ctl   workerpb.WorkerClient

	// in flight from this gateway, in instances (load signal between heartbeats)
	outstanding atomic.Int64
	// seen is when (unix ns) the worker last answered a call: a worker that
	// answers is alive even when its heartbeats are late (a saturated core
	// delays the heartbeat goroutine, not the answers).
	seen atomic.Int64
	// gone is the session whose call failed on the connection: the
	// predict path skips the worker from that moment, before the control
	// plane has taken it out of routing (suspect).
	gone atomic.Int64

	// guarded by Pool.mu
	addr    string
	pid     int64
	session int64 // bumps at every registration: a restarted process is a new session
	// secret is the session's secret (auth.go), exited says its process
	// exited (MarkDead): the id may be taken; callSecret and certSHA are
	// what the session's connection presents and pins.
	secret, callSecret, certSHA string
	exited                      bool
	conn                        *grpc.ClientConn
	live                        bool
	why                         string // why not live
	lastBeat                    time.Time
	status                      *workerpb.WorkerStatus
	ready                       map[string]bool   // version key → ready here
	failed                      map[string]string // version key → why its load failed in this session
	lost                        map[string]bool   // version key → the worker called its loaded copy failed in this session (not placed here again)
	busy                        map[string]bool   // version key → queued or running work at the last heartbeat
	// slots hold, per version key, what the last heartbeat said of its
	// queue and server there (route.go): the map is guarded by Pool.mu,
	// a slot's fields are atomic (heartbeats store, the predict path loads).
	slots map[string]*slot
	// copies are the versions with a copy placed here (placeCopyLocked):
	// a superset, whose entries that no longer hold one heldLocked drops,
	// so that finding what a worker holds walks its copies, not every
	// version of the pool.
	copies map[*Version]bool
	// gen counts the changes of what the pool made ready on this worker
	// (setReadyLocked: placement, loads, evictions, deaths); last is the
	// last report applied, in its order, at lastGen. An entry of the next
	// report equal to the one at its place in last, with no change since,
	// has nothing to apply (applyStatusLocked).
	gen, lastGen uint64
	last         []reported
	// unloading holds the versions the pool is taking off this worker:
	// their memory left its accounting when the unload was decided, so a
	// report that still lists them (built before the unload ended) is not
	// counted again. true once the Unload answered: the entry goes with
	// the first report that no longer lists the version.
	unloading map[string]bool
	// loads and evictions count, per version key, the loads onto and the
	// evictions from this worker since the pool started (across sessions).
	loads, evictions map[string]int64
	// full: the worker refused a load for its memory budget since its
	// last report (placement counts it full until the next one).
	full bool
	// budget and budgetSource are the memory budget w registered with:
	// its heartbeats cannot change it (trust.go). foreign is the memory
	// of the versions its last report listed that the pool did not place
	// there (bounded, one figure: no entry per name). beats counts its
	// reports in this process's life (copyOn.listed).
	budget       int64
	budgetSource string
	foreign      int64
	beats        uint64
}

// placeCopyLocked places v's copy cp on w: every copy is booked through it.
func (p *Pool) placeCopyLocked(v *Version, w *worker, cp *copyOn) {
	w.gen++ // its next report is read in full
	v.on[w.id] = cp
	if w.copies == nil {
		w.copies = map[*Version]bool{}
	}
	w.copies[v] = true
}

// maxEventsPerBeat bounds the events one heartbeat can forward.
const maxEventsPerBeat = 100_000

// New starts a Pool; Close stops it.
func New(cfg Config) *Pool {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 250 * time.Millisecond
	}
	if cfg.MissedHeartbeats <= 0 {
		cfg.MissedHeartbeats = 4
	}
	if cfg.WaitForWorker <= 0 {
		cfg.WaitForWorker = 2 * time.Minute
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = 64 << 20
	}
	if cfg.ShardSize <= 0 {
		cfg.ShardSize = 2
	}
	if cfg.MaxWorkers <= 0 {
		cfg.MaxWorkers = DefaultMaxWorkers
	}
	if cfg.ForgetAfter <= 0 {
		cfg.ForgetAfter = DefaultForgetAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.FailureMemory <= 0 {
		cfg.FailureMemory = placement.FailureMemory
	}
	if cfg.EvictDrain <= 0 {
		cfg.EvictDrain = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, workers: map[string]*worker{},
		versions: map[string]*Version{}, changed: make(chan struct{}), fenced: map[string]string{},
		loadRates: map[string]placement.LoadRate{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.watch()
	}()
	return p
}

// Close stops the pool's loops and closes its connections.
func (p *Pool) Close() {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		if w.conn != nil {
			_ = w.conn.Close()
		}
	}
}

// broadcastLocked publishes the routes that changed and wakes whoever
// waits for a change of readiness.
func (p *Pool) broadcastLocked() {
	p.publishLocked()
	close(p.changed)
	p.changed = make(chan struct{})
}

// Defaults of Config.MaxWorkers and Config.ForgetAfter.
const (
	DefaultMaxWorkers  = 256
	DefaultForgetAfter = time.Minute
)

// watch takes workers that stopped heartbeating out of routing, and
// forgets attached ones that stayed out (Forgettable).
func (p *Pool) watch() {
	t := time.NewTicker(p.cfg.HeartbeatInterval)
	defer t.Stop()
	limit := time.Duration(p.cfg.MissedHeartbeats) * p.cfg.HeartbeatInterval
	last := time.Now()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		late := now.Sub(last) > 2*p.cfg.HeartbeatInterval
		last = now
		if late {
			// This goroutine itself waited for a CPU: heartbeats may be
			// waiting unread too. Judge nobody on a starved clock.
			continue
		}
		p.mu.Lock()
		var forgotten []string
		var jobs []func()
		for _, w := range p.workers {
			heard := time.Unix(0, w.seen.Load())
			switch {
			case w.live && Silent(now, w.lastBeat, heard, limit):
				p.downLocked(w, fmt.Sprintf("missed heartbeats for %s", now.Sub(w.lastBeat).Round(time.Millisecond)))
			case Forgettable(w.live, slices.Contains(p.cfg.Known, w.id), now, w.lastBeat, heard, p.cfg.ForgetAfter):
				p.forgetLocked(w, fmt.Sprintf("silent for %s", now.Sub(w.lastBeat).Round(time.Second)))
				forgotten = append(forgotten, w.id)
			}
		}
		if len(forgotten) > 0 {
			jobs = p.reconcileAllLocked(p.now())
		}
		p.mu.Unlock()
		p.forgetSeries(forgotten)
		p.run(jobs)
	}
}

// Forgettable reports whether a worker is to be forgotten: it is not one
// of the Known (supervised) ones, it is out of routing, and it has been
// silent (no heartbeat, no answered call) for longer than after.
func Forgettable(live, known bool, now, lastBeat, lastAnswer time.Time, after time.Duration) bool {
	return !live && !known && Silent(now, lastBeat, lastAnswer, after)
}

// Silent reports whether a worker has been silent for longer than limit:
// no heartbeat and no answered call since now-limit.
func Silent(now, lastBeat, lastAnswer time.Time, limit time.Duration) bool {
	last := lastBeat
	if lastAnswer.After(last) {
		last = lastAnswer
	}
	return now.Sub(last) > limit
}

func (p *Pool) downLocked(w *worker, why string) {
	if !w.live {
		return
	}
	w.live, w.why = false, why
	p.rerouteWorkerLocked(w)
	p.log.Warn("worker out of routing", "worker", w.id, "pid", w.pid, "reason", why)
	p.broadcastLocked()
}

// MarkDead takes a worker out of routing at once (its process exited);
// every version with calls in flight there is charged with the exit. The
// copies its process held are gone with it: they leave the accounting and
// the versions they leave short are placed again at once (on the other
// workers, as placement decides), so the next request finds them loaded
// or loading, not waiting for the restart. The restarted process gets its
// shard's copies back when it registers.
func (p *Pool) MarkDead(id, why string) {
	p.mu.Lock()
	var acts []func()
	if w := p.workers[id]; w != nil {
		w.exited = true // its session is dead: the id may be taken (auth.go)
		now := p.now()
		for _, v := range p.sortedVersionsLocked() {
			if cp := v.on[w.id]; cp != nil && cp.session == w.session && cp.inflight.Load() > 0 {
				acts = append(acts, p.exitedLocked(v, w, w.session, now)...)
			}
		}
		p.downLocked(w, why)
		for _, v := range p.versions {
			if cp := v.on[w.id]; cp != nil && cp.session == w.session {
				delete(v.on, w.id)
				p.setReadyLocked(w, v.key, false)
				p.settleLocked(v)
			}
		}
		acts = append(acts, p.reconcileAllLocked(now)...)
		p.broadcastLocked()
	}
	p.mu.Unlock()
	p.run(acts)
}

// suspect takes a worker whose call of v failed on the connection out of
// routing until it heartbeats again (a transient failure costs one
// interval), and charges v with the worker's exit. The predict path
// skips the worker at once (gone); the control plane's part runs on its
// own goroutine, so the request that found the failure retries without
// waiting for Pool.mu.
func (p *Pool) suspect(w *worker, session int64, v *Version, err error) {
	w.gone.Store(session)
	p.run([]func(){func() {
		p.mu.Lock()
		var acts []func()
		if w.session == session && w.gone.Load() == session && p.fencedLocked(w.id) == "" {
			// A fenced worker is leaving on purpose: its failed call is no crash.
			acts = p.exitedLocked(v, w, session, p.now())
			p.downLocked(w, "call failed: "+err.Error())
		}
		p.mu.Unlock()
		p.run(acts)
	}})
}

// Register implements the control plane service.
func (p *Pool) Register(ctx context.Context, req *workerpb.RegisterRequest) (*workerpb.RegisterResponse, error) {
	if err := p.join(ctx, req); err != nil {
		return nil, hop.Status(err)
	}
	st := req.GetStatus()
	if st == nil || st.Id == "" || st.Address == "" {
		return nil, hop.Status(errs.New(errs.InvalidArgument, "register: status with id and address is required"))
	}
	if len(st.Id) > 128 {
		return nil, hop.Status(errs.Field(errs.InvalidArgument, "id", "at most 128 characters"))
	}
	dial, err := dialOptions(req)
	if err != nil {
		return nil, hop.Status(err)
	}
	p.mu.Lock()
	err = p.capLocked(st.Id)
	p.mu.Unlock()
	if err != nil {
		return nil, hop.Status(err) // before any lookup or dial
	}
	dialAddr, err := p.allowedAddr(ctx, st.Id, st.Address)
	if err != nil {
		return nil, hop.Status(err)
	}
	p.mu.Lock()
	if err := p.capLocked(st.Id); err != nil {
		p.mu.Unlock()
		return nil, hop.Status(err)
	}
	w := p.workers[st.Id]
	if w != nil {
		if err := p.claimLocked(ctx, w, time.Now()); err != nil {
			p.mu.Unlock()
			return nil, hop.Status(err)
		}
	}
	if w == nil {
		w = &worker{id: st.Id}
		p.workers[st.Id] = w
	}
	if w.conn == nil || w.addr != st.Address || w.pid != st.Pid || w.callSecret != req.CallSecret || w.certSHA != req.TlsCertSha256 {
		if err := p.newSessionLocked(w); err != nil {
			p.mu.Unlock()
			return nil, hop.Status(err)
		}
		if w.conn != nil {
			_ = w.conn.Close()
		}
		conn, err := grpc.NewClient(dialAddr, append(dial,
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.cfg.MaxMessageBytes), grpc.MaxCallSendMsgSize(p.cfg.MaxMessageBytes)),
			// Static flow-control windows: no BDP estimation, whose PING
			// and WINDOW_UPDATE frames cost a write and a wake-up on both
			// sides for nearly every small answer (docs/benchmarks.md,
			// issue 9).
			grpc.WithStaticStreamWindowSize(StreamWindowBytes), grpc.WithStaticConnWindowSize(ConnWindowBytes))...)
		if err != nil {
			p.mu.Unlock()
			return nil, hop.Status(errs.Field(errs.InvalidArgument, "address", "%v", err))
		}
		w.conn, w.infer, w.ctl = conn, inferencepb.NewGRPCInferenceServiceClient(conn), workerpb.NewWorkerClient(conn)
		w.callSecret, w.certSHA = req.CallSecret, req.TlsCertSha256
		p.rerouteWorkerLocked(w) // before its readiness goes with the old session
		w.session++
		w.ready, w.failed, w.busy, w.lost = map[string]bool{}, map[string]string{}, map[string]bool{}, map[string]bool{}
		w.unloading = map[string]bool{}
		w.slots = map[string]*slot{}
		w.last = nil
		if w.loads == nil {
			w.loads, w.evictions = map[string]int64{}, map[string]int64{}
		}
		for _, v := range p.versions {
			if cp := v.on[w.id]; cp != nil && cp.session != w.session {
				delete(v.on, w.id) // the process that held it is gone
				p.rerouteLocked(v)
				p.settleLocked(v)
			}
		}
	}
	w.addr, w.pid, w.status, w.lastBeat = st.Address, st.Pid, st, time.Now()
	w.live, w.why = true, ""
	w.gone.Store(0)
	if why := p.fencedLocked(w.id); why != "" {
		w.live, w.why = false, why // registered, out of routing until Unfence
	}
	p.rerouteWorkerLocked(w)
	events, jobs := p.applyStatusLocked(w, st, true)
	// Versions short of the copies they want are placed again (on this
	// worker or another, as placement decides): hot ones first.
	jobs = append(jobs, p.reconcileAllLocked(p.now())...)
	p.broadcastLocked()
	secret := w.secret
	p.mu.Unlock()
	events.deliver()
	p.log.Info("worker registered", "worker", st.Id, "addr", st.Address, "pid", st.Pid, "loads", len(jobs))
	p.run(jobs)
	return &workerpb.RegisterResponse{HeartbeatIntervalMs: p.cfg.HeartbeatInterval.Milliseconds(), SessionSecret: secret}, nil
}

// capLocked refuses the registration of a new id past MaxWorkers (Known
// ids are always admitted).
func (p *Pool) capLocked(id string) error {
	if p.workers[id] != nil || len(p.workers) < p.cfg.MaxWorkers || slices.Contains(p.cfg.Known, id) {
		return nil
	}
	return &errs.Error{Code: errs.TooManyWorkers, RetryAfter: p.cfg.ForgetAfter,
		Message: fmt.Sprintf("register %s: %d workers are registered, the most sluice serve --max-workers allows; raise --max-workers, or wait until silent ones are forgotten (--forget-after %s)", id, len(p.workers), p.cfg.ForgetAfter)}
}

// applyStatusLocked takes a worker's report (it owns st from then on:
// the report is clamped and filtered in place, trust.go). Only entries of
// versions the pool placed on w in this session, or is unloading from it,
// are read; the others add their memory to w.foreign and nothing else (no
// slot, no map entry: a worker cannot grow the pool's maps by naming
// versions). The budget is the one w registered with (registering: this
// report is the registration's). Readiness and queue work per version:
// a version still loading never loses readiness it was given by its Load
// answer (a report may have been built before the load ended). Queue
// work and serving state go into the version's slot on w (atomic: no
// route is rebuilt for them); a change of readiness marks the route. A
// copy whose load answered that w calls failed, or that two reports in a
// row no longer list (one may have been built before its load ended), is
// dropped and placed again: its jobs are returned. The observers' events
// are returned, to be delivered without the lock.
func (p *Pool) applyStatusLocked(w *worker, st *workerpb.WorkerStatus, registering bool) (events, []func()) {
	var evs events
	clampWorker(st, time.Now())
	if registering {
		w.budget, w.budgetSource = st.MemoryBudgetBytes, st.MemoryBudgetSource
	} else {
		st.MemoryBudgetBytes, st.MemoryBudgetSource = w.budget, w.budgetSource
	}
	w.beats++
	var buf [64]byte
	kept := st.Versions[:0]
	var foreign int64
	for i, vs := range st.Versions {
		if i >= maxReportedVersions {
			break
		}
		if vs == nil {
			continue
		}
		kb := strconv.AppendInt(append(append(buf[:0], vs.Model...), '@'), vs.Version, 10)
		placed := false
		if v := p.versions[string(kb)]; v != nil {
			if cp := v.on[w.id]; cp != nil && cp.session == w.session {
				placed, cp.listed = true, w.beats
			}
		}
		if !placed {
			if _, unl := w.unloading[string(kb)]; !unl {
				foreign = min(foreign+clampInt(vs.MemoryBytes, 0, maxMemory), maxMemory)
				continue
			}
		}
		clampVersion(vs)
		kept = append(kept, vs)
	}
	clear(st.Versions[len(kept):])
	st.Versions, w.foreign = kept, foreign
	if len(w.unloading) > 0 {
		for k, answered := range w.unloading {
			if answered && !slices.ContainsFunc(st.Versions, func(vs *workerpb.VersionStatus) bool { return isKey(k, vs.Model, vs.Version) }) {
				delete(w.unloading, k)
			}
		}
	}
	// A report lists every version its worker holds, at every beat, most
	// of them as the last time: an entry equal to the one at its place in
	// the last report, when nothing changed on the worker since, is
	// skipped. Otherwise its slot (found with a key built in buf, so a
	// known version costs no allocation) keeps what the other maps would,
	// and they are written only when it changed.
	same := w.lastGen == w.gen
	var broken []*Version
	for i, vs := range st.Versions {
		if same && i < len(w.last) && w.last[i] == reportedOf(vs) {
			continue
		}
		kb := strconv.AppendInt(append(append(buf[:0], vs.Model...), '@'), vs.Version, 10)
		s := w.slots[string(kb)]
		if s == nil {
			s = &slot{key: string(kb)}
			w.slots[s.key] = s
		}
		k := s.key
		s.report(vs.QueuedInstances, servingState{cost: serving.CostModel{A: time.Duration(vs.CostANs), B: time.Duration(vs.CostBNs)},
			maxBatch: int(vs.MaxBatch), replicas: int(vs.ReadyReplicas)})
		if busy := vs.QueuedInstances > 0 || vs.InflightBatches > 0; busy != s.busy || !s.reported {
			s.busy, s.reported = busy, true
			w.busy[k] = busy
		}
		// Counters grow within a process (a session): forward the growth,
		// bounded per beat; a drop is ignored (advance). The report keeps
		// what the pool believes.
		prev := s.counts
		now := advanceCounts(prev, counts{crashes: vs.Crashes, expired: vs.ExpiredInQueue, batches: vs.Batches, rows: vs.Rows})
		s.counts = now
		vs.Crashes, vs.ExpiredInQueue, vs.Batches, vs.Rows = now.crashes, now.expired, now.batches, now.rows
		if i < len(w.last) {
			w.last[i] = reportedOf(vs)
		} else {
			w.last = append(w.last, reportedOf(vs))
		}
		v := p.versions[k]
		var cp *copyOn
		if v != nil {
			if cp = v.on[w.id]; cp != nil && cp.session != w.session {
				cp = nil
			}
		}
		if v != nil && v.spec.Observer != nil && (now.crashes > prev.crashes || now.expired > prev.expired) {
			evs = append(evs, event{obs: v.spec.Observer, crashes: now.crashes - prev.crashes, expired: now.expired - prev.expired})
		}
		if cp != nil && !cp.loading && vs.State == "ready" && vs.MemoryBytes > 0 {
			cp.memory = vs.MemoryBytes
		}
		switch vs.State {
		case "ready":
			// Only a copy the pool placed takes traffic: one being evicted
			// is still reported ready while it drains.
			ok := vs.ReadyReplicas > 0 && cp != nil && !cp.loading
			if w.ready[k] != ok {
				p.setReadyLocked(w, k, ok)
				p.broadcastLocked()
			}
		case "failed":
			if cp != nil && !cp.loading {
				// Its load answered ready, and a worker never fails a
				// loaded version (a replica crash is a count and a
				// restarting replica): the copy is broken there. It is
				// placed again, not on w in this session.
				w.lost[k] = true
				broken = append(broken, v)
				continue
			}
			fallthrough
		case "unloading", "unknown":
			if w.ready[k] {
				p.setReadyLocked(w, k, false)
				p.broadcastLocked()
			}
		}
	}
	w.last = w.last[:min(len(w.last), len(st.Versions))]
	// Copies placed here whose load answered and that neither this report
	// nor the one before listed are gone (an Unload from elsewhere, a
	// worker that lost them): placed again.
	for v := range w.copies {
		cp := v.on[w.id]
		if cp == nil || cp.session != w.session || cp.loading || p.versions[v.key] != v {
			continue
		}
		if cp.listed == w.beats {
			cp.missed = 0
			continue
		}
		if cp.missed++; cp.missed >= 2 {
			broken = append(broken, v)
		}
	}
	var jobs []func()
	if len(broken) > 0 {
		now := p.now()
		for _, v := range broken {
			p.dropCopyLocked(v, w, "reported failed, or no longer reported, by its worker")
		}
		for _, v := range broken {
			js, _ := p.reconcileLocked(v, now)
			jobs = append(jobs, js...)
		}
		p.broadcastLocked()
	}
	w.lastGen = w.gen
	return evs, jobs
}

// dropCopyLocked takes v's copy on w out of routing and of the accounting
// (its worker lost it or broke it): the pool no longer counts it placed.
func (p *Pool) dropCopyLocked(v *Version, w *worker, why string) {
	if v.on[w.id] == nil {
		return
	}
	delete(v.on, w.id)
	p.setReadyLocked(w, v.key, false)
	p.settleLocked(v)
	p.log.Warn("copy lost on worker: placed again", "worker", w.id, "version", v.key, "why", why)
}

// isKey reports whether k is key(model, n), without building it.
func isKey(k, model string, n int64) bool {
	var buf [64]byte
	return string(strconv.AppendInt(append(append(buf[:0], model...), '@'), n, 10)) == k
}

// reported is what applyStatusLocked reads of one entry of a report.
type reported struct {
	model                                            string
	version                                          int64
	state                                            string
	ready, maxBatch                                  int32
	queued, inflight, crashes, expired, costA, costB int64
	memory, batches, rows                            int64
}

func reportedOf(vs *workerpb.VersionStatus) reported {
	return reported{model: vs.Model, version: vs.Version, state: vs.State, ready: vs.ReadyReplicas, maxBatch: vs.MaxBatch,
		queued: vs.QueuedInstances, inflight: int64(vs.InflightBatches), crashes: vs.Crashes, expired: vs.ExpiredInQueue,
		costA: vs.CostANs, costB: vs.CostBNs, memory: vs.MemoryBytes, batches: vs.Batches, rows: vs.Rows}
}

// event is the growth of one version's counters in one report.
type event struct {
	obs              serving.Observer
	crashes, expired int64
}

type events []event

// deliver tells the observers (without Pool.mu: an observer may take
// its time), at most maxEventsPerBeat of each kind per report.
func (evs events) deliver() {
	for _, e := range evs {
		for range min(e.crashes, maxEventsPerBeat) {
			e.obs.ReplicaCrash()
		}
		for range min(e.expired, maxEventsPerBeat) {
			e.obs.ExpiredInQueue()
		}
	}
}

// Heartbeat implements the control plane service.
// The predict path does not wait for it: what it changes reaches routing
// through the slots (queue work) and the routes it republishes.
func (p *Pool) Heartbeat(ctx context.Context, st *workerpb.WorkerStatus) (*workerpb.HeartbeatResponse, error) {
	p.mu.Lock()
	w := p.workers[st.GetId()]
	if w != nil {
		if _, err := p.callerLocked(ctx, st.GetId()); err != nil {
			p.mu.Unlock()
			p.refusals.log(p.log, "worker heartbeat refused", err)
			return nil, hop.Status(err)
		}
	}
	if w == nil || w.pid != st.Pid || w.addr != st.Address {
		p.mu.Unlock()
		return &workerpb.HeartbeatResponse{Known: false}, nil
	}
	w.lastBeat, w.status, w.full = time.Now(), st, false
	if !w.live && p.fencedLocked(w.id) == "" {
		w.live, w.why = true, ""
		w.gone.Store(0)
		p.rerouteWorkerLocked(w)
		p.log.Info("worker back in routing", "worker", w.id, "pid", w.pid)
		p.broadcastLocked()
	}
	events, jobs := p.applyStatusLocked(w, st, false)
	p.run(jobs)
	p.run(p.trimLocked(w, p.now()))
	p.publishLocked()
	var used int64
	if p.cfg.Metrics != nil {
		used, _ = p.heldLocked(w, nil, p.now())
	}
	id := w.id
	p.mu.Unlock()
	events.deliver()
	if p.cfg.Metrics != nil {
		p.cfg.Metrics.WorkerMemory(id, st.MemoryBudgetBytes, used)
	}
	return &workerpb.HeartbeatResponse{Known: true}, nil
}

// storeCode is the code an artifact store's error carries (an object
// store that is down is unavailable, not a missing artifact), else def.
func storeCode(err error, def errs.Code) errs.Code {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return def
}

// FetchArtifact implements the control plane service: it streams the
// artifact in chunks of 1 MiB; the worker verifies the hash.
func (p *Pool) FetchArtifact(req *workerpb.FetchArtifactRequest, stream grpc.ServerStreamingServer[workerpb.ArtifactChunk]) error {
	if p.cfg.Artifacts == nil {
		return hop.Status(errs.New(errs.Unavailable, "this control plane serves no artifacts"))
	}
	if err := p.mayFetch(stream.Context(), req.Sha256); err != nil {
		return hop.Status(err)
	}
	r, size, err := p.cfg.Artifacts.OpenArtifact(stream.Context(), req.Sha256)
	if err != nil {
		return hop.Status(errs.Wrap(storeCode(err, errs.NotFound), err, "artifact %s", req.Sha256))
	}
	defer r.Close()
	buf := make([]byte, 1<<20)
	first := true
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 || first {
			c := &workerpb.ArtifactChunk{Data: buf[:n]}
			if first {
				c.TotalBytes, first = size, false
			}
			if serr := stream.Send(c); serr != nil {
				return serr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return hop.Status(errs.Wrap(storeCode(err, errs.Internal), err, "read artifact %s", req.Sha256))
		}
	}
}
