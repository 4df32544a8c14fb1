package serving

import (
	"context"
	"errors"
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

// underSubmit says whether the calling goroutine is inside Server.Submit:
// a model's Predict called there runs inline, on the caller's goroutine; a
// replica loop's stack has replicaLoop → run, never Submit.
func underSubmit() bool {
	pcs := make([]uintptr, 64)
	frames := goruntime.CallersFrames(pcs[:goruntime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "serving.(*Server).Submit") {
			return true
		}
		if !more {
			return false
		}
	}
}

func (m *fakeModel) inlined() []bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]bool(nil), m.inline...)
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRunInline(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	base := InlineInput{IdleReplica: true, Batch: BatchInput{Now: t0, Rows: 1, FirstArrival: t0, MaxBatch: 8, Cost: CostModel{B: ms}}}
	with := func(f func(*InlineInput)) InlineInput { in := base; f(&in); return in }
	cases := []struct {
		name string
		in   InlineInput
		want bool
	}{
		{"opportunistic batch of one, idle replica", base, true},
		{"turned off", with(func(in *InlineInput) { in.Disabled = true }), false},
		{"work queued ahead keeps its turn", with(func(in *InlineInput) { in.Queued = 1 }), false},
		{"a crashed batch's retry goes first", with(func(in *InlineInput) { in.Retried = 1 }), false},
		{"no idle replica", with(func(in *InlineInput) { in.IdleReplica = false }), false},
		{"batching would wait for more rows", with(func(in *InlineInput) { in.Batch.MaxBatchDelay = 2 * ms }), false},
		{"a full batch closes at once", with(func(in *InlineInput) { in.Batch.MaxBatchDelay = 2 * ms; in.Batch.Rows = 8 }), true},
		{"a request over the batch bound is split by the batcher", with(func(in *InlineInput) { in.Batch.Rows = 9 }), false},
		// Due in 5ms, a full batch costs 8ms: the batcher would close it now.
		{"deadline leaves no time to wait", with(func(in *InlineInput) {
			in.Batch.MaxBatchDelay = 10 * ms
			in.Batch.EarliestDue = t0.Add(5 * ms)
		}), true},
		{"far deadline: batching waits", with(func(in *InlineInput) {
			in.Batch.MaxBatchDelay = 10 * ms
			in.Batch.EarliestDue = t0.Add(time.Second)
		}), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RunInline(c.in); got != c.want {
				t.Fatalf("RunInline = %v, want %v", got, c.want)
			}
		})
	}
}

// A request that would run alone at once runs on the caller's goroutine;
// one the batcher would hold, or split, goes through the queue.
func TestInlineWhenIdle(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name     string
		cfg      Config
		n        int
		deadline time.Duration
		want     []bool // per batch: inline
	}{
		{"maxBatchDelay 0", Config{MaxBatchSize: 8}, 1, 0, []bool{true}},
		{"maxBatchSize 1", Config{MaxBatchSize: 1, MaxBatchDelay: 2 * ms}, 1, 0, []bool{true}},
		{"full batch", Config{MaxBatchSize: 4, MaxBatchDelay: 2 * ms}, 4, 0, []bool{true}},
		{"batching waits", Config{MaxBatchSize: 8, MaxBatchDelay: 2 * ms}, 1, 0, []bool{false}},
		{"split request", Config{MaxBatchSize: 4}, 6, 0, []bool{false, false}},
		{"deadline closes the batch at once", Config{MaxBatchSize: 8, MaxBatchDelay: 10 * ms, Cost: CostModel{B: ms}}, 1, 5 * ms, []bool{true}},
		{"turned off", Config{MaxBatchSize: 1, noInline: true}, 1, 0, []bool{false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &fakeModel{}
				s := newServer(t, c.cfg, m)
				ctx := context.Background()
				if c.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.deadline)
					defer cancel()
				}
				in := runtime.Batch{Rows: c.n, Cols: 1, Data: make([]float32, c.n)}
				for i := range in.Data {
					in.Data[i] = float32(i + 1)
				}
				res, err := s.Submit(ctx, Work{Rows: in})
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range res.Out.Data {
					if v != 2*float32(i+1) {
						t.Fatalf("row %d = %v, want %v", i, v, 2*(i+1))
					}
				}
				if got := m.inlined(); !equalBools(got, c.want) {
					t.Fatalf("batches inline %v, want %v", got, c.want)
				}
				if st := s.Stats(); st.Batches != int64(len(c.want)) || st.Rows != int64(c.n) || st.InflightBatches != 0 {
					t.Errorf("stats %+v", st)
				}
			})
		})
	}
}

// While its replica is borrowed, work queues and the replica's own loop
// runs it, in order, once the borrow ends; work queued ahead is never
// overtaken by an inline run on another, idle replica.
func TestInlineNotUsedWhenQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &fakeModel{gate: make(chan struct{})}, &fakeModel{}
		s := newServer(t, Config{MaxBatchSize: 1}, a)
		r1 := submitAsync(context.Background(), s, 1) // inline on a, held at its gate
		synctest.Wait()
		r2 := submitAsync(context.Background(), s, 2) // a is borrowed: queued
		synctest.Wait()
		if st := s.Stats(); st.QueuedInstances != 1 || st.InflightBatches != 1 {
			t.Fatalf("while a is borrowed: %+v, want 1 queued, 1 in flight", st)
		}
		if err := s.AddReplica(b); err != nil {
			t.Fatal(err)
		}
		// b is idle but 2 is queued ahead (unless b's loop has taken it
		// already): 3 must not run inline before it.
		if _, err := s.Submit(context.Background(), Work{Rows: rows(3)}); err != nil {
			t.Fatal(err)
		}
		if err := <-r2; err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		var order []float32
		for _, x := range b.batches {
			order = append(order, x[0])
		}
		b.mu.Unlock()
		if len(order) != 2 || order[0] != 2 || order[1] != 3 {
			t.Fatalf("b computed %v, want [2 3]: queued work was overtaken", order)
		}
		if got := b.inlined(); got[0] {
			t.Fatalf("b's batches inline %v: 2 was queued, b's loop runs it", got)
		}
		close(a.gate)
		if err := <-r1; err != nil {
			t.Fatal(err)
		}
		if got := a.inlined(); !equalBools(got, []bool{true}) {
			t.Fatalf("a's batches inline %v, want [true]", got)
		}
		// Work queued while a was borrowed, with a alone: a's loop runs it
		// when the borrow ends (nothing else would wake it).
		c := &fakeModel{gate: make(chan struct{})}
		s2 := newServer(t, Config{MaxBatchSize: 1}, c)
		q1 := submitAsync(context.Background(), s2, 1)
		synctest.Wait()
		q2 := submitAsync(context.Background(), s2, 2)
		synctest.Wait()
		c.gate <- struct{}{}
		c.gate <- struct{}{}
		for _, r := range []<-chan error{q1, q2} {
			if err := <-r; err != nil {
				t.Fatal(err)
			}
		}
		if got := c.inlined(); !equalBools(got, []bool{true, false}) {
			t.Fatalf("batches inline %v, want [true false]", got)
		}
	})
}

type countingObserver struct {
	nopObserver
	crashes, restarts atomic.Int64
}

func (o *countingObserver) ReplicaCrash()   { o.crashes.Add(1) }
func (o *countingObserver) ReplicaRestart() { o.restarts.Add(1) }

// A panic in an inline run is what a panic in the replica's loop is: the
// piece is retried once, on a replacement loaded with cfg.Load (or on
// another live replica), the crash is observed and counted, and the
// crashed model is closed.
func TestInlineCrashIsRetriedAndReplaced(t *testing.T) {
	cases := []struct {
		name   string
		others int // other live replicas
	}{
		{"replacement runs the retry", 0},
		{"another replica runs the retry", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				crashing := &fakeModel{panicAt: 1}
				var mu sync.Mutex
				var loaded []*fakeModel
				obs := &countingObserver{}
				cfg := Config{MaxBatchSize: 1, Observer: obs, Load: func(ctx context.Context) (runtime.Model, error) {
					time.Sleep(10 * time.Millisecond)
					m := &fakeModel{}
					mu.Lock()
					loaded = append(loaded, m)
					mu.Unlock()
					return m, nil
				}}
				models := []runtime.Model{crashing}
				var others []*fakeModel
				for range c.others {
					m := &fakeModel{}
					others = append(others, m)
					models = append(models, m)
				}
				s := newServer(t, cfg, models...)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				res, err := s.Submit(ctx, Work{Rows: rows(21)})
				if err != nil || res.Out.Data[0] != 42 {
					t.Fatalf("request whose inline run crashed: %v %v, want 42 after the retry", res.Out.Data, err)
				}
				if got := crashing.inlined(); !equalBools(got, []bool{true}) {
					t.Fatalf("crashing model's batches inline %v, want [true]", got)
				}
				time.Sleep(time.Second) // the replacement loads (fake time)
				synctest.Wait()
				mu.Lock()
				retriedOn := append([]*fakeModel(nil), others...)
				retriedOn = append(retriedOn, loaded...)
				nloaded := len(loaded)
				mu.Unlock()
				ran := 0
				for _, m := range retriedOn {
					m.mu.Lock()
					for i, inl := range m.inline {
						ran++
						if inl || m.batches[i][0] != 21 {
							t.Errorf("retry: batch %v inline %v", m.batches[i], inl)
						}
					}
					m.mu.Unlock()
				}
				if ran != 1 {
					t.Errorf("the retried piece ran %d times, want once", ran)
				}
				st := s.Stats()
				if st.Crashes != 1 || st.Restarts != 1 || nloaded != 1 || st.ReadyReplicas != 1+c.others || st.Restarting != 0 {
					t.Errorf("stats %+v, loads %d", st, nloaded)
				}
				if obs.crashes.Load() != 1 || obs.restarts.Load() != 1 || crashing.closes() != 1 {
					t.Errorf("observed %d crashes, %d restarts; crashed model closed %d times", obs.crashes.Load(), obs.restarts.Load(), crashing.closes())
				}
				if err := <-submitAsync(context.Background(), s, 5); err != nil {
					t.Fatalf("after the replacement: %v", err)
				}
			})
		})
	}
}

// Without cfg.Load nothing replaces the replica: the request whose inline
// run crashed is answered unavailable, and new work not_ready.
func TestInlineCrashWithoutReplacement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crashing := &fakeModel{panicAt: 1}
		s := newServer(t, Config{MaxBatchSize: 1}, crashing)
		_, err := s.Submit(context.Background(), Work{Rows: rows(1)})
		if errs.CodeOf(err) != errs.Unavailable {
			t.Fatalf("got %v, want unavailable", err)
		}
		synctest.Wait()
		if st := s.Stats(); st.Crashes != 1 || st.ReadyReplicas != 0 || st.QueuedInstances != 0 || crashing.closes() != 1 {
			t.Errorf("stats %+v, closes %d", st, crashing.closes())
		}
		wantNotReady(t, s)
	})
}

// RemoveReplica of a borrowed replica waits for the inline run, which is
// answered; the model is closed once, after it.
func TestRemoveDuringInlineRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 1}, a)
		r1 := submitAsync(context.Background(), s, 1)
		synctest.Wait() // inline, at the gate
		removed := make(chan error, 1)
		go func() { removed <- s.RemoveReplica(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-removed:
			t.Fatalf("RemoveReplica returned %v during an inline run on its replica", err)
		default:
		}
		if a.closes() != 0 {
			t.Fatal("model closed during an inline run")
		}
		if got := s.Replicas(); got != (ReplicaCounts{Draining: 1}) {
			t.Errorf("Replicas() = %+v, want 1 draining", got)
		}
		wantNotReady(t, s) // a retiring replica is never borrowed
		close(a.gate)
		if err := <-r1; err != nil {
			t.Fatal(err)
		}
		if err := <-removed; err != nil {
			t.Fatal(err)
		}
		if a.closes() != 1 || !equalBools(a.inlined(), []bool{true}) {
			t.Errorf("closes %d, batches inline %v", a.closes(), a.inlined())
		}
	})
}

// A borrowed replica counts as working: RemoveReplica takes an idle one
// even when the borrowed one is the newest.
func TestRemoveSkipsBorrowedReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &fakeModel{gate: make(chan struct{})}, &fakeModel{gate: make(chan struct{})}
		s := newServer(t, Config{MaxBatchSize: 1}, a)
		r1 := submitAsync(context.Background(), s, 1) // inline on a
		synctest.Wait()
		if err := s.AddReplica(b); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		r2 := submitAsync(context.Background(), s, 2) // inline on b, the only idle one
		synctest.Wait()
		a.gate <- struct{}{}
		if err := <-r1; err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // a idle, b (newest) borrowed
		if err := s.RemoveReplica(context.Background()); err != nil {
			t.Fatal(err)
		}
		if a.closes() != 1 || b.closes() != 0 {
			t.Fatalf("closes: a %d, b %d; want the idle a removed, not the borrowed b", a.closes(), b.closes())
		}
		close(b.gate)
		if err := <-r2; err != nil {
			t.Fatal(err)
		}
		if !equalBools(b.inlined(), []bool{true}) {
			t.Errorf("b's batches inline %v, want [true]", b.inlined())
		}
	})
}

// Close during an inline run waits for it and for what was queued
// meanwhile, then closes the model: nothing is lost.
func TestCloseDuringInlineRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &fakeModel{gate: make(chan struct{})}
		s := New(Config{MaxBatchSize: 1, MaxQueueInstances: 10, Logger: quiet()}, []runtime.Model{a})
		r1 := submitAsync(context.Background(), s, 1) // inline
		synctest.Wait()
		r2 := submitAsync(context.Background(), s, 2) // queued
		synctest.Wait()
		closed := make(chan error, 1)
		go func() { closed <- s.Close(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v during an inline run", err)
		default:
		}
		if _, err := s.Submit(context.Background(), Work{Rows: rows(3)}); errs.CodeOf(err) != errs.ShuttingDown {
			t.Fatalf("Submit while closing = %v, want shutting_down", err)
		}
		if a.closes() != 0 {
			t.Fatal("model closed during an inline run")
		}
		a.gate <- struct{}{}
		a.gate <- struct{}{}
		for _, r := range []<-chan error{r1, r2} {
			if err := <-r; err != nil {
				t.Fatal(err)
			}
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if a.closes() != 1 || !equalBools(a.inlined(), []bool{true, false}) {
			t.Errorf("closes %d, batches inline %v; want 1, [true false]", a.closes(), a.inlined())
		}
	})
}

// An inline run's deadline is its batch's: a model that honours ctx stops
// at the caller's deadline, and the caller is answered deadline_exceeded.
func TestInlineDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &ctxModel{}
		s := newServer(t, Config{MaxBatchSize: 1}, m)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := s.Submit(ctx, Work{Rows: rows(1)})
		if errs.CodeOf(err) != errs.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want deadline_exceeded", err)
		}
		if took := time.Since(start); took != 5*time.Millisecond {
			t.Errorf("answered after %v, want 5ms (the deadline)", took)
		}
		if !m.inline.Load() {
			t.Error("the request did not run inline")
		}
	})
}

// ctxModel waits for its context to end.
type ctxModel struct {
	fakeModel
	inline atomic.Bool
}

func (m *ctxModel) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	m.inline.Store(underSubmit())
	<-ctx.Done()
	return runtime.Output{}, ctx.Err()
}
