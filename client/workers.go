package client

import (
	"context"

	"github.com/sluiceml/sluice/internal/api"
)

// Workers lists the server's worker processes (GET /v1/workers).
func (c *Client) Workers(ctx context.Context) (*api.WorkerList, error) {
	var out api.WorkerList
	if err := c.getJSON(ctx, "/v1/workers", &out); err != nil {
		return nil, err
	}
	return &out, nil
}
