package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/scripts"
)

// maxExportStderr bounds what is kept of the exporter's error output.
const maxExportStderr = 64 << 10

func newExportSklearnCmd() *cobra.Command {
	var out, python, rows, name string
	var examples int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "export-sklearn MODEL.joblib|MODEL.pkl --out DIR [--rows data.csv] [--python PATH]",
		Short: "Export a fitted scikit-learn model with your own Python into a Sluice package (model.json + model.yaml)",
		Long: `export-sklearn runs Sluice's exporter (scripts/sluice_export_sklearn.py, built into
this binary) with your Python and scikit-learn on your model file, then writes a
starting model.yaml as sluice init does: the pipeline's fields with their types
and preprocessing steps, the outputs, and golden examples from --rows with
scikit-learn's own outputs, checked against Sluice's sklearn runtime.

Loading a pickle (a joblib file is one) runs the code it names: only export
files you trust. The Sluice server never loads a pickle; it serves the JSON.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src := args[0]
			if out == "" {
				return fmt.Errorf("--out DIR is required (the package folder to write)")
			}
			if examples < 1 || examples > 64 {
				return fmt.Errorf("--examples must be between 1 and 64, got %d", examples)
			}
			if _, err := os.Stat(src); err != nil {
				return fmt.Errorf("model file: %w", err)
			}
			if rows != "" {
				if _, err := os.Stat(rows); err != nil {
					return fmt.Errorf("--rows: %w", err)
				}
			}
			if _, err := os.Stat(filepath.Join(out, modelpkg.ManifestFile)); err == nil {
				return fmt.Errorf("%s exists; sluice export-sklearn never overwrites it (remove it, or choose another --out)", filepath.Join(out, modelpkg.ManifestFile))
			}
			tmp, err := os.MkdirTemp("", "sluice-export-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			art, err := runExporter(cmd.Context(), python, timeout, src, tmp, rows, examples)
			if err != nil {
				return err
			}
			// What sluice init does with the artifact, into --out.
			ic := newInitCmd()
			ic.SetContext(cmd.Context())
			ic.SetOut(cmd.OutOrStdout())
			ic.SetErr(cmd.ErrOrStderr())
			set := map[string]string{"out": out, "runtime": "sklearn"}
			if name != "" {
				set["name"] = name
			}
			for k, v := range set {
				if err := ic.Flags().Set(k, v); err != nil {
					return err
				}
			}
			return ic.RunE(ic, []string{art})
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "package folder to write model.json and model.yaml to (made if absent; an existing model.yaml is never overwritten)")
	f.StringVar(&python, "python", "python3", "the Python that has your scikit-learn (the one you trained with)")
	f.StringVar(&rows, "rows", "", "CSV with the training frame's columns: the fields' types and the golden examples (default: zeros)")
	f.IntVar(&examples, "examples", 8, "how many rows of --rows become golden examples (1-64)")
	f.StringVar(&name, "name", "", "model name (default: the output folder's name)")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "how long the exporter may run")
	return cmd
}

// runExporter runs the embedded exporter with python (the script on its
// standard input) and returns the artifact it wrote in dir.
func runExporter(ctx context.Context, python string, timeout time.Duration, model, dir, rows string, examples int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := []string{"-", model, "--out", dir, "--examples", strconv.Itoa(examples)}
	if rows != "" {
		args = append(args, "--rows", rows)
	}
	c := exec.CommandContext(ctx, python, args...)
	c.Stdin = bytes.NewReader(scripts.ExportSklearn)
	var stderr boundedBuffer
	c.Stderr = &stderr
	c.Stdout = &stderr
	err := c.Run()
	msg := strings.TrimSpace(stderr.String())
	if ctx.Err() == context.DeadlineExceeded {
		return "", fmt.Errorf("the exporter (%s) ran longer than --timeout %s", python, timeout)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if strings.Contains(msg, "No module named 'sklearn'") || strings.Contains(msg, "No module named 'joblib'") || strings.Contains(msg, "No module named 'numpy'") {
			return "", fmt.Errorf("%s has no scikit-learn (%s): pass --python with the Python you trained with", python, lastLine(msg))
		}
		if msg == "" {
			msg = ee.String()
		}
		return "", fmt.Errorf("export of %s failed: %s", model, msg)
	}
	if err != nil {
		return "", fmt.Errorf("cannot run the exporter with --python %s: %w", python, err)
	}
	art := filepath.Join(dir, "model.json")
	if _, err := os.Stat(art); err != nil {
		return "", fmt.Errorf("the exporter wrote no %s: %s", art, msg)
	}
	return art, nil
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// boundedBuffer keeps the first maxExportStderr bytes written to it.
type boundedBuffer struct{ b bytes.Buffer }

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if room := maxExportStderr - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (w *boundedBuffer) String() string { return w.b.String() }

// checkGolden runs a package's golden examples on its model.
func checkGolden(ctx context.Context, p *modelpkg.Package) error {
	m, err := hosting.LoadPackage(ctx, p)
	if err != nil {
		return err
	}
	defer m.Close()
	return hosting.CheckGolden(ctx, p.Spec.Manifest.Name, p.Spec, m)
}
