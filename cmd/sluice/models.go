package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newModelsCmd() *cobra.Command {
	var server string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List models, their versions and the version that serves each",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := apiClient(cmd, server).Models(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(ms)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MODEL\tSERVING\tVERSIONS\tINPUT SCHEMA")
			for _, m := range ms {
				serving := "-"
				if m.ServingVersion != nil {
					serving = fmt.Sprintf("%s@%d", m.Name, *m.ServingVersion)
				}
				var vs []string
				for _, v := range m.Versions {
					vs = append(vs, fmt.Sprintf("%d:%s", v.Version, v.State))
				}
				if m.InvalidPackage != nil {
					vs = append(vs, "package:failed")
				}
				if len(vs) == 0 {
					vs = []string{"-"}
				}
				schema := "-"
				if m.Input != nil {
					schema = m.Input.Schema
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, serving, strings.Join(vs, " "), schema)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, m := range ms {
				for _, v := range m.Versions {
					if v.State == "failed" && v.Reason != "" {
						fmt.Fprintf(cmd.OutOrStdout(), "\n%s@%d failed: %s\n", m.Name, v.Version, v.Reason)
					}
				}
				if p := m.InvalidPackage; p != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "\n%s: package %s is invalid and was not published:\n  %s\n", m.Name, p.Dir, strings.ReplaceAll(p.Error, "\n", "\n  "))
				}
			}
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
