package main

import (
	"github.com/spf13/cobra"
)

// newJobCmd is `sluice job`: batch prediction jobs (docs/jobs.md). Its
// subcommands: submit, status, list, cancel (this file) and run (the
// runner process, jobrun.go).
func newJobCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Batch prediction jobs: score every row of a file with one model version (docs/jobs.md)",
		Args:  cobra.NoArgs,
	}
	for _, sub := range jobCommands {
		cmd.AddCommand(sub())
	}
	return cmd
}

// jobCommands build the subcommands of `sluice job`. A file that adds one
// appends its constructor in an init (jobrun.go: `sluice job run`), so
// the files change no shared line; cobra lists them by name.
var jobCommands []func() *cobra.Command
