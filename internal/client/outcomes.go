package client

import (
	"context"
	"net/http"

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
