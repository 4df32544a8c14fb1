package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/sluiceml/sluice/internal/api"
)

// PostOutcomes posts a batch of outcomes (POST /v1/outcomes).
func (c *Client) PostOutcomes(ctx context.Context, b api.OutcomeBatch) (*api.OutcomeResult, error) {
	var out api.OutcomeResult
	if err := c.sendJSON(ctx, http.MethodPost, "/v1/outcomes", b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StartExperiment starts an experiment on model: PUT
// /v1/deployments/{model} with "experiment" (the split set, then the
// experiment's first figures).
func (c *Client) StartExperiment(ctx context.Context, model string, spec api.ExperimentSpec, reason string) (*api.Experiment, error) {
	var out api.Experiment
	if err := c.sendJSON(ctx, http.MethodPut, depPath(model), api.SetTraffic{Experiment: &spec, Reason: reason}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Experiment is model's latest experiment with up to history earlier
// refreshes.
func (c *Client) Experiment(ctx context.Context, model string, history int) (*api.Experiment, error) {
	var out api.Experiment
	if err := c.getJSON(ctx, depPath(model)+"/experiment?history="+strconv.Itoa(history), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Experiments returns every running experiment the caller may read, by
// model name (GET /v1/experiments).
func (c *Client) Experiments(ctx context.Context) ([]api.Experiment, error) {
	var l api.ExperimentList
	if err := c.getJSON(ctx, "/v1/experiments", &l); err != nil {
		return nil, err
	}
	return l.Experiments, nil
}

// StopExperiment stops model's running experiment.
func (c *Client) StopExperiment(ctx context.Context, model string) (*api.Experiment, error) {
	var out api.Experiment
	if err := c.sendJSON(ctx, http.MethodPost, depPath(model)+"/experiment:stop", struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
