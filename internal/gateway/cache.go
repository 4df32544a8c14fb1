package gateway

import (
	"context"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/predcache"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/serving"
)

// X-Cache values (Answer.Cache): every instance of the answer came from
// the version's prediction cache, none did, or some did.
const (
	CacheHit     = "hit"
	CacheMiss    = "miss"
	CachePartial = "partial"
)

// CacheUse is how a call used its version's prediction cache (zero: the
// version has none).
type CacheUse struct {
	On     bool
	Hits   int // instances answered from the cache (or by another call computing the same row)
	Misses int // instances this call computed
}

// header is the X-Cache value of a use ("" when the version has no cache).
func (u CacheUse) header() string {
	switch {
	case !u.On:
		return ""
	case u.Misses == 0:
		return CacheHit
	case u.Hits == 0:
		return CacheMiss
	}
	return CachePartial
}

// cacheRun is one call's lookups in its version's prediction cache: per
// row, the cached answer, or the flight it leads (computes) or waits for.
// The key of a row is the version (id and digest), the tenant and the
// row as the model receives it (after enrichment, validation and
// preprocessing): the answer is a function of exactly that.
type cacheRun struct {
	c      *predcache.Cache
	keys   []byte    // every row's key, one after the other
	rows   []rowLook // per row
	misses []int     // rows to compute now (leads, and misses past the flights' bound)

	// A 1-row call (the common case) keeps its row, its miss and its key
	// here: one allocation for the whole lookup.
	one     [1]rowLook
	oneMiss [1]int
	keyBuf  [160]byte
}

// rowLook is one row's lookup.
type rowLook struct {
	end  int       // keys[rows[i-1].end:end] is the row's key
	out  []float32 // its answer (cached, waited for or computed)
	lead *predcache.Flight
	wait *predcache.Flight
}

// lookupCache looks every row of rows up in tg's prediction cache for
// tenant; nil when the version declares no cache: (or the gateway keeps
// none). The caller must end the run (run, or abandon).
func (g *Gateway) lookupCache(tg *routing.Target, tenant string, rows runtime.Batch) *cacheRun {
	cfg := tg.Spec.Manifest.Cache
	if cfg == nil || g.Caches == nil {
		return nil
	}
	c := g.Caches.For(tg.Model, tg.N, tg.ID, tg.Digest, predcache.Config{TTL: cfg.TTL.Duration, MaxBytes: cfg.MaxBytes.Bytes})
	n := rows.Rows
	r := &cacheRun{c: c}
	r.keys, r.misses = r.keyBuf[:0], r.oneMiss[:0]
	if n == 1 {
		r.rows = r.one[:]
	} else {
		r.rows = make([]rowLook, n)
	}
	for i := 0; i < n; i++ {
		start := len(r.keys)
		if rows.Tokens != nil {
			r.keys = c.Key(r.keys, tenant, nil, rows.Tokens[i])
		} else {
			r.keys = c.Key(r.keys, tenant, rows.Row(i), nil)
		}
		rl := &r.rows[i]
		rl.end = len(r.keys)
		out, f, lead := c.Get(r.keys[start:])
		switch {
		case out != nil:
			rl.out = out
		case lead:
			rl.lead = f
			r.misses = append(r.misses, i)
		case f != nil:
			rl.wait = f
		default:
			r.misses = append(r.misses, i)
		}
	}
	return r
}

func (r *cacheRun) key(i int) []byte {
	start := 0
	if i > 0 {
		start = r.rows[i-1].end
	}
	return r.keys[start:r.rows[i].end]
}

// abandon fails the flights the call still leads (it ends without their
// answers): their waiters compute the rows themselves.
func (r *cacheRun) abandon() {
	for i := range r.rows {
		if f := r.rows[i].lead; f != nil {
			f.Fail()
			r.rows[i].lead = nil
		}
	}
}

// run submits only the rows the cache did not answer, stores their
// answers, waits (within ctx) for the rows other calls compute, computes
// those whose computation failed, and merges every row's answer back in
// order.
func (r *cacheRun) run(ctx context.Context, srv routing.Backend, rows runtime.Batch, prio serving.Priority) (serving.Result, CacheUse, error) {
	defer r.abandon()
	use := CacheUse{On: true}
	var res serving.Result
	compute := func(idx []int) error {
		got, err := srv.Submit(ctx, serving.Work{Rows: pick(rows, idx), Priority: prio})
		res.Attempts = max(res.Attempts, got.Attempts)
		if err != nil {
			return err
		}
		if res.Out.Cols == 0 {
			res.Timing = got.Timing
		}
		res.Out = got.Out
		for j, i := range idx {
			row := got.Out.Row(j)
			rl := &r.rows[i]
			rl.out = row
			if f := rl.lead; f != nil {
				f.Done(row)
				rl.lead = nil
			} else {
				r.c.Put(r.key(i), row)
			}
		}
		use.Misses += len(idx)
		return nil
	}
	n := rows.Rows
	if len(r.misses) > 0 {
		if err := compute(r.misses); err != nil {
			return res, use, err
		}
		if len(r.misses) == n {
			return res, use, nil // every row computed, in order: the answer as it came
		}
	}
	var again []int
	for i := range r.rows {
		f := r.rows[i].wait
		if f == nil {
			continue
		}
		if out, ok := f.Wait(ctx); ok {
			r.rows[i].out = out
			continue
		}
		if ctx.Err() != nil {
			return res, use, errs.New(errs.DeadlineExceeded, "the deadline passed while instance %d waited for the same row computed by another request", i)
		}
		again = append(again, i) // its computation failed elsewhere: compute it here
	}
	if len(again) > 0 {
		if err := compute(again); err != nil {
			return res, use, err
		}
	}
	use.Hits = n - use.Misses
	cols := len(r.rows[0].out)
	out := runtime.Output{Rows: n, Cols: cols, Data: make([]float32, 0, n*cols)}
	for i := range r.rows {
		o := r.rows[i].out
		if len(o) != cols {
			return res, use, errs.New(errs.Internal, "prediction cache: instance %d has %d outputs, instance 0 has %d", i, len(o), cols)
		}
		out.Data = append(out.Data, o...)
	}
	res.Out = out
	return res, use, nil
}

// pick is the batch of rows idx of b (b itself when idx is every row).
func pick(b runtime.Batch, idx []int) runtime.Batch {
	if len(idx) == b.Rows {
		return b
	}
	out := runtime.Batch{Rows: len(idx), Cols: b.Cols}
	if b.Tokens != nil {
		out.Tokens = make([][]int64, len(idx))
		for j, i := range idx {
			out.Tokens[j] = b.Tokens[i]
		}
		return out
	}
	out.Data = make([]float32, 0, len(idx)*b.Cols)
	for _, i := range idx {
		out.Data = append(out.Data, b.Row(i)...)
	}
	return out
}
