package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/tenant"
)

func newTenantCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tenant", Short: "Manage tenants' API keys"}
	cmd.AddCommand(&cobra.Command{
		Use:   "key",
		Short: "Print a new random API key once, with the hash line for the tenants file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, hash := tenant.NewKey()
			fmt.Fprintf(cmd.OutOrStdout(), "key:  %s\n      (shown once: give it to the tenant; Sluice stores only its hash)\nline: keys: [\"%s\"]\n", key, hash)
			return nil
		},
	})
	return cmd
}
