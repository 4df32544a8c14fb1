package autoscale

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSource offers one version at a rate the test sets; its replica count
// is what the actuator last accepted.
type fakeSource struct {
	mu      sync.Mutex
	cfg     Config
	rate    float64 // instances/s now
	arrived float64
	last    time.Time
	act     *fakeActuator
	fail    bool
}

func (s *fakeSource) setRate(r float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accrueLocked()
	s.rate = r
}

func (s *fakeSource) accrueLocked() {
	now := time.Now()
	if !s.last.IsZero() {
		s.arrived += s.rate * now.Sub(s.last).Seconds()
	}
	s.last = now
}

func (s *fakeSource) Observe(context.Context) ([]Observation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return nil, errors.New("source down")
	}
	s.accrueLocked()
	return []Observation{{Version: "m@1", Config: s.cfg, Sample: Sample{
		Arrived: int64(s.arrived), Replicas: s.act.current(), PerReplica: 100, ColdStart: 5 * time.Second}}}, nil
}

type call struct {
	at time.Time
	n  int
	ok bool
}

// fakeActuator records every call; it fails the first failFirst of them.
type fakeActuator struct {
	mu        sync.Mutex
	n         int
	calls     []call
	failFirst int
}

func (a *fakeActuator) SetReplicas(_ context.Context, version string, n int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.calls) < a.failFirst {
		a.calls = append(a.calls, call{time.Now(), n, false})
		return errors.New("no worker can hold another replica of " + version)
	}
	a.calls = append(a.calls, call{time.Now(), n, true})
	a.n = n
	return nil
}

func (a *fakeActuator) current() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

func (a *fakeActuator) log() []call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]call(nil), a.calls...)
}

// start runs a Loop in the bubble and returns a stop that waits for it.
func start(t *testing.T, src Source, act Actuator) (*Loop, func()) {
	l := NewLoop(src, act, LoopConfig{Tick: time.Second})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	return l, func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	}
}

// A 1x → 3x → 1x step (100 → 300 → 100 instances/s, 100/s per replica at
// the SLO): up at the first whole tick after the step, by as much as needed;
// down one replica per cooldown; never two changes inside one cooldown.
func TestLoopStepUpFastDownSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		act := &fakeActuator{n: 2}
		src := &fakeSource{cfg: Config{MinReplicas: 1}, rate: 100, act: act}
		l, stop := start(t, src, act)
		defer stop()

		time.Sleep(2*time.Minute + 500*time.Millisecond) // ticks land on whole seconds; the test acts between them
		if c := act.log(); len(c) != 0 {
			t.Fatalf("at 1x: %d calls (%v), want none", len(c), c)
		}
		stepUp := time.Now()
		src.setRate(300)
		time.Sleep(3 * time.Minute)
		stepDown := time.Now()
		src.setRate(100)
		time.Sleep(10 * time.Minute)
		synctest.Wait()

		calls := act.log()
		for _, c := range calls {
			t.Logf("%v after the start: %d", c.at.Sub(stepUp.Add(-2*time.Minute-500*time.Millisecond)), c.n)
		}
		if len(calls) == 0 || !calls[0].ok || calls[0].n != 5 { // ceil(300/70)
			t.Fatalf("calls %v: want the first to set 5", calls)
		}
		// The tick half a second after the step sees half of it (200/s,
		// what 2 replicas serve at 100 %); the next one sees all of it.
		if d := calls[0].at.Sub(stepUp); d > 2*time.Second {
			t.Errorf("scaled up %v after the step, want at the first whole tick after it (<= 2s)", d)
		}
		ups := 0
		for i, c := range calls {
			if c.at.Before(stepDown) {
				ups++
				continue
			}
			prev := calls[i-1]
			if prev.n-c.n != 1 {
				t.Errorf("call %d: %d → %d, want down one step", i, prev.n, c.n)
			}
		}
		if ups != 1 {
			t.Errorf("%d changes during 3x, want 1: %v", ups, calls)
		}
		for i := 1; i < len(calls); i++ {
			if gap := calls[i].at.Sub(calls[i-1].at); gap < DefaultCooldown {
				t.Errorf("changes %d and %d %v apart, want >= the cooldown %v", i-1, i, gap, DefaultCooldown)
			}
		}
		if n := act.current(); n != 2 { // ceil(100/70)
			t.Errorf("back at 1x: %d replicas, want 2 (calls %v)", n, calls)
		}
		st := l.Status()["m@1"]
		if st.Applied != 2 || st.Decision.Replicas != 2 {
			t.Errorf("status %+v, want 2 applied and desired", st)
		}
	})
}

// Actuator errors are retried on the next tick, then after 2, 4, … ticks:
// no storm, and the count is reached once the actuator works.
func TestLoopRetriesActuatorErrorsWithoutAStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		act := &fakeActuator{n: 1, failFirst: 4}
		src := &fakeSource{cfg: Config{MinReplicas: 1}, rate: 50, act: act}
		l, stop := start(t, src, act)
		defer stop()

		time.Sleep(30*time.Second + 500*time.Millisecond)
		src.setRate(500) // needs ceil(500/70) = 8
		time.Sleep(30 * time.Second)
		synctest.Wait()

		calls := act.log()
		if len(calls) != 5 {
			t.Fatalf("%d calls, want 4 failures and 1 success: %v", len(calls), calls)
		}
		var gaps []time.Duration
		for i := 1; i < len(calls); i++ {
			gaps = append(gaps, calls[i].at.Sub(calls[i-1].at))
		}
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
		for i := range want {
			if gaps[i] != want[i] {
				t.Fatalf("gaps between attempts %v, want %v", gaps, want)
			}
		}
		if last := calls[len(calls)-1]; !last.ok || last.n != 8 || act.current() != 8 {
			t.Fatalf("last call %+v, replicas %d: want 8 set", last, act.current())
		}
		if st := l.Status()["m@1"]; st.Failures != 0 || st.LastErr != "" || st.Applied != 8 {
			t.Errorf("status after success %+v", st)
		}
	})
}

// A source that fails holds every count: no calls, and the loop goes on.
func TestLoopHoldsWhileTheSourceFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		act := &fakeActuator{n: 2}
		src := &fakeSource{cfg: Config{MinReplicas: 1}, rate: 100, act: act}
		_, stop := start(t, src, act)
		defer stop()
		time.Sleep(10*time.Second + 500*time.Millisecond)
		src.mu.Lock()
		src.fail = true
		src.mu.Unlock()
		src.setRate(1000)
		time.Sleep(30 * time.Second)
		if c := act.log(); len(c) != 0 {
			t.Fatalf("calls while the source fails: %v", c)
		}
		src.mu.Lock()
		src.fail = false
		src.mu.Unlock()
		time.Sleep(2 * time.Second)
		if n := act.current(); n != 15 { // ceil(1000/70)
			t.Fatalf("after the source is back: %d replicas, want 15", n)
		}
	})
}

func TestDelta(t *testing.T) {
	cases := []struct{ cur, last, want int64 }{{10, 4, 6}, {4, 4, 0}, {3, 10, 3}, {0, 0, 0}}
	for _, c := range cases {
		if got := delta(c.cur, c.last); got != c.want {
			t.Errorf("delta(%d, %d) = %d, want %d", c.cur, c.last, got, c.want)
		}
	}
}
