package cluster

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/workerpb"
)

// BenchmarkPredictUnderHeartbeats measures the predict path (Submit of a
// one-row request to a version on two loopback gRPC workers) while 100
// other workers, each reporting 1,000 versions (50,000 versions in shards
// of two), heartbeat 10 times a second into the same pool (1,000 heartbeats and a million version
// reports a second, applied in-process: Pool.Heartbeat is called as the
// gRPC handler would call it). Every heartbeat also flips one of its
// versions out of readiness and the next one back, so routes are rebuilt
// all the time. It reports each sub-benchmark's p50 and p99 per request;
// compare heartbeats=on with heartbeats=off:
//
//	go test -run '^$' -bench PredictUnderHeartbeats -benchtime 20000x ./internal/cluster/
//
// SLUICE_BENCH_CPUPROFILE=FILE writes a CPU profile of the heartbeats=on
// run after its setup.
//
// heartbeats=lock-held sends no heartbeat but holds Pool.mu nearly all the
// time (1 ms at a time, asleep: no CPU taken), as a control plane that
// never lets go would: its p99 matches heartbeats=off only if the predict
// path takes no lock.
//
// heartbeats=on-budgets is heartbeats=on as a real deployment has it: the
// workers report a memory budget (2 GiB, twice what they hold: nothing is
// trimmed) and the pool has Metrics (counting), so every heartbeat also
// runs the budget check and the memory gauge.
func BenchmarkPredictUnderHeartbeats(b *testing.B) {
	for _, mode := range []string{"off", "on", "lock-held", "on-budgets"} {
		b.Run("heartbeats="+mode, func(b *testing.B) {
			benchPredict(b, mode, 100, 1000, 100*time.Millisecond)
		})
	}
}

func benchPredict(b *testing.B, mode string, nWorkers, perWorker int, interval time.Duration) {
	beats := mode == "on" || mode == "on-budgets"
	cfg := Config{HeartbeatInterval: time.Hour}
	if mode == "on-budgets" {
		cfg.Metrics = &countingMetrics{}
	}
	p := newTestPool(cfg)
	defer p.Close()
	fa, fb := startFake(b, "a"), startFake(b, "b")
	for i, f := range []*fakeWorker{fa, fb} {
		if _, err := p.testRegister(context.Background(), &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: f.id, Address: f.addr, Pid: int64(i + 1)}}); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	target, _, err := p.Start(ctx, testSpec(b))
	if err != nil {
		b.Fatal(err)
	}
	for len(p.candidates(target, nil)) != 2 {
		if ctx.Err() != nil {
			b.Fatal("m@1 not ready on both workers")
		}
		time.Sleep(time.Millisecond)
	}
	// The other workers (their addresses are never dialled: the pool
	// connects lazily and nothing is sent to them) and their versions,
	// placed by hand as shards of two: nWorkers×perWorker/2 versions,
	// each on two workers, each worker holding perWorker of them.
	statuses := make([]*workerpb.WorkerStatus, nWorkers)
	for i := range statuses {
		st := &workerpb.WorkerStatus{Id: fmt.Sprintf("w%03d", i), Address: fmt.Sprintf("127.0.0.1:%d", 40000+i), Pid: int64(100 + i)}
		if mode == "on-budgets" {
			st.MemoryBudgetBytes = 2 << 30
		}
		if _, err := p.testRegister(context.Background(), &workerpb.RegisterRequest{Status: st}); err != nil {
			b.Fatal(err)
		}
		statuses[i] = st
	}
	spec := testSpec(b)
	p.mu.Lock()
	for n := range nWorkers * perWorker / 2 {
		vs := spec
		vs.Model, vs.N = fmt.Sprintf("bulk%05d", n), 1
		v := newVersion(p, vs)
		p.versions[v.key] = v
		v.want = 2
		first := n % nWorkers
		for _, i := range []int{first, (first + 1 + (n/nWorkers)%(nWorkers-1)) % nWorkers} {
			st := statuses[i]
			p.placeCopyLocked(v, p.workers[st.Id], &copyOn{session: p.workers[st.Id].session, replicas: 1, memory: 1 << 20})
			st.Versions = append(st.Versions, &workerpb.VersionStatus{Model: vs.Model, Version: 1, State: "ready",
				ReadyReplicas: 1, QueuedInstances: int64(n % 7), CostANs: 1000, CostBNs: 100, MaxBatch: 8})
		}
	}
	p.mu.Unlock()
	for _, st := range statuses {
		slices.SortFunc(st.Versions, func(a, b *workerpb.VersionStatus) int { return strings.Compare(a.Model, b.Model) })
		if len(st.Versions) < perWorker*9/10 {
			b.Fatalf("%s holds %d versions, want about %d", st.Id, len(st.Versions), perWorker)
		}
	}
	// Ready everywhere at once (as their heartbeats would make them, one
	// route rebuild per version and worker), then one report each.
	p.mu.Lock()
	for _, st := range statuses {
		w := p.workers[st.Id]
		for _, vs := range st.Versions {
			p.setReadyLocked(w, key(vs.Model, vs.Version), true)
		}
	}
	p.publishLocked()
	p.mu.Unlock()
	for _, st := range statuses {
		if _, err := p.testBeat(context.Background(), st); err != nil {
			b.Fatal(err)
		}
	}
	if v := p.versions["bulk00000@1"]; len(routed(v)) != 2 {
		b.Fatalf("bulk00000@1 routed to %d workers, want 2", len(routed(v)))
	}
	if pprofOut := os.Getenv("SLUICE_BENCH_CPUPROFILE"); pprofOut != "" && beats {
		f, err := os.Create(pprofOut)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	stopped := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopped() // also when the benchmark fails half-way
	var beaten sync.Map
	beatStart := time.Now()
	if beats {
		for i, st := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Spread the workers' phases over the interval.
				t := time.NewTimer(interval * time.Duration(i) / time.Duration(nWorkers))
				defer t.Stop()
				n := 0
				for {
					select {
					case <-stop:
						beaten.Store(i, n)
						return
					case <-t.C:
					}
					t.Reset(interval)
					// One version leaves readiness, the one before comes back.
					flip := n % len(st.Versions)
					st.Versions[flip].State = "unloading"
					st.Versions[(flip+len(st.Versions)-1)%len(st.Versions)].State = "ready"
					if resp, err := p.testBeat(context.Background(), st); err != nil || !resp.Known {
						b.Errorf("heartbeat of %s: %v %v", st.Id, resp, err)
						return
					}
					n++
				}
			}()
		}
		time.Sleep(2 * interval) // every worker beating
	}
	if mode == "lock-held" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p.mu.Lock()
				time.Sleep(time.Millisecond)
				p.mu.Unlock()
			}
		}()
	}
	lat := make([]time.Duration, 0, b.N)
	w := rows(1)
	failed := 0
	b.ResetTimer()
	for range b.N {
		// A deadline far above any latency measured: a request that
		// misses it counts as failed, its time as the deadline.
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := target.Submit(ctx, w)
		cancel()
		if err != nil {
			failed++
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	elapsed := time.Since(beatStart)
	stopped()
	total := 0
	beaten.Range(func(_, n any) bool { total += n.(int); return true })
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[min(len(lat)-1, int(f*float64(len(lat))))].Microseconds()) }
	b.ReportMetric(float64(failed), "failed")
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(q(0.999), "p99.9-µs")
	if beats {
		b.ReportMetric(float64(total)/elapsed.Seconds(), "beats/s")
	}
}
