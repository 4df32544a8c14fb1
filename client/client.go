// Package client is the Go client of Sluice's public HTTP API
// (docs/api.md, docs/openapi.yaml): models and versions, predictions,
// deployments and rollouts, records, batch jobs, workers. The bodies are
// the API's wire types under this package's names (Model, Version,
// PredictResponse, …: aliases of internal/api's). The CLI, the
// benchmark tool and the end-to-end tests use it; it holds no server
// logic.
//
// A Client retries what it safely can (RetryPolicy): a refusal with
// Retry-After after the wait the server asked for, and a call that got no
// answer only when repeating it cannot do the work twice (a GET, or a
// predict call with an idempotency key, X-Request-Id), all within the
// context's deadline. Non-2xx answers are *Error, with the server's code
// (docs/errors.md).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/api"
)

// Client talks to one Sluice server. Set its fields before the first
// call; a Client is then safe for concurrent use.
type Client struct {
	Base   string // "http://127.0.0.1:8080"
	APIKey string // sent as Authorization: Bearer (sluice serve --tenants)
	HTTP   *http.Client
	Retry  RetryPolicy // which failed calls are sent again (New: DefaultRetry)
}

// New returns a client for base ("http://127.0.0.1:8080") that retries
// with DefaultRetry.
func New(base string) *Client {
	return &Client{Base: strings.TrimSuffix(base, "/"), HTTP: &http.Client{Timeout: 10 * time.Minute}, Retry: DefaultRetry}
}

// Error is an API error response.
type Error struct {
	Status     int
	Detail     api.ErrorDetail
	RetryAfter string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%d %s", e.Status, e.Detail.Code)
	if e.Detail.Field != "" {
		s += " " + e.Detail.Field
	}
	return s + ": " + e.Detail.Message
}

// Response is a raw API response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends a request and returns the raw response; non-2xx answers are
// returned as *Error along with the response. A failed call is sent
// again as c.Retry says (the same headers, so the same X-Request-Id, on
// every attempt; a body only when it can be read again: a *bytes.Reader,
// *bytes.Buffer or *strings.Reader); a retryable failure it gives up on
// is a *RetryError.
func (c *Client) Do(ctx context.Context, method, path string, header http.Header, body io.Reader) (*Response, error) {
	return c.do(ctx, method, path, header, body, c.Retry)
}

func (c *Client) do(ctx context.Context, method, path string, header http.Header, body io.Reader, policy RetryPolicy) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	deadline, _ := ctx.Deadline()
	for n := 1; ; n++ {
		r, err := c.once(req)
		if err == nil || policy.Attempts == 0 {
			return r, err
		}
		d := policy.Decide(Attempt{N: n, Idempotent: idempotent(req), Err: err, Now: time.Now(), Deadline: deadline, Jitter: rand.Float64()})
		if !d.Retry {
			if d.Why != "" {
				return r, &RetryError{Err: err, Attempts: n, Reason: d.Reason, Why: d.Why}
			}
			return r, err
		}
		if req.Body != nil && req.GetBody == nil {
			return r, err // a body that cannot be read again
		}
		if policy.OnRetry != nil {
			policy.OnRetry(n, err, d.Wait)
		}
		t := time.NewTimer(d.Wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return r, &RetryError{Err: err, Attempts: n, Reason: GaveUpDeadline, Why: fmt.Sprintf("gave up while waiting to retry: %v", ctx.Err())}
		case <-t.C:
		}
		next := req.Clone(ctx)
		if req.GetBody != nil {
			if next.Body, err = req.GetBody(); err != nil {
				return r, err
			}
		}
		req = next
	}
}

// once sends req once.
func (c *Client) once(req *http.Request) (*Response, error) {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read response: %w", req.Method, req.URL, err)
	}
	r := &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
		var eb api.ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error.Code != "" {
			e.Detail = eb.Error
		} else {
			e.Detail = api.ErrorDetail{Code: "http_" + fmt.Sprint(resp.StatusCode), Message: strings.TrimSpace(string(b))}
		}
		return r, e
	}
	return r, nil
}

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	return c.getJSONMethod(ctx, http.MethodGet, path, v)
}

// getJSONMethod sends a request without a body and decodes the answer.
func (c *Client) getJSONMethod(ctx context.Context, method, path string, v any) error {
	r, err := c.Do(ctx, method, path, nil, nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(r.Body, v)
}

// Models lists the models.
func (c *Client) Models(ctx context.Context) ([]api.Model, error) {
	var l api.ModelList
	err := c.getJSON(ctx, "/v1/models", &l)
	return l.Models, err
}

// Model describes one model.
func (c *Client) Model(ctx context.Context, name string) (*api.Model, error) {
	var m api.Model
	if err := c.getJSON(ctx, "/v1/models/"+url.PathEscape(name), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Version describes one model version.
func (c *Client) Version(ctx context.Context, name string, n int) (*api.Version, error) {
	var v api.Version
	if err := c.getJSON(ctx, fmt.Sprintf("/v1/models/%s/versions/%d", url.PathEscape(name), n), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// PredictRaw sends a predict body as is. version 0 means the serving version.
func (c *Client) PredictRaw(ctx context.Context, model string, version int, body []byte, requestID string) (*Response, error) {
	path := "/v1/models/" + url.PathEscape(model) + ":predict"
	if version > 0 {
		path = fmt.Sprintf("/v1/models/%s/versions/%d:predict", url.PathEscape(model), version)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if requestID != "" {
		h.Set("X-Request-Id", requestID)
	}
	return c.Do(ctx, http.MethodPost, path, h, bytes.NewReader(body))
}

// Predict sends instances and decodes the response.
func (c *Client) Predict(ctx context.Context, model string, version int, body []byte) (*api.PredictResponse, error) {
	r, err := c.PredictRaw(ctx, model, version, body, "")
	if err != nil {
		return nil, err
	}
	var p api.PredictResponse
	if err := json.Unmarshal(r.Body, &p); err != nil {
		return nil, fmt.Errorf("decode predict response: %w", err)
	}
	return &p, nil
}

// Push uploads a package archive (.tar.gz). wait > 0 asks the server to
// answer once the version is ready or failed (at most wait).
func (c *Client) Push(ctx context.Context, model string, archive []byte, wait time.Duration) (*api.PublishResponse, error) {
	path := "/v1/models/" + url.PathEscape(model) + "/versions"
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	r, err := c.Do(ctx, http.MethodPost, path, http.Header{"Content-Type": {"application/gzip"}}, bytes.NewReader(archive))
	if err != nil {
		return nil, err
	}
	var p api.PublishResponse
	if err := json.Unmarshal(r.Body, &p); err != nil {
		return nil, fmt.Errorf("decode publish response: %w", err)
	}
	return &p, nil
}

// Ready reports the server's readiness (a server not ready answers 503
// with its problems: that answer is returned, not retried).
func (c *Client) Ready(ctx context.Context) (*api.Readiness, error) {
	r, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil, NoRetry)
	if r == nil {
		return nil, err
	}
	var rd api.Readiness
	if jerr := json.Unmarshal(r.Body, &rd); jerr != nil {
		return nil, jerr
	}
	return &rd, nil
}

func versionPath(model string, n int) string {
	return fmt.Sprintf("/v1/models/%s/versions/%d", url.PathEscape(model), n)
}

// Archive unloads model@n everywhere it runs and keeps its record, state
// archived. The server refuses a version that holds traffic.
func (c *Client) Archive(ctx context.Context, model string, n int, reason string) (*api.Version, error) {
	var v api.Version
	if err := c.sendJSON(ctx, http.MethodPost, versionPath(model, n)+":archive", api.Change{Reason: reason}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Load loads model@n again (failed, archived or deleted). wait > 0 asks the
// server to answer once it is ready or failed (at most wait).
func (c *Client) Load(ctx context.Context, model string, n int, reason string, wait time.Duration) (*api.Version, error) {
	path := versionPath(model, n) + ":load"
	if wait > 0 {
		path += "?wait=" + wait.String()
	}
	var v api.Version
	if err := c.sendJSON(ctx, http.MethodPost, path, api.Change{Reason: reason}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Drift decodes model@n's drift report (GET …/versions/{n}/drift) into v.
func (c *Client) Drift(ctx context.Context, model string, n int, v any) error {
	return c.getJSON(ctx, versionPath(model, n)+"/drift", v)
}

// DeleteVersion deletes model@n, a version that never served (it is hidden
// from listings). The server refuses any other version.
func (c *Client) DeleteVersion(ctx context.Context, model string, n int, reason string) (*api.Version, error) {
	var v api.Version
	if err := c.sendJSON(ctx, http.MethodDelete, versionPath(model, n), api.Change{Reason: reason}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteModel archives every version of model and hides them from
// listings. The server refuses a model with recent traffic or a rollout.
func (c *Client) DeleteModel(ctx context.Context, model, reason string) (*api.DeletedModel, error) {
	var d api.DeletedModel
	if err := c.sendJSON(ctx, http.MethodDelete, "/v1/models/"+url.PathEscape(model), api.Change{Reason: reason}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// PriorityHeader lowers a predict call's serving class (the server's
// server.PriorityHeader).
const PriorityHeader = "Sluice-Priority"

// PredictBatch sends a predict body at the batch class (Sluice-Priority:
// batch: the rows take only what online work leaves idle), as the remote
// runner of `sluice job run` does.
func (c *Client) PredictBatch(ctx context.Context, model string, version int, body []byte, requestID string) (*Response, error) {
	path := fmt.Sprintf("/v1/models/%s/versions/%d:predict", url.PathEscape(model), version)
	h := http.Header{"Content-Type": {"application/json"}, PriorityHeader: {"batch"}}
	if requestID != "" {
		h.Set("X-Request-Id", requestID)
	}
	return c.Do(ctx, http.MethodPost, path, h, bytes.NewReader(body))
}
