package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/drift"
)

func newDriftCmd() *cobra.Command {
	var server string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "drift MODEL | MODEL@N",
		Short: "A version's drift report: each feature's and output's PSI over the window against the reference sample (default: the serving version)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := apiClient(cmd, server)
			model, n := args[0], 0
			if strings.Contains(args[0], "@") {
				var err error
				if model, n, err = parseModelVersion(args[0]); err != nil {
					return err
				}
			} else {
				m, err := c.Model(cmd.Context(), model)
				if err != nil {
					return err
				}
				if m.ServingVersion == nil {
					return fmt.Errorf("%s has no serving version: name one, like sluice drift %s@1", model, model)
				}
				n = *m.ServingVersion
			}
			var rep drift.Report
			if err := c.Drift(cmd.Context(), model, n, &rep); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return writeDrift(cmd.OutOrStdout(), fmt.Sprintf("%s@%d", model, n), rep)
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report's JSON")
	return cmd
}

// writeDrift prints a drift report as a table, one line per feature
// column and output.
func writeDrift(out io.Writer, id string, rep drift.Report) error {
	flagged := 0
	for _, d := range append(append([]drift.Drift(nil), rep.Features...), rep.Outputs...) {
		if d.Flagged {
			flagged++
		}
	}
	fmt.Fprintf(out, "%s: %d rows from %s to %s (%s); %d of %d columns drifted (PSI > %s)\n", id, rep.Samples,
		rep.Start.UTC().Format(time.RFC3339), rep.End.UTC().Format(time.RFC3339), rep.End.Sub(rep.Start).Round(time.Second),
		flagged, len(rep.Features)+len(rep.Outputs), strconv.FormatFloat(drift.FlagPSI, 'f', -1, 64))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COLUMN\tPSI\tDRIFT\tSAMPLES\tMISSING\tREF MISSING")
	for _, d := range append(append([]drift.Drift(nil), rep.Features...), rep.Outputs...) {
		psi, mark := strconv.FormatFloat(d.PSI, 'f', 4, 64), "no"
		switch {
		case !d.Enough:
			psi, mark = "-", "not enough samples"
		case d.Flagged:
			mark = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", d.Name, psi, mark, d.Samples, share(d.MissingShare), share(d.RefMissingShare))
	}
	return tw.Flush()
}

// share prints a share as a percentage with one decimal.
func share(x float64) string {
	return strconv.FormatFloat(100*x, 'f', 1, 64) + "%"
}
