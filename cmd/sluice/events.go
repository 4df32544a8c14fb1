package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/client"
	"github.com/sluiceml/sluice/internal/api"
)

func newEventsCmd() *cobra.Command {
	var server, output, models, last string
	cmd := &cobra.Command{
		Use:   "events [--models a,b] [--last-event-id ID] [-o text|json]",
		Short: "Follow the server's changes as they happen (GET /v1/events): traffic, rollouts, load states, workers, audit entries; one line per event",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: use text or json", output)
			}
			var names []string
			if models != "" {
				names = strings.Split(models, ",")
			}
			out := cmd.OutOrStdout()
			opened := func() { fmt.Fprintf(cmd.ErrOrStderr(), "following the events of %s (Ctrl-C to stop)\n", server) }
			return apiClient(cmd, server).Events(cmd.Context(), client.EventsQuery{Models: names, LastEventID: last, Opened: opened}, func(e client.StreamEvent) error {
				if output == "json" {
					b, _ := json.Marshal(e)
					_, err := fmt.Fprintf(out, "%s\n", b)
					return err
				}
				_, err := fmt.Fprintln(out, eventLine(e))
				return err
			})
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&models, "models", "", "only these models' events (comma-separated)")
	cmd.Flags().StringVar(&last, "last-event-id", "", "replay the events after this id first (the id of the last event seen)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text (one line per event) or json (one {\"id\",\"event\",\"data\"} object per line)")
	return cmd
}

// eventLine is one event as a line: its id, kind and what changed.
func eventLine(e client.StreamEvent) string {
	var what string
	switch e.Kind {
	case api.EventKindDeployment:
		var d api.EventDeployment
		if json.Unmarshal(e.Data, &d) == nil {
			ws := make([]string, 0, len(d.Weights))
			for _, w := range d.Weights {
				if w.Shadow {
					ws = append(ws, fmt.Sprintf("%s@%d shadow", d.Model, w.Version))
				} else {
					ws = append(ws, fmt.Sprintf("%s@%d %d%%", d.Model, w.Version, w.Weight))
				}
			}
			what = fmt.Sprintf("%s policy %d: %s by %s", d.Model, d.Policy, strings.Join(ws, ", "), d.Actor)
			if d.Reason != "" {
				what += ": " + d.Reason
			}
			if d.FromElsewhere {
				what += " (another gateway)"
			}
		}
	case api.EventKindRollout:
		var r api.EventRollout
		if json.Unmarshal(e.Data, &r) == nil {
			what = fmt.Sprintf("%s@%d %s step %d/%d at %d%%", r.Model, r.Candidate, r.State, r.Step, r.Of, r.Percent)
			var gs []string
			for _, g := range r.Gates {
				mark := "pass"
				switch {
				case !g.Ready:
					mark = "waiting"
				case !g.Pass:
					mark = "FAIL"
				}
				gs = append(gs, fmt.Sprintf("%s %.4g/%.4g %s", g.Name, g.Observed, g.Limit, mark))
			}
			if len(gs) > 0 {
				what += "; gates: " + strings.Join(gs, ", ")
			}
			if r.Reason != "" {
				what += ": " + r.Reason
			}
		}
	case api.EventKindVersion:
		var v api.EventVersion
		if json.Unmarshal(e.Data, &v) == nil {
			what = v.ID + " " + v.State
			if v.Reason != "" {
				what += ": " + v.Reason
			}
		}
	case api.EventKindWorker:
		var w api.EventWorker
		if json.Unmarshal(e.Data, &w) == nil {
			what = "worker " + w.Worker + " " + w.State
			if w.Reason != "" {
				what += ": " + w.Reason
			}
		}
	case api.EventKindAudit:
		var a api.EventAudit
		if json.Unmarshal(e.Data, &a) == nil {
			what = fmt.Sprintf("%s %s by %s: %s", a.Model, a.Action, a.Actor, a.What)
			if a.Reason != "" {
				what += " (" + a.Reason + ")"
			}
		}
	case api.EventKindReset:
		var r api.EventReset
		if json.Unmarshal(e.Data, &r) == nil {
			what = r.Reason
		}
	}
	if what == "" {
		what = string(e.Data)
	}
	id := e.ID
	if id == "" {
		id = "-"
	}
	return fmt.Sprintf("%s %-10s %s", id, e.Kind, what)
}

func newStatsCmd() *cobra.Command {
	var server, output, window string
	cmd := &cobra.Command{
		Use:   "stats MODEL [--window 1h] [-o table|json]",
		Short: "A model's requests, errors, p50 and p99 per version and minute over the last window (GET /v1/models/{name}/stats)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: use table or json", output)
			}
			st, err := apiClient(cmd, server).Stats(cmd.Context(), args[0], window)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return writeStats(cmd.OutOrStdout(), st)
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&window, "window", "1h", "how far back: a whole number of minutes from 5m to 24h")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// writeStats prints one row per version and minute, then a total per
// version.
func writeStats(out io.Writer, st *api.ModelStats) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "VERSION\tMINUTE (UTC)\tREQUESTS\tERRORS\tP50 MS\tP99 MS\t")
	for _, v := range st.Versions {
		var n, errs int64
		for _, p := range v.Points {
			n, errs = n+p.Count, errs+p.Errors
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.3g\t%.3g\t\n", v.Version, p.T.UTC().Format("2006-01-02 15:04"), p.Count, p.Errors, p.P50Ms, p.P99Ms)
		}
		fmt.Fprintf(tw, "%s\tlast %s\t%d\t%d\t\t\t\n", v.Version, st.Window, n, errs)
	}
	return tw.Flush()
}
