package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/modelpkg"
)

// parseModelVersion splits "fraud@18".
func parseModelVersion(s string) (string, int, error) {
	m, v, ok := strings.Cut(s, "@")
	n, err := strconv.Atoi(v)
	if !ok || m == "" || err != nil || n <= 0 {
		return "", 0, fmt.Errorf("%q: expected MODEL@VERSION, like fraud@18", s)
	}
	return m, n, nil
}

func printDeployment(w io.Writer, d *api.Deployment) {
	fmt.Fprintf(w, "%s  policy v%d  (%s by %s: %s)\n", d.Model, d.PolicyVersion, d.UpdatedAt.Format(time.RFC3339), d.Actor, d.Reason)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TARGET\tWEIGHT\tSTATE")
	for _, t := range d.Targets {
		weight := fmt.Sprintf("%d%%", t.Weight)
		if t.Shadow {
			weight = "shadow"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.ID, weight, t.State)
	}
	tw.Flush()
	for _, s := range d.Shadows {
		fmt.Fprintf(w, "  shadow %s@%d: %d requests, %d rows, disagreement %.2f%% (%d), mean |Δ| %s, max |Δ| %s, p50 %.2f ms, p99 %.2f ms, errors %d, dropped %d\n",
			d.Model, s.Version, s.Requests, s.Rows, 100*s.DisagreementRate, s.Disagreements, control.FormatSig(s.MeanAbsDiff, 4), control.FormatSig(s.MaxAbsDiff, 4), s.P50Ms, s.P99Ms, s.Errors, s.Dropped)
	}
}

func printRollout(w io.Writer, r *api.Rollout) {
	fmt.Fprintf(w, "rollout %s@%d (baseline %s@%d): %s", r.Model, r.Candidate, r.Model, r.Baseline, r.Phase)
	if r.Phase == "canary" {
		fmt.Fprintf(w, ", step %d of %d at %d%%", r.Step, len(r.Steps), r.Percent)
		if r.NextStepInMs > 0 {
			fmt.Fprintf(w, ", bake ends in %s", time.Duration(r.NextStepInMs*float64(time.Millisecond)).Round(100*time.Millisecond))
		}
	}
	fmt.Fprintln(w)
	if r.Reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", r.Reason)
	}
	fmt.Fprintf(w, "  steps %v, started %s by %s\n", r.Steps, r.Started.Format(time.RFC3339), r.Actor)
	for _, g := range r.Gates {
		state := "pass"
		switch {
		case !g.Ready:
			state = "waiting for samples"
		case !g.Pass:
			state = "FAIL"
		}
		fmt.Fprintf(w, "  gate %-20s observed %s  limit %s  samples %d  %s\n", g.Name, control.FormatSig(g.Observed, 4), control.FormatSig(g.Limit, 4), g.Samples, state)
	}
}

func newDeployCmd() *cobra.Command {
	var server, reason, planFile, steps, bake, onFail string
	var shadowN, minSamples int
	cmd := &cobra.Command{
		Use:   "deploy MODEL@VERSION",
		Short: "Roll out a version: [shadow] → canary steps with gates → promoted (plan from --plan, flags, or model.yaml release:)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model, n, err := parseModelVersion(args[0])
			if err != nil {
				return err
			}
			body := api.StartRollout{Version: n, Reason: reason}
			plan := map[string]any{}
			if planFile != "" {
				b, err := os.ReadFile(planFile)
				if err != nil {
					return err
				}
				rel, err := modelpkg.ParsePlan(planFile, b)
				if err != nil {
					return err
				}
				jb, _ := json.Marshal(rel)
				if err := json.Unmarshal(jb, &plan); err != nil {
					return err
				}
			}
			if steps != "" {
				var ss []int
				for _, p := range strings.Split(steps, ",") {
					v, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(p, "%")))
					if err != nil {
						return fmt.Errorf("--steps %q: comma-separated percents like 1,5,25,50,100", steps)
					}
					ss = append(ss, v)
				}
				plan["steps"] = ss
			}
			if bake != "" {
				plan["bake"] = bake
			}
			if shadowN > 0 {
				plan["shadow"] = map[string]int{"requests": shadowN}
			}
			if minSamples > 0 {
				plan["minSamples"] = minSamples
			}
			if onFail != "" {
				plan["onFail"] = onFail
			}
			if len(plan) > 0 {
				body.Plan, _ = json.Marshal(plan)
			}
			r, err := apiClient(cmd, server).StartRollout(cmd.Context(), model, body)
			if err != nil {
				return err
			}
			printRollout(cmd.OutOrStdout(), r)
			return nil
		},
	}
	serverFlag(cmd, &server)
	f := cmd.Flags()
	f.StringVar(&reason, "reason", "", "why (recorded in the audit trail)")
	f.StringVar(&planFile, "plan", "", "a release plan file: YAML like model.yaml's release: (or JSON), see docs/releases.md; flags below override it")
	f.StringVar(&steps, "steps", "", "canary percents, e.g. 1,5,25,50,100")
	f.StringVar(&bake, "bake", "", "time at each step, e.g. 30s")
	f.IntVar(&shadowN, "shadow", 0, "run a shadow phase of N compared requests first")
	f.IntVar(&minSamples, "min-samples", 0, "requests per side before a gate may pass")
	f.StringVar(&onFail, "on-fail", "", "rollback (default) or pause")
	return cmd
}

func newTrafficCmd() *cobra.Command {
	var server, reason string
	cmd := &cobra.Command{
		Use:   "traffic [MODEL [MODEL@V=WEIGHT ...]]",
		Short: "Show or set a model's traffic split: sluice traffic fraud fraud@17=90 fraud@18=10 (no model: every model's)",
		RunE: func(cmd *cobra.Command, args []string) error {
			c := apiClient(cmd, server)
			if len(args) == 0 {
				ds, err := c.Deployments(cmd.Context())
				if err != nil {
					return err
				}
				for i := range ds {
					printDeployment(cmd.OutOrStdout(), &ds[i])
				}
				return nil
			}
			if len(args) == 1 {
				d, err := c.Deployment(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				printDeployment(cmd.OutOrStdout(), d)
				return nil
			}
			cur, err := c.Deployment(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			body := api.SetTraffic{Reason: reason, ExpectPolicyVersion: &cur.PolicyVersion}
			for _, t := range cur.Targets {
				if t.Shadow {
					body.Targets = append(body.Targets, api.Target{Version: t.Version, Shadow: true})
				}
			}
			for _, a := range args[1:] {
				mv, w, ok := strings.Cut(a, "=")
				model, n, err := parseModelVersion(mv)
				weight, werr := strconv.Atoi(strings.TrimSuffix(w, "%"))
				if !ok || err != nil || werr != nil || model != args[0] {
					return fmt.Errorf("%q: expected %s@VERSION=WEIGHT, like %s@18=10", a, args[0], args[0])
				}
				body.Targets = append(body.Targets, api.Target{Version: n, Weight: weight})
			}
			d, err := c.SetTraffic(cmd.Context(), args[0], body)
			if err != nil {
				return err
			}
			printDeployment(cmd.OutOrStdout(), d)
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit trail)")
	return cmd
}

func newShadowCmd() *cobra.Command {
	var server, reason string
	var off bool
	cmd := &cobra.Command{
		Use:   "shadow MODEL@VERSION [--off]",
		Short: "Send copies of a model's traffic to a version (its answers are compared, never returned)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model, n, err := parseModelVersion(args[0])
			if err != nil {
				return err
			}
			c := apiClient(cmd, server)
			cur, err := c.Deployment(cmd.Context(), model)
			if err != nil {
				return err
			}
			body := api.SetTraffic{Reason: reason, ExpectPolicyVersion: &cur.PolicyVersion}
			for _, t := range cur.Targets {
				if t.Version == n {
					if !t.Shadow && !off {
						return fmt.Errorf("%s takes %d%% of the traffic; it cannot also shadow it", args[0], t.Weight)
					}
					continue
				}
				body.Targets = append(body.Targets, api.Target{Version: t.Version, Weight: t.Weight, Shadow: t.Shadow})
			}
			if !off {
				body.Targets = append(body.Targets, api.Target{Version: n, Shadow: true})
			}
			d, err := c.SetTraffic(cmd.Context(), model, body)
			if err != nil {
				return err
			}
			printDeployment(cmd.OutOrStdout(), d)
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().BoolVar(&off, "off", false, "stop shadowing")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit trail)")
	return cmd
}

func newRolloutCmd() *cobra.Command {
	var server, reason string
	cmd := &cobra.Command{
		Use:   "rollout status|pause|resume|abort|promote MODEL",
		Short: "Watch or steer a model's rollout",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := apiClient(cmd, server)
			var r *api.Rollout
			var err error
			switch args[0] {
			case "status":
				r, err = c.Rollout(cmd.Context(), args[1])
			case "pause", "resume", "abort", "promote":
				r, err = c.RolloutAction(cmd.Context(), args[1], args[0], reason)
			default:
				return fmt.Errorf("unknown rollout command %q (status, pause, resume, abort, promote)", args[0])
			}
			if err != nil {
				return err
			}
			printRollout(cmd.OutOrStdout(), r)
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit trail)")
	return cmd
}

func newRollbackCmd() *cobra.Command {
	var server, reason string
	var to int
	cmd := &cobra.Command{
		Use:   "rollback MODEL [--to N]",
		Short: "Send 100% of a model's traffic to its baseline (or version N) now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := apiClient(cmd, server).Rollback(cmd.Context(), args[0], to, reason)
			if err != nil {
				return err
			}
			printDeployment(cmd.OutOrStdout(), d)
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().IntVar(&to, "to", 0, "the version to send all traffic to (default: the baseline)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit trail)")
	return cmd
}

func newHistoryCmd() *cobra.Command {
	var server, at string
	cmd := &cobra.Command{
		Use:   "history MODEL [--at TIME]",
		Short: "A model's deployment history and audit trail, or the policy in force at a time",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := apiClient(cmd, server)
			w := cmd.OutOrStdout()
			if at != "" {
				t, err := time.Parse(time.RFC3339Nano, at)
				if err != nil {
					return fmt.Errorf("--at %q: use RFC 3339, like 2026-11-30T07:40:00Z", at)
				}
				p, err := c.PolicyAt(cmd.Context(), args[0], t)
				if err != nil {
					return err
				}
				printDeployment(w, &api.Deployment{Model: args[0], PolicyVersion: p.PolicyVersion, Targets: p.Targets, UpdatedAt: p.CreatedAt, Actor: p.Actor, Reason: p.Reason})
				return nil
			}
			h, err := c.History(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			for _, e := range h.Events {
				reason := ""
				if e.Reason != "" {
					reason = "  (" + e.Reason + ")"
				}
				fmt.Fprintf(w, "%s  %-8s %-10s %s%s\n", e.At.Format(time.RFC3339Nano), e.Actor, e.Action, e.What, reason)
			}
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&at, "at", "", "show the policy in force at this time (RFC 3339)")
	return cmd
}
