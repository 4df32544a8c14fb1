package cluster

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/runtime"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/testwait"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// fakeWorker is a hand-written worker: it loads anything at once and
// answers ModelInfer with what behave says (nil: echo the rows' sums).
type fakeWorker struct {
	workerpb.UnimplementedWorkerServer
	inferencepb.UnimplementedGRPCInferenceServiceServer
	id   string
	addr string
	gs   *grpc.Server
	// secret is the call secret it registers; refused counts the calls
	// that came without it.
	secret  string
	refused atomic.Int64
	calls   atomic.Int64
	mu      sync.Mutex
	behave  error
	hang    chan struct{} // when set, ModelInfer waits for it or the caller's end
	// replicas is the count of the last SetReplicas
	replicas atomic.Int32
	// loads counts Load calls; gate, when set, holds each Load until it
	// is closed; loadErr fails them; unloads lists the Unload calls.
	loads   atomic.Int64
	gate    chan struct{}
	loadErr error
	unloads []string
	// measured, per model, is the memory its Load reports (0: none).
	measured map[string]int64
	// refuse is how many of the next loads are refused for the budget
	// (ResourceExhausted, as a worker over its budget answers).
	refuse int
}

func (f *fakeWorker) SetReplicas(_ context.Context, req *workerpb.SetReplicasRequest) (*workerpb.SetReplicasResponse, error) {
	f.replicas.Store(req.Replicas)
	return &workerpb.SetReplicasResponse{ReadyReplicas: req.Replicas}, nil
}

func (f *fakeWorker) Load(ctx context.Context, req *workerpb.LoadRequest) (*workerpb.LoadResponse, error) {
	f.loads.Add(1)
	f.mu.Lock()
	gate, lerr := f.gate, f.loadErr
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if lerr != nil {
		return nil, hop.Status(lerr)
	}
	f.mu.Lock()
	mem, refuse := f.measured[req.Model], f.refuse > 0
	if refuse {
		f.refuse--
	}
	f.mu.Unlock()
	if refuse {
		return nil, status.Error(codes.ResourceExhausted, "worker "+f.id+" is at its memory budget")
	}
	return &workerpb.LoadResponse{LoadNs: 1000, MemoryBytes: mem, MemoryMeasured: mem > 0}, nil
}

func (f *fakeWorker) Unload(_ context.Context, req *workerpb.UnloadRequest) (*workerpb.UnloadResponse, error) {
	f.mu.Lock()
	f.unloads = append(f.unloads, key(req.Model, req.Version))
	f.mu.Unlock()
	return &workerpb.UnloadResponse{}, nil
}

func (f *fakeWorker) unloaded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.unloads...)
}

func (f *fakeWorker) ModelInfer(ctx context.Context, req *inferencepb.ModelInferRequest) (*inferencepb.ModelInferResponse, error) {
	f.calls.Add(1)
	f.mu.Lock()
	err, hang := f.behave, f.hang
	f.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, hop.Status(err)
	}
	b, derr := hop.DecodeBatch(req, 2, false)
	if derr != nil {
		return nil, hop.Status(derr)
	}
	out := runtime.Output{Rows: b.Rows, Cols: 1, Data: make([]float32, b.Rows)}
	for i := 0; i < b.Rows; i++ {
		out.Data[i] = b.Data[2*i] + b.Data[2*i+1]
	}
	resp := &inferencepb.ModelInferResponse{}
	hop.EncodeOutput(resp, out)
	return resp, nil
}

func (f *fakeWorker) set(err error) {
	f.mu.Lock()
	f.behave = err
	f.mu.Unlock()
}

func init() { slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil))) }

func startFake(t testing.TB, id string) *fakeWorker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeWorker{id: id, addr: ln.Addr().String(), secret: newTestSecret(t)}
	// As a worker does: TLS with the certificate the pool pins, and every
	// call refused without the call secret.
	f.gs = grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{fakeCert.cert}})),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if !hop.SecretEqual(hop.Incoming(ctx, hop.CallKey), f.secret) {
				f.refused.Add(1)
				return nil, status.Error(codes.Unauthenticated, "no call secret")
			}
			return h(ctx, req)
		}))
	fakes.Store(f.addr, f)
	workerpb.RegisterWorkerServer(f.gs, f)
	inferencepb.RegisterGRPCInferenceServiceServer(f.gs, f)
	go func() { _ = f.gs.Serve(ln) }()
	t.Cleanup(f.gs.Stop)
	return f
}

func (f *fakeWorker) register(t *testing.T, p *Pool, pid int64) {
	t.Helper()
	if _, err := p.testRegister(t.Context(), &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: f.id, Address: f.addr, Pid: pid}}); err != nil {
		t.Fatal(err)
	}
}

func testSpec(t testing.TB) VersionSpec {
	t.Helper()
	y := "name: m\nruntime: linear\nartifact: a.json\ninput:\n  schema: i@1\n  fields: [{name: x, type: float}, {name: z, type: float}]\noutput:\n  schema: o@1\n  fields: [{name: y}]\n"
	spec, err := modelpkg.Parse("model.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return VersionSpec{Model: "m", N: 1, Manifest: []byte(y), ArtifactSHA: "00", Spec: spec}
}

func rows(n int) serving.Work {
	b := runtime.Batch{Rows: n, Cols: 2, Data: make([]float32, 2*n)}
	for i := range b.Data {
		b.Data[i] = float32(i)
	}
	return serving.Work{Rows: b}
}

// twoWorkers starts a pool with two fake workers holding version m@1.
func twoWorkers(t *testing.T) (*Pool, *Version, *fakeWorker, *fakeWorker) {
	t.Helper()
	p := newTestPool(Config{Known: []string{"a", "b"}, HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	a, b := startFake(t, "a"), startFake(t, "b")
	a.register(t, p, 1)
	b.register(t, p, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	v, _, err := p.Start(ctx, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() bool { return len(p.candidates(v, nil)) == 2 })
	return p, v, a, b
}

// Submit tries one other worker when the first refuses or fails, and
// never a third; errors that say the request itself is wrong are not
// retried. B reports a queue, so the power of two choices always sends
// first to A: whether B was tried is then the retry's doing alone.
func TestSubmitRetriesElsewhere(t *testing.T) {
	cases := []struct {
		name         string
		a, b         error // behaviour of each worker (nil: answer)
		wantCode     errs.Code
		wantAttempts int
		wantTriedB   bool
	}{
		{"both answer", nil, nil, "", 1, false},
		{"a queue full", errs.New(errs.QueueFull, "full"), nil, "", 2, true},
		{"a infeasible", errs.New(errs.DeadlineInfeasible, "late"), nil, "", 2, true},
		{"a not ready", errs.New(errs.NotReady, "loading"), nil, "", 2, true},
		{"a unavailable", errs.New(errs.Unavailable, "going"), nil, "", 2, true},
		{"both full", errs.New(errs.QueueFull, "full"), errs.New(errs.QueueFull, "full"), errs.QueueFull, 2, true},
		{"bad request is not retried", errs.Field(errs.InvalidArgument, "rows", "bad"), nil, errs.InvalidArgument, 1, false},
		{"internal is not retried", errs.New(errs.Internal, "boom"), nil, errs.Internal, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, v, a, b := twoWorkers(t)
			a.set(c.a)
			b.set(c.b)
			// B's report: 1,000 instances queued, so A has the lesser load.
			st := &workerpb.WorkerStatus{Id: "b", Address: b.addr, Pid: 2, Versions: []*workerpb.VersionStatus{
				{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1, QueuedInstances: 1000}}}
			if resp, err := p.testBeat(t.Context(), st); err != nil || !resp.Known {
				t.Fatalf("heartbeat: %v %v", resp, err)
			}
			if cs := p.candidates(v, nil); len(cs) != 2 {
				t.Fatalf("%d candidates after B's report, want 2", len(cs))
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			res, err := v.Submit(ctx, rows(3))
			if c.wantCode == "" {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				if res.Out.Rows != 3 || res.Out.Data[0] != 1 || res.Out.Data[2] != 9 {
					t.Fatalf("out %+v", res.Out)
				}
			} else if errs.CodeOf(err) != c.wantCode {
				t.Fatalf("err %v, want %s", err, c.wantCode)
			}
			if res.Attempts != c.wantAttempts {
				t.Errorf("attempts %d, want %d", res.Attempts, c.wantAttempts)
			}
			if got := a.calls.Load(); got != 1 {
				t.Errorf("A got %d calls, want 1 (the lesser load is tried first)", got)
			}
			if got, want := b.calls.Load(), map[bool]int64{true: 1, false: 0}[c.wantTriedB]; got != want {
				t.Errorf("B got %d calls, want %d", got, want)
			}
		})
	}
}

// A worker whose connection fails is skipped at once (every request goes
// to the other) and taken out of routing; the field of a peer's error survives the hop.
func TestDeadWorkerIsSkipped(t *testing.T) {
	p, v, a, b := twoWorkers(t)
	a.gs.Stop()
	for i := 0; i < 10; i++ {
		res, err := v.Submit(t.Context(), rows(1))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if res.Attempts < 1 || res.Attempts > 2 {
			t.Fatalf("attempts %d", res.Attempts)
		}
	}
	if b.calls.Load() != 10 {
		t.Errorf("b answered %d of 10", b.calls.Load())
	}
	// The control plane's part of taking it out runs off the request's
	// way (suspect): the listing shows it once that ran.
	testwait.Until(t, 10*time.Second, func() bool {
		for _, w := range p.Workers() {
			if w.ID == "a" && w.State == "down" {
				return true
			}
		}
		return false
	})
	b.set(errs.Field(errs.InvalidArgument, "rows", "tensor %q: wrong", "rows"))
	_, err := v.Submit(t.Context(), rows(1))
	if e := errs.As(err); e.Code != errs.InvalidArgument || e.Field != "rows" {
		t.Errorf("peer error came back as %+v", e)
	}
}

// A worker that stops heartbeating leaves routing; one that reports again
// comes back; a restarted process (new pid) must register again.
func TestHeartbeats(t *testing.T) {
	p := newTestPool(Config{HeartbeatInterval: 10 * time.Millisecond, MissedHeartbeats: 3})
	t.Cleanup(p.Close)
	a := startFake(t, "a")
	a.register(t, p, 7)
	state := func() string {
		for _, w := range p.Workers() {
			if w.ID == "a" {
				return w.State
			}
		}
		return "absent"
	}
	if s := state(); s != "ready" {
		t.Fatalf("after register: %s", s)
	}
	testwait.Until(t, 10*time.Second, func() bool { return state() == "down" })
	resp, err := p.testBeat(t.Context(), &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 7})
	if err != nil || !resp.Known {
		t.Fatalf("heartbeat: %v %v", resp, err)
	}
	if s := state(); s != "ready" {
		t.Errorf("after heartbeat: %s", s)
	}
	resp, _ = p.testBeat(t.Context(), &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 8})
	if resp.Known {
		t.Error("a new pid was accepted without registering")
	}
	resp, _ = p.testBeat(t.Context(), &workerpb.WorkerStatus{Id: "nobody", Address: "x", Pid: 1})
	if resp.Known {
		t.Error("an unknown worker was accepted")
	}
}

// With no worker ready, Submit refuses at once with not_ready and a retry delay.
func TestNoWorkerIsNotReady(t *testing.T) {
	p, v, a, b := twoWorkers(t)
	p.MarkDead("a", "test")
	p.MarkDead("b", "test")
	_, err := v.Submit(t.Context(), rows(1))
	if e := errs.As(err); e.Code != errs.NotReady || e.RetryAfter <= 0 {
		t.Errorf("got %+v", e)
	}
	if a.calls.Load()+b.calls.Load() != 0 {
		t.Error("a dead worker was called")
	}
}

type countingObserver struct{ crashes, expired atomic.Int64 }

func (o *countingObserver) Batch(int, time.Duration) {}
func (o *countingObserver) ExpiredInQueue()          { o.expired.Add(1) }
func (o *countingObserver) ReplicaCrash()            { o.crashes.Add(1) }
func (o *countingObserver) ReplicaRestart()          {}

// Replica crashes and expired requests on workers reach the gateway's
// observer once each, from the growth of the heartbeats' counters; a
// restarted worker's counters start again from zero.
func TestWorkerEventsReachObserver(t *testing.T) {
	p := newTestPool(Config{Known: []string{"a"}, HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	a := startFake(t, "a")
	a.register(t, p, 1)
	obs := &countingObserver{}
	vs := testSpec(t)
	vs.Observer = obs
	if _, _, err := p.Start(t.Context(), vs); err != nil {
		t.Fatal(err)
	}
	beat := func(pid, crashes, expired int64) {
		st := &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: pid, Versions: []*workerpb.VersionStatus{
			{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1, Crashes: crashes, ExpiredInQueue: expired}}}
		if resp, err := p.testBeat(t.Context(), st); err != nil || !resp.Known {
			t.Fatalf("heartbeat: %v %v", resp, err)
		}
	}
	beat(1, 2, 5)
	beat(1, 2, 5)
	beat(1, 3, 9)
	if c, e := obs.crashes.Load(), obs.expired.Load(); c != 3 || e != 9 {
		t.Fatalf("crashes %d expired %d, want 3 and 9", c, e)
	}
	a.register(t, p, 2) // restarted: a new process
	beat(2, 1, 0)
	if c := obs.crashes.Load(); c != 4 {
		t.Errorf("after a restart: crashes %d, want 4", c)
	}
}

func TestSilent(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := time.Second
	cases := []struct {
		name         string
		beat, answer time.Duration // before now
		want         bool
	}{
		{"recent heartbeat", 200 * time.Millisecond, 10 * s, false},
		{"late heartbeats but answering", 3 * s, 10 * time.Millisecond, false},
		{"silent both ways", 2 * s, 2 * s, true},
		{"never answered, heartbeats stopped", 1500 * time.Millisecond, 1000 * s, true},
		{"exactly at the limit", s, 5 * s, false},
	}
	for _, c := range cases {
		if got := Silent(t0, t0.Add(-c.beat), t0.Add(-c.answer), s); got != c.want {
			t.Errorf("%s: Silent = %v, want %v", c.name, got, c.want)
		}
	}
}

// A request whose deadline passes while its worker is busy fails with
// deadline_exceeded and leaves the worker in routing (under overload many
// deadlines pass; taking workers out for it would refuse everything).
func TestDeadlineDoesNotTakeWorkerOut(t *testing.T) {
	p, v, a, b := twoWorkers(t)
	block := make(chan struct{})
	defer close(block)
	for _, f := range []*fakeWorker{a, b} {
		f.mu.Lock()
		f.hang = block
		f.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := v.Submit(ctx, rows(1))
	if errs.CodeOf(err) != errs.DeadlineExceeded {
		t.Fatalf("err %v, want deadline_exceeded", err)
	}
	for _, w := range p.Workers() {
		if w.State != "ready" {
			t.Errorf("worker %s is %s (%s) after a deadline passed", w.ID, w.State, w.Reason)
		}
	}
	if calls := a.calls.Load() + b.calls.Load(); calls != 1 {
		t.Errorf("%d calls: a passed deadline is not tried elsewhere", calls)
	}
}

func TestSpread(t *testing.T) {
	cases := []struct {
		n, h int
		want []int
	}{
		{5, 2, []int{3, 2}}, {4, 2, []int{2, 2}}, {1, 2, []int{1, 1}}, {7, 3, []int{3, 2, 2}}, {3, 1, []int{3}}, {2, 0, nil},
	}
	for _, c := range cases {
		if got := Spread(c.n, c.h); !slices.Equal(got, c.want) {
			t.Errorf("Spread(%d, %d) = %v, want %v", c.n, c.h, got, c.want)
		}
	}
}

// The pool reports a scalable version to the autoscaler (arrivals seen by
// Submit, the workers' replicas, a floor of one per holder) and spreads a
// replica count over its workers.
func TestAutoscaleSourceAndActuator(t *testing.T) {
	p := newTestPool(Config{Known: []string{"a", "b"}, HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	a, b := startFake(t, "a"), startFake(t, "b")
	a.register(t, p, 1)
	b.register(t, p, 2)
	y := "name: m\nruntime: linear\nartifact: a.json\ninput:\n  schema: i@1\n  fields: [{name: x, type: float}, {name: z, type: float}]\noutput:\n  schema: o@1\n  fields: [{name: y}]\nplacement: {maxReplicas: 6}\n"
	spec, err := modelpkg.Parse("model.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := p.Start(t.Context(), VersionSpec{Model: "m", N: 1, Manifest: []byte(y), ArtifactSHA: "00", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() bool { return len(p.candidates(v, nil)) == 2 })
	for i := 0; i < 3; i++ {
		if _, err := v.Submit(t.Context(), rows(4)); err != nil {
			t.Fatal(err)
		}
	}
	obs, err := p.Observe(t.Context())
	if err != nil || len(obs) != 1 {
		t.Fatalf("observe: %+v %v", obs, err)
	}
	o := obs[0]
	if o.Version != "m@1" || o.Sample.Arrived != 12 || o.Config.MinReplicas != 2 || o.Config.MaxReplicas != 6 {
		t.Errorf("observation %+v", o)
	}
	// The budget: what each holder's free memory can still take, in
	// replicas of the version's (estimated) size; unbounded workers are
	// capped at MaxAutoscaled each.
	if o.Sample.Budget != 2*MaxAutoscaled {
		t.Errorf("budget of two workers without a memory budget: %d, want %d", o.Sample.Budget, 2*MaxAutoscaled)
	}
	p.mu.Lock()
	per := p.replicaMemoryLocked(v)
	usedA, _ := p.heldLocked(p.workers["a"], nil, p.now())
	p.workers["a"].budget = usedA + 3*per + per/2
	p.mu.Unlock()
	if obs, _ := p.Observe(t.Context()); len(obs) != 1 || obs[0].Sample.Budget != 3+MaxAutoscaled {
		t.Errorf("budget with room for 3 more replicas on a: %+v, want %d", obs, 3+MaxAutoscaled)
	}
	// The workers' cost model reaches the autoscaler, also a fixed-cost
	// one (maxBatchSize 1 fits B = 0): without it the policy has no
	// throughput figure and never scales down.
	for _, c := range []struct{ a, b time.Duration }{{5 * time.Millisecond, 0}, {2 * time.Millisecond, 300 * time.Microsecond}} {
		for _, f := range []struct {
			w   *fakeWorker
			id  string
			pid int64
		}{{a, "a", 1}, {b, "b", 2}} {
			st := &workerpb.WorkerStatus{Id: f.id, Address: f.w.addr, Pid: f.pid, Versions: []*workerpb.VersionStatus{
				{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1, CostANs: int64(c.a), CostBNs: int64(c.b)}}}
			if resp, err := p.testBeat(t.Context(), st); err != nil || !resp.Known {
				t.Fatalf("heartbeat: %v %v", resp, err)
			}
		}
		obs, _ := p.Observe(t.Context())
		if len(obs) != 1 || obs[0].Sample.Cost.A != c.a || obs[0].Sample.Cost.B != c.b {
			t.Errorf("workers report cost %v + %v·n; observed %+v", c.a, c.b, obs)
		}
	}
	if err := p.SetReplicas(t.Context(), "m@1", 5); err != nil {
		t.Fatal(err)
	}
	got := []int32{a.replicas.Load(), b.replicas.Load()}
	slices.Sort(got)
	if !slices.Equal(got, []int32{2, 3}) {
		t.Errorf("workers asked for %v replicas, want 3 and 2", got)
	}
	// A version whose placement does not let the count move is not reported.
	p2 := newTestPool(Config{Known: []string{"a"}, HeartbeatInterval: time.Hour})
	t.Cleanup(p2.Close)
	a.register(t, p2, 1)
	if _, _, err := p2.Start(t.Context(), testSpec(t)); err != nil {
		t.Fatal(err)
	}
	if obs, _ := p2.Observe(t.Context()); len(obs) != 0 {
		t.Errorf("a fixed-size version was reported: %+v", obs)
	}
}
