package main

import (
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
		Short: "List worker processes: id, address, pid, state, versions with replicas and queue work, RSS, last heartbeat",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wl, err := newClient(server).Workers(cmd.Context())
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
			fmt.Fprintln(tw, "WORKER\tADDRESS\tPID\tSTATE\tRSS\tHEARTBEAT\tVERSIONS (replicas, queued)")
			for _, w := range wl.Workers {
				var vs []string
				for _, v := range w.Versions {
					s := fmt.Sprintf("%s %s r=%d q=%d", v.Version, v.State, v.ReadyReplicas, v.QueuedInstances)
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
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%dMiB\t%s\t%s\n", w.ID, w.Address, w.PID, state, w.RSSBytes>>20, beat, strings.Join(vs, ", "))
			}
			return tw.Flush()
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
