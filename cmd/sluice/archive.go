package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newArchiveCmd() *cobra.Command {
	var server, reason string
	cmd := &cobra.Command{
		Use:   "archive MODEL@N",
		Short: "Unload a version everywhere it runs and keep its record (state archived); refused while it holds traffic",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, n, err := parseModelVersion(args[0])
			if err != nil {
				return err
			}
			v, err := apiClient(cmd, server).Archive(cmd.Context(), m, n, reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s (%s)\n", v.ID, v.State, v.Reason)
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit trail)")
	return cmd
}

func newLoadCmd() *cobra.Command {
	var server, reason string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "load MODEL@N",
		Short: "Load a failed, archived or deleted version again (startup never retries them)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, n, err := parseModelVersion(args[0])
			if err != nil {
				return err
			}
			v, err := apiClient(cmd, server).Load(cmd.Context(), m, n, reason, wait)
			if err != nil {
				return err
			}
			line := fmt.Sprintf("%s %s", v.ID, v.State)
			if v.Reason != "" {
				line += ": " + v.Reason
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
			if v.State == "failed" {
				return fmt.Errorf("%s failed to load", v.ID)
			}
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit trail)")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "wait until the version is ready or failed, at most this long (0: return at once)")
	return cmd
}

func newDeleteCmd() *cobra.Command {
	var server, reason string
	cmd := &cobra.Command{
		Use:   "delete MODEL | MODEL@N",
		Short: "Delete a model with no traffic (its versions are archived and hidden from listings, its deployment ends), or one version that never served",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.Contains(args[0], "@") {
				m, n, err := parseModelVersion(args[0])
				if err != nil {
					return err
				}
				v, err := apiClient(cmd, server).DeleteVersion(cmd.Context(), m, n, reason)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s deleted: hidden from listings (%s)\n", v.ID, v.Reason)
				return nil
			}
			d, err := apiClient(cmd, server).DeleteModel(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			vs := make([]string, len(d.Versions))
			for i, n := range d.Versions {
				vs[i] = fmt.Sprintf("%s@%d", d.Model, n)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s deleted: %s archived and hidden\n", d.Model, strings.Join(vs, ", "))
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit trail)")
	return cmd
}
