package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// Runner scores jobs' chunks: Run is the server's loop (up to
// Config.Runners jobs at once), RunShard one process's share of one job
// (`sluice job run ID --shard I/N`). Both run the same code per job.
type Runner struct {
	cfg  Config
	m    *metrics
	wake chan struct{} // one slot: a submit or a cancel happened
}

// NewRunner returns a runner of cfg (Store, Predictor and Objects are
// required). It registers the per-job metrics on cfg.Metrics.
func NewRunner(cfg Config) *Runner {
	cfg = cfg.withDefaults()
	return &Runner{cfg: cfg, m: newMetrics(cfg.Metrics), wake: make(chan struct{}, 1)}
}

// Owner is the runner's name in the store's leases.
func (r *Runner) Owner() string { return r.cfg.Owner }

// Wake makes Run look for runnable jobs now (never blocks).
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// outcome is what one pass over a job came to.
type outcome int

const (
	ended  outcome = iota // the job is final (this pass or before)
	worked                // chunks were scored; more may be claimable
	idle                  // nothing claimable: every chunk left is leased (or the job waits for a retry)
)

// The causes a job's context is cancelled with.
var (
	errCancelRequested = errors.New("cancel requested")
	errJobEnded        = errors.New("the job ended elsewhere")
	errOverRate        = errors.New("past the error rate")
	errLeaseLost       = errors.New("lease lost")
)

// fatalError fails the job with its message.
type fatalError struct{ msg string }

func (e *fatalError) Error() string { return e.msg }

func fatal(format string, args ...any) error { return &fatalError{msg: fmt.Sprintf(format, args...)} }

// Run works on runnable jobs until ctx is cancelled: every Poll and on a
// Wake it lists them (oldest first) and starts each one not running here
// while fewer than Config.Runners are. A job that had nothing claimable
// rests until the next poll. Run returns nil once ctx is cancelled and
// every job's goroutines have returned; chunks in flight are abandoned
// to their leases' expiry (another runner, or this one restarted, redoes
// them).
func (r *Runner) Run(ctx context.Context) error {
	if r.cfg.Runners <= 0 {
		<-ctx.Done()
		return nil
	}
	type result struct {
		id string
		o  outcome
	}
	var wg sync.WaitGroup
	done := make(chan result, r.cfg.Runners) // each job goroutine sends once; at most Runners run
	active := make(map[string]bool, r.cfg.Runners)
	resting := make(map[string]bool) // cleared every poll; bounded by the jobs listed
	seen := make(map[string]bool)    // jobs this runner worked on, whose series may exist
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	for {
		if len(active) < r.cfg.Runners {
			ids, err := r.cfg.Store.Runnable(ctx, 100+r.cfg.Runners)
			if err != nil && ctx.Err() == nil {
				r.cfg.Log.Warn("jobs: listing runnable jobs", "err", err)
			}
			runnable := make(map[string]bool, len(ids))
			for _, id := range ids {
				runnable[id] = true
				if active[id] || resting[id] || len(active) >= r.cfg.Runners {
					continue
				}
				active[id], seen[id] = true, true
				wg.Go(func() {
					o, err := r.runJob(ctx, id, 0, 1)
					if err != nil && ctx.Err() == nil {
						r.cfg.Log.Warn("jobs: job pass failed; retrying at the next poll", "job", id, "err", err)
						o = idle
					}
					done <- result{id, o}
				})
			}
			if err == nil {
				for id := range seen {
					if !runnable[id] && !active[id] {
						r.m.forget(id) // it ended here or elsewhere
						delete(seen, id)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-tick.C:
			clear(resting)
		case <-r.wake:
			clear(resting)
		case res := <-done:
			delete(active, res.id)
			if res.o != worked {
				resting[res.id] = true
			}
		}
	}
}

// RunShard scores the chunks of shard of shards of job id (chunk i is
// shard i%shards's) until none is left to this process: it returns nil
// when the job is final, or when no chunk of the shard was claimable for
// a whole lease (each is done, or held by a runner that keeps renewing
// it: a dead runner's lease would have expired and been claimed). The
// last runner to complete a chunk assembles the output.
func (r *Runner) RunShard(ctx context.Context, id string, shard, shards int) error {
	if shards < 1 || shard < 0 || shard >= shards {
		return fmt.Errorf("shard %d/%d: want 0 ≤ I < N, N ≥ 1", shard, shards)
	}
	var idleSince time.Time
	attempt := 0
	for {
		o, err := r.runJob(ctx, id, shard, shards)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case errors.Is(err, ErrNotFound):
			return fmt.Errorf("job %s: %w", id, err)
		case err != nil:
			attempt++
			r.cfg.Log.Warn("jobs: job pass failed; retrying", "job", id, "err", err, "attempt", attempt)
			if !r.sleep(ctx, Backoff(attempt, 0, rand.Float64()/2)) {
				return ctx.Err()
			}
			continue
		}
		attempt = 0
		switch o {
		case ended:
			r.m.forget(id)
			return nil
		case worked:
			idleSince = time.Time{}
		case idle:
			now := time.Now()
			if idleSince.IsZero() {
				idleSince = now
			} else if now.Sub(idleSince) > r.cfg.Lease+r.cfg.Poll {
				r.m.forget(id)
				return nil
			}
		}
		if !r.sleep(ctx, r.cfg.Poll) {
			return ctx.Err()
		}
	}
}

// sleep waits d or until ctx ends (false).
func (r *Runner) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// jobRun is one pass of a runner over one job.
type jobRun struct {
	r             *Runner
	id            string
	shard, shards int
	spec          Spec
	info          VersionInfo
	in            jobio.ObjectStore
	inKey         string
	parts         jobio.PartStore
	out           *jobio.OutputWriter
	scan          *scanRecord
	stripID       bool // the id field is not a schema field: it is taken out of the rows scored
}

// runJob takes the job as far as this runner can now: the scan, the
// chunks it can claim, the final move. The error is one to retry later
// (a store or predictor that failed), never the job's failure (that is
// recorded in the job).
func (r *Runner) runJob(ctx context.Context, id string, shard, shards int) (outcome, error) {
	run := &jobRun{r: r, id: id, shard: shard, shards: shards}
	didWork := false
	for pass := 0; ; pass++ {
		if pass > 20 {
			return idle, nil // the job keeps changing under this runner: look again at the next poll
		}
		j, err := r.cfg.Store.Get(ctx, id)
		if err != nil {
			return idle, err
		}
		step := Next(j)
		if step == StepRun && didWork {
			// A pass ended with chunks left: leased by others, or the
			// job's context was cut; decide again from the top next time.
			return worked, nil
		}
		switch step {
		case StepStop:
			return ended, nil
		case StepCancel:
			return ended, r.move(ctx, j, Cancelled, "cancelled on request", j.State == Running)
		case StepFail:
			return ended, r.move(ctx, j, Failed, ErrorRateMessage(j.RowsFailed, j.RowsTotal, j.Spec.MaxErrorRate), true)
		}
		if run.spec.Model == "" {
			if err := run.prepare(ctx, j); err != nil {
				return r.settle(ctx, j, err)
			}
		}
		if j.State == Queued && (step == StepRun || step == StepAssemble) {
			if _, err := r.cfg.Store.SetState(ctx, id, []State{Queued}, Running, "", false); err != nil {
				return idle, err
			}
			continue
		}
		switch step {
		case StepScan:
			if err := run.doScan(ctx, j); err != nil {
				return r.settle(ctx, j, err)
			}
		case StepAssemble:
			if err := run.assemble(ctx, j); err != nil {
				return r.settle(ctx, j, err)
			}
			return ended, nil
		case StepRun:
			n, err := run.chunks(ctx)
			if err != nil {
				return r.settle(ctx, j, err)
			}
			if n == 0 {
				if j2, err := r.cfg.Store.Get(ctx, id); err == nil && Next(j2) == StepRun {
					return idle, nil
				}
			}
			didWork = true
		}
	}
}

// settle turns a pass's error into its outcome: a fatal one fails the
// job, others are returned to retry.
func (r *Runner) settle(ctx context.Context, j Job, err error) (outcome, error) {
	var fe *fatalError
	if errors.As(err, &fe) {
		return ended, r.move(ctx, j, Failed, fe.msg, j.State == Running)
	}
	if ctx.Err() != nil {
		return idle, ctx.Err()
	}
	return idle, err
}

// move ends a job (from whatever state allows it) and logs it.
func (r *Runner) move(ctx context.Context, j Job, to State, msg string, incomplete bool) error {
	ok, err := r.cfg.Store.SetState(ctx, j.ID, From(to), to, msg, incomplete)
	if err != nil {
		return err
	}
	if ok {
		r.cfg.Log.Info("job "+string(to), "job", j.ID, "message", msg, "incomplete", incomplete)
	}
	r.m.forget(j.ID)
	return nil
}

// prepare learns the pinned version and opens the job's stores.
func (run *jobRun) prepare(ctx context.Context, j Job) error {
	cfg := run.r.cfg
	info, err := cfg.Predictor.Version(ctx, j.Spec.Tenant, j.Spec.Model, j.Spec.Version)
	if err != nil {
		if ok, _ := Retryable(err); ok || ctx.Err() != nil {
			return err
		}
		return fatal("%s: %s", j.Spec.VersionID, errs.As(err).Message)
	}
	inLoc, err := jobio.ParseURI(j.Spec.Input.URI, cfg.JobsDir)
	if err != nil {
		return fatal("input: %v", err)
	}
	outLoc, err := jobio.ParseURI(j.Spec.Output.URI, cfg.JobsDir)
	if err != nil {
		return fatal("output: %v", err)
	}
	in, err := cfg.Objects(inLoc)
	if err != nil {
		return fatal("input: %v", err)
	}
	out, err := cfg.Objects(outLoc)
	if err != nil {
		return fatal("output: %v", err)
	}
	parts, err := out.Parts(ctx, outLoc.Path)
	if err != nil {
		return err
	}
	run.spec, run.info, run.in, run.inKey, run.parts = j.Spec, info, in, inLoc.Path, parts
	run.stripID = true
	for _, f := range info.Fields {
		if f.Name == j.Spec.IDField {
			run.stripID = false
		}
	}
	return nil
}

func (run *jobRun) options() jobio.Options {
	return jobio.Options{ChunkRows: run.spec.ChunkRows, IDField: run.spec.IDField, Fields: run.info.Fields, MaxLineBytes: LineBytes(run.spec.ChunkRows)}
}

// doScan reads the input once, commits the scan's record among the
// output's parts, then records the scan in the store (or fails the job:
// an unreadable input, or more bad rows than its error rate allows).
func (run *jobRun) doScan(ctx context.Context, j Job) error {
	// A cancel or an end elsewhere stops the scan too (a 10 GB input
	// takes minutes to read).
	sctx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		run.watch(sctx, cancel)
	}()
	s, err := run.scanOnce(sctx)
	cancel(nil)
	<-watched
	if cause := context.Cause(sctx); err != nil && ctx.Err() == nil && (cause == errCancelRequested || cause == errJobEnded) {
		return nil // the runJob loop reads the job again and ends it
	}
	if err != nil {
		return err
	}
	if OverErrorRate(s.errors, s.rows, run.spec.MaxErrorRate) {
		if err := run.r.cfg.Store.SetScan(ctx, run.id, s.rows, s.chunks, s.first); err != nil {
			return err
		}
		return fatal("%s", ErrorRateMessage(s.errors, s.rows, run.spec.MaxErrorRate))
	}
	if err := run.r.cfg.Store.SetScan(ctx, run.id, s.rows, s.chunks, nil); err != nil {
		return err
	}
	run.r.cfg.Log.Info("job scanned", "job", run.id, "rows", s.rows, "chunks", len(s.chunks), "bad_rows", s.errors)
	return nil
}

// scanOnce scans the input and commits the record.
func (run *jobRun) scanOnce(ctx context.Context) (scanResult, error) {
	obj, err := run.in.Open(ctx, run.inKey)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return scanResult{}, fatal("input: %v", err)
		}
		return scanResult{}, err
	}
	defer obj.Close()
	s, err := scanInput(ctx, obj, run.spec.Input.Format, run.options())
	if err != nil {
		if ctx.Err() != nil || transient(err) {
			return s, err // the next pass scans again
		}
		return s, fatal("input %s: %v", run.spec.Input.URI, err)
	}
	if err := saveScan(ctx, run.parts, s.rec); err != nil {
		return s, err
	}
	run.scan = &s.rec
	return s, nil
}

// loadScanRecord reads the scan's record (scanning again when it is
// gone: the store says scanned, the parts lost it).
func (run *jobRun) loadScanRecord(ctx context.Context) error {
	if run.scan != nil {
		return nil
	}
	rec, found, err := loadScan(ctx, run.parts)
	if err != nil {
		return err
	}
	if found {
		run.scan = &rec
		return nil
	}
	_, err = run.scanOnce(ctx)
	return err
}

// chunks claims and scores chunks with ChunksInFlight workers until none
// is claimable, the job is cancelled, ends elsewhere or passes its error
// rate (a watcher reads it every CancelPoll), or ctx ends. n is the
// chunks completed. A fatal error of one chunk stops the others.
func (run *jobRun) chunks(ctx context.Context) (n int, err error) {
	cfg := run.r.cfg
	if err := run.loadScanRecord(ctx); err != nil {
		return 0, err
	}
	if run.out == nil {
		out, err := jobio.OpenOutput(ctx, run.parts, run.spec.Output.Format, run.info.Outputs)
		if err != nil {
			return 0, err
		}
		run.out = out
	}
	jctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex // guards done and firstErr
		done     int
		firstErr error
	)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		run.watch(jctx, cancel)
	}()
	for range cfg.ChunksInFlight {
		wg.Go(func() {
			for jctx.Err() == nil {
				ok, err := run.oneChunk(jctx, cancel)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cancel(nil)
	<-watchDone
	if firstErr != nil {
		return done, firstErr
	}
	if ctx.Err() != nil {
		return done, ctx.Err()
	}
	return done, nil
}

// watch reads the job every CancelPoll until ctx ends: a cancel request,
// a final state set elsewhere, or failures past the error rate cancel
// the pass (the runJob loop then ends the job), so a cancel stops the
// chunks in flight within CancelPoll and a predict call's time.
func (run *jobRun) watch(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(run.r.cfg.CancelPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		j, err := run.r.cfg.Store.Get(ctx, run.id)
		if err != nil {
			continue
		}
		run.observe(j)
		switch {
		case Final(j.State):
			cancel(errJobEnded)
		case j.CancelRequested:
			cancel(errCancelRequested)
		case OverErrorRate(j.RowsFailed, j.RowsTotal, j.Spec.MaxErrorRate):
			cancel(errOverRate)
		}
	}
}

// observe sets the job's rows/s gauge.
func (run *jobRun) observe(j Job) {
	if Final(j.State) {
		return
	}
	rps, _ := Progress(j, run.r.cfg.Now())
	run.r.m.rps.WithLabelValues(run.id).Set(rps)
}

// oneChunk claims one chunk and takes it to completion. ok is false when
// no chunk was claimable or the pass's context ended; the error is fatal
// to the job (or a store failure to retry the pass on).
func (run *jobRun) oneChunk(ctx context.Context, cancelJob context.CancelCauseFunc) (ok bool, err error) {
	cfg := run.r.cfg
	c, ok, err := cfg.Store.Claim(ctx, run.id, cfg.Owner, run.shard, run.shards, cfg.Lease)
	if err != nil || !ok {
		if ctx.Err() != nil {
			return false, nil
		}
		return false, err
	}
	start := time.Now()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		run.renew(cctx, cancel, c)
	}()
	defer func() { cancel(nil); <-renewed }()

	res, failedRows, err := run.score(cctx, c)
	if err != nil {
		if cctx.Err() != nil {
			return false, nil // cancelled, ended, lease lost or shutting down: the chunk is left to its lease
		}
		return false, err
	}
	// The part is committed: record the chunk done (a store failure is
	// retried while the lease holds; a crash here redoes the chunk, and
	// WriteChunk or the rename makes its part appear once).
	for attempt := 1; ; attempt++ {
		err = cfg.Store.Complete(cctx, run.id, c.Chunk, cfg.Owner, res)
		if err == nil {
			break
		}
		if errors.Is(err, ErrLeaseLost) || cctx.Err() != nil {
			return false, nil
		}
		cfg.Log.Warn("jobs: recording a chunk done", "job", run.id, "chunk", c.Chunk, "err", err, "attempt", attempt)
		if !run.r.sleep(cctx, Backoff(attempt, 0, rand.Float64()/2)) {
			return false, nil
		}
	}
	m := run.r.m
	m.chunk.Observe(time.Since(start).Seconds())
	m.rows.WithLabelValues(run.id, "ok").Add(float64(res.Rows - res.Failed))
	m.rows.WithLabelValues(run.id, "failed").Add(float64(res.Failed))
	if c.Redone {
		m.rows.WithLabelValues(run.id, "redone").Add(float64(res.Rows))
	}
	if failedRows > 0 {
		// Failures only grow: fail the job as soon as they pass the rate.
		if j, err := cfg.Store.Get(ctx, run.id); err == nil && OverErrorRate(j.RowsFailed, j.RowsTotal, j.Spec.MaxErrorRate) {
			cancelJob(errOverRate)
		}
	}
	return true, nil
}

// renew renews the chunk's lease every third of it until ctx ends; a
// lost lease (another runner holds the chunk, or the lease ran out
// without a renewal) cancels the chunk.
func (run *jobRun) renew(ctx context.Context, cancel context.CancelCauseFunc, c Claim) {
	cfg := run.r.cfg
	until := c.Until
	t := time.NewTicker(max(cfg.Lease/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := cfg.Store.Renew(ctx, run.id, c.Chunk, cfg.Owner, cfg.Lease)
		switch {
		case err == nil:
			until = cfg.Now().Add(cfg.Lease)
		case errors.Is(err, ErrLeaseLost):
			cfg.Log.Warn("jobs: chunk lease lost; abandoning the chunk", "job", run.id, "chunk", c.Chunk)
			cancel(errLeaseLost)
			return
		case ctx.Err() != nil:
			return
		default:
			cfg.Log.Warn("jobs: renewing a chunk lease", "job", run.id, "chunk", c.Chunk, "err", err)
			if !cfg.Now().Before(until) {
				cancel(errLeaseLost)
				return
			}
		}
	}
}

// score reads the claimed chunk, scores its good rows (retrying the
// predictor's retryable errors with backoff) and commits its part.
// failed is the chunk's failed rows.
func (run *jobRun) score(ctx context.Context, c Claim) (res ChunkResult, failed int64, err error) {
	ch, err := run.read(ctx, c)
	if err != nil {
		return res, 0, err
	}
	var (
		rowErrs []RowError
		out     = make([]jobio.OutRow, 0, len(ch.Rows)+len(ch.Errors))
		outLine = make([]int64, 0, len(ch.Rows)+len(ch.Errors)) // each out row's input line: the part is in input order
		rows    = make([]jobio.Row, 0, len(ch.Rows))
		ids     = make([]string, 0, len(ch.Rows))
		lines   = make([]int64, 0, len(ch.Rows))
	)
	cross := make(map[string]jobio.RowError)
	for _, e := range run.scan.Dups[c.Chunk] {
		if _, ok := cross[e.ID]; !ok {
			cross[e.ID] = e
		}
	}
	fail := func(e jobio.RowError, write bool) {
		rowErrs = append(rowErrs, rowError(c.Chunk, e))
		if write {
			out = append(out, jobio.OutRow{ID: e.ID, VersionID: run.spec.VersionID, Error: &jobio.OutError{Field: e.Field, Message: e.Message}})
			outLine = append(outLine, e.Line)
		}
	}
	for i, row := range ch.Rows {
		id := ch.IDs[i]
		if e, ok := cross[id]; ok {
			delete(cross, id) // later rows of the id in the chunk are the reader's duplicates
			fail(e, false)
			continue
		}
		if run.stripID {
			delete(row, run.spec.IDField)
		}
		var line int64
		if i < len(ch.Lines) {
			line = ch.Lines[i]
		}
		rows, ids, lines = append(rows, row), append(ids, id), append(lines, line)
	}
	for _, e := range ch.Errors {
		switch d, ok := cross[e.ID]; {
		case e.ID != "" && ok:
			delete(cross, e.ID)
			fail(d, false)
		case isDup(e, run.spec.IDField) || e.ID == "":
			fail(e, false) // a duplicate, or a row without an id: counted and listed, never written
		default:
			fail(e, true)
		}
	}
	results, err := run.predict(WithChunk(ctx, run.id, c.Chunk), rows)
	if err != nil {
		return res, 0, err
	}
	for i, rr := range results {
		if rr.Err != nil {
			fail(jobio.RowError{Line: lines[i], ID: ids[i], Field: rr.Err.Field, Message: rr.Err.Message}, true)
			continue
		}
		out = append(out, jobio.OutRow{ID: ids[i], VersionID: run.spec.VersionID, Outputs: rr.Outputs})
		outLine = append(outLine, lines[i])
	}
	sortByLine(out, outLine)
	for attempt := 1; ; attempt++ {
		_, err = run.out.WriteChunk(ctx, c.Chunk, out)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return res, 0, ctx.Err()
		}
		if attempt >= 5 {
			return res, 0, fatal("output %s: %v", run.spec.Output.URI, err)
		}
		run.r.cfg.Log.Warn("jobs: committing a chunk's part", "job", run.id, "chunk", c.Chunk, "err", err, "attempt", attempt)
		if !run.r.sleep(ctx, Backoff(attempt, 0, rand.Float64()/2)) {
			return res, 0, ctx.Err()
		}
	}
	kept := rowErrs[:min(len(rowErrs), MaxErrorsKept)]
	return ChunkResult{Rows: int64(len(ch.Rows) + len(ch.Errors)), Failed: int64(len(rowErrs)), Errors: kept}, int64(len(rowErrs)), nil
}

// read reads the claimed chunk: a reader opened at its start, one Next.
func (run *jobRun) read(ctx context.Context, c Claim) (jobio.Chunk, error) {
	for attempt := 1; ; attempt++ {
		ch, err := run.readOnce(ctx, c)
		if err == nil {
			return ch, nil
		}
		var fe *fatalError
		if errors.As(err, &fe) || ctx.Err() != nil {
			return ch, err
		}
		if attempt >= 5 {
			return ch, fatal("input %s: chunk %d: %v", run.spec.Input.URI, c.Chunk, err)
		}
		run.r.cfg.Log.Warn("jobs: reading a chunk", "job", run.id, "chunk", c.Chunk, "err", err, "attempt", attempt)
		if !run.r.sleep(ctx, Backoff(attempt, 0, rand.Float64()/2)) {
			return ch, ctx.Err()
		}
	}
}

func (run *jobRun) readOnce(ctx context.Context, c Claim) (jobio.Chunk, error) {
	obj, err := run.in.Open(ctx, run.inKey)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return jobio.Chunk{}, fatal("input: %v", err)
		}
		return jobio.Chunk{}, err
	}
	defer obj.Close()
	opt := run.options()
	opt.Start = c.Start
	if c.Chunk < len(run.scan.Lines) {
		opt.Line = run.scan.Lines[c.Chunk]
	}
	rd, err := jobio.NewReader(obj, run.spec.Input.Format, opt)
	if err != nil {
		if transient(err) {
			return jobio.Chunk{}, err
		}
		return jobio.Chunk{}, fatal("input %s: %v", run.spec.Input.URI, err)
	}
	ch, err := rd.Next(ctx)
	if err == io.EOF {
		return ch, fatal("input %s: chunk %d has no rows at its start (offset %d): the input changed since the scan", run.spec.Input.URI, c.Chunk, c.Start.Offset)
	}
	if err != nil {
		if ctx.Err() != nil || transient(err) {
			return ch, err
		}
		return ch, fatal("input %s: chunk %d: %v", run.spec.Input.URI, c.Chunk, err)
	}
	if ch.Index != c.Chunk {
		return ch, fatal("input %s: read chunk %d for chunk %d", run.spec.Input.URI, ch.Index, c.Chunk)
	}
	return ch, nil
}

// predict scores rows, retrying the predictor's retryable errors with
// backoff (they are never the rows' fault and never count as failures)
// until they pass or ctx ends; any other error is fatal to the job.
func (run *jobRun) predict(ctx context.Context, rows []jobio.Row) ([]RowResult, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	sp := run.spec
	for attempt := 1; ; attempt++ {
		res, err := run.r.cfg.Predictor.Predict(ctx, sp.Tenant, sp.Model, sp.Version, rows)
		if err == nil {
			if len(res) != len(rows) {
				return nil, fatal("%s answered %d rows for %d", sp.VersionID, len(res), len(rows))
			}
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		retry, after := Retryable(err)
		if !retry {
			return nil, fatal("%s: %s", sp.VersionID, errs.As(err).Message)
		}
		if !run.r.sleep(ctx, Backoff(attempt, after, rand.Float64()/2)) {
			return nil, ctx.Err()
		}
	}
}

// assemble writes the final output from every chunk's part and moves the
// job to Succeeded. Idempotent: a crash during it assembles again.
func (run *jobRun) assemble(ctx context.Context, j Job) error {
	out, err := jobio.OpenOutput(ctx, run.parts, run.spec.Output.Format, run.info.Outputs)
	if err != nil {
		return err
	}
	for _, i := range []int{0, j.ChunksTotal - 1} {
		if i >= 0 && !out.Committed(i) {
			return fatal("output %s: chunk %d is recorded done but its part is gone from %s.parts/; submit the job again", run.spec.Output.URI, i, run.spec.Output.URI)
		}
	}
	if err := out.Assemble(ctx, j.ChunksTotal); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fatal("output %s: assembling: %v", run.spec.Output.URI, err)
	}
	ok, err := run.r.cfg.Store.SetState(ctx, run.id, From(Succeeded), Succeeded, "", false)
	if err != nil {
		return err
	}
	if ok {
		run.r.cfg.Log.Info("job succeeded", "job", run.id, "rows", j.RowsTotal, "failed", j.RowsFailed, "redone", j.RowsRedone)
		// The output is whole and the job recorded done: its parts are
		// needed no more (a failure here leaves them, nothing else).
		if err := run.parts.RemoveAll(ctx); err != nil {
			run.r.cfg.Log.Warn("jobs: removing a succeeded job's parts", "job", run.id, "err", err)
		}
	}
	run.r.m.forget(run.id)
	return nil
}

type chunkKey struct{}

type chunkRef struct {
	job   string
	chunk int
}

// WithChunk marks ctx as the scoring of a job's chunk (a Predictor names
// its calls after it: request id "job-ID-chunk-N").
func WithChunk(ctx context.Context, job string, chunk int) context.Context {
	return context.WithValue(ctx, chunkKey{}, chunkRef{job, chunk})
}

// ChunkOf is the job and chunk WithChunk put in ctx (ok false: none).
func ChunkOf(ctx context.Context) (job string, chunk int, ok bool) {
	r, ok := ctx.Value(chunkKey{}).(chunkRef)
	return r.job, r.chunk, ok
}

// transient says whether a read error is the network's (an object
// store's connection: worth reading again at the next pass), not the
// file's content (a format error fails the job).
func transient(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// sortByLine orders a chunk's output rows by their input lines (the
// reader's bad rows and the scored ones were gathered apart).
func sortByLine(out []jobio.OutRow, lines []int64) {
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return lines[idx[a]] < lines[idx[b]] })
	sorted := make([]jobio.OutRow, len(out))
	for k, i := range idx {
		sorted[k] = out[i]
	}
	copy(out, sorted)
}
