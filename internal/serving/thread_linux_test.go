package serving

import (
	"context"
	"sync"
	"syscall"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

// tidModel records the OS thread each batch computes on.
type tidModel struct {
	mu   sync.Mutex
	tids []int
}

func (m *tidModel) Info() runtime.Info { return runtime.Info{Inputs: 1, Outputs: 1} }
func (m *tidModel) Close() error       { return nil }
func (m *tidModel) Predict(_ context.Context, in runtime.Batch) (runtime.Output, error) {
	m.mu.Lock()
	m.tids = append(m.tids, syscall.Gettid())
	m.mu.Unlock()
	return runtime.Output{Rows: in.Rows, Cols: 1, Data: make([]float32, in.Rows)}, nil
}

// With CPUs.WithThread, a replica loop runs the setup on its own OS thread
// and computes every batch on that same thread (LockOSThread), so a policy
// the setup gives the thread (SCHED_IDLE) applies to the model's compute.
func TestReplicaThreadSetup(t *testing.T) {
	var mu sync.Mutex
	var setup []int
	cpus := NewCPUs(1).WithThread(func() error {
		mu.Lock()
		setup = append(setup, syscall.Gettid())
		mu.Unlock()
		return nil
	})
	m := &tidModel{}
	srv := newServer(t, Config{MaxBatchSize: 1, CPUs: cpus}, m)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := srv.Submit(context.Background(), Work{Rows: rows(1)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(setup) != 1 {
		t.Fatalf("thread setup ran %d times for one replica, want 1", len(setup))
	}
	if len(m.tids) != 50 {
		t.Fatalf("%d batches, want 50", len(m.tids))
	}
	for i, tid := range m.tids {
		if tid != setup[0] {
			t.Fatalf("batch %d computed on thread %d, the replica's set-up thread is %d", i, tid, setup[0])
		}
	}
}
