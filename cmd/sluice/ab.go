package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/api"
)

func newABCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "ab", Short: "A/B experiments: a sticky split of two versions compared on an outcome (docs/experiments.md)"}
	cmd.AddCommand(newABStartCmd(), newABStatusCmd(), newABStopCmd(), newABListCmd())
	return cmd
}

func newABStartCmd() *cobra.Command {
	var server, reason string
	var spec api.ExperimentSpec
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "start MODEL --a V --b V --metric NAME",
		Short: "Split MODEL's traffic between versions a and b by routing key and compare them on an outcome metric",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ex, err := apiClient(cmd, server).StartExperiment(cmd.Context(), args[0], spec, reason)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(ex)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "experiment %d on %s: %s@%d %d %% / %s@%d %d %%, metric %s\n", ex.ID, ex.Model, ex.Model, spec.A, 100-spec.Split, ex.Model, spec.B, spec.Split, spec.Metric)
			return nil
		},
	}
	serverFlag(cmd, &server)
	f := cmd.Flags()
	f.IntVar(&spec.A, "a", 0, "the control version")
	f.IntVar(&spec.B, "b", 0, "the treatment version")
	f.IntVar(&spec.Split, "split", 50, "percent of units (routing keys) on b, 1 to 99")
	f.StringVar(&spec.Metric, "metric", "", "the outcome name compared, e.g. converted")
	f.StringVar(&spec.Direction, "direction", "increase", "which way is better: increase or decrease")
	f.Float64Var(&spec.MinEffect, "min-effect", 0, "the relative lift that matters (0.01 = 1 %): below it the arms are called equal (no_difference); 0: never")
	f.Float64Var(&spec.Alpha, "alpha", 0.05, "the sequential test's level")
	f.StringVar(&spec.Label, "label", "", "an outcome name holding labels: model quality per arm (log loss and AUC, or MAE and RMSE)")
	f.StringVar(&reason, "reason", "", "why (the audit trail)")
	f.BoolVar(&asJSON, "json", false, "print the experiment as JSON")
	return cmd
}

func newABStatusCmd() *cobra.Command {
	var server string
	var history int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status MODEL",
		Short: "Per arm units, outcomes, mean and interval; the lift with its interval, the always-valid p-value, the split check and the decision",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ex, err := apiClient(cmd, server).Experiment(cmd.Context(), args[0], history)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(ex)
			}
			printExperiment(cmd.OutOrStdout(), ex)
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().IntVar(&history, "history", 5, "earlier refreshes to show")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the experiment as JSON")
	return cmd
}

func newABListCmd() *cobra.Command {
	var server string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Every running experiment: its arms, units, lift, always-valid p-value, split check and decision",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := apiClient(cmd, server).Experiments(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(api.ExperimentList{Experiments: list})
			}
			w := cmd.OutOrStdout()
			if len(list) == 0 {
				fmt.Fprintln(w, "no running experiments (start one: sluice ab start MODEL --a V --b V --metric NAME)")
				return nil
			}
			fmt.Fprintf(w, "%-20s %-12s %-14s %-14s %9s %9s %9s %10s %-5s %s\n", "MODEL", "METRIC", "A", "B", "UNITS A", "UNITS B", "LIFT", "P-VALUE", "SRM", "DECISION")
			for _, ex := range list {
				srm := "ok"
				if ex.SRM {
					srm = "BAD"
				}
				fmt.Fprintf(w, "%-20s %-12s %-14s %-14s %9d %9d %8.2f%% %10.3g %-5s %s\n", ex.Model, ex.Spec.Metric, ex.A.ID, ex.B.ID, ex.A.Units, ex.B.Units, 100*ex.RelLift, ex.PValue, srm, ex.Decision)
			}
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}

func newABStopCmd() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:   "stop MODEL",
		Short: "Stop MODEL's experiment (its figures are kept; the traffic split stays until you change it: sluice traffic)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ex, err := apiClient(cmd, server).StopExperiment(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			printExperiment(cmd.OutOrStdout(), ex)
			return nil
		},
	}
	serverFlag(cmd, &server)
	return cmd
}

func printExperiment(w io.Writer, ex *api.Experiment) {
	fmt.Fprintf(w, "experiment %d on %s (%s), metric %s, started %s by %s, refreshed %s\n", ex.ID, ex.Model, ex.State, ex.Spec.Metric,
		ex.Started.Format("2006-01-02 15:04:05Z"), ex.Actor, ex.Refreshed.Format("15:04:05Z"))
	fmt.Fprintf(w, "%-4s %-14s %8s %9s %10s %23s\n", "arm", "version", "units", "outcomes", "mean", "95% interval")
	for _, a := range []struct {
		name string
		arm  api.ExperimentArm
	}{{"A", ex.A}, {"B", ex.B}} {
		fmt.Fprintf(w, "%-4s %-14s %8d %9d %10.5g %23s\n", a.name, a.arm.ID, a.arm.Units, a.arm.Outcomes, a.arm.Mean, fmt.Sprintf("[%.5g, %.5g]", a.arm.Low, a.arm.High))
		for _, k := range []string{"logLoss", "auc", "mae", "rmse"} {
			if q, ok := a.arm.Quality[k]; ok {
				fmt.Fprintf(w, "     %-8s %.5g [%.5g, %.5g] over %d labels\n", k, q.Value, q.Low, q.High, q.N)
			}
		}
	}
	fmt.Fprintf(w, "lift %+.5g [%+.5g, %+.5g]; relative %+.2f %% [%+.2f %%, %+.2f %%], always-valid [%+.2f %%, %+.2f %%]\n",
		ex.Lift, ex.LiftLow, ex.LiftHigh, 100*ex.RelLift, 100*ex.RelLow, 100*ex.RelHigh, 100*ex.SeqRelLow, 100*ex.SeqRelHigh)
	sig := "not significant"
	if ex.Significant {
		sig = "significant"
	}
	fmt.Fprintf(w, "always-valid p-value %.4g (%s at alpha %g)\n", ex.PValue, sig, alphaOf(ex.Spec.Alpha))
	srm := "ok"
	if ex.SRM {
		srm = "MISMATCH: the split is broken, no result can be trusted"
	}
	fmt.Fprintf(w, "sample ratio: p %.4g, %s\n", ex.SRMPValue, srm)
	fmt.Fprintf(w, "decision: %s\n", ex.Decision)
	if len(ex.Notes) > 0 {
		fmt.Fprintf(w, "notes: %s\n", strings.Join(ex.Notes, "; "))
	}
	if len(ex.History) > 0 {
		fmt.Fprintln(w, "history (newest first):")
		for _, h := range ex.History {
			fmt.Fprintf(w, "  %s units %d/%d mean %.5g/%.5g rel %+.2f %% p %.4g %s\n", h.At.Format("15:04:05Z"), h.UnitsA, h.UnitsB, h.MeanA, h.MeanB, 100*h.RelLift, h.PValue, h.Decision)
		}
	}
}

func alphaOf(a float64) float64 {
	if a == 0 {
		return 0.05
	}
	return a
}
