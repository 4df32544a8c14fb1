package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/runtime/onnx"
	"github.com/sluiceml/sluice/internal/scaffold"
)

func newInitCmd() *cobra.Command {
	var name, out, rt, onnxLib string
	var categories []string
	var rows string
	dummies := true
	cmd := &cobra.Command{
		Use:   "init ARTIFACT [--name NAME] [--out DIR] [--categories FIELD=A,B,...]",
		Short: "Write a starting model.yaml from what an artifact (XGBoost, scikit-learn export, linear JSON, ONNX) says about itself",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src := args[0]
			if onnxLib != "" {
				onnx.SetLibraryPath(onnxLib)
			}
			data, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Dir(src)
			}
			abs, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			if name == "" {
				name = scaffold.ModelName(filepath.Base(abs))
			}
			man := filepath.Join(out, modelpkg.ManifestFile)
			if _, err := os.Stat(man); err == nil {
				return fmt.Errorf("%s exists; sluice init never overwrites it (remove it, or choose another --out)", man)
			}
			m, err := scaffold.Describe(src, data, rt)
			if err != nil {
				return err
			}
			if dummies && m.Runtime == "xgboost" {
				m.Fields = scaffold.GroupDummies(m.Fields)
			}
			for _, c := range categories {
				field, values, ok := strings.Cut(c, "=")
				if !ok || field == "" || values == "" {
					return fmt.Errorf("--categories %q: want FIELD=A,B,... (the field's categories in the order of the training frame's df[FIELD].cat.categories)", c)
				}
				if err := m.SetValues(field, strings.Split(values, ",")); err != nil {
					return err
				}
			}
			if rows != "" {
				f, err := os.Open(rows)
				if err != nil {
					return fmt.Errorf("--rows: %w", err)
				}
				gs, err := scaffold.ReadRows(rows, f, m)
				f.Close()
				if err != nil {
					return err
				}
				m.Golden, m.GoldenRows = gs, filepath.Base(rows)
			}
			art := filepath.Base(src)
			w := cmd.OutOrStdout()
			yml := scaffold.YAML(name, art, filepath.Base(src), m, true)
			p, err := modelpkg.FromFiles(out, map[string][]byte{modelpkg.ManifestFile: yml, art: data})
			if err != nil {
				return fmt.Errorf("the generated model.yaml is invalid (nothing written): %w", err)
			}
			if m.Golden != nil && m.GoldenRows == "" {
				// The artifact carries its producer's own outputs
				// (scikit-learn's): this runtime must give them.
				if err := checkGolden(cmd.Context(), p); err != nil {
					return fmt.Errorf("%s: nothing written: %w", src, err)
				}
			}
			// Else run the artifact on the all-zero golden instance to
			// fill in what it answers.
			model, err := hosting.LoadPackage(cmd.Context(), p)
			if err == nil && (m.Golden == nil || m.GoldenRows != "") {
				yml, _, err = hosting.UpdateGolden(cmd.Context(), man, p, model)
			}
			if model != nil {
				model.Close()
			}
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "sluice: no golden example written: the artifact could not be run here: %v\n", err)
				yml = scaffold.YAML(name, art, filepath.Base(src), m, false)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			dst := filepath.Join(out, art)
			if old, err := os.ReadFile(dst); err == nil {
				if !bytes.Equal(old, data) {
					return fmt.Errorf("%s exists with other content; sluice init never overwrites it (choose another --out)", dst)
				}
			} else if err := os.WriteFile(dst, data, 0o644); err != nil {
				return err
			}
			f, err := os.OpenFile(man, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			if _, err := f.Write(yml); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(w, "wrote %s: runtime %s, %d input fields, outputs %v\n", man, m.Runtime, len(m.Fields), m.Outputs)
			fmt.Fprintf(w, "next: edit it (names, bounds, optional fields, preprocessing, golden examples you know), then sluice check %s\n", out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "model name (default: the output folder's name)")
	f.StringVar(&out, "out", "", "package folder to write model.yaml (and a copy of the artifact) to (default: the artifact's folder)")
	f.StringVar(&rt, "runtime", "", "xgboost, sklearn, linear or onnx (default: told by the artifact's content)")
	f.StringArrayVar(&categories, "categories", nil, "FIELD=A,B,...: the categories of a categorical XGBoost feature, in the order of the training frame's df[FIELD].cat.categories (XGBoost before 3.1 does not save them; repeat for each field)")
	f.StringVar(&rows, "rows", "", "a CSV file with a header (the training frame's columns): its first 5 rows become the golden examples, their outputs computed by running the artifact (default: one all-zero example)")
	f.BoolVar(&dummies, "dummies", true, "read consecutive int or bool XGBoost features named PREFIX_LEVEL (pandas.get_dummies columns) as one category field PREFIX with an onehot step (--dummies=false: a field each)")
	f.StringVar(&onnxLib, "onnxruntime-lib", "", "path of ONNX Runtime's shared library, to compute an ONNX model's golden example (as for sluice serve)")
	return cmd
}
