package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/lab"
)

func newLabCmd() *cobra.Command {
	var (
		quick       bool
		out         string
		publish     string
		note        string
		scratch     string
		experiments string
		workers     int
		point       time.Duration
		models      int
		manyFor     time.Duration
		rates       string
		render      string
	)
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Run the Model Serving Lab's three experiments on real worker processes and write an HTML report",
		Long: `lab starts sluice serve --workers N itself (this binary) and runs three
experiments against it with open-loop load (latency from each request's
intended send time): batching's latency against throughput across batch
sizes and delays; goodput and p99 from 0.5x to 3x of the measured capacity
with admission on and off; 300 models under Zipf traffic on workers whose
memory holds a fifth of them (hit ratio, loads and evictions over time, the
hot models' p99). It writes one self-contained HTML report (inline SVG, no
script) and its raw numbers as CSV and JSON beside it. --quick takes under
5 minutes on 2 cores, the full run under 30. See docs/lab.md.`,
		Example: `  sluice lab --quick --out /tmp/lab/report.html
  sluice lab --out docs/lab/report.html --note "busy machine: other builds running"
  sluice lab --quick --out /tmp/lab/report.html --publish .sluice-data   # GET /v1/lab/report serves it`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			plan := lab.FullPlan()
			if quick {
				plan = lab.QuickPlan()
			}
			f := cmd.Flags()
			if f.Changed("workers") {
				plan.Workers = workers
			}
			if f.Changed("point") {
				if point <= 0 {
					return fmt.Errorf("--point %v: must be > 0 (how long each load point runs)", point)
				}
				plan.Point, plan.OverloadPoint = point, point
			}
			if f.Changed("models") {
				if models < 10 || models > 1000 {
					return fmt.Errorf("--models %d: between 10 and 1000 (the many-models experiment's models)", models)
				}
				plan.Models = models
			}
			if f.Changed("many-duration") {
				if manyFor <= 0 {
					return fmt.Errorf("--many-duration %v: must be > 0", manyFor)
				}
				plan.ManyFor = manyFor
				plan.Window = min(plan.Window, max(manyFor/6, time.Second))
				plan.Warmup = min(plan.Warmup, manyFor/3)
			}
			if f.Changed("rates") {
				rs, err := parseRates(rates)
				if err != nil {
					return err
				}
				plan.BatchRates = rs
			}
			if f.Changed("experiments") {
				plan.Batching, plan.Overload, plan.Many = false, false, false
				for _, e := range strings.Split(experiments, ",") {
					switch strings.TrimSpace(e) {
					case "batching", "1":
						plan.Batching = true
					case "overload", "2":
						plan.Overload = true
					case "many", "3":
						plan.Many = true
					default:
						return fmt.Errorf("--experiments %q: a comma-separated list of batching, overload, many (or 1, 2, 3)", experiments)
					}
				}
			}
			var r *lab.Report
			if render != "" {
				var err error
				if r, err = lab.ReadJSON(render); err != nil {
					return fmt.Errorf("--render: %v", err)
				}
				r.Stem = strings.TrimSuffix(filepath.Base(out), filepath.Ext(out))
				if err := lab.Write(out, r); err != nil {
					return err
				}
			} else {
				bin, err := os.Executable()
				if err != nil {
					return fmt.Errorf("lab: find this binary (the servers run it): %v", err)
				}
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				if r, err = lab.Run(ctx, lab.Config{Binary: bin, Out: out, Scratch: scratch, Plan: plan, Note: note, Version: version,
					Command: "sluice " + strings.Join(os.Args[1:], " "), Log: cmd.ErrOrStderr()}); err != nil {
					return err
				}
			}
			if publish != "" {
				dst := lab.PublishedPath(publish)
				r.Stem = "report"
				if err := lab.Write(dst, r); err != nil {
					return fmt.Errorf("--publish %s: %v", publish, err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "lab: published %s (sluice serve --data %s serves it at /v1/lab/report)\n", dst, publish)
			}
			fmt.Fprintln(cmd.OutOrStdout(), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "the short run: fewer rates and configurations, shorter points (under 5 minutes on 2 cores)")
	f.StringVar(&out, "out", filepath.Join("lab", "report.html"), "the report's path; its CSV and JSON files are written beside it (STEM-batching.csv, STEM-overload.csv, STEM-many.csv, STEM.json)")
	f.StringVar(&publish, "publish", "", "also copy the report and its files into DATA_DIR/lab/, where sluice serve --data DATA_DIR serves it (GET /v1/lab/report)")
	f.StringVar(&note, "note", "", "a sentence for the report's machine section, e.g. \"busy machine: other builds running\"")
	f.StringVar(&scratch, "scratch", "", "keep the model packages, data folders and server logs in this folder (default: a temporary one, removed after)")
	f.StringVar(&experiments, "experiments", "batching,overload,many", "which experiments run: batching, overload, many (or 1, 2, 3), comma-separated")
	f.IntVar(&workers, "workers", 2, "local worker processes of each server the lab starts")
	f.DurationVar(&point, "point", 0, "how long each load point of experiments 1 and 2 runs (default: 3s quick, 6s/10s full)")
	f.IntVar(&models, "models", 300, "models of the many-models experiment")
	f.DurationVar(&manyFor, "many-duration", 0, "how long the many-models load runs (default: 75s quick, 8m full)")
	f.StringVar(&render, "render", "", "run nothing: write the report (and its CSV and JSON) again from a report's JSON FILE, with this binary's page and findings; the numbers, machine and command stay as measured")
	f.StringVar(&rates, "rates", "", "experiment 1's offered rates, comma-separated requests/s (default: 100..1500 quick, 100..2500 full)")
	return cmd
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		var r float64
		if _, err := fmt.Sscanf(strings.TrimSpace(p), "%g", &r); err != nil || !(r > 0) || r > 100000 {
			return nil, fmt.Errorf("--rates %q: comma-separated rates above 0 and at most 100000 requests/s, e.g. 100,300,600", s)
		}
		if len(out) > 0 && r <= out[len(out)-1] {
			return nil, fmt.Errorf("--rates %q: rates must increase", s)
		}
		out = append(out, r)
	}
	return out, nil
}
