package cluster

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/placement"
	"github.com/sluiceml/sluice/internal/serving"
)

// Version is the data plane's backend for a version whose replicas run on
// workers.
type Version struct {
	pool *Pool
	key  string
	spec VersionSpec
	ver  string // spec.N as the protocol's model_version
	tier string // placement.tier: hot, warm or cold

	// guarded by Pool.mu
	timing hosting.Timings
	// want is how many workers should hold a copy (0 for a cold version
	// nobody asked for, or a warm one evicted everywhere): reconcileLocked
	// places the missing ones. SetWant is where an autoscaler sets it.
	want int
	on   map[string]*copyOn // worker id → the copy placed there
	// lastLoad is the measured time of its last load (load + golden +
	// warmup); loads and evictions count them over every worker.
	lastLoad         time.Duration
	loads, evictions int64
	// failed is why its last load failed, at failedAt: requests get it
	// instead of loading again until placement.RetryLoad allows.
	failed   string
	failedAt time.Time
	// pending is closed when the on-demand load that requests wait for
	// ends (nil: none); replaced counts how often that load was placed
	// again after a worker refused it for its budget. onDemand is set
	// while a request places it (its copies are copyOn.onDemand), waited
	// when that request waits for the load (reconcileForRequestLocked).
	pending          chan struct{}
	replaced         int
	onDemand, waited bool
	// exits are the worker exits it was charged with (once per worker
	// session: exitSeen); quarantined is the reason once it is poison.
	exits       []time.Time
	exitSeen    map[string]int64
	quarantined string

	// route is the predict path's snapshot of the workers holding the
	// version ready (route.go): published under Pool.mu, read without it.
	route atomic.Pointer[route]
	stale bool // in Pool.stale (guarded by Pool.mu)

	// Instances seen by Submit, for the autoscaler (cumulative).
	arrived, refused, missed atomic.Int64
	// slack is how late its calls to workers have answered against the
	// workers' reports (preadmit.go): the gateway's admission weighs it.
	slack hopSlack
	// requests counts Submit calls (refused ones too: demand for a version
	// not loaded is what admission weighs); demand is their decayed rate,
	// folded in up to folded by Pool.rateLocked (guarded by Pool.mu).
	requests atomic.Int64
	demand   placement.Rate
	folded   int64
}

func newVersion(p *Pool, vs VersionSpec) *Version {
	tier := modelpkg.TierWarm
	if vs.Spec != nil && vs.Spec.Manifest.Placement.Tier != "" {
		tier = vs.Spec.Manifest.Placement.Tier
	}
	return &Version{pool: p, key: key(vs.Model, int64(vs.N)), spec: vs, ver: strconv.Itoa(vs.N), tier: tier,
		on: map[string]*copyOn{}, exitSeen: map[string]int64{}}
}

// retryable reports whether a refusal or failure from one worker is worth
// one try on another: the catalogue's RetryWorker column (refused there
// before computing, or the worker itself failed).
func retryable(code errs.Code) bool { return errs.Lookup(code).RetryWorker }

// Submit sends w to the less loaded of two random workers holding the
// version; when that worker refuses or dies, it tries one other inside the
// request's deadline (predictions are pure, so a batch lost with a dead
// worker is safe to compute again). Result.Attempts counts the workers
// tried. When no worker has the version loaded (cold, or evicted), the
// request starts its load and waits for it if its deadline allows
// (Pool.ensure).
func (v *Version) Submit(ctx context.Context, w serving.Work) (res serving.Result, err error) {
	n := int64(w.Rows.Rows)
	v.arrived.Add(n)
	v.requests.Add(1)
	defer func() {
		// Demand the version could not take (the catalogue's capacity and
		// readiness refusals) is what the autoscaler weighs; a server
		// draining is not.
		switch e := errs.Of(err); {
		case e.Refusal == errs.RefusalCapacity || e.Refusal == errs.RefusalReadiness:
			v.refused.Add(n)
		case e.Code == errs.DeadlineExceeded || e.Code == errs.ExpiredInQueue:
			v.missed.Add(n)
		}
	}()
	var skip *worker
	var last error
	for attempt := 1; attempt <= 2; attempt++ {
		c, ok := v.pool.pick(v, skip)
		if !ok && last == nil {
			if err := v.pool.ensure(ctx, v); err != nil {
				return serving.Result{}, err
			}
			c, ok = v.pool.pick(v, skip)
		}
		if !ok {
			if last != nil {
				return serving.Result{Attempts: attempt - 1}, last
			}
			return serving.Result{}, v.pool.notReady(v)
		}
		if attempt == 1 {
			if c, err = v.admit(ctx, c, n); err != nil {
				return serving.Result{}, err
			}
		}
		res, err, fromPeer := v.call(ctx, c, w)
		if err == nil {
			res.Attempts = attempt
			return res, nil
		}
		if !fromPeer && errs.CodeOf(err) == errs.Unavailable {
			// The connection failed (the worker died or is unreachable).
			// A deadline that passed while the worker was busy says
			// nothing against the worker: it stays in routing.
			v.pool.suspect(c.w, c.session, v, err)
		}
		last = err
		if !retryable(errs.CodeOf(err)) || ctx.Err() != nil {
			return serving.Result{Attempts: attempt}, err
		}
		skip = c.w
	}
	return serving.Result{Attempts: 2}, last
}

// admit runs the gateway's deadline check (preAdmit) on the chosen
// worker, and on one other holder when that one cannot make the
// deadline; it returns the worker to send to, or the refusal.
func (v *Version) admit(ctx context.Context, c candidate, n int64) (candidate, error) {
	dl, has := ctx.Deadline()
	if !has {
		return c, nil
	}
	var delay time.Duration
	if v.spec.Spec != nil {
		delay = v.spec.Spec.Manifest.Serving.MaxBatchDelay.Duration
	}
	slack := v.slack.get()
	err := preAdmit(c, int(n), delay, time.Until(dl), slack)
	if err == nil {
		return c, nil
	}
	if alt, ok := v.pool.pick(v, c.w); ok && preAdmit(alt, int(n), delay, time.Until(dl), slack) == nil {
		return alt, nil
	}
	v.slack.observe(hopRefused, 0, 0)
	return c, err
}

func (v *Version) call(ctx context.Context, c candidate, w serving.Work) (serving.Result, error, bool) {
	req := &inferencepb.ModelInferRequest{ModelName: v.spec.Model, ModelVersion: v.ver}
	if w.Priority != serving.Online {
		req.Parameters = map[string]*inferencepb.InferParameter{hop.ParamPriority: {ParameterChoice: &inferencepb.InferParameter_StringParam{StringParam: w.Priority.String()}}}
	}
	hop.EncodeBatch(req, w.Rows)
	n := int64(w.Rows.Rows)
	c.w.outstanding.Add(n)
	if c.cp != nil {
		c.cp.inflight.Add(1)
		c.cp.rows.Add(n)
		c.cp.lastUsed.Store(time.Now().UnixNano())
	}
	est := hopEstimate(c, w.Rows.Rows)
	t0 := time.Now()
	resp, err := c.infer.ModelInfer(ctx, req)
	elapsed := time.Since(t0)
	c.w.outstanding.Add(-n)
	if c.cp != nil {
		c.cp.inflight.Add(-1)
		c.cp.rows.Add(-n)
	}
	if err != nil {
		e, fromPeer := hop.FromStatus(err)
		v.slack.observe(hopOutcomeOf(e, fromPeer, ctx.Err()), elapsed, est)
		if fromPeer {
			c.w.seen.Store(time.Now().UnixNano())
		}
		return serving.Result{}, e, fromPeer
	}
	c.w.seen.Store(time.Now().UnixNano())
	v.slack.observe(hopAnswered, elapsed, est)
	out, err := hop.DecodeOutput(resp, w.Rows.Rows)
	if err != nil {
		return serving.Result{}, errs.Wrap(errs.Internal, err, "%s on worker %s: %v", v.key, c.w.id, err), true
	}
	p := resp.Parameters
	ns := func(k string) time.Duration {
		if x := p[k]; x != nil {
			return time.Duration(x.GetInt64Param())
		}
		return 0
	}
	return serving.Result{Out: out, Timing: serving.Timing{Queue: ns(hop.ParamQueueNs), BatchWait: ns(hop.ParamBatchNs), Compute: ns(hop.ParamComputeNs)}}, nil, true
}

// Stats sums the version's figures over the live workers' last reports;
// its cost model is the one the workers report (the best fitted).
func (v *Version) Stats() serving.Stats {
	p := v.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	var st serving.Stats
	var fitted int64 // batches behind st.Cost
	for _, w := range p.workers {
		if !w.live || w.status == nil {
			continue
		}
		for _, vs := range w.status.Versions {
			if key(vs.Model, vs.Version) != v.key {
				continue
			}
			// The cost model each worker learned for its copy (one
			// replica's A + B·n, as in process): the one fitted on the
			// most batches, so sluice plan and the API read it as they
			// do in process.
			if (vs.CostANs > 0 || vs.CostBNs > 0) && (st.Cost == (serving.CostModel{}) || vs.Batches > fitted) {
				st.Cost, fitted = serving.CostModel{A: time.Duration(vs.CostANs), B: time.Duration(vs.CostBNs)}, vs.Batches
			}
			st.ReadyReplicas += int(vs.ReadyReplicas)
			st.Restarting += int(vs.RestartingReplicas)
			st.QueuedInstances += int(vs.QueuedInstances)
			st.InflightBatches += int(vs.InflightBatches)
			st.Batches += vs.Batches
			st.Rows += vs.Rows
			st.Crashes += vs.Crashes
			st.ExpiredInQueue += vs.ExpiredInQueue
		}
	}
	return st
}

// notReady is the error of a request that found v on no worker after
// trying to load it: the load's failure when it failed.
func (p *Pool) notReady(v *Version) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case v.quarantined != "":
		return &errs.Error{Code: errs.NotReady, Message: fmt.Sprintf("%s is not ready (failed: %s)", v.key, v.quarantined), RetryAfter: time.Second}
	case v.failed != "":
		return &errs.Error{Code: errs.NotReady, Message: fmt.Sprintf("%s is not ready: its load failed: %s", v.key, v.failed), RetryAfter: time.Second}
	}
	return &errs.Error{Code: errs.NotReady, Message: v.key + " is not ready on any worker", RetryAfter: time.Second}
}

// Close unloads the version from every worker, draining within ctx.
func (v *Version) Close(ctx context.Context) error { return v.pool.unload(ctx, v) }
