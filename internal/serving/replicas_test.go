package serving

import (
	"context"
	"errors"
	goruntime "runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/runtime"
)

// submitAsync submits v and sends its error (nil if the answer was right)
// on the returned channel.
func submitAsync(ctx context.Context, s *Server, v float32) <-chan error {
	ch := make(chan error, 1)
	go func() {
		res, err := s.Submit(ctx, Work{Rows: rows(v)})
		if err == nil && (len(res.Out.Data) != 1 || res.Out.Data[0] != 2*v) {
			err = errors.New("wrong answer")
		}
		ch <- err
	}()
	return ch
}

func wantNotReady(t *testing.T, s *Server) {
	t.Helper()
	_, err := s.Submit(context.Background(), Work{Rows: rows(9)})
	if errs.CodeOf(err) != errs.NotReady || errs.As(err).RetryAfter < time.Second {
		t.Fatalf("Submit = %v, want not_ready with a Retry-After", err)
	}
}

func TestAddReplicaTakesBatchesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &fakeModel{gate: make(chan struct{})}, &fakeModel{}
		s := newServer(t, Config{MaxBatchSize: 1}, a)
		r1 := submitAsync(context.Background(), s, 1) // taken by a, held at its gate
		synctest.Wait()
		r2 := submitAsync(context.Background(), s, 2) // queued: a is busy
		synctest.Wait()
		if q := s.Stats().QueuedInstances; q != 1 {
			t.Fatalf("queued %d, want 1", q)
		}
		if err := s.AddReplica(b); err != nil {
			t.Fatal(err)
		}
		if err := <-r2; err != nil {
			t.Fatalf("request queued behind a busy replica, after AddReplica: %v", err)
		}
		if got := b.sizes(); len(got) != 1 {
			t.Errorf("new replica ran batches %v, want one", got)
		}
		if got := s.Replicas(); got != (ReplicaCounts{Ready: 2}) {
			t.Errorf("Replicas() = %+v, want 2 ready", got)
		}
		close(a.gate)
		if err := <-r1; err != nil {
			t.Fatal(err)
		}
	})
}

func TestRemoveWaitsForInflightBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 4}, a)
		r1 := submitAsync(context.Background(), s, 1)
		synctest.Wait() // computing, held at the gate
		removed := make(chan error, 1)
		go func() { removed <- s.RemoveReplica(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-removed:
			t.Fatalf("RemoveReplica returned %v while its replica was computing", err)
		default:
		}
		if a.closes() != 0 {
			t.Fatal("model closed mid-batch")
		}
		if got := s.Replicas(); got != (ReplicaCounts{Draining: 1}) {
			t.Errorf("Replicas() while draining = %+v, want 1 draining", got)
		}
		wantNotReady(t, s) // a draining replica takes no new work
		close(a.gate)
		if err := <-r1; err != nil {
			t.Fatalf("the in-flight request: %v", err)
		}
		if err := <-removed; err != nil {
			t.Fatal(err)
		}
		if a.closes() != 1 {
			t.Errorf("model closed %d times, want 1", a.closes())
		}
		if st := s.Stats(); st.ReadyReplicas != 0 || st.Draining != 0 || st.Restarting != 0 {
			t.Errorf("stats after removing the only replica: %+v", st)
		}
		wantNotReady(t, s)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if a.closes() != 1 {
			t.Errorf("model closed %d times after Close, want 1", a.closes())
		}
	})
}

func TestRemovePrefersIdleReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy, idle := &fakeModel{gate: make(chan struct{})}, &fakeModel{}
		s := newServer(t, Config{MaxBatchSize: 1}, busy)
		r1 := submitAsync(context.Background(), s, 1)
		synctest.Wait()
		if err := s.AddReplica(idle); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveReplica(context.Background()); err != nil {
			t.Fatal(err)
		}
		if idle.closes() != 1 || busy.closes() != 0 {
			t.Errorf("closes: idle %d, busy %d; want the idle replica removed", idle.closes(), busy.closes())
		}
		close(busy.gate)
		if err := <-r1; err != nil {
			t.Fatal(err)
		}
	})
}

func TestRemoveLastRefusedWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 1}, a)
		r1 := submitAsync(context.Background(), s, 1)
		synctest.Wait()
		r2 := submitAsync(context.Background(), s, 2)
		synctest.Wait()
		err := s.RemoveReplica(context.Background())
		if errs.CodeOf(err) != errs.Unavailable {
			t.Fatalf("removing the last replica with work queued = %v, want unavailable", err)
		}
		if got := s.Replicas(); got != (ReplicaCounts{Ready: 1}) {
			t.Errorf("a refused removal changed the replicas: %+v", got)
		}
		close(a.gate)
		for _, r := range []<-chan error{r1, r2} {
			if err := <-r; err != nil {
				t.Fatal(err)
			}
		}
		// Nothing queued any more: now it may go.
		if err := s.RemoveReplica(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRemoveLastWhileClosing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &fakeModel{gate: make(chan struct{})}
		s := New(Config{MaxBatchSize: 1, MaxQueueInstances: 10, Logger: quiet()}, []runtime.Model{a})
		r1 := submitAsync(context.Background(), s, 1)
		synctest.Wait()
		r2 := submitAsync(context.Background(), s, 2)
		synctest.Wait()
		closed := make(chan error, 1)
		go func() { closed <- s.Close(context.Background()) }()
		synctest.Wait()
		removed := make(chan error, 1)
		go func() { removed <- s.RemoveReplica(context.Background()) }()
		if err := <-r2; errs.CodeOf(err) != errs.ShuttingDown {
			t.Fatalf("queued request when the last replica left a closing server: %v, want shutting_down", err)
		}
		close(a.gate)
		if err := <-r1; err != nil {
			t.Fatalf("the in-flight request: %v", err)
		}
		if err := <-removed; err != nil {
			t.Fatal(err)
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if a.closes() != 1 {
			t.Errorf("model closed %d times, want 1", a.closes())
		}
	})
}

func TestZeroReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{MaxBatchSize: 4, MaxQueueInstances: 10, Logger: quiet()}, nil)
		wantNotReady(t, s)
		if err := s.RemoveReplica(context.Background()); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("RemoveReplica with none = %v, want not_found", err)
		}
		m := &fakeModel{}
		if err := s.AddReplica(m); err != nil {
			t.Fatal(err)
		}
		if err := <-submitAsync(context.Background(), s, 3); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		late := &fakeModel{}
		if err := s.AddReplica(late); errs.CodeOf(err) != errs.ShuttingDown {
			t.Fatalf("AddReplica after Close = %v, want shutting_down", err)
		}
		if late.closes() != 1 || m.closes() != 1 {
			t.Errorf("closes: refused model %d, served model %d; want 1 and 1", late.closes(), m.closes())
		}
	})
}

func TestOnlyReplicaCrashRefusesNewWorkUntilReloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crashing := &fakeModel{gate: make(chan struct{}), panicAt: 1}
		load := func(ctx context.Context) (runtime.Model, error) {
			time.Sleep(100 * time.Millisecond)
			return &fakeModel{}, nil
		}
		s := newServer(t, Config{MaxBatchSize: 1, Load: load}, crashing)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r1 := submitAsync(ctx, s, 1) // computing on the crashing replica
		synctest.Wait()
		r2 := submitAsync(ctx, s, 2) // queued
		synctest.Wait()
		crashing.gate <- struct{}{} // panics
		synctest.Wait()             // crashed; the replacement is loading
		if got := s.Replicas(); got != (ReplicaCounts{Restarting: 1}) {
			t.Fatalf("Replicas() while reloading = %+v, want 1 restarting, 0 ready", got)
		}
		if st := s.Stats(); st.ReadyReplicas != 0 || st.Restarting != 1 || st.Crashes != 1 {
			t.Fatalf("stats while reloading: %+v", st)
		}
		wantNotReady(t, s)
		for i, r := range []<-chan error{r1, r2} {
			if err := <-r; err != nil {
				t.Fatalf("request %d, accepted before the crash: %v", i+1, err)
			}
		}
		if got := s.Replicas(); got != (ReplicaCounts{Ready: 1}) {
			t.Errorf("Replicas() after the reload = %+v", got)
		}
		if st := s.Stats(); st.ReadyReplicas != 1 || st.Restarting != 0 || st.Restarts != 1 {
			t.Errorf("stats after the reload: %+v", st)
		}
		if err := <-submitAsync(context.Background(), s, 4); err != nil {
			t.Fatalf("after the reload: %v", err)
		}
	})
}

func TestCrashWithoutReplacementAnswersQueuedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No Load: nothing will ever run what is queued, so it is answered
		// at once rather than left waiting (here, with no deadline, forever).
		crashing := &fakeModel{gate: make(chan struct{}), panicAt: 1}
		s := newServer(t, Config{MaxBatchSize: 1}, crashing)
		r1 := submitAsync(context.Background(), s, 1)
		synctest.Wait()
		r2 := submitAsync(context.Background(), s, 2)
		synctest.Wait()
		crashing.gate <- struct{}{}
		for i, r := range []<-chan error{r1, r2} {
			if err := <-r; errs.CodeOf(err) != errs.Unavailable {
				t.Errorf("request %d: %v, want unavailable", i+1, err)
			}
		}
		if st := s.Stats(); st.QueuedInstances != 0 || st.ReadyReplicas != 0 {
			t.Errorf("stats %+v", st)
		}
		wantNotReady(t, s)
	})
}

func TestRetiringReplicaCrashIsNotReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crashing := &fakeModel{gate: make(chan struct{}), panicAt: 1}
		loads := 0
		load := func(ctx context.Context) (runtime.Model, error) { loads++; return &fakeModel{}, nil }
		s := newServer(t, Config{MaxBatchSize: 1, Load: load}, crashing)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r1 := submitAsync(ctx, s, 1)
		synctest.Wait()
		removed := make(chan error, 1)
		go func() { removed <- s.RemoveReplica(context.Background()) }()
		synctest.Wait()
		crashing.gate <- struct{}{}
		if err := <-removed; err != nil {
			t.Fatal(err)
		}
		// The piece would be retried, but no replica is left to run it.
		if err := <-r1; errs.CodeOf(err) != errs.Unavailable {
			t.Fatalf("request on a removed replica that crashed: %v, want unavailable", err)
		}
		if loads != 0 || crashing.closes() != 1 {
			t.Errorf("loads %d (want 0: a removed replica is not replaced), closes %d", loads, crashing.closes())
		}
		if got := s.Replicas(); got != (ReplicaCounts{}) {
			t.Errorf("Replicas() = %+v, want none", got)
		}
	})
}

func TestRemoveReturnsWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 1}, a)
		r1 := submitAsync(context.Background(), s, 1)
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		if err := s.RemoveReplica(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("RemoveReplica = %v, want deadline exceeded", err)
		}
		close(a.gate)
		if err := <-r1; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if a.closes() != 1 || s.Replicas() != (ReplicaCounts{}) {
			t.Errorf("after its batch: closes %d, replicas %+v; want the replica gone", a.closes(), s.Replicas())
		}
	})
}

func TestAddRemoveUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 400
		var mu sync.Mutex
		var models []*fakeModel
		newModel := func() *fakeModel {
			m := &fakeModel{cost: func(n int) time.Duration { return time.Millisecond + time.Duration(n)*100*time.Microsecond }}
			mu.Lock()
			models = append(models, m)
			mu.Unlock()
			return m
		}
		s := New(Config{MaxBatchSize: 8, MaxBatchDelay: time.Millisecond, MaxQueueInstances: 10 * n, Logger: quiet()},
			[]runtime.Model{newModel()})
		results := make([]<-chan error, n)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // requests arrive over 200ms
			defer wg.Done()
			for i := range n {
				results[i] = submitAsync(context.Background(), s, float32(i))
				time.Sleep(500 * time.Microsecond)
			}
		}()
		// Scale 1 → 3 → 1 → 4 → 2 while they arrive; never below one, so no
		// removal is refused.
		steps := []int{+1, +1, -1, -1, +1, +1, +1, -1, -1}
		for _, d := range steps {
			time.Sleep(15 * time.Millisecond)
			if d > 0 {
				if err := s.AddReplica(newModel()); err != nil {
					t.Fatal(err)
				}
			} else if err := s.RemoveReplica(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		for i, r := range results {
			if err := <-r; err != nil {
				t.Errorf("request %d: %v", i, err)
			}
		}
		if got := s.Replicas(); got != (ReplicaCounts{Ready: 2}) {
			t.Errorf("Replicas() = %+v, want 2 ready", got)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		seen := make(map[float32]int)
		for _, m := range models {
			m.mu.Lock()
			for _, b := range m.batches {
				for _, v := range b {
					seen[v]++
				}
			}
			m.mu.Unlock()
			if c := m.closes(); c != 1 {
				t.Errorf("a model was closed %d times, want 1", c)
			}
		}
		for i := range n {
			if seen[float32(i)] != 1 {
				t.Errorf("row %d computed %d times, want 1", i, seen[float32(i)])
			}
		}
		if len(models) != 6 {
			t.Errorf("%d models, want 6", len(models))
		}
	})
}

// TestNoGoroutineLeft checks, outside a bubble, that a Server whose replica
// set changed leaves no goroutine behind once closed. (Inside synctest
// bubbles a leaked goroutine fails the test as a deadlock.)
func TestNoGoroutineLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := goruntime.NumGoroutine()
		s := New(Config{MaxBatchSize: 4, MaxQueueInstances: 100, Logger: quiet()}, []runtime.Model{&fakeModel{}})
		for range 3 {
			if err := s.AddReplica(&fakeModel{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RemoveReplica(context.Background()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Submit(context.Background(), Work{Rows: rows(float32(i))}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if err := s.RemoveReplica(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Goroutines that called wg.Done may not have exited yet: once every
		// goroutine of the bubble is blocked or gone, none of the server's is
		// left (and synctest.Test fails on one blocked for good).
		synctest.Wait()
		if n := goruntime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after Close:\n%s", before, n, buf[:goruntime.Stack(buf, true)])
		}
	})
}
