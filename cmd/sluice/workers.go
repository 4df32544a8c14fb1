package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/api"
)

func newWorkersCmd() *cobra.Command {
	var server, output string
	var asJSON, wide bool
	cmd := &cobra.Command{
		Use:   "workers [-o table|wide|json]",
		Short: "List worker processes: id, state, pid, memory used and budget, RSS, versions, last heartbeat (--wide: address, loads, evictions, and every version's tier, replicas, queue, memory, last use and load time)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case asJSON:
				output = "json"
			case wide && output == "table":
				output = "wide"
			}
			switch output {
			case "table", "wide", "json":
			default:
				return fmt.Errorf("-o %q: use table, wide or json", output)
			}
			wl, err := apiClient(cmd, server).Workers(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(wl)
			}
			return writeWorkers(cmd.OutOrStdout(), wl, time.Now(), output == "wide")
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table (a few columns), wide (every column and a row per version) or json")
	cmd.Flags().BoolVar(&wide, "wide", false, "same as -o wide")
	cmd.Flags().BoolVar(&asJSON, "json", false, "same as -o json")
	return cmd
}

// writeWorkers prints the workers as an aligned table, one line per
// worker; wide adds columns and a second table, one line per version held.
func writeWorkers(out io.Writer, wl *api.WorkerList, now time.Time, wide bool) error {
	if wl.Mode != "workers" {
		_, err := fmt.Fprintln(out, "no workers: replicas run in the server's process (start it with --workers N)")
		return err
	}
	ago := func(t time.Time, round time.Duration, never string) string {
		if t.IsZero() {
			return never
		}
		return now.Sub(t).Round(round).String() + " ago"
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "WORKER\tSTATE\tPID\tADDRESS\tMEMORY (used/budget)\tRSS\tVERSIONS\tLOADS\tEVICTIONS\tHEARTBEAT")
	} else {
		fmt.Fprintln(tw, "WORKER\tSTATE\tPID\tMEMORY (used/budget)\tRSS\tVERSIONS\tHEARTBEAT")
	}
	for _, w := range wl.Workers {
		state := w.State
		if w.Reason != "" {
			state += " (" + w.Reason + ")"
		}
		ready := 0
		for _, v := range w.Versions {
			if v.State == "ready" {
				ready++
			}
		}
		versions := fmt.Sprintf("%d", len(w.Versions))
		if ready != len(w.Versions) {
			versions += fmt.Sprintf(" (%d ready)", ready)
		}
		mem := mib(w.MemoryUsedBytes) + "/" + mib(w.MemoryBudgetBytes)
		beat := ago(w.LastHeartbeat, time.Millisecond, "-")
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", w.ID, state, w.PID, w.Address, mem, mib(w.RSSBytes), versions, w.Loads, w.Evictions, beat)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", w.ID, state, w.PID, mem, mib(w.RSSBytes), versions, beat)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !wide {
		return nil
	}
	fmt.Fprintln(out)
	fmt.Fprintln(tw, "WORKER\tVERSION\tTIER\tSTATE\tREPLICAS\tQUEUED\tMEMORY\tLAST USE\tLOAD TIME\tLOADS\tEVICTIONS")
	for _, w := range wl.Workers {
		for _, v := range w.Versions {
			state := v.State
			if v.Reason != "" {
				state += " (" + v.Reason + ")"
			}
			mem := mib(v.MemoryBytes)
			if !v.MemoryMeasured {
				mem += " (estimate)"
			}
			load := strconv.FormatFloat(v.LoadTimeMs, 'f', 1, 64) + "ms"
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%d\n", w.ID, v.Version, cmp.Or(v.Tier, "-"), state, v.ReadyReplicas, v.QueuedInstances,
				mem, ago(v.LastUsed, time.Second, "never"), load, v.Loads, v.Evictions)
		}
	}
	return tw.Flush()
}

// mib renders bytes in MiB with one decimal under 10 MiB.
func mib(n int64) string {
	if n < 10<<20 {
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%dMiB", n>>20)
}
