package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/sluiceml/sluice/internal/api"
)

func (c *Client) sendJSON(ctx context.Context, method, path string, body, out any) error {
	_, err := c.sendJSONStatus(ctx, method, path, body, out)
	return err
}

// sendJSONStatus is sendJSON that returns the answer's status too.
func (c *Client) sendJSONStatus(ctx context.Context, method, path string, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	r, err := c.Do(ctx, method, path, http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	if out != nil {
		return r.Status, json.Unmarshal(r.Body, out)
	}
	return r.Status, nil
}

func depPath(model string) string { return "/v1/deployments/" + url.PathEscape(model) }

// Deployments returns every deployment the caller may read, by model
// name (GET /v1/deployments).
func (c *Client) Deployments(ctx context.Context) ([]api.Deployment, error) {
	var l api.DeploymentList
	if err := c.getJSON(ctx, "/v1/deployments", &l); err != nil {
		return nil, err
	}
	return l.Deployments, nil
}

// Deployment returns model's deployment.
func (c *Client) Deployment(ctx context.Context, model string) (*api.Deployment, error) {
	var d api.Deployment
	if err := c.getJSON(ctx, depPath(model), &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// SetTraffic replaces model's targets.
func (c *Client) SetTraffic(ctx context.Context, model string, body api.SetTraffic) (*api.Deployment, error) {
	var d api.Deployment
	if err := c.sendJSON(ctx, http.MethodPut, depPath(model), body, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// StartRollout starts a rollout.
func (c *Client) StartRollout(ctx context.Context, model string, body api.StartRollout) (*api.Rollout, error) {
	var r api.Rollout
	if err := c.sendJSON(ctx, http.MethodPost, depPath(model)+"/rollout", body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Rollout returns model's rollout status.
func (c *Client) Rollout(ctx context.Context, model string) (*api.Rollout, error) {
	var r api.Rollout
	if err := c.getJSON(ctx, depPath(model)+"/rollout", &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// RolloutAction pauses, resumes, aborts or promotes model's rollout.
func (c *Client) RolloutAction(ctx context.Context, model, action, reason string) (*api.Rollout, error) {
	var r api.Rollout
	if err := c.sendJSON(ctx, http.MethodPost, depPath(model)+"/rollout:"+action, api.RolloutAction{Reason: reason}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Rollback sends 100 % to the baseline (to 0) or to version to.
func (c *Client) Rollback(ctx context.Context, model string, to int, reason string) (*api.Deployment, error) {
	var d api.Deployment
	if err := c.sendJSON(ctx, http.MethodPost, depPath(model)+":rollback", api.RolloutAction{To: to, Reason: reason}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// History returns model's whole policy history and audit events, following
// the pages (nextCursor) of GET /v1/deployments/{model}/history.
func (c *Client) History(ctx context.Context, model string) (*api.History, error) {
	var all api.History
	for cursor := ""; ; {
		path := depPath(model) + "/history?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var h api.History
		if err := c.getJSON(ctx, path, &h); err != nil {
			return nil, err
		}
		all.Model = h.Model
		all.Policies = append(all.Policies, h.Policies...)
		all.Events = append(all.Events, h.Events...)
		if h.NextCursor == "" || h.NextCursor == cursor {
			return &all, nil
		}
		cursor = h.NextCursor
	}
}

// PolicyAt returns the policy in force at t.
func (c *Client) PolicyAt(ctx context.Context, model string, t time.Time) (*api.Policy, error) {
	var p api.Policy
	if err := c.getJSON(ctx, depPath(model)+"/history?at="+url.QueryEscape(t.Format(time.RFC3339Nano)), &p); err != nil {
		return nil, err
	}
	return &p, nil
}
