package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/jobs"
)

// stubJobs is a jobs.Service that keeps jobs in a map and notes its
// calls: the HTTP layer's tests (the Manager's are in internal/jobs).
type stubJobs struct {
	mu     sync.Mutex // guards the fields below
	jobs   map[string]jobs.Status
	calls  []string          // "submit acme", "get acme false job-1", …
	list   jobs.ListOptions  // the last List's options
	last   api.JobSubmit     // the last submit
	bodies map[string]string // a job's submit, for repeats
}

func newStubJobs() *stubJobs {
	return &stubJobs{jobs: map[string]jobs.Status{}, bodies: map[string]string{}}
}

func (s *stubJobs) note(f string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(a)
	s.calls = append(s.calls, f+" "+string(b))
}

func (s *stubJobs) SubmitJob(ctx context.Context, tenant string, sub jobs.Submit) (jobs.Status, bool, error) {
	s.note("submit", tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = sub
	if sub.Input.URI == "" {
		return jobs.Status{}, false, errs.Field(errs.JobInvalid, "input.uri", "an input is required")
	}
	id := sub.ID
	if id == "" {
		id = "job-" + string(rune('a'+len(s.jobs)))
	}
	b, _ := json.Marshal(sub)
	if prev, ok := s.bodies[id]; ok {
		if prev != string(b) {
			return jobs.Status{}, false, errs.Field(errs.JobConflict, "id", "job id %q is taken by another job", id)
		}
		return s.jobs[id], false, nil
	}
	st := jobs.Status{Job: jobs.Job{ID: id, State: jobs.Queued, Spec: jobs.Spec{Model: sub.Model, Version: 1, VersionID: sub.Model + "@1", Tenant: tenant}, Created: time.Unix(1, 0).UTC()}, ETASeconds: -1}
	s.jobs[id], s.bodies[id] = st, string(b)
	return st, true, nil
}

func (s *stubJobs) Submit(ctx context.Context, tenant string, sub jobs.Submit) (jobs.Status, error) {
	st, _, err := s.SubmitJob(ctx, tenant, sub)
	return st, err
}

func (s *stubJobs) Get(ctx context.Context, tenant string, admin bool, id string) (jobs.Status, error) {
	s.note("get", tenant, admin, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.jobs[id]
	if !ok || (!admin && st.Spec.Tenant != tenant) {
		return jobs.Status{}, errs.Field(errs.JobNotFound, "id", "no job %q", id)
	}
	return st, nil
}

func (s *stubJobs) List(ctx context.Context, tenant string, admin bool, o jobs.ListOptions) ([]jobs.Status, error) {
	s.note("list", tenant, admin)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = o
	var out []jobs.Status
	for _, st := range s.jobs {
		if (admin || st.Spec.Tenant == tenant) && (o.Tenant == "" || st.Spec.Tenant == o.Tenant) {
			out = append(out, st)
		}
	}
	return out, nil
}

func (s *stubJobs) Cancel(ctx context.Context, tenant string, admin bool, id string) (jobs.Status, error) {
	s.note("cancel", tenant, admin, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.jobs[id]
	if !ok || (!admin && st.Spec.Tenant != tenant) {
		return jobs.Status{}, errs.Field(errs.JobNotFound, "id", "no job %q", id)
	}
	if jobs.Final(st.State) {
		return jobs.Status{}, errs.Field(errs.JobConflict, "id", "job %q is already %s", id, st.State)
	}
	st.State, st.CancelRequested = jobs.Cancelled, true
	s.jobs[id] = st
	return st, nil
}

var _ jobs.Service = (*stubJobs)(nil)

func (s *stubJobs) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// TestJobsRoutes: the batch jobs' routes through the server to a
// jobs.Service: submit (201 with Location, a repeat 200, strict bodies,
// the tenant's right to the model checked before the service is asked),
// get, list (its parameters), cancel, methods and unknown routes.
func TestJobsRoutes(t *testing.T) {
	set, acme, ops, root := routeTenants(t)
	stub := newStubJobs()
	ts := newTestServer(t, Config{Tenants: set, Jobs: stub})
	key := map[string]string{"acme": acme, "ops": ops, "root": root}
	call := func(who, method, path, body string) result {
		h := map[string]string{"Authorization": "Bearer " + key[who]}
		if body != "" {
			h["Content-Type"] = "application/json"
		}
		return send(t, method, ts.URL+path, body, h)
	}
	good := `{"model":"fraud","input":{"uri":"file:in.jsonl"},"output":{"uri":"file:out.jsonl"},"id":"j1"}`

	r := call("acme", "POST", "/v1/jobs", good)
	if r.status != 201 || r.header.Get("Location") != "/v1/jobs/j1" {
		t.Fatalf("submit: %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	var st api.JobStatus
	if err := json.Unmarshal(r.body, &st); err != nil || st.ID != "j1" || st.State != "queued" || st.Spec.Tenant != "acme" || st.Spec.VersionID != "fraud@1" {
		t.Fatalf("submit body: %v %s", err, r.body)
	}
	if r := call("acme", "POST", "/v1/jobs", good); r.status != 200 || r.header.Get("Location") != "" {
		t.Fatalf("the same submit again: %d %q %s, want 200 without Location", r.status, r.header.Get("Location"), r.body)
	}

	for _, c := range []struct {
		name, who, method, path, body string
		status                        int
		code, field                   string
		reachesService                bool
	}{
		{"unknown field", "acme", "POST", "/v1/jobs", `{"model":"fraud","input":{"uri":"file:a.csv"},"output":{"uri":"file:b"},"chunkrows":5}`, 400, "invalid_argument", "chunkrows", false},
		{"unknown nested field", "acme", "POST", "/v1/jobs", `{"model":"fraud","input":{"uri":"file:a.csv","fmt":"csv"},"output":{"uri":"file:b"}}`, 400, "invalid_argument", "input.fmt", false},
		{"duplicate key", "acme", "POST", "/v1/jobs", `{"model":"fraud","model":"churn"}`, 400, "invalid_argument", "model", false},
		{"wrong type", "acme", "POST", "/v1/jobs", `{"model":"fraud","chunkRows":"10"}`, 400, "invalid_argument", "chunkRows", false},
		{"not an object", "acme", "POST", "/v1/jobs", `[1]`, 400, "invalid_argument", "", false},
		{"model of another tenant", "acme", "POST", "/v1/jobs", `{"model":"churn","input":{"uri":"file:a.csv"},"output":{"uri":"file:b.csv"}}`, 403, "permission_denied", "", false},
		{"bad model name", "acme", "POST", "/v1/jobs", `{"model":"Fraud!","input":{"uri":"file:a.csv"},"output":{"uri":"file:b.csv"}}`, 400, "invalid_argument", "model", false},
		{"the service's refusal", "acme", "POST", "/v1/jobs", `{"model":"fraud","output":{"uri":"file:b.csv"}}`, 400, "job_invalid", "input.uri", true},
		{"a taken id", "root", "POST", "/v1/jobs", `{"model":"fraud","input":{"uri":"file:x.jsonl"},"output":{"uri":"file:out.jsonl"},"id":"j1"}`, 409, "job_conflict", "id", true},
		{"a body past 1 MiB", "acme", "POST", "/v1/jobs", `{"model":"fraud","id":"` + strings.Repeat("x", 1<<20) + `"}`, 413, "payload_too_large", "", false},
		{"empty body", "acme", "POST", "/v1/jobs", ``, 400, "invalid_argument", "", false},
		{"PUT", "acme", "PUT", "/v1/jobs", ``, 405, "method_not_allowed", "", false},
		{"another tenant's job", "ops", "GET", "/v1/jobs/j1", ``, 404, "job_not_found", "id", true}, // (ops is an admin of fraud only)
		{"an admin sees it", "root", "GET", "/v1/jobs/j1", ``, 200, "", "", true},
		{"GET on cancel", "acme", "GET", "/v1/jobs/j1:cancel", ``, 405, "method_not_allowed", "", false},
		{"POST on a job", "acme", "POST", "/v1/jobs/j1", ``, 405, "method_not_allowed", "", false},
		{"unknown verb", "acme", "POST", "/v1/jobs/j1:pause", ``, 404, "not_found", "", false},
		{"sub-path", "acme", "GET", "/v1/jobs/j1/chunks", ``, 404, "not_found", "", false},
		{"no id", "acme", "GET", "/v1/jobs/", ``, 404, "not_found", "", false},
		{"unknown list parameter", "acme", "GET", "/v1/jobs?status=running", ``, 400, "invalid_argument", "status", false},
		{"bad limit", "acme", "GET", "/v1/jobs?limit=0", ``, 400, "invalid_argument", "limit", false},
		{"another tenant's list", "acme", "GET", "/v1/jobs?tenant=ops", ``, 403, "permission_denied", "tenant", false},
		{"cancel", "acme", "POST", "/v1/jobs/j1:cancel", ``, 200, "", "", true},
		{"cancel again", "acme", "POST", "/v1/jobs/j1:cancel", ``, 409, "job_conflict", "id", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := stub.callCount()
			r := call(c.who, c.method, c.path, c.body)
			if r.status != c.status || r.err.Code != c.code || r.err.Field != c.field {
				t.Fatalf("got %d %q field %q (%s); want %d %q field %q", r.status, r.err.Code, r.err.Field, r.err.Message, c.status, c.code, c.field)
			}
			if got := stub.callCount() > before; got != c.reachesService {
				t.Fatalf("reached the service: %v, want %v", got, c.reachesService)
			}
		})
	}

	if r := send(t, "POST", ts.URL+"/v1/jobs", good, map[string]string{"Authorization": "Bearer " + acme, "Content-Type": "text/plain"}); r.status != 415 {
		t.Fatalf("a text/plain submit: %d %s, want 415", r.status, r.body)
	}

	// List: the parameters reach the service; a tenant sees its own.
	r = call("root", "GET", "/v1/jobs?state=running&limit=7&before=j9&tenant=acme", "")
	var l api.JobList
	if err := json.Unmarshal(r.body, &l); r.status != 200 || err != nil || len(l.Jobs) != 1 {
		t.Fatalf("list: %d %v %s", r.status, err, r.body)
	}
	if want := (jobs.ListOptions{State: "running", Limit: 7, Before: "j9", Tenant: "acme"}); stub.list != want {
		t.Fatalf("list options %+v, want %+v", stub.list, want)
	}
	r = call("ops", "GET", "/v1/jobs", "")
	if err := json.Unmarshal(r.body, &l); r.status != 200 || err != nil || l.Jobs == nil || len(l.Jobs) != 0 || !strings.Contains(string(r.body), `"jobs":[]`) {
		t.Fatalf("ops's list: %d %v %s, want an empty list", r.status, err, r.body)
	}
	if stub.list.Limit != 100 {
		t.Fatalf("default limit %d, want 100", stub.list.Limit)
	}
}

// TestJobsOff: without a job service every jobs route is 503 jobs_off
// (after authentication), naming what to set.
func TestJobsOff(t *testing.T) {
	ts := newTestServer(t, Config{})
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"model":"churn"}`},
		{"GET", "/v1/jobs", ""},
		{"GET", "/v1/jobs/j1", ""},
		{"POST", "/v1/jobs/j1:cancel", ""},
	} {
		h := map[string]string{}
		if c.body != "" {
			h["Content-Type"] = "application/json"
		}
		r := send(t, c.method, ts.URL+c.path, c.body, h)
		if r.status != http.StatusServiceUnavailable || r.err.Code != "jobs_off" || !strings.Contains(r.err.Message, "--data") {
			t.Errorf("%s %s: %d %+v, want 503 jobs_off", c.method, c.path, r.status, r.err)
		}
	}
}
