package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluiceml/sluice/internal/api"
)

func jobPath(id string) string { return "/v1/jobs/" + url.PathEscape(id) }

// SubmitJob submits a batch job. created is false when the server
// answered with an existing job: a repeat of the same submit (same id
// and body), which is how a client retries a submit safely.
func (c *Client) SubmitJob(ctx context.Context, s api.JobSubmit) (st *api.JobStatus, created bool, err error) {
	var out api.JobStatus
	status, err := c.sendJSONStatus(ctx, http.MethodPost, "/v1/jobs", s, &out)
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// Job returns one batch job's status.
func (c *Client) Job(ctx context.Context, id string) (*api.JobStatus, error) {
	var st api.JobStatus
	if err := c.getJSON(ctx, jobPath(id), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// JobsQuery filters Jobs; zero fields filter nothing.
type JobsQuery struct {
	State  string // queued, running, succeeded, failed, cancelled
	Limit  int    // 0: the server's default (100); at most 1000
	Before string // the last job id of the previous page
	Tenant string // an admin's: that tenant's jobs only
}

// Jobs lists batch jobs, newest first: the caller's, or an admin's
// every tenant's.
func (c *Client) Jobs(ctx context.Context, q JobsQuery) ([]api.JobStatus, error) {
	v := url.Values{}
	if q.State != "" {
		v.Set("state", q.State)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Before != "" {
		v.Set("before", q.Before)
	}
	if q.Tenant != "" {
		v.Set("tenant", q.Tenant)
	}
	path := "/v1/jobs"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var l api.JobList
	if err := c.getJSON(ctx, path, &l); err != nil {
		return nil, err
	}
	return l.Jobs, nil
}

// CancelJob asks a job to stop: a queued one is cancelled at once, a
// running one within a second, its committed parts kept.
func (c *Client) CancelJob(ctx context.Context, id string) (*api.JobStatus, error) {
	var st api.JobStatus
	if err := c.getJSONMethod(ctx, http.MethodPost, jobPath(id)+":cancel", &st); err != nil {
		return nil, err
	}
	return &st, nil
}
