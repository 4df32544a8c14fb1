package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/runtime"
)

func newCheckCmd() *cobra.Command {
	var updateGolden bool
	cmd := &cobra.Command{
		Use:   "check DIR [--update-golden]",
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
			if fs := p.Spec.Schema.SequenceFields(); len(fs) == 1 {
				fmt.Fprintf(out, "input     %s: token ids %q, 1 to %d per instance\n", m.Input.Schema, fs[0].Name, fs[0].MaxLength)
			} else if len(fs) > 1 {
				fmt.Fprintf(out, "input     %s: %d sequence inputs of one length, 1 to %d per instance:\n", m.Input.Schema, len(fs), fs[0].MaxLength)
				for i, f := range fs {
					what := "token ids"
					if f.Mask {
						what = "mask (0 or 1, padded with 0)"
					}
					dt := f.DType
					if dt == "" {
						dt = "int64"
					}
					fmt.Fprintf(out, "  [%d] %s %s [batch, seq]: %s\n", i, f.Name, dt, what)
				}
			} else {
				fmt.Fprintf(out, "input     %s, %d fields -> %d features:\n", m.Input.Schema, len(m.Input.Fields), p.Spec.Schema.Width())
				for i, f := range p.Spec.Schema.Features() {
					fmt.Fprintf(out, "  [%d] %s\n", i, f)
				}
			}
			fmt.Fprintf(out, "output    %s: %s\n", m.Output.Schema, strings.Join(p.Spec.OutputNames, ", "))
			pc, err := control.CheckPackage(cmd.Context(), p, control.CheckOptions{SkipGolden: updateGolden})
			defer pc.Close()
			printCheck(out, p, pc)
			printWarnings(cmd.ErrOrStderr(), pc)
			if err != nil {
				return err
			}
			if updateGolden {
				return writeGolden(cmd.Context(), out, args[0], p, pc.Model)
			}
			if len(p.Spec.Golden) == 0 {
				fmt.Fprintln(out, "golden    none declared: add golden examples so a broken load can never serve")
				return nil
			}
			fmt.Fprintln(out, "ok")
			return nil
		},
	}
	cmd.Flags().BoolVar(&updateGolden, "update-golden", false, "rewrite the golden examples' expected outputs in model.yaml with what the artifact answers now (only the numbers change)")
	return cmd
}

// printCheck prints what CheckPackage found, as far as it went.
func printCheck(out io.Writer, p *modelpkg.Package, pc *control.PackageCheck) {
	if pc.Model == nil {
		return
	}
	fmt.Fprintf(out, "model     %s\n", pc.Detail)
	if pc.Ordered {
		fmt.Fprintf(out, "order     the schema's columns are the artifact's feature names, in order\n")
	}
	if d := p.Spec.Manifest.Drift; d != nil && pc.ReferenceRows > 0 {
		fmt.Fprintf(out, "drift     %s: %d reference rows, %d bins per feature\n", d.Reference, pc.ReferenceRows, d.Bins)
	}
	for _, r := range pc.Golden {
		mark := "ok  "
		if !r.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "golden    %s example %d %s = %s (expected %s, tolerance %s)\n", mark, r.Example, r.Output,
			r.GotText(), r.WantText(), control.FormatNumber(r.Tolerance))
	}
}

// printWarnings prints what CheckPackage passed but wants fixed.
func printWarnings(w io.Writer, pc *control.PackageCheck) {
	for _, m := range pc.Warnings {
		fmt.Fprintf(w, "warning: %s\n", m)
	}
}

// writeGolden rewrites DIR/model.yaml's expected golden outputs with what
// model answers, printing old -> new per example and output.
func writeGolden(ctx context.Context, out io.Writer, dir string, p *modelpkg.Package, model runtime.Model) error {
	file := filepath.Join(dir, modelpkg.ManifestFile)
	b, res, err := hosting.UpdateGolden(ctx, file, p, model)
	if err != nil {
		return err
	}
	changed := 0
	for _, r := range res {
		now := modelpkg.FormatFloat32(r.Got)
		if float32(r.Got) == float32(r.Want) {
			fmt.Fprintf(out, "golden    example %d %s = %s (unchanged)\n", r.Example, r.Output, now)
			continue
		}
		changed++
		fmt.Fprintf(out, "golden    example %d %s: %s -> %s\n", r.Example, r.Output, control.FormatNumber(r.Want), now)
	}
	if changed == 0 {
		fmt.Fprintf(out, "%s: the golden examples already hold what the artifact answers; nothing written\n", file)
		return nil
	}
	if err := writeFileAtomic(file, b); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %d expected value(s) updated\n", file, changed)
	return nil
}

// writeFileAtomic replaces name with data, keeping its mode: a crash leaves
// either the old file or the new one.
func writeFileAtomic(name string, data []byte) error {
	st, err := os.Stat(name)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(st.Mode().Perm())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
