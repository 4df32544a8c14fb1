package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newWorkersCmd() *cobra.Command {
	var server string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List worker processes: id, pid, state, memory budget and use, loads and evictions, RSS, last heartbeat, versions with tier, memory, replicas, queue work, last use, load time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wl, err := apiClient(cmd, server).Workers(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(wl)
			}
			if wl.Mode != "workers" {
				fmt.Fprintln(cmd.OutOrStdout(), "no workers: replicas run in the server's process (start it with --workers N)")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKER\tADDRESS\tPID\tSTATE\tMEMORY (used/budget)\tLOADS\tEVICTIONS\tRSS\tHEARTBEAT\tVERSIONS (tier, state, replicas, queued, memory, last use, load time, loads/evictions)")
			for _, w := range wl.Workers {
				var vs []string
				for _, v := range w.Versions {
					s := fmt.Sprintf("%s %s %s r=%d q=%d mem=%s", v.Version, cmp.Or(v.Tier, "-"), v.State, v.ReadyReplicas, v.QueuedInstances, mib(v.MemoryBytes))
					if !v.MemoryMeasured {
						s += "~"
					}
					used := "never"
					if !v.LastUsed.IsZero() {
						used = time.Since(v.LastUsed).Round(time.Second).String() + " ago"
					}
					s += fmt.Sprintf(" used=%s load=%s l/e=%d/%d", used, (time.Duration(v.LoadTimeMs * float64(time.Millisecond))).Round(time.Millisecond), v.Loads, v.Evictions)
					vs = append(vs, s)
				}
				state := w.State
				if w.Reason != "" {
					state += " (" + w.Reason + ")"
				}
				beat := "-"
				if !w.LastHeartbeat.IsZero() {
					beat = time.Since(w.LastHeartbeat).Round(time.Millisecond).String() + " ago"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s/%s\t%d\t%d\t%s\t%s\t%s\n", w.ID, w.Address, w.PID, state, mib(w.MemoryUsedBytes), mib(w.MemoryBudgetBytes),
					w.Loads, w.Evictions, mib(w.RSSBytes), beat, strings.Join(vs, ", "))
			}
			return tw.Flush()
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// mib renders bytes in MiB with one decimal under 10 MiB.
func mib(n int64) string {
	if n < 10<<20 {
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%dMiB", n>>20)
}
