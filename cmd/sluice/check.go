package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
)

func newCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check DIR",
		Short: "Validate a model package: model.yaml, artifact, feature vector, golden examples",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := modelpkg.ReadDir(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			m := p.Spec.Manifest
			fmt.Fprintf(out, "package   %s (%s)\nruntime   %s\nartifact  %s sha256:%s (%d bytes)\n", m.Name, args[0], m.Runtime, m.Artifact, p.ArtifactSHA, len(p.Artifact))
			if f := m.Input.Fields[0]; f.Type == "sequence" {
				fmt.Fprintf(out, "input     %s: token ids %q, 1 to %d per instance\n", m.Input.Schema, f.Name, f.MaxLength)
			} else {
				fmt.Fprintf(out, "input     %s, %d fields -> %d features:\n", m.Input.Schema, len(m.Input.Fields), p.Spec.Schema.Width())
				for i, f := range p.Spec.Schema.Features() {
					fmt.Fprintf(out, "  [%d] %s\n", i, f)
				}
			}
			fmt.Fprintf(out, "output    %s: %s\n", m.Output.Schema, strings.Join(p.Spec.OutputNames, ", "))
			model, err := hosting.LoadPackage(context.Background(), p)
			if err != nil {
				return fmt.Errorf("load %s: %w", args[0], err)
			}
			defer model.Close()
			fmt.Fprintf(out, "model     %s\n", model.Info().Detail)
			if d := m.Drift; d != nil {
				rows, err := control.ReferenceRows(p.Spec, p.Reference)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "drift     %s: %d reference rows, %d bins per feature\n", d.Reference, len(rows), d.Bins)
			}
			res, err := hosting.CompareGolden(context.Background(), p.Spec, model)
			if err != nil {
				return err
			}
			if len(p.Spec.Golden) == 0 {
				fmt.Fprintln(out, "golden    none declared: add golden examples so a broken load can never serve")
				return nil
			}
			failed := 0
			for _, r := range res {
				mark := "ok  "
				if !r.OK {
					mark = "FAIL"
					failed++
				}
				fmt.Fprintf(out, "golden    %s example %d %s = %.9g (expected %.9g, tolerance %g)\n", mark, r.Example, r.Output, r.Got, r.Want, r.Tolerance)
			}
			if failed > 0 {
				return fmt.Errorf("%d golden check(s) failed", failed)
			}
			fmt.Fprintln(out, "ok")
			return nil
		},
	}
}
