package main

import (
	"bytes"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/modelpkg"
)

func newPushCmd() *cobra.Command {
	var server string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "push DIR",
		Short: "Check a model package as `sluice check` does, then publish it to a server as a new immutable version",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := modelpkg.ReadDir(args[0])
			if err != nil {
				return err
			}
			// The checks of `sluice check`, here before the upload (the
			// server runs them again before it stores the version).
			pc, err := control.CheckPackage(cmd.Context(), p, control.CheckOptions{})
			pc.Close()
			printWarnings(cmd.ErrOrStderr(), pc)
			if err != nil {
				return fmt.Errorf("%w; nothing was pushed (`sluice check %s` shows every check)", err, args[0])
			}
			var buf bytes.Buffer
			if err := p.WriteTarGz(&buf); err != nil {
				return err
			}
			res, err := apiClient(cmd, server).Push(cmd.Context(), p.Spec.Manifest.Name, buf.Bytes(), wait)
			if err != nil {
				return err
			}
			v := res.Version
			what := "published"
			if !res.Created {
				what = "already published (identical content)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s sha256:%s state=%s\n", v.ID, what, v.ArtifactSHA256, v.State)
			if v.State == "failed" {
				return fmt.Errorf("%s failed: %s", v.ID, v.Reason)
			}
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "wait until the version is ready or failed (0: return at once)")
	return cmd
}
