package outcomes

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// JoinerConfig configures a Joiner. Zero fields take the defaults.
type JoinerConfig struct {
	Buffer     int           // joins held before Add drops; default 20000
	BatchSize  int           // joins per write; default 1000
	FlushEvery time.Duration // longest a join waits; default 200ms
	Retention  time.Duration // joins and outcomes older than this are deleted; default 7 days (the records')
	CleanEvery time.Duration // how often retention runs; default 10 minutes
	Logger     *slog.Logger
	Now        func() time.Time
}

// Joiner writes the joins of answered predictions to a Store off the
// request path, in batches, from a bounded buffer: Add never blocks (a
// full buffer drops the join, counted: that prediction's outcomes will be
// unknown). Run owns its goroutine; it also runs retention.
type Joiner struct {
	store Store
	cfg   JoinerConfig
	wake  chan struct{} // 1-slot: a batch is full

	mu     sync.Mutex // guards buf and closed
	buf    []Join
	closed bool

	dropped atomic.Int64
	written atomic.Int64
}

// NewJoiner returns a joiner to store; start it with Run.
func NewJoiner(store Store, cfg JoinerConfig) *Joiner {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 20000
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 200 * time.Millisecond
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.CleanEvery <= 0 {
		cfg.CleanEvery = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Joiner{store: store, cfg: cfg, wake: make(chan struct{}, 1)}
}

// Add queues j. False when it was dropped (buffer full, or Run ended).
func (w *Joiner) Add(j Join) bool {
	if len(j.RequestID) > MaxRequestID {
		return false
	}
	if j.Created.IsZero() {
		j.Created = w.cfg.Now()
	}
	w.mu.Lock()
	if w.closed || len(w.buf) >= w.cfg.Buffer {
		w.mu.Unlock()
		w.dropped.Add(1)
		return false
	}
	w.buf = append(w.buf, j)
	full := len(w.buf) >= w.cfg.BatchSize
	w.mu.Unlock()
	if full {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// Dropped is how many joins Add dropped; Written how many were stored.
func (w *Joiner) Dropped() int64 { return w.dropped.Load() }
func (w *Joiner) Written() int64 { return w.written.Load() }

// Run writes batches until ctx ends, then writes what is buffered (within
// 5 s) and returns.
func (w *Joiner) Run(ctx context.Context) error {
	tick := time.NewTicker(w.cfg.FlushEvery)
	defer tick.Stop()
	clean := time.NewTicker(w.cfg.CleanEvery)
	defer clean.Stop()
	for {
		select {
		case <-ctx.Done():
			w.mu.Lock()
			w.closed = true
			w.mu.Unlock()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			w.Flush(dctx)
			cancel()
			return nil
		case <-w.wake:
			w.Flush(ctx)
		case <-tick.C:
			w.Flush(ctx)
		case <-clean.C:
			n, err := w.store.DeleteBefore(ctx, w.cfg.Now().Add(-w.cfg.Retention))
			if err != nil {
				w.cfg.Logger.Warn("outcomes: retention failed", "err", err)
			} else if n > 0 {
				w.cfg.Logger.Info("outcomes: retention", "deleted", n)
			}
		}
	}
}

// Flush writes what is buffered now, in batches.
func (w *Joiner) Flush(ctx context.Context) {
	for {
		w.mu.Lock()
		n := min(len(w.buf), w.cfg.BatchSize)
		if n == 0 {
			w.mu.Unlock()
			return
		}
		batch := append([]Join(nil), w.buf[:n]...)
		w.buf = append(w.buf[:0], w.buf[n:]...)
		w.mu.Unlock()
		if err := w.store.WriteJoins(ctx, batch); err != nil {
			w.dropped.Add(int64(len(batch)))
			w.cfg.Logger.Warn("outcomes: joins not written", "joins", len(batch), "err", err)
			if ctx.Err() != nil {
				return
			}
			continue
		}
		w.written.Add(int64(len(batch)))
	}
}
