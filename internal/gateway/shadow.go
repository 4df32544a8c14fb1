package gateway

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/vstats"
)

// shadowJob is one copy of a request for a shadow version.
type shadowJob struct {
	target  *routing.Target
	rows    Rows
	primary []float32 // the primary's outputs, row-major
	cols    int
	// prio is the copy's class: Low, or BatchJob for a copy of batch
	// work, which never outranks the work it copies.
	prio serving.Priority
	// enrich, when set, fills the shadow's own features into rows (the
	// shadow declares features: its primary did not read the same way)
	// within the copy's deadline.
	enrich func(ctx context.Context, spec *modelpkg.Spec, rows Rows) (Rows, *Enriched, error)
}

// Shadows runs copies of requests on shadow versions, off the request's
// path: a bounded queue drained by a fixed set of workers. A copy that does
// not fit is dropped and counted, never waited for; a copy runs at low
// priority, so it never takes a batch slot from online work.
type Shadows struct {
	stats    *vstats.Set
	Metrics  *telemetry.Metrics // set before the first request (nil: none)
	log      *slog.Logger
	deadline time.Duration
	jobs     chan shadowJob
	stop     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
}

// NewShadows starts workers that drain a queue of queue copies. Each copy
// gets deadline to finish.
func NewShadows(stats *vstats.Set, log *slog.Logger, workers, queue int, deadline time.Duration) *Shadows {
	s := &Shadows{stats: stats, log: log, deadline: deadline, jobs: make(chan shadowJob, queue), stop: make(chan struct{})}
	for i := 0; i < workers; i++ {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				select {
				case <-s.stop:
					return
				case j := <-s.jobs:
					s.run(j)
				}
			}
		}()
	}
	return s
}

// offer queues a copy or drops it (counted) when the queue is full.
func (s *Shadows) offer(j shadowJob) {
	select {
	case s.jobs <- j:
	default:
		s.stats.Get(j.target.ID).Shadow.Dropped.Add(1)
	}
}

func (s *Shadows) run(j shadowJob) {
	v := s.stats.Get(j.target.ID)
	ctx, cancel := context.WithTimeout(context.Background(), s.deadline)
	defer cancel()
	in := j.rows
	if j.enrich != nil {
		var err error
		if in, _, err = j.enrich(ctx, j.target.Spec, in); err != nil {
			v.Shadow.Errors.Add(1)
			return
		}
	}
	rows, err := in.Build(j.target.Spec.Schema, nil)
	if err != nil {
		v.Shadow.Errors.Add(1) // the shadow's schema refuses what the primary took
		return
	}
	start := time.Now()
	res, err := j.target.Server.Submit(ctx, serving.Work{Rows: rows, Priority: max(serving.Low, j.prio)})
	switch e := errs.Of(err); {
	case err == nil:
	case e.Refusal == errs.RefusalCapacity || e.Refusal == errs.RefusalClosing:
		v.Shadow.Dropped.Add(1) // the shadow had no room (or is draining): dropped, not a model error
		return
	default:
		v.Shadow.Errors.Add(1)
		return
	}
	if res.Out.Cols != j.cols {
		v.Shadow.Incompatible.Add(1)
		return
	}
	lat := time.Since(start)
	v.Compare(j.primary, res.Out.Data, j.cols, lat)
	if m := s.Metrics; m != nil {
		ver := strconv.Itoa(j.target.N)
		for r := 0; r*j.cols < len(j.primary); r++ {
			p, q := j.primary[r*j.cols:(r+1)*j.cols], res.Out.Data[r*j.cols:(r+1)*j.cols]
			var d float64
			for k := range p {
				d = math.Max(d, math.Abs(float64(p[k])-float64(q[k])))
			}
			m.ShadowCompared(j.target.Model, ver, vstats.Label(p) != vstats.Label(q), d, lat)
		}
	}
}

// Close stops the workers; copies still queued are dropped.
func (s *Shadows) Close() {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
}
