// Package jobhttp is the remote jobs.Predictor of `sluice job run`: a
// batch job's rows scored by a gateway over its public HTTP API, each
// call with the header Sluice-Priority: batch (the batch class, which
// takes only what online work leaves idle).
//
// Version reads the pinned version's input fields and outputs from GET
// /v1/models/{m}/versions/{v} and compiles the fields into a schema
// (internal/schema) to check rows with before they are sent: the gateway
// refuses a whole call for one bad instance, so a row the schema refuses
// is that row's error here and the call carries only valid rows. Should
// the gateway still refuse an instance (a check of the model's
// preprocessing the fields do not show, or a version with feature
// enrichment, whose rows are judged by the gateway), that row becomes
// its error and the others are sent again. A full batch queue or an empty
// quota is waited on and sent again (batch work finds the queue full
// whenever online work is busy: that is its class), and a call too large
// for the server (its --max-body-bytes) is sent in halves; any other failure is
// the chunk's, an *errs.Error with the server's code for the runner to
// retry or fail the job on.
//
// The calls authenticate with the client's API key: the tenant whose
// permissions and quota the rows use is the key's (give the runner the
// submitter's key, or an admin's).
package jobhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluiceml/sluice/client"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobgw"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/serving"
)

// Predictor scores rows through a gateway's HTTP API.
type Predictor struct {
	Client *client.Client

	mu       sync.Mutex          // guards versions
	versions map[string]*version // "model@n": what Version read; at most maxVersions
}

var _ jobs.Predictor = (*Predictor)(nil)

// maxVersions bounds the versions remembered (a runner scores one job's
// version; a few more are cheap).
const maxVersions = 16

// version is what the runner needs of a pinned version.
type version struct {
	info     jobs.VersionInfo
	sch      *schema.Schema // nil: rows are judged by the gateway (feature enrichment fills fields first)
	callSize int            // rows per call
}

// New is a Predictor over a copy of c that sends each call once: the
// Predictor retries refusals itself (jobs.CallRetryWait), per row.
func New(c *client.Client) *Predictor {
	cc := *c
	cc.Retry = client.NoRetry
	return &Predictor{Client: &cc}
}

// Version describes the pinned version (its fields as the readers type
// them, its outputs), read from the gateway.
func (p *Predictor) Version(ctx context.Context, _ string, model string, n int) (jobs.VersionInfo, error) {
	v, err := p.version(ctx, model, n, true)
	if err != nil {
		return jobs.VersionInfo{}, err
	}
	return v.info, nil
}

func (p *Predictor) version(ctx context.Context, model string, n int, fresh bool) (*version, error) {
	key := fmt.Sprintf("%s@%d", model, n)
	p.mu.Lock()
	v, ok := p.versions[key]
	p.mu.Unlock()
	if ok && !fresh {
		return v, nil
	}
	av, err := p.Client.Version(ctx, model, n)
	if err != nil {
		return nil, callErr(fmt.Sprintf("read %s from %s", key, p.Client.Base), err)
	}
	v, err = compile(key, av)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.versions == nil || len(p.versions) >= maxVersions {
		p.versions = map[string]*version{}
	}
	p.versions[key] = v
	p.mu.Unlock()
	return v, nil
}

// compile is what the runner keeps of a version's description.
func compile(key string, av *api.Version) (*version, error) {
	if av.Input == nil || av.Output == nil {
		return nil, errs.New(errs.NotReady, "%s: the server's description has no input schema (the version is not loaded: its state is %q)", key, av.State)
	}
	fields := make([]schema.Field, len(av.Input.Fields))
	var steps []schema.Step
	for i, f := range av.Input.Fields {
		fields[i] = schema.Field{Name: f.Name, Type: f.Type, Min: f.Min, Max: f.Max, Optional: f.Optional, Default: f.Default, Values: f.Values, MaxLength: f.MaxLength, DType: f.DType, Mask: f.Mask}
		if f.Type == schema.TypeCategory {
			// Validation only: any encoding checks the values.
			steps = append(steps, schema.Step{Op: schema.OpOrdinal, Field: f.Name})
		}
	}
	sch, probs := schema.Compile(fields, steps)
	if len(probs) > 0 {
		return nil, errs.New(errs.Internal, "%s: the server's input fields do not compile here (%v): is this sluice older than the server's?", key, probs[0])
	}
	v := &version{
		info: jobs.VersionInfo{VersionID: av.ID, Fields: jobgw.Fields(sch), Outputs: append([]string(nil), av.Output.Fields...)},
		sch:  sch,
	}
	if v.info.VersionID == "" {
		v.info.VersionID = key
	}
	if av.Input.Enrichment != nil {
		v.sch = nil
	}
	v.callSize = callSize(av.Config)
	return v, nil
}

// callSize is how many rows one call holds: at most the version's
// maxInstancesPerRequest and half its batch queue bound (two chunks in
// flight fit in it), as the in-process predictor sends.
func callSize(c *api.Serving) int {
	if c == nil {
		return 100
	}
	n := max(serving.BatchQueueBound(c.MaxQueueInstances, 0)/2, 1)
	if c.MaxInstancesPerRequest > 0 {
		n = min(n, c.MaxInstancesPerRequest)
	}
	return n
}

// Predict scores rows: one result per row, in order.
func (p *Predictor) Predict(ctx context.Context, _ string, model string, n int, rows []jobio.Row) ([]jobs.RowResult, error) {
	v, err := p.version(ctx, model, n, false)
	if err != nil {
		return nil, err
	}
	out := make([]jobs.RowResult, len(rows))
	bodies := make([][]byte, len(rows)) // each good row's JSON
	var good []int
	var buf []float32
	if v.sch != nil {
		buf = make([]float32, v.sch.Width())
	}
	for i, r := range rows {
		if v.sch != nil {
			inst := jobgw.Instance(v.sch, r)
			var err error
			if _, _, seq := v.sch.Sequence(); seq {
				_, err = v.sch.Tokens("", inst)
			} else {
				err = v.sch.Row("", inst, buf)
			}
			if err != nil {
				out[i].Err = jobs.RowErr(err)
				continue
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			out[i].Err = &jobio.OutError{Message: "cannot be sent as JSON: " + err.Error()}
			continue
		}
		bodies[i] = b
		good = append(good, i)
	}
	job, chunk, _ := jobs.ChunkOf(ctx)
	for part, lo := 0, 0; lo < len(good); part, lo = part+1, lo+v.callSize {
		hi := min(lo+v.callSize, len(good))
		id := fmt.Sprintf("job-%s-chunk-%d", job, chunk)
		if len(good) > v.callSize {
			id += "-" + strconv.Itoa(part)
		}
		if err := p.call(ctx, model, n, id, bodies, append([]int(nil), good[lo:hi]...), out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// call scores the rows idx in one request, retrying a full batch queue
// or an empty quota; an instance the gateway refuses is its row's error
// and the others are sent again.
func (p *Predictor) call(ctx context.Context, model string, n int, id string, bodies [][]byte, idx []int, out []jobs.RowResult) error {
	for attempt := 1; len(idx) > 0; {
		var b strings.Builder
		b.WriteString(`{"instances":[`)
		for k, i := range idx {
			if k > 0 {
				b.WriteByte(',')
			}
			b.Write(bodies[i])
		}
		b.WriteString(`]}`)
		resp, err := p.Client.PredictBatch(ctx, model, n, []byte(b.String()), id)
		if err == nil {
			var pr api.PredictResponse
			if err := json.Unmarshal(resp.Body, &pr); err != nil {
				return errs.Wrap(errs.Internal, err, "%s@%d: decode the answer of %s", model, n, p.Client.Base)
			}
			if len(pr.Predictions) != len(idx) {
				return errs.New(errs.Internal, "%s@%d answered %d predictions for %d instances", model, n, len(pr.Predictions), len(idx))
			}
			for k, i := range idx {
				m := make(map[string]any, len(pr.Predictions[k]))
				for name, x := range pr.Predictions[k] {
					m[name] = x
				}
				if k < len(pr.Labels) {
					// postprocess: labels by their label, as the
					// in-process runner writes them.
					for name, l := range pr.Labels[k] {
						if l != nil {
							m[name] = *l
						} else {
							m[name] = nil
						}
					}
				}
				out[i].Outputs = m
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e := callErr(fmt.Sprintf("%s@%d: predict at %s", model, n, p.Client.Base), err)
		if k, ok := jobs.InstanceOf(e.Field); ok && k < len(idx) && e.Code == errs.InvalidArgument {
			out[idx[k]].Err = jobs.RowErr(e)
			idx = append(idx[:k:k], idx[k+1:]...)
			continue
		}
		if (e.Code == errs.PayloadTooLarge || e.Code == errs.TooManyInstances) && len(idx) > 1 {
			// The server's --max-body-bytes (or a bound this side does not
			// know) is below the call: send it in halves.
			half := len(idx) / 2
			if err := p.call(ctx, model, n, id+"a", bodies, idx[:half], out); err != nil {
				return err
			}
			return p.call(ctx, model, n, id+"b", bodies, idx[half:], out)
		}
		if e.Code != errs.QueueFull && e.Code != errs.QuotaExceeded {
			return e
		}
		wait := jobs.CallRetryWait(attempt, e)
		attempt++
		tm := time.NewTimer(wait)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
	return nil
}

// callErr is a client error as the catalogue's: the server's code, field
// and Retry-After; a call that got no answer is unavailable (retried).
func callErr(what string, err error) *errs.Error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		if e := errs.As(err); e.Code != errs.Internal {
			return e
		}
		return errs.Wrap(errs.Unavailable, err, "%s", what)
	}
	e := &errs.Error{Code: errs.Code(ce.Detail.Code), Field: ce.Detail.Field, Message: ce.Detail.Message, Err: err}
	if !slices.Contains(errs.Codes(), e.Code) {
		// Not the server's answer (a proxy's 502, say): a 5xx or 429 is
		// worth a retry.
		e.Code = errs.Internal
		if ce.Status >= 500 || ce.Status == 429 {
			e.Code = errs.Unavailable
		}
		e.Field, e.Message = "", fmt.Sprintf("%s: %v", what, ce)
	}
	if s, err := strconv.Atoi(ce.RetryAfter); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
