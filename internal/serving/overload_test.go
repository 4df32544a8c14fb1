package serving

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

// TestOverloadKeepsDeadlines offers twice the capacity of one replica
// (2 ms + 0.5 ms per instance, 4 per batch: about 1,000 instances/s)
// under fake time: every request is answered; what admission accepts
// finishes inside its deadline, the rest is refused at once with
// Retry-After; the queue never passes its bound. It is the clock-free
// form of the HTTP TestOverload's deadline claim.
func TestOverloadKeepsDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &fakeModel{cost: func(n int) time.Duration { return 2*time.Millisecond + time.Duration(n)*500*time.Microsecond }}
		s := newServer(t, Config{MaxBatchSize: 4, MaxQueueInstances: 16}, m)
		for i := 0; i < 6; i++ { // warmup: the cost model learns the replica
			if _, err := s.Submit(context.Background(), Work{Rows: rows(float32(i))}); err != nil {
				t.Fatal(err)
			}
		}
		const n, deadline = 1200, 50 * time.Millisecond
		type answer struct {
			code       errs.Code
			retryAfter time.Duration
			took       time.Duration
		}
		out := make([]answer, n)
		var wg sync.WaitGroup
		for i := range n {
			time.Sleep(time.Second / 1200) // 1,200 requests/s of 1 or 2 instances
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				start := time.Now()
				vals := rows(1)
				if i%2 == 1 {
					vals = rows(1, 2)
				}
				_, err := s.Submit(ctx, Work{Rows: vals})
				out[i] = answer{code: errs.CodeOf(err), took: time.Since(start)}
				if err != nil {
					out[i].retryAfter = errs.As(err).RetryAfter
				}
			}()
		}
		wg.Wait()
		counts := map[errs.Code]int{}
		for i, a := range out {
			counts[a.code]++
			switch a.code {
			case "":
				if a.took > deadline {
					t.Errorf("request %d answered after %v, deadline %v", i, a.took, deadline)
				}
			case errs.QueueFull, errs.DeadlineInfeasible:
				if a.retryAfter == 0 || a.took != 0 {
					t.Errorf("request %d: %s after %v, Retry-After %v; want an immediate refusal with Retry-After", i, a.code, a.took, a.retryAfter)
				}
			default:
				t.Errorf("request %d: %s after %v: accepted work must finish inside its deadline", i, a.code, a.took)
			}
		}
		t.Logf("outcomes: %v", counts)
		if counts[""] == 0 || counts[errs.QueueFull]+counts[errs.DeadlineInfeasible] == 0 {
			t.Errorf("want both answers and refusals at twice the capacity: %v", counts)
		}
		if st := s.Stats(); st.QueuedHighWater > 16 || st.ExpiredInQueue != 0 {
			t.Errorf("queue high water %d (bound 16), expired in queue %d", st.QueuedHighWater, st.ExpiredInQueue)
		}
	})
}
