package records

import (
	"context"
	"errors"
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
	// Durable: Commit and CommitBump wait until their operation is
	// committed (group commit: a batch is written as soon as the previous
	// one ends, at most BatchSize operations each; FlushEvery is unused).
	// Open the store with Options.Durable too, or a commit is not on the
	// disk. Otherwise (async) they return at once and a kill -9 loses what
	// is still buffered: see Pending.
	Durable bool
	// CommitWait bounds how long Commit waits for its batch in durable
	// mode (default 5s): a store that hangs makes answers 503, not hang.
	CommitWait time.Duration
}

// Defaults.
const (
	DefaultBuffer     = 10000
	DefaultBatchSize  = 500
	DefaultFlushEvery = time.Second
	DefaultRetention  = 7 * 24 * time.Hour
	DefaultCleanEvery = 10 * time.Minute
	DefaultCommitWait = 5 * time.Second
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

	mu     sync.Mutex // guards buf, spare and closed
	buf    []Op
	spare  []Op // the array of the last batch written, empty: the next buf
	closed bool // Run has returned: Add refuses

	overflows atomic.Int64
	failed    atomic.Int64
	written   atomic.Int64
	writing   atomic.Int64 // operations of the batch being written now

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
	if cfg.CommitWait <= 0 {
		cfg.CommitWait = DefaultCommitWait
	}
	w := &Writer{store: store, cfg: cfg, wake: make(chan struct{}, 1), rows: map[[2]string]int64{}, order: make([][2]string, 0, rememberRows)}
	if rr, ok := store.(RowRanger); ok {
		if id, err := rr.RowBase(context.Background()); err == nil {
			w.nextID.Store(id)
		} else {
			cfg.Logger.Error("records: no row id range for this writer; its inserts may collide with another gateway's and be dropped", "err", err)
		}
	} else if store != nil {
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
	_, ok := w.add(r, nil)
	return ok
}

func (w *Writer) add(r Record, ack chan error) (int64, bool) {
	r.bound()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = w.cfg.Now()
	}
	id := w.nextID.Add(1)
	if !w.push(Op{Row: id, Record: r, ack: ack}) {
		return 0, false
	}
	if r.Retryable {
		w.remember(r.Tenant, r.RequestID, id)
	}
	return id, true
}

// Bump queues an attempts bump of tenant's record of requestID (a retry
// answered by replay). Bumps are applied in order with the inserts, so a
// bump that follows its record's Add finds it. Never blocks; false when
// dropped, as for Add.
func (w *Writer) Bump(tenant, requestID string) bool {
	return w.push(w.bumpOp(tenant, requestID, 0, nil))
}

// bumpOp is the bump of (tenant, requestID): by row when the writer
// remembers it or row > 0 (a row the store's Lookup found).
func (w *Writer) bumpOp(tenant, requestID string, row int64, ack chan error) Op {
	if row == 0 {
		tenant, requestID = clipText(tenant), clipText(requestID)
		w.rowsMu.Lock()
		row = w.rows[[2]string{tenant, requestID}]
		w.rowsMu.Unlock()
	}
	r := Record{Tenant: tenant, RequestID: requestID}
	r.bound()
	return Op{Bump: true, Row: row, Record: r, ack: ack}
}

// Durable reports whether Commit waits for the disk.
func (w *Writer) Durable() bool { return w.cfg.Durable }

// Commit writes r. In durable mode it waits until r is committed (or ctx
// ends, or CommitWait passes) and returns an error when r is not known to
// be written: the caller must not acknowledge the answer then (the
// gateway answers 503 unavailable). In async mode it is Add and returns
// nil (a drop is counted, not returned: the answer goes out and the loss
// shows in sluice_records_dropped_total).
func (w *Writer) Commit(ctx context.Context, r Record) error {
	if !w.cfg.Durable {
		w.Add(r)
		return nil
	}
	ack := make(chan error, 1)
	if _, ok := w.add(r, ack); !ok {
		return ErrNotWritten
	}
	return w.await(ctx, ack)
}

// CommitBump is Bump with Commit's guarantee. row is the record's row when
// the caller knows it (Lookup), else 0.
func (w *Writer) CommitBump(ctx context.Context, tenant, requestID string, row int64) error {
	if !w.cfg.Durable {
		w.push(w.bumpOp(tenant, requestID, row, nil))
		return nil
	}
	ack := make(chan error, 1)
	if !w.push(w.bumpOp(tenant, requestID, row, ack)) {
		return ErrNotWritten
	}
	return w.await(ctx, ack)
}

// ErrNotWritten is Commit's error when the record was refused before it
// reached the disk: the buffer was full or the writer had stopped.
var ErrNotWritten = errors.New("records: the prediction record was not accepted for writing (the writer's buffer is full or the server is stopping)")

func (w *Writer) await(ctx context.Context, ack chan error) error {
	t := time.NewTimer(w.cfg.CommitWait)
	defer t.Stop()
	select {
	case err := <-ack:
		return err
	case <-t.C:
		return fmt.Errorf("records: the prediction record was not committed within %s (it may still be written)", w.cfg.CommitWait)
	case <-ctx.Done():
		return fmt.Errorf("records: gave up waiting for the prediction record's commit: %w", ctx.Err())
	}
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
	full := len(w.buf) >= w.cfg.BatchSize || w.cfg.Durable
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

// Pending is how many operations were accepted and are not committed yet:
// buffered, or in the batch being written. In async mode these are the
// records (and bumps) of answers already sent that a kill -9 now would
// lose; they stay below Buffer + BatchSize, and, while the database keeps
// up, below one FlushEvery of traffic plus one batch.
func (w *Writer) Pending() int64 { return int64(w.Buffered()) + w.writing.Load() }

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
			if ctx.Err() != nil {
				return w.drain(context.WithoutCancel(ctx))
			}
			w.writeBatches(ctx, !w.cfg.Durable) // durable: group commit, everything now
		case <-flush.C:
			if ctx.Err() != nil {
				return w.drain(context.WithoutCancel(ctx))
			}
			w.writeBatches(ctx, false)
		case <-clean.C:
			w.clean(ctx)
		}
	}
}

// writeBatches writes what is buffered, in batches of at most BatchSize:
// the full batches (fullOnly), or everything. It takes them from the
// buffer at once (the array of the last ones becomes the buffer, with the
// partial batch left), so a backlog costs no copying.
func (w *Writer) writeBatches(ctx context.Context, fullOnly bool) error {
	var last error
	for {
		w.mu.Lock()
		n := len(w.buf)
		if n == 0 || fullOnly && n < w.cfg.BatchSize {
			w.mu.Unlock()
			return last
		}
		if fullOnly {
			n -= n % w.cfg.BatchSize // a partial batch waits for FlushEvery
		}
		taken := w.buf[:n]
		w.buf, w.spare = append(w.spare[:0], w.buf[n:]...), nil
		w.writing.Store(int64(n))
		w.mu.Unlock()
		for i := 0; i < len(taken); i += w.cfg.BatchSize {
			batch := taken[i:min(i+w.cfg.BatchSize, len(taken))]
			if err := w.write(ctx, batch); err != nil {
				last = err
			}
		}
		clear(taken) // drop the records' strings and acks
		w.mu.Lock()
		if cap(taken) > cap(w.spare) {
			w.spare = taken[:0]
		}
		w.mu.Unlock()
		if last != nil && ctx.Err() != nil {
			return last
		}
	}
}

// write writes one batch and answers its acks.
func (w *Writer) write(ctx context.Context, batch []Op) error {
	// Not cancelled with ctx: a batch taken from the buffer is written
	// whole even when shutdown begins meanwhile (cancelling it would drop
	// records that drain promises to write).
	err := w.store.Write(context.WithoutCancel(ctx), batch)
	n := int64(len(batch))
	if err == nil {
		w.written.Add(n)
	}
	// No longer pending before any ack goes out: a durable Commit that
	// returns sees its record counted as written, not as pending.
	w.writing.Add(-n)
	for _, o := range batch {
		if o.ack != nil {
			if err != nil {
				o.ack <- fmt.Errorf("records: %s", failReason(err))
			} else {
				o.ack <- nil
			}
		}
	}
	if err != nil {
		w.failed.Add(n)
		w.dropped(failReason(err))
		w.cfg.Logger.Error("records: write batch failed; its records are dropped", "records", n, "err", err)
	}
	return err
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
	if _, err := w.store.ExpireReplays(ctx, w.cfg.Now()); err != nil && ctx.Err() == nil {
		w.cfg.Logger.Error("records: expire replays", "err", err)
	}
}
