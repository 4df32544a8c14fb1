// Package cluster is the gateway's side of worker processes. A Pool is the
// control plane's registry of workers (they register and heartbeat over
// the worker control protocol; one that misses heartbeats, dies or fails a
// call is taken out of routing), the place versions are loaded onto them
// (until placement arrives: every worker holds every version, the
// version's replicas spread across them), and the source of artifacts they
// fetch by SHA-256. A Version is the data plane's backend for one version
// whose replicas live on workers: it picks a worker by the power of two
// choices on reported queue work, sends the preprocessed rows over the Open
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
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/oip"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
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
	// HeartbeatInterval is how often workers report (default 250ms); a
	// worker silent for MissedHeartbeats intervals (default 4) is out of
	// routing until it reports again.
	HeartbeatInterval time.Duration
	MissedHeartbeats  int
	// Known are the ids of workers expected to register (the local
	// workers a supervisor starts): they count in every model's shard
	// from the start, so shards do not move while workers boot.
	Known []string
	// ShardSize is how many workers hold each model (default 2): each
	// model's versions go to the ShardSize workers chosen by rendezvous
	// hashing of the model name (Shard); its replicas are spread over them.
	ShardSize int
	// WaitForWorker bounds how long a version waits for a first worker to
	// register before it fails (default 2 minutes).
	WaitForWorker time.Duration
	// MaxMessageBytes bounds gRPC messages to workers (default 64 MiB).
	MaxMessageBytes int
	Logger          *slog.Logger
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

	mu       sync.Mutex // guards workers, versions, changed and every worker's fields marked "guarded by Pool.mu"
	workers  map[string]*worker
	versions map[string]*Version // desired: loaded on every worker
	changed  chan struct{}       // closed and replaced on every change of readiness

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

	// guarded by Pool.mu
	addr     string
	pid      int64
	session  int64 // bumps at every registration: a restarted process is a new session
	conn     *grpc.ClientConn
	live     bool
	why      string // why not live
	lastBeat time.Time
	status   *workerpb.WorkerStatus
	ready    map[string]bool   // version key → ready here
	failed   map[string]string // version key → why its load failed in this session
	queued   map[string]int64  // version key → queued instances at the last heartbeat
	counts   map[string]counts // version key → cumulative counters at the last heartbeat
}

// maxEventsPerBeat bounds the events one heartbeat can forward.
const maxEventsPerBeat = 100_000

// counts are a version's cumulative event counters on one worker process.
type counts struct{ crashes, expired int64 }

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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, workers: map[string]*worker{},
		versions: map[string]*Version{}, changed: make(chan struct{})}
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

func (p *Pool) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// watch takes workers that stopped heartbeating out of routing.
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
		for _, w := range p.workers {
			if w.live && Silent(now, w.lastBeat, time.Unix(0, w.seen.Load()), limit) {
				p.downLocked(w, fmt.Sprintf("missed heartbeats for %s", now.Sub(w.lastBeat).Round(time.Millisecond)))
			}
		}
		p.mu.Unlock()
	}
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
	p.log.Warn("worker out of routing", "worker", w.id, "pid", w.pid, "reason", why)
	p.broadcastLocked()
}

// MarkDead takes a worker out of routing at once (its process exited).
func (p *Pool) MarkDead(id, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.workers[id]; w != nil {
		p.downLocked(w, why)
	}
}

// suspect takes a worker whose call failed out of routing until it
// heartbeats again (a transient failure costs one interval).
func (p *Pool) suspect(w *worker, session int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.session == session {
		p.downLocked(w, "call failed: "+err.Error())
	}
}

// Register implements the control plane service.
func (p *Pool) Register(_ context.Context, req *workerpb.RegisterRequest) (*workerpb.RegisterResponse, error) {
	st := req.GetStatus()
	if st == nil || st.Id == "" || st.Address == "" {
		return nil, oip.Status(errs.New(errs.InvalidArgument, "register: status with id and address is required"))
	}
	if len(st.Id) > 128 {
		return nil, oip.Status(errs.Field(errs.InvalidArgument, "id", "at most 128 characters"))
	}
	p.mu.Lock()
	w := p.workers[st.Id]
	if w == nil {
		w = &worker{id: st.Id}
		p.workers[st.Id] = w
	}
	if w.conn == nil || w.addr != st.Address || w.pid != st.Pid {
		if w.conn != nil {
			_ = w.conn.Close()
		}
		conn, err := grpc.NewClient(st.Address, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.cfg.MaxMessageBytes), grpc.MaxCallSendMsgSize(p.cfg.MaxMessageBytes)),
			// Static flow-control windows: no BDP estimation, whose PING
			// and WINDOW_UPDATE frames cost a write and a wake-up on both
			// sides for nearly every small answer (docs/benchmarks.md,
			// issue 9).
			grpc.WithStaticStreamWindowSize(StreamWindowBytes), grpc.WithStaticConnWindowSize(ConnWindowBytes))
		if err != nil {
			p.mu.Unlock()
			return nil, oip.Status(errs.Field(errs.InvalidArgument, "address", "%v", err))
		}
		w.conn, w.infer, w.ctl = conn, inferencepb.NewGRPCInferenceServiceClient(conn), workerpb.NewWorkerClient(conn)
		w.session++
		w.ready, w.failed, w.queued, w.counts = map[string]bool{}, map[string]string{}, map[string]int64{}, map[string]counts{}
	}
	w.addr, w.pid, w.status, w.lastBeat = st.Address, st.Pid, st, time.Now()
	w.live, w.why = true, ""
	p.applyStatusLocked(w, st)
	var todo []*Version
	for _, v := range p.versions {
		if !w.ready[v.key] && p.inShardLocked(v, w.id) {
			todo = append(todo, v)
		}
	}
	session := w.session
	p.broadcastLocked()
	p.mu.Unlock()
	p.log.Info("worker registered", "worker", st.Id, "addr", st.Address, "pid", st.Pid, "versions_to_load", len(todo))
	for _, v := range todo {
		p.loadOn(w, session, v)
	}
	return &workerpb.RegisterResponse{HeartbeatIntervalMs: p.cfg.HeartbeatInterval.Milliseconds()}, nil
}

// applyStatusLocked takes a worker's report: readiness and queue work per
// version. A version still loading never loses readiness it was given by
// its Load answer (a report may have been built before the load ended).
func (p *Pool) applyStatusLocked(w *worker, st *workerpb.WorkerStatus) {
	for _, vs := range st.Versions {
		k := key(vs.Model, vs.Version)
		w.queued[k] = vs.QueuedInstances
		// Counters grow within a process (a session): forward the growth.
		prev, now := w.counts[k], counts{crashes: vs.Crashes, expired: vs.ExpiredInQueue}
		w.counts[k] = now
		if v := p.versions[k]; v != nil && v.spec.Observer != nil {
			for i := prev.crashes; i < min(now.crashes, prev.crashes+maxEventsPerBeat); i++ {
				v.spec.Observer.ReplicaCrash()
			}
			for i := prev.expired; i < min(now.expired, prev.expired+maxEventsPerBeat); i++ {
				v.spec.Observer.ExpiredInQueue()
			}
		}
		switch vs.State {
		case "ready":
			ok := vs.ReadyReplicas > 0
			if w.ready[k] != ok {
				w.ready[k] = ok
				p.broadcastLocked()
			}
		case "failed", "unloading":
			if w.ready[k] {
				w.ready[k] = false
				p.broadcastLocked()
			}
		}
	}
}

// Heartbeat implements the control plane service.
func (p *Pool) Heartbeat(_ context.Context, st *workerpb.WorkerStatus) (*workerpb.HeartbeatResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.workers[st.GetId()]
	if w == nil || w.pid != st.Pid || w.addr != st.Address {
		return &workerpb.HeartbeatResponse{Known: false}, nil
	}
	w.lastBeat, w.status = time.Now(), st
	if !w.live {
		w.live, w.why = true, ""
		p.log.Info("worker back in routing", "worker", w.id, "pid", w.pid)
		p.broadcastLocked()
	}
	p.applyStatusLocked(w, st)
	return &workerpb.HeartbeatResponse{Known: true}, nil
}

// FetchArtifact implements the control plane service: it streams the
// artifact in chunks of 1 MiB; the worker verifies the hash.
func (p *Pool) FetchArtifact(req *workerpb.FetchArtifactRequest, stream grpc.ServerStreamingServer[workerpb.ArtifactChunk]) error {
	if p.cfg.Artifacts == nil {
		return oip.Status(errs.New(errs.Unavailable, "this control plane serves no artifacts"))
	}
	r, size, err := p.cfg.Artifacts.OpenArtifact(stream.Context(), req.Sha256)
	if err != nil {
		return oip.Status(errs.Wrap(errs.NotFound, err, "artifact %s: %v", req.Sha256, err))
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
			return oip.Status(errs.Wrap(errs.Internal, err, "read artifact %s: %v", req.Sha256, err))
		}
	}
}

// VersionSpec is one version to place on workers.
type VersionSpec struct {
	Model         string
	N             int
	Manifest      []byte
	ArtifactSHA   string
	ArtifactBytes int64
	Spec          *modelpkg.Spec
	// Observer is told of replica crashes and expired requests on the
	// workers (from their heartbeats' counters; nil: nobody).
	Observer serving.Observer
}

func key(model string, n int64) string { return fmt.Sprintf("%s@%d", model, n) }

// Start places v on every live worker (and on every worker that registers
// later) and returns once one of them has it ready, or with the reason
// when every live worker failed to load it.
func (p *Pool) Start(ctx context.Context, vs VersionSpec) (*Version, hosting.Timings, error) {
	v := newVersion(p, vs)
	p.mu.Lock()
	p.versions[v.key] = v
	type job struct {
		w       *worker
		session int64
	}
	var jobs []job
	for _, w := range p.workers {
		if w.live && p.inShardLocked(v, w.id) {
			jobs = append(jobs, job{w, w.session})
		}
	}
	p.mu.Unlock()
	for _, j := range jobs {
		p.loadOn(j.w, j.session, v)
	}
	wait := time.NewTimer(p.cfg.WaitForWorker)
	defer wait.Stop()
	for {
		p.mu.Lock()
		live, failed := 0, 0
		var reasons []string
		for _, w := range p.workers {
			if !w.live || !p.inShardLocked(v, w.id) {
				continue
			}
			live++
			if w.ready[v.key] {
				tm := v.timing
				p.mu.Unlock()
				return v, tm, nil
			}
			if why, ok := w.failed[v.key]; ok {
				failed++
				reasons = append(reasons, why)
			}
		}
		ch := p.changed
		p.mu.Unlock()
		if live > 0 && failed == live {
			p.forget(v)
			sort.Strings(reasons)
			return nil, hosting.Timings{}, errors.New(reasons[0])
		}
		select {
		case <-ch:
		case <-ctx.Done():
			p.forget(v)
			return nil, hosting.Timings{}, ctx.Err()
		case <-wait.C:
			if live == 0 {
				p.forget(v)
				return nil, hosting.Timings{}, fmt.Errorf("load %s: no worker registered within %s (start workers with sluice serve --workers N, or attach one with sluice worker --join ADDR)", v.key, p.cfg.WaitForWorker)
			}
			wait.Reset(p.cfg.WaitForWorker)
		}
	}
}

func (p *Pool) forget(v *Version) {
	p.mu.Lock()
	if p.versions[v.key] == v {
		delete(p.versions, v.key)
	}
	p.mu.Unlock()
}

// shardLocked is the workers that hold v's model: the shard among the
// known and registered workers.
func (p *Pool) shardLocked(v *Version) []string {
	seen := map[string]bool{}
	var ids []string
	for _, id := range p.cfg.Known {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for id := range p.workers {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return Shard(v.spec.Model, ids, p.cfg.ShardSize)
}

func (p *Pool) inShardLocked(v *Version, id string) bool {
	for _, s := range p.shardLocked(v) {
		if s == id {
			return true
		}
	}
	return false
}

// replicasPerWorkerLocked spreads a version's replicas over its shard.
func (p *Pool) replicasPerWorkerLocked(v *Version) int32 {
	r := max(v.spec.Spec.Manifest.Serving.Replicas, 1)
	n := max(len(p.shardLocked(v)), 1)
	return int32(max(1, (r+n-1)/n))
}

// loadOn loads v on w (in the background, owned by the pool).
func (p *Pool) loadOn(w *worker, session int64, v *Version) {
	p.mu.Lock()
	ctl := w.ctl
	reps := p.replicasPerWorkerLocked(v)
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Minute)
		defer cancel()
		resp, err := ctl.Load(ctx, &workerpb.LoadRequest{Model: v.spec.Model, Version: int64(v.spec.N), Manifest: v.spec.Manifest,
			ArtifactSha256: v.spec.ArtifactSHA, ArtifactBytes: v.spec.ArtifactBytes, Replicas: reps})
		p.mu.Lock()
		defer p.mu.Unlock()
		if w.session != session || p.versions[v.key] != v {
			return // the worker restarted or the version went away meanwhile
		}
		if err != nil {
			e, _ := oip.FromStatus(err)
			w.failed[v.key] = e.Message
			p.log.Error("load on worker failed", "worker", w.id, "version", v.key, "err", e.Message)
		} else {
			w.ready[v.key] = true
			delete(w.failed, v.key)
			if v.timing == (hosting.Timings{}) {
				v.timing = hosting.Timings{Load: time.Duration(resp.LoadNs), Golden: time.Duration(resp.GoldenNs), Warmup: time.Duration(resp.WarmupNs)}
			}
			p.log.Info("version ready on worker", "worker", w.id, "version", v.key, "replicas", reps, "artifact", resp.ArtifactSource,
				"load", time.Duration(resp.LoadNs).String(), "rss_mb", resp.RssBytes>>20)
		}
		p.broadcastLocked()
	}()
}

// unload removes v from every worker (best effort, bounded by ctx).
func (p *Pool) unload(ctx context.Context, v *Version) error {
	p.mu.Lock()
	if p.versions[v.key] == v {
		delete(p.versions, v.key)
	}
	var ctls []workerpb.WorkerClient
	for _, w := range p.workers {
		if w.live {
			ctls = append(ctls, w.ctl)
		}
		delete(w.ready, v.key)
	}
	p.broadcastLocked()
	p.mu.Unlock()
	var errList []error
	drain := int64(10_000)
	if dl, ok := ctx.Deadline(); ok {
		drain = max(1, time.Until(dl).Milliseconds())
	}
	for _, c := range ctls {
		if _, err := c.Unload(ctx, &workerpb.UnloadRequest{Model: v.spec.Model, Version: int64(v.spec.N), DrainMs: drain}); err != nil {
			errList = append(errList, err)
		}
	}
	return errors.Join(errList...)
}

// candidate is a worker that can take a version's work now.
type candidate struct {
	w       *worker
	session int64
	load    int64
}

// candidates lists the live workers holding key ready, except skip.
func (p *Pool) candidates(k string, skip *worker) []candidate {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []candidate
	for _, w := range p.workers {
		if w.live && w.ready[k] && w != skip {
			out = append(out, candidate{w: w, session: w.session, load: w.queued[k] + w.outstanding.Load()})
		}
	}
	return out
}

// pick chooses a worker for key by the power of two choices.
func (p *Pool) pick(k string, skip *worker) (candidate, bool) {
	cs := p.candidates(k, skip)
	switch len(cs) {
	case 0:
		return candidate{}, false
	case 1:
		return cs[0], true
	}
	i, j := twoOf(len(cs), rand.Uint64())
	load := make([]int64, len(cs))
	for x, c := range cs {
		load[x] = c.load
	}
	return cs[PickTwo(load, i, j)], true
}

// WorkerInfo is one worker as the API lists it.
type WorkerInfo struct {
	ID        string
	Address   string
	PID       int64
	State     string // ready, down
	Reason    string
	RSS       int64
	CacheSize int64
	LastBeat  time.Time
	Started   time.Time
	Versions  []WorkerVersion
}

// WorkerVersion is one version on a worker.
type WorkerVersion struct {
	ID                 string
	State              string
	Reason             string
	ReadyReplicas      int
	RestartingReplicas int
	QueuedInstances    int64
	InflightBatches    int
	Batches, Rows      int64
	Crashes            int64
}

// Workers lists the registered workers by id.
func (p *Pool) Workers() []WorkerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]WorkerInfo, 0, len(p.workers))
	for _, w := range p.workers {
		wi := WorkerInfo{ID: w.id, Address: w.addr, PID: w.pid, State: "ready", LastBeat: w.lastBeat}
		if !w.live {
			wi.State, wi.Reason = "down", w.why
		}
		if st := w.status; st != nil {
			wi.RSS, wi.CacheSize, wi.Started = st.RssBytes, st.CacheBytes, time.UnixMilli(st.StartedUnixMs)
			for _, vs := range st.Versions {
				wi.Versions = append(wi.Versions, WorkerVersion{ID: key(vs.Model, vs.Version), State: vs.State, Reason: vs.Reason,
					ReadyReplicas: int(vs.ReadyReplicas), RestartingReplicas: int(vs.RestartingReplicas), QueuedInstances: vs.QueuedInstances,
					InflightBatches: int(vs.InflightBatches), Batches: vs.Batches, Rows: vs.Rows, Crashes: vs.Crashes})
			}
		}
		out = append(out, wi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
