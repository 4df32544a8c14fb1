package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/tenant"
)

// jobCreator is what a jobs.Service may offer to tell a new job (201)
// from the repeat of a submit with the same id and body (200): the
// Manager does.
type jobCreator interface {
	SubmitJob(ctx context.Context, tenant string, s jobs.Submit) (st jobs.Status, created bool, err error)
}

// jobsOff is the answer of every /v1/jobs route on a server without a
// job service.
func jobsOff() error {
	return errs.New(errs.JobsOff, "this server keeps no batch jobs (no job store); start it with --data or --store (docs/jobs.md)")
}

// jobAdmin says whether tn sees every tenant's jobs: an admin of every
// model (models: ["*"]). An admin of some models sees its own jobs only,
// as any tenant does: another tenant's jobs name models, inputs and
// outputs it may not know of.
func jobAdmin(tn *tenant.Tenant) bool { return tn.Admin && tn.AllModels() }

// jobsRoot serves /v1/jobs: POST submits, GET lists.
func (s *Server) jobsRoot(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodHead:
		return s.listJobs(w, r, tn.Name, jobAdmin(tn))
	default:
		w.Header().Set("Allow", "GET, POST")
		return errs.New(errs.MethodNotAllowed, "%s %s is not allowed; use GET or POST", r.Method, r.URL.Path)
	}
	if s.cfg.Jobs == nil {
		return jobsOff()
	}
	var sub api.JobSubmit
	if err := decodeJSON(w, r, &sub); err != nil {
		return err
	}
	if sub.Model != "" { // (a missing model is the service's error, naming the field)
		if err := checkModelName(sub.Model); err != nil {
			return err
		}
		if err := tn.Check(sub.Model); err != nil {
			return err // a job runs with its submitter's permissions: none on this model, no job
		}
	}
	var st jobs.Status
	created := true
	if c, ok := s.cfg.Jobs.(jobCreator); ok {
		st, created, err = c.SubmitJob(r.Context(), tn.Name, sub)
	} else {
		st, err = s.cfg.Jobs.Submit(r.Context(), tn.Name, sub)
	}
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/jobs/"+url.PathEscape(st.ID))
	}
	writeJSON(w, status, st)
	return nil
}

// jobListParams are the query parameters GET /v1/jobs reads.
var jobListParams = map[string]bool{"state": true, "limit": true, "before": true, "tenant": true}

// listJobs serves GET /v1/jobs?state=&limit=&before=&tenant=: the
// caller's jobs (an admin's: every tenant's, or ?tenant='s), newest
// first; before=ID pages on from the last job of a page.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, tenant string, admin bool) error {
	q := r.URL.Query()
	for k := range q {
		if !jobListParams[k] {
			return errs.Field(errs.InvalidArgument, errs.Clip(k), "GET /v1/jobs takes no parameter %q; it takes state, limit, before and tenant", errs.Clip(k))
		}
	}
	if s.cfg.Jobs == nil {
		return jobsOff()
	}
	limit, err := pageLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	o := jobs.ListOptions{State: jobs.State(q.Get("state")), Limit: limit, Before: q.Get("before")}
	if t := q.Get("tenant"); t != "" {
		if len(t) > 128 {
			return errs.Field(errs.InvalidArgument, "tenant", "must be at most 128 characters")
		}
		if !admin && t != tenant {
			return errs.Field(errs.PermissionDenied, "tenant", "tenant %q may not list the jobs of tenant %q (needs admin: true in the tenants file)", tenant, errs.Clip(t))
		}
		o.Tenant = t
	}
	list, err := s.cfg.Jobs.List(r.Context(), tenant, admin, o)
	if err != nil {
		return err
	}
	if list == nil {
		list = []jobs.Status{}
	}
	writeJSON(w, http.StatusOK, api.JobList{Jobs: list})
	return nil
}

// jobsOne serves /v1/jobs/{id} (GET) and /v1/jobs/{id}:cancel (POST).
func (s *Server) jobsOne(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	rest := strings.TrimPrefix(r.URL.Path, "/v1/jobs/")
	id, verb, hasVerb := strings.Cut(rest, ":")
	if id == "" || strings.Contains(id, "/") || (hasVerb && verb != "cancel") {
		return errs.New(errs.NotFound, "no route for %s %s: a job is GET /v1/jobs/{id} or POST /v1/jobs/{id}:cancel (see docs/api.md)", r.Method, errs.Clip(r.URL.Path))
	}
	want := http.MethodGet
	if hasVerb {
		want = http.MethodPost
	}
	if r.Method != want && !(want == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", want)
		return errs.New(errs.MethodNotAllowed, "%s %s is not allowed; use %s", r.Method, errs.Clip(r.URL.Path), want)
	}
	if s.cfg.Jobs == nil {
		return jobsOff()
	}
	var st jobs.Status
	if hasVerb {
		st, err = s.cfg.Jobs.Cancel(r.Context(), tn.Name, jobAdmin(tn), id)
	} else {
		st, err = s.cfg.Jobs.Get(r.Context(), tn.Name, jobAdmin(tn), id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}
