package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/docs"
)

// newOpenAPICmd prints the OpenAPI 3.1 description of the HTTP API: the
// one this binary embeds (docs/openapi.yaml), or with --server the one a
// running server serves at /openapi.json (for a generator:
// `sluice openapi --server URL > openapi.json`).
func newOpenAPICmd() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:   "openapi",
		Short: "Print the OpenAPI 3.1 description of the HTTP API (this binary's docs/openapi.yaml, or --server's /openapi.json)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if server == "" {
				_, err := cmd.OutOrStdout().Write(docs.OpenAPI)
				return err
			}
			hc := &http.Client{Timeout: 30 * time.Second}
			resp, err := hc.Get(strings.TrimRight(server, "/") + "/openapi.json")
			if err != nil {
				return fmt.Errorf("--server %s: %v", server, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				return fmt.Errorf("GET %s/openapi.json: %d %s", server, resp.StatusCode, strings.TrimSpace(string(b)))
			}
			_, err = io.Copy(cmd.OutOrStdout(), io.LimitReader(resp.Body, 64<<20))
			return err
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "a running server to ask (GET /openapi.json); default: the description this binary embeds")
	return cmd
}
