package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/api"
)

func newRecordsCmd() *cobra.Command {
	var server, model, outcome, since, tenantName string
	var version, limit int
	var follow, asJSON bool
	cmd := &cobra.Command{
		Use:   "records [--model M] [--follow]",
		Short: "List prediction records (one per logical request, retries included): the newest --limit, printed oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := apiClient(cmd, server)
			q := url.Values{}
			set := func(k, v string) {
				if v != "" {
					q.Set(k, v)
				}
			}
			set("model", model)
			set("outcome", outcome)
			set("since", since)
			set("tenant", tenantName)
			if version > 0 {
				q.Set("version", strconv.Itoa(version))
			}
			if limit <= 0 {
				return fmt.Errorf("--limit must be at least 1, got %d", limit)
			}
			w := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			// fetch gets the newest --limit records, following the
			// server's pages (at most 1000 records each) by nextCursor.
			fetch := func() ([]api.Record, error) {
				var out []api.Record
				q.Del("cursor")
				for len(out) < limit {
					q.Set("limit", strconv.Itoa(min(limit-len(out), 1000)))
					var rs api.Records
					r, err := c.Do(cmd.Context(), "GET", "/v1/records?"+q.Encode(), nil, nil)
					if err != nil {
						return nil, err
					}
					if err := json.Unmarshal(r.Body, &rs); err != nil {
						return nil, err
					}
					out = append(out, rs.Records...)
					if rs.NextCursor == "" {
						break
					}
					q.Set("cursor", rs.NextCursor)
				}
				return out, nil
			}
			print := func(rs []api.Record, header bool) {
				if asJSON {
					enc := json.NewEncoder(w)
					for i := len(rs) - 1; i >= 0; i-- {
						enc.Encode(rs[i])
					}
					return
				}
				if header {
					fmt.Fprintln(tw, "TIME\tREQUEST\tTENANT\tVERSION\tOUTCOME\tLATENCY\tATTEMPTS")
				}
				for i := len(rs) - 1; i >= 0; i-- { // oldest first on screen
					r := rs[i]
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2fms\t%d\n", r.CreatedAt.Format(time.RFC3339Nano), r.RequestID, r.Tenant, orDash(r.ModelVersion), r.Outcome, r.LatencyMs, r.Attempts)
				}
				tw.Flush()
			}
			rs, err := fetch()
			if err != nil {
				return err
			}
			print(rs, true)
			if !follow {
				return nil
			}
			last := time.Now().UTC()
			if len(rs) > 0 {
				last = rs[0].CreatedAt
			}
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-cmd.Context().Done():
					return nil
				case <-tick.C:
				}
				q.Set("since", last.Add(time.Microsecond).Format(time.RFC3339Nano))
				rs, err := fetch()
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "sluice:", err)
					continue
				}
				if len(rs) > 0 {
					last = rs[0].CreatedAt
					print(rs, false)
				}
			}
		},
	}
	serverFlag(cmd, &server)
	f := cmd.Flags()
	f.StringVar(&model, "model", "", "only this model")
	f.IntVar(&version, "version", 0, "only this version")
	f.StringVar(&tenantName, "tenant", "", "only this tenant's records (admin keys only)")
	f.StringVar(&outcome, "outcome", "", "only this outcome (ok or an error code)")
	f.StringVar(&since, "since", "", "only records at or after this time (RFC 3339)")
	f.IntVar(&limit, "limit", 50, "at most this many")
	f.BoolVar(&follow, "follow", false, "keep printing new records")
	f.BoolVar(&asJSON, "json", false, "one JSON record per line")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
