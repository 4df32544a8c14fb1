package serving

import (
	"context"
	"errors"
	"io"
	"log/slog"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/runtime"
)

// fakeModel doubles the first column of each row. It records the batches it
// sees, takes cost(n) of (fake) time, can be held at a gate, and can panic.
type fakeModel struct {
	cost    func(n int) time.Duration
	gate    chan struct{} // if set, each Predict waits for a value
	panicAt int           // panic on this call number (1-based); 0 never

	mu      sync.Mutex
	calls   int
	batches [][]float32 // first column of each row, per batch
	starts  []time.Time // when each Predict began
	closed  int         // Close calls
}

func (m *fakeModel) Info() runtime.Info { return runtime.Info{Inputs: 1, Outputs: 1} }
func (m *fakeModel) Close() error {
	m.mu.Lock()
	m.closed++
	m.mu.Unlock()
	return nil
}

func (m *fakeModel) closes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
func (m *fakeModel) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	m.mu.Lock()
	m.calls++
	call := m.calls
	col := make([]float32, in.Rows)
	for i := range col {
		col[i] = in.Row(i)[0]
	}
	m.batches = append(m.batches, col)
	m.starts = append(m.starts, time.Now())
	m.mu.Unlock()
	if m.gate != nil {
		<-m.gate
	}
	if call == m.panicAt {
		panic("fake model crash")
	}
	if m.cost != nil {
		time.Sleep(m.cost(in.Rows))
	}
	out := runtime.Output{Rows: in.Rows, Cols: 1, Data: make([]float32, in.Rows)}
	for i := range out.Data {
		out.Data[i] = in.Row(i)[0] * 2
	}
	return out, nil
}

func (m *fakeModel) sizes() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s []int
	for _, b := range m.batches {
		s = append(s, len(b))
	}
	return s
}

func rows(vals ...float32) runtime.Batch {
	return runtime.Batch{Rows: len(vals), Cols: 1, Data: vals}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newServer(t *testing.T, cfg Config, models ...runtime.Model) *Server {
	cfg.Logger = quiet()
	if cfg.MaxQueueInstances == 0 {
		cfg.MaxQueueInstances = 1000
	}
	s := New(cfg, models)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func TestBatchSizeBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{cost: func(n int) time.Duration { return time.Millisecond }}
		s := newServer(t, Config{MaxBatchSize: 8, MaxBatchDelay: 2 * time.Millisecond}, m)
		var wg sync.WaitGroup
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.Submit(context.Background(), Work{Rows: rows(float32(i))})
				if err != nil || res.Out.Data[0] != float32(2*i) {
					t.Errorf("request %d: %v %v", i, res.Out.Data, err)
				}
			}()
		}
		wg.Wait()
		total := 0
		for _, n := range m.sizes() {
			if n > 8 {
				t.Errorf("batch of %d exceeds maxBatchSize 8", n)
			}
			total += n
		}
		if total != 50 {
			t.Errorf("%d rows computed, want 50", total)
		}
		if len(m.sizes()) > 10 {
			t.Errorf("%d batches for 50 rows queued at once: not batching", len(m.sizes()))
		}
	})
}

func TestBatchDelayBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{}
		s := newServer(t, Config{MaxBatchSize: 8, MaxBatchDelay: 3 * time.Millisecond}, m)
		start := time.Now()
		res, err := s.Submit(context.Background(), Work{Rows: rows(1)})
		if err != nil {
			t.Fatal(err)
		}
		// A lone row waits exactly maxBatchDelay (fake clock), then runs.
		if waited := time.Since(start); waited != 3*time.Millisecond {
			t.Errorf("lone row answered after %v, want 3ms", waited)
		}
		if res.Timing.Queue+res.Timing.BatchWait != 3*time.Millisecond {
			t.Errorf("timing %+v", res.Timing)
		}
	})
}

func TestOpportunisticNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, Config{MaxBatchSize: 8}, &fakeModel{})
		start := time.Now()
		if _, err := s.Submit(context.Background(), Work{Rows: rows(1)}); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("maxBatchDelay 0 waited %v", waited)
		}
	})
}

func TestDeadlineClosesBatchEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{}
		s := newServer(t, Config{MaxBatchSize: 8, MaxBatchDelay: 10 * time.Millisecond, Cost: CostModel{A: time.Millisecond}}, m)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := s.Submit(ctx, Work{Rows: rows(1)}); err != nil {
			t.Fatal(err)
		}
		// Due in 5ms, a full batch costs 1ms: the batch closes at 4ms, not 10ms.
		if waited := time.Since(start); waited != 4*time.Millisecond {
			t.Errorf("answered after %v, want 4ms", waited)
		}
	})
}

func TestOversizeRequestIsSplitAndReassembled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{}
		s := newServer(t, Config{MaxBatchSize: 4}, m)
		in := rows(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
		res, err := s.Submit(context.Background(), Work{Rows: in})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range res.Out.Data {
			if v != float32(2*i) {
				t.Fatalf("row %d = %v, want %v (out of order?)", i, v, 2*i)
			}
		}
		got := m.sizes()
		if len(got) != 3 || got[0] != 4 || got[1] != 4 || got[2] != 2 {
			t.Errorf("batches %v, want [4 4 2]", got)
		}
	})
}

func TestOnlineBeforeLow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 1}, m)
		done := make(chan float32, 3)
		submit := func(v float32, p Priority) {
			go func() {
				res, err := s.Submit(context.Background(), Work{Rows: rows(v), Priority: p})
				if err != nil {
					t.Error(err)
				}
				done <- res.Out.Data[0] / 2
			}()
			synctest.Wait()
		}
		submit(1, Online) // taken at once, held at the gate
		submit(2, Low)
		submit(3, Online)
		for i := 0; i < 3; i++ {
			m.gate <- struct{}{}
			<-done
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		var order []float32
		for _, b := range m.batches {
			order = append(order, b[0])
		}
		if len(order) != 3 || order[0] != 1 || order[1] != 3 || order[2] != 2 {
			t.Errorf("compute order %v, want [1 3 2]: low ran before queued online work", order)
		}
	})
}

// The batch delay counts from the oldest request in the batch, not from
// its first piece: a low-priority request that waited through another
// batch, taken after a newer online one, runs as soon as the replica is
// free instead of waiting the delay again from the online one's arrival.
func TestBatchDelayFromTheOldestRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 20 * time.Millisecond
		m := &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 8, MaxBatchDelay: delay}, m)
		t0 := time.Now()
		done := make(chan error, 3)
		submit := func(v float32, p Priority) {
			go func() {
				_, err := s.Submit(context.Background(), Work{Rows: rows(v), Priority: p})
				done <- err
			}()
			synctest.Wait()
		}
		submit(1, Online)
		time.Sleep(delay) // its batch closes and is held at the gate
		synctest.Wait()
		submit(2, Low) // arrives at 20 ms while the replica is busy
		time.Sleep(40 * time.Millisecond)
		submit(3, Online) // arrives at 60 ms
		m.gate <- struct{}{}
		synctest.Wait() // the first batch is answered; the replica forms the next
		m.mu.Lock()
		calls, batches, starts := m.calls, m.batches, m.starts
		m.mu.Unlock()
		if calls != 2 {
			t.Fatalf("%d batches started at %v, want the second at once: request 2 has waited %v, over maxBatchDelay %v",
				calls, time.Since(t0), time.Since(t0)-delay, delay)
		}
		if got := starts[1].Sub(t0); got != 60*time.Millisecond || len(batches[1]) != 2 || batches[1][0] != 3 || batches[1][1] != 2 {
			t.Errorf("second batch %v started at %v, want [3 2] at 60ms", batches[1], got)
		}
		m.gate <- struct{}{}
		for range 3 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	})
}

func TestVersionsNeverMix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ma, mb := &fakeModel{}, &fakeModel{}
		a := newServer(t, Config{MaxBatchSize: 16, MaxBatchDelay: time.Millisecond}, ma)
		b := newServer(t, Config{MaxBatchSize: 16, MaxBatchDelay: time.Millisecond}, mb)
		var wg sync.WaitGroup
		for i := 0; i < 40; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv, v := a, float32(1)
				if i%2 == 1 {
					srv, v = b, -1
				}
				if _, err := srv.Submit(context.Background(), Work{Rows: rows(v)}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		for _, c := range []struct {
			m    *fakeModel
			want float32
		}{{ma, 1}, {mb, -1}} {
			for _, batch := range c.m.batches {
				for _, v := range batch {
					if v != c.want {
						t.Fatalf("a batch of one version held a row of the other")
					}
				}
			}
		}
	})
}

func TestQueueBoundCountsInstances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 100, MaxQueueInstances: 10}, m)
		go s.Submit(context.Background(), Work{Rows: rows(1)}) // taken, held at the gate
		synctest.Wait()
		go s.Submit(context.Background(), Work{Rows: rows(make([]float32, 8)...)})
		synctest.Wait()
		if q := s.Stats().QueuedInstances; q != 8 {
			t.Fatalf("queued %d instances, want 8", q)
		}
		_, err := s.Submit(context.Background(), Work{Rows: rows(1, 2, 3)})
		if errs.CodeOf(err) != errs.QueueFull || errs.As(err).RetryAfter == 0 {
			t.Fatalf("3 more instances over a bound of 10: got %v, want queue_full with Retry-After", err)
		}
		go s.Submit(context.Background(), Work{Rows: rows(1, 2)})
		synctest.Wait()
		if q := s.Stats().QueuedInstances; q != 10 {
			t.Fatalf("queued %d, want 10", q)
		}
		close(m.gate)
	})
}

func TestExpiredInQueueIsNeverComputed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 1}, m)
		go s.Submit(context.Background(), Work{Rows: rows(1)})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		_, err := s.Submit(ctx, Work{Rows: rows(42)})
		if errs.CodeOf(err) != errs.ExpiredInQueue {
			t.Fatalf("got %v, want expired_in_queue", err)
		}
		close(m.gate)
		synctest.Wait()
		for _, b := range m.batches {
			for _, v := range b {
				if v == 42 {
					t.Fatal("an expired request reached the model")
				}
			}
		}
		if st := s.Stats(); st.ExpiredInQueue != 1 || st.QueuedInstances != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestPanicReplacesReplicaAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crashing := &fakeModel{panicAt: 1, cost: func(int) time.Duration { return time.Millisecond }}
		var loads int
		cfg := Config{MaxBatchSize: 4, MaxBatchDelay: time.Millisecond, Load: func(ctx context.Context) (runtime.Model, error) {
			loads++
			return &fakeModel{cost: func(int) time.Duration { return time.Millisecond }}, nil
		}}
		s := newServer(t, cfg, crashing)
		var wg sync.WaitGroup
		var refused atomic.Int64
		for i := 0; i < 12; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				res, err := s.Submit(ctx, Work{Rows: rows(float32(i))})
				if errs.CodeOf(err) == errs.NotReady {
					// Sent while the only replica was being replaced: refused
					// at admission (never admitted, so not lost). Which
					// requests come after the crash depends on scheduling.
					refused.Add(1)
					return
				}
				if err != nil || res.Out.Data[0] != float32(2*i) {
					t.Errorf("request %d lost after a crash: %v %v", i, res.Out.Data, err)
				}
			}()
		}
		wg.Wait()
		if refused.Load() > 8 {
			t.Errorf("%d of 12 refused: the crashed batch's own requests must be retried, not refused", refused.Load())
		}
		st := s.Stats()
		if st.Crashes != 1 || st.Restarts != 1 || loads != 1 || st.ReadyReplicas != 1 {
			t.Errorf("stats %+v loads %d", st, loads)
		}
	})
}

func TestCrashWithoutTimeToRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Retry needs the crashed batch to still fit in its deadline.
		crashing := &fakeModel{panicAt: 1, cost: func(int) time.Duration { return 0 }}
		slowLoad := func(ctx context.Context) (runtime.Model, error) {
			time.Sleep(time.Hour)
			return &fakeModel{}, nil
		}
		s := newServer(t, Config{MaxBatchSize: 4, Cost: CostModel{A: 10 * time.Millisecond}, Load: slowLoad}, crashing)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		s.mu.Lock()
		s.fitted = false // let the tight deadline in
		s.mu.Unlock()
		_, err := s.Submit(ctx, Work{Rows: rows(1)})
		if c := errs.CodeOf(err); c != errs.Unavailable {
			t.Fatalf("got %v, want unavailable (503) when the retry cannot meet the deadline", err)
		}
	})
}

func TestCloseDrainsQueuedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{cost: func(n int) time.Duration { return time.Millisecond }}
		s := New(Config{MaxBatchSize: 2, MaxQueueInstances: 100, Logger: quiet()}, []runtime.Model{m})
		results := make(chan error, 20)
		for i := 0; i < 20; i++ {
			go func() {
				_, err := s.Submit(context.Background(), Work{Rows: rows(float32(i))})
				results <- err
			}()
		}
		synctest.Wait()
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			if err := <-results; err != nil {
				t.Errorf("accepted request failed during drain: %v", err)
			}
		}
		_, err := s.Submit(context.Background(), Work{Rows: rows(1)})
		if errs.CodeOf(err) != errs.ShuttingDown {
			t.Errorf("after Close: %v, want shutting_down", err)
		}
	})
}

func TestCloseWithDeadlineAnswersTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{cost: func(n int) time.Duration { return 10 * time.Millisecond }}
		s := New(Config{MaxBatchSize: 1, MaxQueueInstances: 100, Logger: quiet()}, []runtime.Model{m})
		results := make(chan error, 10)
		for i := 0; i < 10; i++ {
			go func() {
				_, err := s.Submit(context.Background(), Work{Rows: rows(1)})
				results <- err
			}()
		}
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Millisecond)
		defer cancel()
		if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want deadline exceeded", err)
		}
		var ok, shut int
		for i := 0; i < 10; i++ {
			switch err := <-results; errs.CodeOf(err) {
			case "":
				ok++
			case errs.ShuttingDown:
				shut++
			default:
				t.Errorf("unexpected %v", err)
			}
		}
		if ok == 0 || shut == 0 || ok+shut != 10 {
			t.Errorf("ok %d, shutting_down %d: every accepted request must get an answer", ok, shut)
		}
	})
}

// lockCheckObserver records whether the Server's mutex was held when it was
// called. Only used where no other goroutine can hold the mutex then.
type lockCheckObserver struct {
	nopObserver
	s       *Server
	mu      sync.Mutex
	expired int
	locked  int // calls made with s.mu held
}

func (o *lockCheckObserver) ExpiredInQueue() {
	held := !o.s.mu.TryLock()
	if !held {
		o.s.mu.Unlock()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expired++
	if held {
		o.locked++
	}
}

// The Observer is called off the lock, as its doc says: an observer that
// takes the server's lock (or blocks) must not stall every request.
func TestObserverCalledOffTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{gate: make(chan struct{})}
		obs := &lockCheckObserver{}
		s := newServer(t, Config{MaxBatchSize: 1, Observer: obs}, m)
		obs.s = s
		go s.Submit(context.Background(), Work{Rows: rows(1)})
		synctest.Wait() // the replica holds row 1 at the gate, without the lock
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		if _, err := s.Submit(ctx, Work{Rows: rows(2)}); errs.CodeOf(err) != errs.ExpiredInQueue {
			t.Fatalf("got %v, want expired_in_queue", err)
		}
		close(m.gate)
		synctest.Wait()
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if obs.expired != 1 || obs.locked != 0 {
			t.Fatalf("ExpiredInQueue called %d times, %d of them under the server's lock", obs.expired, obs.locked)
		}
	})
}

// goroutinesOf counts live goroutines whose stack mentions fn.
func goroutinesOf(fn string) int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:goruntime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// When Close's ctx ends while a replica computes, the idle replicas' models
// are closed anyway, the busy one's when its batch is done, and Close leaves
// no goroutine behind.
func TestCloseTimeoutClosesModels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := &fakeModel{gate: make(chan struct{})}
		idle := &fakeModel{}
		s := New(Config{MaxBatchSize: 1, MaxQueueInstances: 100, Logger: quiet()}, []runtime.Model{busy})
		first := submitAsync(context.Background(), s, 1)
		synctest.Wait() // busy holds row 1 at its gate
		if err := s.AddReplica(idle); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Close(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Close = %v, want context canceled", err)
		}
		if n := goroutinesOf("(*Server).Close"); n != 0 {
			t.Fatalf("%d goroutines of Close outlive it", n)
		}
		synctest.Wait()
		if idle.closes() != 1 {
			t.Fatalf("idle model closed %d times after Close timed out, want 1", idle.closes())
		}
		if busy.closes() != 0 {
			t.Fatal("a model was closed while computing a batch")
		}
		close(busy.gate)
		if err := <-first; err != nil {
			t.Fatalf("the batch being computed: %v", err)
		}
		synctest.Wait()
		if busy.closes() != 1 {
			t.Fatalf("busy model closed %d times after its batch, want 1", busy.closes())
		}
	})
}

// concurrencyModel records the most Predict calls running at once.
type concurrencyModel struct {
	fakeModel
	now, most *atomic.Int64
}

func (m *concurrencyModel) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	n := m.now.Add(1)
	for {
		old := m.most.Load()
		if n <= old || m.most.CompareAndSwap(old, n) {
			break
		}
	}
	defer m.now.Add(-1)
	time.Sleep(time.Millisecond)
	return m.fakeModel.Predict(ctx, in)
}

// CPUs bounds the batches computing at once across every Server sharing
// it (two versions, two replicas each: at most one batch at a time with
// one CPU), and a batch whose deadline ends while it waits for a CPU is
// answered with the reason, not computed.
func TestCPUsBoundAcrossServers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var now, most atomic.Int64
		cpus := NewCPUs(1)
		mk := func() runtime.Model { return &concurrencyModel{now: &now, most: &most} }
		a := newServer(t, Config{MaxBatchSize: 1, CPUs: cpus}, mk(), mk())
		b := newServer(t, Config{MaxBatchSize: 1, CPUs: cpus}, mk(), mk())
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				srv := a
				if i%2 == 1 {
					srv = b
				}
				if _, err := srv.Submit(context.Background(), Work{Rows: rows(1)}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := most.Load(); got != 1 {
			t.Fatalf("%d batches computed at once with --model-cpus 1, want 1", got)
		}
		if NewCPUs(0) != nil || NewCPUs(0).Size() != 0 {
			t.Fatal("NewCPUs(0) must be no bound")
		}
	})
}
