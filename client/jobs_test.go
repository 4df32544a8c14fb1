package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluiceml/sluice/internal/api"
)

// TestJobCalls: each job call's method, path, query and body, and what
// the client makes of the answers (201 created, 200 a repeat, an error).
func TestJobCalls(t *testing.T) {
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/jobs":
			var s api.JobSubmit
			json.Unmarshal(b, &s)
			if s.ID == "again" {
				w.WriteHeader(200)
			} else {
				w.WriteHeader(201)
			}
			json.NewEncoder(w).Encode(api.JobStatus{Job: api.Job{ID: s.ID, State: "queued"}})
		case r.URL.Path == "/v1/jobs":
			json.NewEncoder(w).Encode(api.JobList{Jobs: []api.JobStatus{{Job: api.Job{ID: "a"}}, {Job: api.Job{ID: "b"}}}})
		case r.URL.Path == "/v1/jobs/gone":
			w.WriteHeader(404)
			w.Write([]byte(`{"error":{"code":"job_not_found","field":"id","message":"no job \"gone\""}}`))
		default:
			json.NewEncoder(w).Encode(api.JobStatus{Job: api.Job{ID: "j1", State: "cancelled"}})
		}
	}))
	defer ts.Close()
	c, ctx := New(ts.URL), context.Background()
	rate := 0.1
	st, created, err := c.SubmitJob(ctx, api.JobSubmit{Model: "m", ID: "new", MaxErrorRate: &rate})
	if err != nil || !created || st.ID != "new" {
		t.Fatalf("submit: %+v %v %v", st, created, err)
	}
	if _, created, err := c.SubmitJob(ctx, api.JobSubmit{Model: "m", ID: "again"}); err != nil || created {
		t.Fatalf("repeat: created %v, %v", created, err)
	}
	if js, err := c.Jobs(ctx, JobsQuery{State: "running", Limit: 5, Before: "x", Tenant: "acme"}); err != nil || len(js) != 2 {
		t.Fatalf("list: %v %v", js, err)
	}
	if _, err := c.Jobs(ctx, JobsQuery{}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.CancelJob(ctx, "j1"); err != nil || st.State != "cancelled" {
		t.Fatalf("cancel: %+v %v", st, err)
	}
	_, err = c.Job(ctx, "gone")
	if ce, ok := err.(*Error); !ok || ce.Status != 404 || ce.Detail.Code != "job_not_found" {
		t.Fatalf("get of a missing job: %v", err)
	}
	want := []string{
		`POST /v1/jobs {"model":"m","input":{"uri":"","format":""},"output":{"uri":"","format":""},"maxErrorRate":0.1,"id":"new"}`,
		`POST /v1/jobs {"model":"m","input":{"uri":"","format":""},"output":{"uri":"","format":""},"id":"again"}`,
		`GET /v1/jobs?before=x&limit=5&state=running&tenant=acme `,
		`GET /v1/jobs `,
		`POST /v1/jobs/j1:cancel `,
		`GET /v1/jobs/gone `,
	}
	if len(got) != len(want) {
		t.Fatalf("calls %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d: %s\nwant      %s", i, got[i], want[i])
		}
	}
}
