package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
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
			var table *recordTable // its widths fixed by the first page, for --follow
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
					table = newRecordTable(rs)
					fmt.Fprintln(w, table.header())
				}
				for i := len(rs) - 1; i >= 0; i-- { // oldest first on screen
					fmt.Fprintln(w, table.row(rs[i]))
				}
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

// recordTime is the records' time column: microseconds always shown, so
// every time is as wide as the others.
const recordTime = "2006-01-02T15:04:05.000000Z07:00"

// recordColumns are the records table's headers.
var recordColumns = []string{"TIME", "REQUEST", "TENANT", "VERSION", "OUTCOME", "LATENCY", "ATTEMPTS"}

// recordTable prints records in columns whose widths are set once, from
// the header and the first page, with room to spare for what --follow
// prints later (a longer value shifts only its own line).
type recordTable struct{ widths []int }

// recordFloor is each column's least width: a default request id is 24
// hex digits, an outcome code like deadline_infeasible 19 characters.
var recordFloor = []int{len("2006-01-02T15:04:05.000000Z"), 24, 8, 10, 19, 9, 8}

func newRecordTable(first []api.Record) *recordTable {
	t := &recordTable{widths: make([]int, len(recordColumns))}
	for i, h := range recordColumns {
		t.widths[i] = max(len(h), recordFloor[i])
	}
	for _, r := range first {
		for i, c := range recordCells(r) {
			t.widths[i] = max(t.widths[i], len(c))
		}
	}
	return t
}

func recordCells(r api.Record) []string {
	return []string{r.CreatedAt.UTC().Format(recordTime), r.RequestID, r.Tenant, orDash(r.ModelVersion), r.Outcome,
		strconv.FormatFloat(r.LatencyMs, 'f', 2, 64) + "ms", strconv.Itoa(r.Attempts)}
}

func (t *recordTable) header() string { return t.line(recordColumns) }

func (t *recordTable) row(r api.Record) string { return t.line(recordCells(r)) }

func (t *recordTable) line(cells []string) string {
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", max(t.widths[i]-len(c), 0)+2))
		}
	}
	return b.String()
}
