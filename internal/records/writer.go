package records

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluiceml/sluice/internal/storefile"
)

// Config configures a Writer. Zero fields take the defaults.
type Config struct {
	Buffer     int           // operations held before Add refuses; default 10000
	BatchSize  int           // operations per transaction; default 500
	FlushEvery time.Duration // longest an operation waits for its batch; default 1s
	Retention  time.Duration // records older than this are deleted; default 7 days
	CleanEvery time.Duration // how often retention runs; default 10 minutes
	Logger     *slog.Logger
	Now        func() time.Time // the clock (tests inject one); default time.Now
}

// Defaults.
const (
	DefaultBuffer     = 10000
	DefaultBatchSize  = 500
	DefaultFlushEvery = time.Second
	DefaultRetention  = 7 * 24 * time.Hour
	DefaultCleanEvery = 10 * time.Minute
)

// Writer writes records (and attempts bumps) to a Store asynchronously, in
// batches, from a bounded buffer: the request path never waits on the disk.
// Run owns its goroutine.
type Writer struct {
	store Store
	cfg   Config

	nextID atomic.Int64 // row ids assigned by Add
	// rows remembers the row id of recent retryable records, so a retry's
	// attempts bump is a primary-key update; bounded, oldest forgotten
	// first (a forgotten one falls back to a lookup by request id).
	rowsMu sync.Mutex
	rows   map[[2]string]int64
	order  [][2]string
	next   int
	wake   chan struct{} // 1-slot: a batch is full

	mu     sync.Mutex // guards buf and closed
	buf    []Op
	closed bool // Run has returned: Add refuses

	overflows atomic.Int64
	failed    atomic.Int64
	written   atomic.Int64

	dropMu   sync.Mutex // guards lastDrop and lastFail
	lastDrop time.Time  // when a record or bump was last dropped
	lastFail string     // why the last failed write failed, for readiness ("" if none)
}

// WarnFor is how long after the last dropped record Warning still reports
// the drops.
const WarnFor = 5 * time.Minute

// NewWriter returns a writer to store; start it with Run.
func NewWriter(store Store, cfg Config) *Writer {
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = DefaultFlushEvery
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.CleanEvery <= 0 {
		cfg.CleanEvery = DefaultCleanEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &Writer{store: store, cfg: cfg, wake: make(chan struct{}, 1), rows: map[[2]string]int64{}, order: make([][2]string, 0, rememberRows)}
	if store != nil {
		if id, err := store.MaxRow(context.Background()); err == nil {
			w.nextID.Store(id)
		}
	}
	return w
}

// rememberRows bounds the retryable records whose row id the writer keeps.
const rememberRows = 100_000

func (w *Writer) remember(tenant, requestID string, id int64) {
	k := [2]string{tenant, requestID}
	w.rowsMu.Lock()
	defer w.rowsMu.Unlock()
	if len(w.order) < rememberRows {
		w.order = append(w.order, k)
	} else {
		delete(w.rows, w.order[w.next])
		w.order[w.next] = k
		w.next = (w.next + 1) % rememberRows
	}
	w.rows[k] = id
}

// Add queues r for writing. It never blocks: when the buffer is full, or
// after Run has returned, it drops r, counts an overflow and returns false.
// A zero CreatedAt is set from the writer's clock.
func (w *Writer) Add(r Record) bool {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = w.cfg.Now()
	}
	id := w.nextID.Add(1)
	if !w.push(Op{Row: id, Record: r}) {
		return false
	}
	if r.Retryable {
		w.remember(r.Tenant, r.RequestID, id)
	}
	return true
}

// Bump queues an attempts bump of tenant's record of requestID (a retry
// answered by replay). Bumps are applied in order with the inserts, so a
// bump that follows its record's Add finds it. Never blocks; false when
// dropped, as for Add.
func (w *Writer) Bump(tenant, requestID string) bool {
	w.rowsMu.Lock()
	id := w.rows[[2]string{tenant, requestID}]
	w.rowsMu.Unlock()
	return w.push(Op{Bump: true, Row: id, Record: Record{Tenant: tenant, RequestID: requestID}})
}

func (w *Writer) push(o Op) bool {
	w.mu.Lock()
	if w.closed || len(w.buf) >= w.cfg.Buffer {
		w.mu.Unlock()
		w.overflows.Add(1)
		w.dropped("")
		return false
	}
	w.buf = append(w.buf, o)
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

// dropped notes a drop now; fail is why a write failed ("" for a full
// buffer).
func (w *Writer) dropped(fail string) {
	now := w.cfg.Now()
	w.dropMu.Lock()
	w.lastDrop = now
	if fail != "" {
		w.lastFail = fail
	}
	w.dropMu.Unlock()
}

// Warning says, for readiness, that records are being lost: "" unless a
// record or bump was dropped in the last WarnFor. The text counts the
// drops by reason and says why writes fail; it holds no path, request id
// or tenant.
func (w *Writer) Warning() string {
	w.dropMu.Lock()
	last, fail := w.lastDrop, w.lastFail
	w.dropMu.Unlock()
	if last.IsZero() || w.cfg.Now().Sub(last) > WarnFor {
		return ""
	}
	msg := fmt.Sprintf("prediction records are being dropped (since start: %d because the buffer was full, %d because writing failed)", w.Overflows(), w.Failed())
	if fail != "" {
		msg += "; the last failed write: " + fail
	}
	return msg
}

// failReason is the public reason of a failed write: the disk is full, or
// the database failed (the full error goes to the log).
func failReason(err error) string {
	if storefile.Full(err) {
		return "no space left on the disk of records.db"
	}
	return "the records database failed (the server log has the error)"
}

// Overflows is how many records and bumps Add and Bump dropped.
func (w *Writer) Overflows() int64 { return w.overflows.Load() }

// Failed is how many records and bumps were lost to database errors.
func (w *Writer) Failed() int64 { return w.failed.Load() }

// Written is how many records and bumps reached the database.
func (w *Writer) Written() int64 { return w.written.Load() }

// Buffered is how many operations wait to be written.
func (w *Writer) Buffered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.buf)
}

// Run writes batches until ctx ends, deleting records older than the
// retention on start and every CleanEvery. When ctx ends it writes every
// buffered operation, refuses further Adds, and returns the error of that
// last flush, if any. Stop adding (shut the HTTP server down, drain the
// queues) before cancelling ctx, or late records are dropped and counted
// as overflows.
func (w *Writer) Run(ctx context.Context) error {
	flush := time.NewTicker(w.cfg.FlushEvery)
	defer flush.Stop()
	clean := time.NewTicker(w.cfg.CleanEvery)
	defer clean.Stop()
	w.clean(context.WithoutCancel(ctx)) // always one pass, even if ctx is already done
	for {
		select {
		case <-ctx.Done():
			return w.drain(context.WithoutCancel(ctx))
		case <-w.wake:
			w.writeBatches(ctx, true)
		case <-flush.C:
			w.writeBatches(ctx, false)
		case <-clean.C:
			w.clean(ctx)
		}
	}
}

// writeBatches writes full batches (fullOnly) or everything buffered now.
func (w *Writer) writeBatches(ctx context.Context, fullOnly bool) error {
	var last error
	for {
		w.mu.Lock()
		n := min(len(w.buf), w.cfg.BatchSize)
		if n == 0 || fullOnly && n < w.cfg.BatchSize {
			w.mu.Unlock()
			return last
		}
		batch := make([]Op, n)
		copy(batch, w.buf)
		w.buf = append(w.buf[:0], w.buf[n:]...)
		w.mu.Unlock()
		if err := w.store.Write(ctx, batch); err != nil {
			w.failed.Add(int64(n))
			w.dropped(failReason(err))
			w.cfg.Logger.Error("records: write batch failed; its records are dropped", "records", n, "err", err)
			last = err
			if ctx.Err() != nil {
				return last
			}
			continue
		}
		w.written.Add(int64(n))
	}
}

// drain closes the writer to Adds and writes everything left.
func (w *Writer) drain(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	return w.writeBatches(ctx, false)
}

func (w *Writer) clean(ctx context.Context) {
	cut := w.cfg.Now().Add(-w.cfg.Retention)
	n, err := w.store.DeleteBefore(ctx, cut)
	switch {
	case err != nil && ctx.Err() == nil:
		w.cfg.Logger.Error("records: retention", "err", err)
	case n > 0:
		w.cfg.Logger.Info("records: retention deleted old records", "records", n, "before", cut)
	}
}
