package cluster

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/testwait"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// routed is the ids of the workers v's published route holds.
func routed(v *Version) []string {
	var ids []string
	if r := v.route.Load(); r != nil {
		for _, h := range r.holders {
			ids = append(ids, h.w.id)
		}
	}
	return ids
}

// checkRoutes fails when a version's published route differs from the
// one the pool's state gives now: a change of readiness that did not
// reach the predict path.
func checkRoutes(t *testing.T, p *Pool) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, v := range p.versions {
		want := p.routeLocked(v)
		got := v.route.Load()
		if got == nil {
			got = &route{}
		}
		same := slices.EqualFunc(got.holders, want.holders, func(a, b holder) bool {
			return a.w == b.w && a.session == b.session && a.cp == b.cp && a.slot == b.slot && a.infer == b.infer
		})
		if !same {
			t.Errorf("%s: route published %v, the pool's state gives %v", v.key, routed(v), routesOf(want))
		}
	}
}

func routesOf(r *route) []string {
	var ids []string
	for _, h := range r.holders {
		ids = append(ids, h.w.id)
	}
	return ids
}

func beat(t *testing.T, p *Pool, f *fakeWorker, pid int64, state string, queued int64) {
	t.Helper()
	st := &workerpb.WorkerStatus{Id: f.id, Address: f.addr, Pid: pid, Versions: []*workerpb.VersionStatus{
		{Model: "m", Version: 1, State: state, ReadyReplicas: 1, QueuedInstances: queued}}}
	if resp, err := p.testBeat(context.Background(), st); err != nil || !resp.Known {
		t.Errorf("heartbeat of %s: %v %v", f.id, resp, err)
	}
}

// The route follows every change of readiness: a report, a death, a
// restart (a new session: its copy is placed again), fencing.
func TestRouteFollowsReadiness(t *testing.T) {
	p, v, a, b := twoWorkers(t)
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"both loaded", func() {}, []string{"a", "b"}},
		{"a reports it unloading", func() { beat(t, p, a, 1, "unloading", 0) }, []string{"b"}},
		{"a reports it ready", func() { beat(t, p, a, 1, "ready", 0) }, []string{"a", "b"}},
		{"b's process exits", func() { p.MarkDead("b", "test") }, []string{"a"}},
		{"a heartbeat of the dead process changes nothing", func() { beat(t, p, b, 2, "ready", 0) }, []string{"a"}},
		{"b restarts: a new process, loaded again", func() {
			b.register(t, p, 3)
			testwait.Until(t, 10*time.Second, func() bool { return len(routed(v)) == 2 })
		}, []string{"a", "b"}},
		{"a is fenced", func() { p.Fence("a", "draining") }, []string{"b"}},
		{"a's heartbeat does not bring it back", func() { beat(t, p, a, 1, "ready", 0) }, []string{"b"}},
		{"a is unfenced", func() { p.Unfence("a") }, []string{"a", "b"}},
		{"a is forgotten", func() { p.Forget("a") }, []string{"b"}},
	}
	for _, s := range steps {
		s.do()
		if got := routed(v); !slices.Equal(got, s.want) {
			t.Errorf("%s: routed to %v, want %v", s.name, got, s.want)
		}
		checkRoutes(t, p)
	}
	// Queue work reaches the predict path without a new route.
	r := v.route.Load()
	beat(t, p, b, 3, "ready", 42)
	if v.route.Load() != r {
		t.Error("a report of queue work alone rebuilt the route")
	}
	if cs := p.candidates(v, nil); len(cs) != 1 || cs[0].queued != 42 {
		t.Errorf("candidates %+v, want b with 42 queued", cs)
	}
}

// Submit takes no lock the control plane holds: with Pool.mu held (a
// heartbeat applying a thousand versions, a registration running
// placement), a request is still answered.
func TestSubmitDoesNotWaitForThePoolLock(t *testing.T) {
	p, v, _, _ := twoWorkers(t)
	p.mu.Lock()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := v.Submit(ctx, rows(2))
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Submit waited for Pool.mu")
	}
	p.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}

// Requests go on while heartbeats flip one worker's readiness and the
// worker registers again: the other worker always takes them, the routes
// end as the state gives them, and -race sees the snapshot swap.
func TestSubmitDuringHeartbeats(t *testing.T) {
	p, v, a, b := twoWorkers(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				beat(t, p, a, 1, "ready", 0)
				return
			default:
			}
			beat(t, p, a, 1, map[bool]string{true: "unloading", false: "ready"}[i%2 == 0], int64(i%5))
			beat(t, p, b, 2, "ready", int64(i%3))
			if i%10 == 0 {
				a.register(t, p, 1) // the same process again: same session
			}
		}
	})
	var sub sync.WaitGroup
	for range 4 {
		sub.Go(func() {
			for range 100 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := v.Submit(ctx, rows(1))
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	sub.Wait()
	close(stop)
	wg.Wait()
	if got := routed(v); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("routed to %v at the end, want [a b]", got)
	}
	checkRoutes(t, p)
}

// A worker whose call failed on the connection leaves the predict path at
// once, before the control plane has taken it out of routing.
func TestGoneWorkerSkippedAtOnce(t *testing.T) {
	p, v, a, _ := twoWorkers(t)
	p.mu.Lock() // the control plane is busy: suspect's own part waits
	var wa *worker
	for _, c := range p.candidates(v, nil) {
		if c.w.id == "a" {
			wa = c.w
			p.suspect(c.w, c.session, v, context.Canceled)
		}
	}
	for range 20 {
		c, ok := p.pick(v, nil)
		if !ok || c.w == wa {
			t.Fatalf("picked %v (ok %v) after a's call failed", c.w, ok)
		}
	}
	p.mu.Unlock()
	testwait.Until(t, 10*time.Second, func() bool {
		for _, w := range p.Workers() {
			if w.ID == "a" {
				return w.State == "down"
			}
		}
		return false
	})
	beat(t, p, a, 1, "ready", 0) // it answers again: back in routing
	if got := routed(v); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("routed to %v after a's heartbeat, want [a b]", got)
	}
	if len(p.candidates(v, nil)) != 2 {
		t.Error("a is still skipped after it came back")
	}
	checkRoutes(t, p)
}

// lockProbe is an observer that notes whether Pool.mu was held when it
// was called.
type lockProbe struct {
	countingObserver
	p    *Pool
	held int
}

func (o *lockProbe) ReplicaCrash() {
	if o.p.mu.TryLock() {
		o.p.mu.Unlock()
	} else {
		o.held++
	}
	o.countingObserver.ReplicaCrash()
}

// Observers hear of a heartbeat's events after the pool let go of its
// lock: an observer that takes its time delays no request.
func TestObserversCalledWithoutThePoolLock(t *testing.T) {
	p := newTestPool(Config{Known: []string{"a"}, HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	a := startFake(t, "a")
	a.register(t, p, 1)
	obs := &lockProbe{p: p}
	vs := testSpec(t)
	vs.Observer = obs
	if _, _, err := p.Start(t.Context(), vs); err != nil {
		t.Fatal(err)
	}
	st := &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1, Versions: []*workerpb.VersionStatus{
		{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1, Crashes: 5}}}
	if _, err := p.testBeat(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if c := obs.crashes.Load(); c != 5 || obs.held != 0 {
		t.Errorf("%d crashes told, %d of them under Pool.mu; want 5 and none", c, obs.held)
	}
}

// A worker's process exits: the copies it held are placed again on the
// rest of the shard at once, before any request asks for them, and the
// next request is answered there without a load of its own.
func TestDeadWorkersCopiesPlacedAgain(t *testing.T) {
	p := newTestPool(Config{Known: []string{"a", "b"}, ShardSize: 2, HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	fs := map[string]*fakeWorker{"a": startFake(t, "a"), "b": startFake(t, "b")}
	fs["a"].registerWith(t, p, 1, 1<<30)
	fs["b"].registerWith(t, p, 2, 1<<30)
	v := start(t, p, specOf(t, "c", "cold", "1MiB"))
	if err := submit(v, 10*time.Second); err != nil {
		t.Fatal(err) // its first request loads it on one worker
	}
	held := routed(v)
	if len(held) != 1 {
		t.Fatalf("a cold version loaded on %v, want one worker", held)
	}
	dead, other := held[0], map[string]string{"a": "b", "b": "a"}[held[0]]
	p.MarkDead(dead, "process exited (test)")
	testwait.Until(t, 10*time.Second, func() bool { return slices.Equal(routed(v), []string{other}) })
	if n := fs[other].loads.Load(); n != 1 {
		t.Errorf("%d loads on %s, want 1", n, other)
	}
	before := fs[other].calls.Load()
	if err := submit(v, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if fs[other].calls.Load() != before+1 || fs[other].loads.Load() != 1 {
		t.Errorf("the request after the death: calls %d → %d, loads %d on %s", before, fs[other].calls.Load(), fs[other].loads.Load(), other)
	}
	checkRoutes(t, p)
}

// The watch loop takes a worker whose heartbeats stopped out of the
// route after MissedHeartbeats intervals, and its next heartbeat puts it
// back (fake time: testing/synctest).
func TestMissedHeartbeatsLeaveTheRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(Config{HeartbeatInterval: 100 * time.Millisecond, MissedHeartbeats: 3})
		defer p.Close()
		v := newVersion(p, testSpec(t))
		p.mu.Lock()
		p.versions[v.key] = v
		for i, id := range []string{"a", "b"} {
			w := &worker{id: id, addr: id + ":1", pid: int64(i + 1), session: 1, secret: "s-" + id, live: true, lastBeat: time.Now(),
				ready: map[string]bool{}, failed: map[string]string{}, busy: map[string]bool{}, unloading: map[string]bool{},
				slots: map[string]*slot{}, loads: map[string]int64{}, evictions: map[string]int64{}}
			p.workers[id] = w
			p.placeCopyLocked(v, w, &copyOn{session: 1, replicas: 1})
			p.setReadyLocked(w, v.key, true)
		}
		p.publishLocked()
		p.mu.Unlock()
		beatB := func() {
			st := &workerpb.WorkerStatus{Id: "b", Address: "b:1", Pid: 2, Versions: []*workerpb.VersionStatus{
				{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1}}}
			if resp, err := p.testBeat(context.Background(), st); err != nil || !resp.Known {
				t.Fatalf("heartbeat of b: %v %v", resp, err)
			}
		}
		// b beats every interval, a says nothing.
		for range 5 {
			time.Sleep(100 * time.Millisecond)
			beatB()
			synctest.Wait()
		}
		if got := routed(v); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("after 500 ms of silence from a: routed to %v, want [b]", got)
		}
		st := &workerpb.WorkerStatus{Id: "a", Address: "a:1", Pid: 1, Versions: []*workerpb.VersionStatus{
			{Model: "m", Version: 1, State: "ready", ReadyReplicas: 1}}}
		if resp, err := p.testBeat(context.Background(), st); err != nil || !resp.Known {
			t.Fatalf("heartbeat of a: %v %v", resp, err)
		}
		if got := routed(v); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("after a's heartbeat: routed to %v, want [a b]", got)
		}
		checkRoutes(t, p)
	})
}
