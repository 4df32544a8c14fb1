package jobs

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// Manager is the jobs' Service: submit (validated, the version pinned,
// the input probed, the job queued), get, list and cancel, each scoped to
// the caller's tenant. It runs no job: the Runner does.
type Manager struct {
	cfg Config
}

var _ Service = (*Manager)(nil)

// NewManager returns the Manager of cfg's Store (nil Store: every call
// is jobs_off). It registers sluice_jobs{state} on cfg.Metrics.
func NewManager(cfg Config) *Manager {
	cfg = cfg.withDefaults()
	m := &Manager{cfg: cfg}
	if cfg.Metrics != nil && cfg.Store != nil {
		register[*statesCollector](cfg.Metrics, newStatesCollector(cfg.Store))
	}
	return m
}

// probeRows is how many rows a submit reads to check the input.
const probeRows = 100

func jobsOff() error {
	return errs.New(errs.JobsOff, "this server keeps no batch jobs (no job store); start it with --data or --store")
}

func storeErr(err error) error {
	if e := errs.As(err); e.Code != errs.Internal {
		return e
	}
	e := errs.Wrap(errs.Unavailable, err, "the job store failed; retry")
	e.RetryAfter = time.Second
	return e
}

func notFound(id string) error {
	return errs.Field(errs.JobNotFound, "id", "no job %q; list your jobs with GET /v1/jobs", errs.Clip(id))
}

// Submit queues a job (see SubmitJob).
func (m *Manager) Submit(ctx context.Context, tenant string, s Submit) (Status, error) {
	st, _, err := m.SubmitJob(ctx, tenant, s)
	return st, err
}

// SubmitJob checks a submit and queues its job: the fields (Normalize),
// the version (the deployment's primary when none is named, pinned for
// the whole job), the tenant's right to it and its schema
// (Predictor.Version), the URIs, the input (opened, and its first rows
// read in its format: a missing file, a format that does not match, a
// CSV without the id column or a schema field are refused here), the
// output (refused when it or parts of it exist: nothing is overwritten).
// The full scan runs in the runner. created is false when s repeats the
// submit of an existing job with the same id and body: that job is the
// answer (HTTP 200 rather than 201).
func (m *Manager) SubmitJob(ctx context.Context, tenant string, s Submit) (st Status, created bool, err error) {
	if m.cfg.Store == nil {
		return Status{}, false, jobsOff()
	}
	s, err = Normalize(s)
	if err != nil {
		return Status{}, false, err
	}
	if s.ID != "" {
		if st, err := m.repeat(ctx, tenant, s); err != nil || st.ID != "" {
			return st, false, err
		}
	}
	spec, info, err := m.pin(ctx, tenant, s)
	if err != nil {
		return Status{}, false, err
	}
	if err := m.probe(ctx, spec, info.Fields); err != nil {
		return Status{}, false, err
	}
	now := m.cfg.Now()
	for attempt := 0; ; attempt++ {
		id := s.ID
		if id == "" {
			id = newID()
		}
		j := Job{ID: id, Spec: spec, State: Queued, Created: now, Updated: now}
		err := m.cfg.Store.Create(ctx, j)
		if errors.Is(err, ErrExists) {
			if s.ID != "" { // a submit of the same id won the race
				if st, err := m.repeat(ctx, tenant, s); err != nil || st.ID != "" {
					return st, false, err
				}
				continue
			}
			if attempt < 3 {
				continue
			}
		}
		if err != nil {
			return Status{}, false, storeErr(err)
		}
		m.cfg.Log.Info("job submitted", "job", id, "tenant", tenant, "model", spec.Model, "version", spec.Version,
			"input", spec.Input.URI, "output", spec.Output.URI)
		if m.cfg.Wake != nil {
			m.cfg.Wake()
		}
		return StatusOf(j, now), true, nil
	}
}

// repeat answers a submit whose id is taken: the job, when s is the
// submit it was made from; job_conflict otherwise. A zero Status and nil:
// the id is free.
func (m *Manager) repeat(ctx context.Context, tenant string, s Submit) (Status, error) {
	j, err := m.cfg.Store.Get(ctx, s.ID)
	if errors.Is(err, ErrNotFound) {
		return Status{}, nil
	}
	if err != nil {
		return Status{}, storeErr(err)
	}
	if !SameSubmit(s, tenant, j) {
		return Status{}, errs.Field(errs.JobConflict, "id", "job id %q is taken by another job; choose another id, or send the same submit again to get that job", s.ID)
	}
	return StatusOf(j, m.cfg.Now()), nil
}

// pin resolves the version and asks the predictor for it.
func (m *Manager) pin(ctx context.Context, tenant string, s Submit) (Spec, VersionInfo, error) {
	v := s.Version
	if v == 0 {
		if m.cfg.Resolve == nil {
			return Spec{}, VersionInfo{}, invalid("version", "this server cannot tell a deployment's primary; name the version")
		}
		var err error
		if v, err = m.cfg.Resolve(s.Model); err != nil {
			if e := errs.As(err); e.Code == errs.PermissionDenied {
				return Spec{}, VersionInfo{}, e
			}
			return Spec{}, VersionInfo{}, invalid("model", "model %q: %s; deploy it first or name a version", s.Model, errs.As(err).Message)
		}
	}
	if m.cfg.Predictor == nil {
		return Spec{}, VersionInfo{}, errs.New(errs.Internal, "jobs: no predictor")
	}
	info, err := m.cfg.Predictor.Version(ctx, tenant, s.Model, v)
	if err != nil {
		e := errs.As(err)
		switch {
		case e.Code == errs.PermissionDenied:
			return Spec{}, VersionInfo{}, e
		case ctx.Err() != nil:
			return Spec{}, VersionInfo{}, e
		}
		field := "model"
		if s.Version != 0 {
			field = "version"
		}
		return Spec{}, VersionInfo{}, invalid(field, "%s@%d cannot run a job: %s", s.Model, v, e.Message)
	}
	return Spec{Model: s.Model, Version: v, VersionID: info.VersionID, Input: s.Input, Output: s.Output,
		IDField: s.IDField, ChunkRows: s.ChunkRows, MaxErrorRate: *s.MaxErrorRate, Tenant: tenant}, info, nil
}

// probe checks the input and the output of a submit.
func (m *Manager) probe(ctx context.Context, sp Spec, fields []jobio.Field) error {
	if m.cfg.Objects == nil {
		return errs.New(errs.Internal, "jobs: no object stores")
	}
	inLoc, err := jobio.ParseURI(sp.Input.URI, m.cfg.JobsDir)
	if err != nil {
		return invalid("input.uri", "%v", err)
	}
	outLoc, err := jobio.ParseURI(sp.Output.URI, m.cfg.JobsDir)
	if err != nil {
		return invalid("output.uri", "%v", err)
	}
	if inLoc.Scheme == outLoc.Scheme && inLoc.Bucket == outLoc.Bucket && inLoc.Path == outLoc.Path {
		return invalid("output.uri", "the output is the input (%s); name another output", errs.Clip(sp.Output.URI))
	}
	in, err := m.cfg.Objects(inLoc)
	if err != nil {
		return invalid("input.uri", "%v", err)
	}
	out, err := m.cfg.Objects(outLoc)
	if err != nil {
		return invalid("output.uri", "%v", err)
	}
	if err := probeInput(ctx, in, inLoc, sp, fields); err != nil {
		return err
	}
	return m.probeOutput(ctx, out, outLoc, sp)
}

// probeInput opens the input, checks that its first bytes look like its
// format, and reads its first rows.
func probeInput(ctx context.Context, in jobio.ObjectStore, loc jobio.Location, sp Spec, fields []jobio.Field) error {
	format := sp.Input.Format
	if err := sniff(ctx, in, loc, format); err != nil {
		return err
	}
	obj, err := in.Open(ctx, loc.Path)
	if err != nil {
		return invalid("input.uri", "%v", err)
	}
	defer obj.Close()
	rd, err := jobio.NewReader(obj, format, jobio.Options{ChunkRows: min(sp.ChunkRows, probeRows), IDField: sp.IDField, Fields: fields, MaxLineBytes: LineBytes(sp.ChunkRows)})
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "no id column"):
			return invalid("idField", "%s: %s", errs.Clip(sp.Input.URI), msg)
		case strings.Contains(msg, "not a Parquet file"):
			return invalid("input.format", "%s: %s", errs.Clip(sp.Input.URI), msg)
		}
		return invalid("input.uri", "%s: %s", errs.Clip(sp.Input.URI), msg)
	}
	c, err := rd.Next(ctx)
	if err == io.EOF {
		return invalid("input.uri", "%s has no rows; check the file", errs.Clip(sp.Input.URI))
	}
	if err != nil {
		return invalid("input.uri", "%s: %v", errs.Clip(sp.Input.URI), err)
	}
	if len(c.Rows) > 0 || len(c.Errors) == 0 {
		return nil
	}
	// Not one good row in the first ones: the format or the id column is
	// wrong, not a row here and there.
	noID := true
	for _, e := range c.Errors {
		if e.Field != sp.IDField || e.ID != "" {
			noID = false
		}
	}
	first := c.Errors[0]
	if noID {
		return invalid("idField", "none of the first %d rows of %s has the id field %q; set idField to the input's id column", len(c.Errors), errs.Clip(sp.Input.URI), sp.IDField)
	}
	return invalid("input.format", "none of the first %d rows of %s reads as %s (line %d: %s); check input.format", len(c.Errors), errs.Clip(sp.Input.URI), format, first.Line, first.Message)
}

// sniff refuses an input whose first bytes are another format's.
func sniff(ctx context.Context, in jobio.ObjectStore, loc jobio.Location, format string) error {
	obj, err := in.Open(ctx, loc.Path)
	if err != nil {
		return invalid("input.uri", "%v", err)
	}
	defer obj.Close()
	var buf [512]byte
	n, err := io.ReadFull(obj, buf[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return invalid("input.uri", "%s: %v", errs.Clip(loc.URI), err)
	}
	head := buf[:n]
	parquet := len(head) >= 4 && string(head[:4]) == "PAR1"
	lead := strings.TrimLeft(strings.TrimPrefix(string(head), "\ufeff"), " \t\r\n")
	switch {
	case format == jobio.FormatParquet && !parquet:
		return invalid("input.format", "%s is not a Parquet file (it does not start with PAR1); set input.format to jsonl or csv", errs.Clip(loc.URI))
	case format != jobio.FormatParquet && parquet:
		return invalid("input.format", "%s is a Parquet file; set input.format to parquet", errs.Clip(loc.URI))
	case format == jobio.FormatCSV && strings.HasPrefix(lead, "{"):
		return invalid("input.format", "%s starts with a JSON object, not a CSV header; set input.format to jsonl", errs.Clip(loc.URI))
	}
	return nil
}

// probeOutput refuses an output that exists, holds parts, or that a
// queued or running job writes.
func (m *Manager) probeOutput(ctx context.Context, out jobio.ObjectStore, loc jobio.Location, sp Spec) error {
	obj, err := out.Open(ctx, loc.Path)
	if err == nil {
		obj.Close()
		return invalid("output.uri", "%s exists; nothing is overwritten: remove it or name another output", errs.Clip(sp.Output.URI))
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return invalid("output.uri", "%v", err)
	}
	for _, st := range []State{Queued, Running} {
		js, err := m.cfg.Store.List(ctx, ListOptions{State: st, Limit: 1000})
		if err != nil {
			return storeErr(err)
		}
		for _, j := range js {
			if j.Spec.Output.URI == sp.Output.URI {
				return invalid("output.uri", "job %s (%s) writes %s; wait for it or name another output", j.ID, j.State, errs.Clip(sp.Output.URI))
			}
		}
	}
	parts, err := out.Parts(ctx, loc.Path)
	if err != nil {
		return invalid("output.uri", "%v", err)
	}
	names, err := parts.Committed(ctx)
	if err != nil {
		return invalid("output.uri", "%v", err)
	}
	if len(names) > 0 {
		return invalid("output.uri", "%s.parts/ holds %d parts of an earlier job; remove them or name another output", errs.Clip(sp.Output.URI), len(names))
	}
	return nil
}

// Get returns a job the caller may see.
func (m *Manager) Get(ctx context.Context, tenant string, admin bool, id string) (Status, error) {
	j, err := m.get(ctx, tenant, admin, id)
	if err != nil {
		return Status{}, err
	}
	return StatusOf(j, m.cfg.Now()), nil
}

func (m *Manager) get(ctx context.Context, tenant string, admin bool, id string) (Job, error) {
	if m.cfg.Store == nil {
		return Job{}, jobsOff()
	}
	if !idRE.MatchString(id) {
		return Job{}, notFound(id)
	}
	j, err := m.cfg.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Job{}, notFound(id)
	}
	if err != nil {
		return Job{}, storeErr(err)
	}
	if !admin && j.Spec.Tenant != tenant {
		return Job{}, notFound(id) // another tenant's job is not there for this caller
	}
	return j, nil
}

// List returns the caller's jobs (an admin's: everyone's, or o.Tenant's),
// newest first.
func (m *Manager) List(ctx context.Context, tenant string, admin bool, o ListOptions) ([]Status, error) {
	if m.cfg.Store == nil {
		return nil, jobsOff()
	}
	if o.State != "" && !ValidState(o.State) {
		return nil, errs.Field(errs.InvalidArgument, "state", "%q is not a job state: queued, running, succeeded, failed or cancelled", errs.Clip(string(o.State)))
	}
	if o.Limit < 0 || o.Limit > 1000 {
		return nil, errs.Field(errs.InvalidArgument, "limit", "must be 1 to 1000, got %d", o.Limit)
	}
	if o.Before != "" && !idRE.MatchString(o.Before) {
		return nil, errs.Field(errs.InvalidArgument, "before", "%q is not a job id", errs.Clip(o.Before))
	}
	if !admin {
		o.Tenant = tenant
	}
	js, err := m.cfg.Store.List(ctx, o)
	if err != nil {
		return nil, storeErr(err)
	}
	now := m.cfg.Now()
	out := make([]Status, len(js))
	for i, j := range js {
		out[i] = StatusOf(j, now)
	}
	return out, nil
}

// Cancel asks a job to stop. A queued job is cancelled at once; a
// running one by its runners within a second (its committed parts kept,
// the job marked incomplete). A final job is job_conflict.
func (m *Manager) Cancel(ctx context.Context, tenant string, admin bool, id string) (Status, error) {
	j, err := m.get(ctx, tenant, admin, id)
	if err != nil {
		return Status{}, err
	}
	if Final(j.State) {
		return Status{}, errs.Field(errs.JobConflict, "id", "job %q is already %s; there is nothing to cancel", id, j.State)
	}
	j, err = m.cfg.Store.RequestCancel(ctx, id)
	if err != nil {
		return Status{}, storeErr(err)
	}
	if j.State == Queued {
		ok, err := m.cfg.Store.SetState(ctx, id, []State{Queued}, Cancelled, "cancelled before it started", false)
		if err != nil {
			return Status{}, storeErr(err)
		}
		if ok {
			if j, err = m.cfg.Store.Get(ctx, id); err != nil {
				return Status{}, storeErr(err)
			}
		}
	}
	if Final(j.State) && j.State != Cancelled {
		// It ended between the look and the request.
		return Status{}, errs.Field(errs.JobConflict, "id", "job %q is already %s; there is nothing to cancel", id, j.State)
	}
	m.cfg.Log.Info("job cancel requested", "job", id, "tenant", tenant)
	if m.cfg.Wake != nil {
		m.cfg.Wake()
	}
	return StatusOf(j, m.cfg.Now()), nil
}
