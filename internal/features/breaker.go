package features

import (
	"context"
	"sync"
	"time"
)

// Breaker stops calling a store that keeps failing. After Threshold
// failures in a row it opens: requests skip the store (their fields go to
// the next store or their default) and Run probes the store every
// ProbeEvery (Ping, within ProbeTimeout); the first probe that succeeds
// closes it, so values flow again within ProbeEvery + ProbeTimeout of the
// store's return. The decision is breakerState.after, a pure function.
type Breaker struct {
	name   string
	cfg    BreakerConfig
	ping   func(ctx context.Context) error
	report func(store string, open bool) // nil: none

	mu    sync.Mutex // guards state
	state breakerState
	wake  chan struct{} // 1 slot: the breaker opened
}

// BreakerConfig is a breaker's thresholds.
type BreakerConfig struct {
	Threshold    int           // failures in a row that open it (default 5)
	ProbeEvery   time.Duration // between probes while open (default 250ms)
	ProbeTimeout time.Duration // one probe's bound (default 100ms)
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.Threshold <= 0 {
		c.Threshold = 5
	}
	if c.ProbeEvery <= 0 {
		c.ProbeEvery = 250 * time.Millisecond
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = 100 * time.Millisecond
	}
	return c
}

// breakerState is what the breaker knows: open or not, and the failures
// in a row while closed.
type breakerState struct {
	Open  bool
	Fails int
}

// after is the state after an outcome (ok: the store answered; a probe's
// outcome is one too): a success closes and clears, a failure counts and
// opens at threshold.
func (s breakerState) after(ok bool, threshold int) breakerState {
	if ok {
		return breakerState{}
	}
	s.Fails++
	if s.Fails >= threshold {
		s.Open = true
	}
	return s
}

// NewBreaker makes the breaker of store name; ping probes it while it is
// open, report (nil: none) hears of every change.
func NewBreaker(name string, cfg BreakerConfig, ping func(ctx context.Context) error, report func(store string, open bool)) *Breaker {
	return &Breaker{name: name, cfg: cfg.withDefaults(), ping: ping, report: report, wake: make(chan struct{}, 1)}
}

// Allow says whether a request may call the store now.
func (b *Breaker) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.state.Open
}

// Open says whether the breaker is open.
func (b *Breaker) Open() bool { return !b.Allow() }

// Done reports a call's outcome.
func (b *Breaker) Done(ok bool) {
	b.mu.Lock()
	was := b.state.Open
	b.state = b.state.after(ok, b.cfg.Threshold)
	now := b.state.Open
	b.mu.Unlock()
	if now != was {
		b.changed(now)
	}
}

func (b *Breaker) changed(open bool) {
	if b.report != nil {
		b.report(b.name, open)
	}
	if open {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// Run probes the store while the breaker is open, until ctx is done.
func (b *Breaker) Run(ctx context.Context) error {
	t := time.NewTimer(b.cfg.ProbeEvery)
	t.Stop()
	for {
		if b.Allow() {
			select {
			case <-ctx.Done():
				return nil
			case <-b.wake:
				continue
			}
		}
		t.Reset(b.cfg.ProbeEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, b.cfg.ProbeTimeout)
		err := b.ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			b.mu.Lock()
			was := b.state.Open
			b.state = b.state.after(true, b.cfg.Threshold)
			b.mu.Unlock()
			if was {
				b.changed(false)
			}
		}
	}
}
