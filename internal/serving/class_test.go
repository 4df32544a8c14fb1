package serving

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/runtime"
)

func TestBatchQueueBound(t *testing.T) {
	for _, c := range []struct{ maxQueue, configured, want int }{
		{1000, 0, 250},
		{1000, 100, 100},
		{1000, 1000, 250}, // not below the online bound: the default
		{1000, 5000, 250},
		{3, 0, 1},
		{2, 1, 1},
		{1, 0, 1},
		{0, 0, 0},
	} {
		if got := BatchQueueBound(c.maxQueue, c.configured); got != c.want {
			t.Errorf("BatchQueueBound(%d, %d) = %d, want %d", c.maxQueue, c.configured, got, c.want)
		}
	}
}

// A batch request is refused queue_full whenever an online request of the
// same size would be, and also once its own bound is reached.
func TestAdmitBatchWork(t *testing.T) {
	base := AdmitInput{Ready: true, Replicas: 1, MaxQueue: 100, MaxBatch: 10}
	for _, c := range []struct {
		name                  string
		online, low, batchQ   int // queued by class
		n                     int
		wantOnline, wantBatch errs.Code // "" admitted
	}{
		{name: "empty", n: 10},
		{name: "batch bound reached", batchQ: 20, n: 10, wantBatch: errs.QueueFull},
		{name: "batch bound exactly", batchQ: 15, n: 10},
		{name: "online and batch fill the queue", online: 80, batchQ: 12, n: 10, wantBatch: errs.QueueFull},
		{name: "online full", online: 95, n: 10, wantOnline: errs.QueueFull, wantBatch: errs.QueueFull},
		{name: "batch queued does not refuse online", online: 80, batchQ: 20, n: 15, wantBatch: errs.QueueFull},
		{name: "low queued counts for batch", low: 96, n: 5, wantBatch: errs.QueueFull},
	} {
		t.Run(c.name, func(t *testing.T) {
			on := base
			on.Instances, on.QueuedInstances = c.n, c.online
			ba := base
			ba.Instances, ba.QueuedInstances = c.n, c.online+c.low+c.batchQ
			if got := errs.CodeOf(Admit(on)); got != c.wantOnline && !(c.wantOnline == "" && Admit(on) == nil) {
				t.Errorf("online: %v, want %q", Admit(on), c.wantOnline)
			}
			err := AdmitBatchWork(ba, c.batchQ, 25)
			if c.wantBatch == "" {
				if err != nil {
					t.Errorf("batch: %v, want admitted", err)
				}
				return
			}
			e := errs.As(err)
			if err == nil || e.Code != c.wantBatch || e.RetryAfter <= 0 {
				t.Errorf("batch: %v, want %s with a Retry-After", err, c.wantBatch)
			}
			if Admit(on) != nil && err == nil {
				t.Error("online refused, batch admitted")
			}
		})
	}
}

func TestPickTake(t *testing.T) {
	for _, c := range []struct {
		name string
		in   PickInput
		want Take
	}{
		{"nothing queued", PickInput{}, TakeNone},
		{"online first", PickInput{Foreground: 3, Batch: 100}, TakeForeground},
		{"batch when no online", PickInput{Batch: 100}, TakeBatch},
		{"a foreground batch never takes batch rows", PickInput{HoldsForeground: true, Batch: 100}, TakeForeground},
		{"a batch-only batch is not extended once online waits", PickInput{HoldsBatch: true, Foreground: 1, Batch: 100}, TakeNone},
		{"a batch-only batch fills while nothing else waits", PickInput{HoldsBatch: true, Batch: 100}, TakeBatch},
	} {
		if got := PickTake(c.in); got != c.want {
			t.Errorf("%s: PickTake(%+v) = %d, want %d", c.name, c.in, got, c.want)
		}
	}
}

func TestCloseBatchYields(t *testing.T) {
	now := time.Unix(1000, 0)
	in := BatchInput{Now: now, Rows: 2, OldestArrival: now, MaxBatch: 8, MaxBatchDelay: 20 * time.Millisecond}
	if closeNow, until := CloseBatch(in); closeNow || !until.Equal(now.Add(20*time.Millisecond)) {
		t.Fatalf("without Yield: %v %v, want wait until +20ms", closeNow, until)
	}
	in.Yield = true
	if closeNow, _ := CloseBatch(in); !closeNow {
		t.Error("Yield: the batch should run now")
	}
}

// Batch work runs only when no online work is queued, in batches of its
// own; online work queued behind a computing batch-only batch runs next.
func TestBatchWorkRunsLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 4}, m)
		done := make(chan error, 8)
		submit := func(v float32, n int, p Priority) {
			go func() {
				_, err := s.Submit(context.Background(), Work{Rows: nrows(v, n), Priority: p})
				done <- err
			}()
			synctest.Wait()
		}
		submit(-1, 3, BatchJob) // taken at once (nothing else queued), held at the gate
		submit(-2, 3, BatchJob)
		submit(1, 1, Online)
		submit(2, 1, Low)
		submit(3, 1, Online)
		if st := s.Stats(); st.Classes[Online].Queued != 2 || st.Classes[Low].Queued != 1 || st.Classes[BatchJob].Queued != 3 {
			t.Errorf("queued by class %+v, want online 2, low 1, batch 3", st.Classes)
		}
		for range 3 {
			m.gate <- struct{}{}
			synctest.Wait()
		}
		for range 3 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		m.mu.Lock()
		var got [][]float32
		got = append(got, m.batches...)
		m.mu.Unlock()
		want := [][]float32{{-1, -1, -1}, {1, 3, 2}, {-2, -2, -2}}
		if !sameBatches(got, want) {
			t.Errorf("batches %v, want %v: online first, batch rows never mixed in", got, want)
		}
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		st := s.Stats()
		if st.Classes[Online].Served != 2 || st.Classes[Low].Served != 1 || st.Classes[BatchJob].Served != 6 || st.QueuedInstances != 0 {
			t.Errorf("classes %+v, want served online 2, low 1, batch 6, nothing queued", st.Classes)
		}
	})
}

// A batch-only batch still forming yields when online work arrives: it
// runs at once with the rows it holds, takes no more batch rows, and the
// online request runs in the next batch.
func TestBatchWorkYieldsWithinOneBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 20 * time.Millisecond
		m := &fakeModel{cost: func(int) time.Duration { return 10 * time.Millisecond }}
		s := newServer(t, Config{MaxBatchSize: 8, MaxBatchDelay: delay}, m)
		t0 := time.Now()
		done := make(chan error, 3)
		submit := func(v float32, n int, p Priority) {
			go func() {
				_, err := s.Submit(context.Background(), Work{Rows: nrows(v, n), Priority: p})
				done <- err
			}()
			synctest.Wait()
		}
		submit(-1, 2, BatchJob) // forms a batch of 2, waiting up to the delay for more
		time.Sleep(5 * time.Millisecond)
		submit(1, 1, Online)    // arrives at 5 ms: the batch-only batch runs now
		submit(-2, 2, BatchJob) // not taken into it
		for range 3 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		want := [][]float32{{-1, -1}, {1}, {-2, -2}}
		if !sameBatches(m.batches, want) {
			t.Fatalf("batches %v, want %v", m.batches, want)
		}
		// Fake time: exact. The batch rows ran at 5 ms (not at the batch
		// delay, 20 ms) and were done by 15 ms; the online request ran when
		// its own batch delay ended (5 + 20 ms), as with no batch work at
		// all; the later batch rows after it.
		if got := []time.Duration{m.starts[0].Sub(t0), m.starts[1].Sub(t0), m.starts[2].Sub(t0)}; got[0] != 5*time.Millisecond || got[1] != 25*time.Millisecond || got[2] != 35*time.Millisecond {
			t.Errorf("batches started at %v, want [5ms 25ms 35ms]", got)
		}
	})
}

// The batch class has its own bound, below the online one: a batch
// request is refused queue_full (retryable) while online work is still
// admitted.
func TestBatchWorkOwnBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 4, MaxQueueInstances: 20, MaxBatchQueueInstances: 6}, m)
		if got := s.BatchQueueBound(); got != 6 {
			t.Fatalf("BatchQueueBound %d, want 6", got)
		}
		done := make(chan error, 8)
		submit := func(v float32, n int, p Priority) {
			go func() {
				_, err := s.Submit(context.Background(), Work{Rows: nrows(v, n), Priority: p})
				done <- err
			}()
			synctest.Wait()
		}
		submit(-1, 4, BatchJob) // taken: held at the gate
		submit(-2, 6, BatchJob) // queued: the batch bound is full
		_, err := s.Submit(context.Background(), Work{Rows: nrows(-3, 1), Priority: BatchJob})
		if e := errs.As(err); err == nil || e.Code != errs.QueueFull || !errs.Of(err).RetryClient {
			t.Errorf("batch past its bound: %v, want retryable queue_full", err)
		}
		submit(1, 4, Online) // admitted: batch work does not count against online
		if _, err := s.Submit(context.Background(), Work{Rows: nrows(0, 1), Priority: 7}); errs.CodeOf(err) != errs.Internal {
			t.Errorf("unknown priority: %v, want internal", err)
		}
		for range 4 {
			m.gate <- struct{}{}
			synctest.Wait()
		}
		for range 3 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	})
}

func nrows(v float32, n int) runtime.Batch {
	b := rows(v)
	for range n - 1 {
		b.Data = append(b.Data, v)
	}
	b.Rows = n
	return b
}

func sameBatches(got, want [][]float32) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if len(got[i]) != len(want[i]) {
			return false
		}
		for j := range got[i] {
			if got[i][j] != want[i][j] {
				return false
			}
		}
	}
	return true
}

// Under a steady online load on two replicas, with batch work always
// queued: no batch mixes the classes, batch work gets served, and no
// online request takes longer than it does with no batch work at all by
// more than the one batch-job batch a replica may be computing when it
// arrives (fake time, so the figures are the scheduler's, not the
// machine's).
func TestOnlineUnhurtByBatchWork(t *testing.T) {
	cost := func(n int) time.Duration { return time.Millisecond + time.Duration(n)*100*time.Microsecond }
	const maxBatch, online = 8, 200
	run := func(withBatch bool) (lat []time.Duration, batches [][]float32, batchServed int64, elapsed time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			m1, m2 := &fakeModel{cost: cost}, &fakeModel{cost: cost}
			s := newServer(t, Config{MaxBatchSize: maxBatch, MaxBatchDelay: time.Millisecond}, m1, m2)
			start := time.Now()
			stop := make(chan struct{})
			var feeders sync.WaitGroup
			if withBatch {
				for range 2 {
					feeders.Add(1)
					go func() {
						defer feeders.Done()
						for {
							select {
							case <-stop:
								return
							default:
							}
							if _, err := s.Submit(context.Background(), Work{Rows: nrows(-1, maxBatch), Priority: BatchJob}); err != nil {
								time.Sleep(time.Millisecond)
							}
						}
					}()
				}
			}
			lat = make([]time.Duration, online)
			var wg sync.WaitGroup
			for i := range online {
				// A fixed schedule: every 2 ms, plus a few hundred µs.
				time.Sleep(2*time.Millisecond + time.Duration(i*37%5)*100*time.Microsecond)
				wg.Add(1)
				go func() {
					defer wg.Done()
					t0 := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					if _, err := s.Submit(ctx, Work{Rows: nrows(float32(1+i%3), 1+i%3)}); err != nil {
						t.Errorf("online %d: %v", i, err)
					}
					lat[i] = time.Since(t0)
				}()
			}
			wg.Wait()
			elapsed = time.Since(start)
			close(stop)
			feeders.Wait()
			for _, m := range []*fakeModel{m1, m2} {
				m.mu.Lock()
				batches = append(batches, m.batches...)
				m.mu.Unlock()
			}
			batchServed = s.Stats().Classes[BatchJob].Served
		})
		return lat, batches, batchServed, elapsed
	}
	alone, _, _, _ := run(false)
	with, batches, served, elapsed := run(true)
	var onlineBusy, batchBusy time.Duration
	for _, b := range batches {
		if b[0] < 0 {
			batchBusy += cost(len(b))
		} else {
			onlineBusy += cost(len(b))
		}
		for _, v := range b[1:] {
			if (v < 0) != (b[0] < 0) {
				t.Fatalf("batch %v mixes batch rows with online ones", b)
			}
		}
	}
	if served == 0 {
		t.Error("no batch work was served")
	}
	bound := cost(maxBatch)
	worst := time.Duration(0)
	for i := range with {
		worst = max(worst, with[i]-alone[i])
		if with[i] > alone[i]+bound {
			t.Errorf("online %d took %v with batch work, %v without: over one batch-job batch (%v) more", i, with[i], alone[i], bound)
		}
	}
	// A figure, not a goal (that is the runner's benchmark): the share of
	// the replicas' time online work left idle that batch work computed.
	idle := 2*elapsed - onlineBusy
	t.Logf("batch rows served %d, computing %.0f%% of the idle replica time; worst online slowdown %v (bound %v)",
		served, 100*float64(batchBusy)/float64(idle), worst, bound)
}
