package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/autoscale"
	"github.com/sluiceml/sluice/internal/bench"
	"github.com/sluiceml/sluice/internal/serving"
)

// planOutput is what `sluice plan` prints (--json: as is).
type planOutput struct {
	Model             string               `json:"model"`
	Version           int                  `json:"version"`
	PeakPerSecond     float64              `json:"peakInstancesPerSecond"`
	SLOMs             float64              `json:"sloMs"`
	PerReplica        float64              `json:"perReplicaInstancesPerSecond"`
	PerReplicaSource  string               `json:"perReplicaSource"` // given, cost-model, measured
	PerReplicaHow     string               `json:"perReplicaHow"`
	Workers           int                  `json:"workers"`
	WorkersSource     string               `json:"workersSource"`
	Plan              autoscale.PlanResult `json:"plan"`
	MeasuredProbes    []bench.Result       `json:"measuredProbes,omitempty"`
	TargetUtilisation float64              `json:"targetUtilisation"`
}

func newPlanCmd() *cobra.Command {
	var (
		server, apiKey              string
		peak, perReplica, target    float64
		slo, probeDur               time.Duration
		version, workers, instances int
		measure, asJSON             bool
		measureStart                float64
		measureSteps                int
	)
	cmd := &cobra.Command{
		Use:   "plan MODEL",
		Short: "Print the replicas MODEL needs for a peak rate within an SLO, with headroom for a failed worker and a rollout",
		Long: `plan applies the capacity formula replicas = ceil(peak / (per-replica
throughput × 0.7)), then adds headroom for one failed worker (the replicas
spread evenly over --workers-hint workers, default the server's ready ones)
and for a rollout (candidate and baseline both loaded, either able to take
all traffic). The per-replica throughput at the SLO comes from, in order:
--per-replica (given by hand), --measure (an open-loop bisection with the
bench load generator against the model, divided by its ready replicas), or
the cost model the server learned for the version (A + B·n: the largest
batch that fits in SLO/2 gives n / (A + B·n)). The output names the inputs
it used. See docs/capacity.md.`,
		Example: `  sluice plan fraud --peak 50000 --slo 50ms
  sluice plan fraud --peak 50000 --slo 50ms --measure --instances 8 --workers-hint 4
  sluice plan fraud --peak 50000 --slo 50ms --per-replica 1800 --workers-hint 6`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model := args[0]
			if slo <= 0 {
				return fmt.Errorf("--slo is required and must be > 0 (e.g. --slo 50ms)")
			}
			if !(peak > 0) {
				return fmt.Errorf("--peak is required and must be > 0 instances/s")
			}
			if perReplica > 0 && measure {
				return fmt.Errorf("--per-replica and --measure do not go together: one is the figure, the other measures it")
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			c := newClient(server)
			if apiKey != "" {
				c.APIKey = apiKey
			}
			out := planOutput{Model: model, PeakPerSecond: peak, SLOMs: float64(slo) / 1e6, TargetUtilisation: target}

			var v *api.Version
			if perReplica <= 0 {
				if version == 0 {
					m, err := c.Model(ctx, model)
					if err != nil {
						return err
					}
					if m.ServingVersion == nil {
						return fmt.Errorf("%s has no serving version: name one with --version", model)
					}
					version = *m.ServingVersion
				}
				var err error
				if v, err = c.Version(ctx, model, version); err != nil {
					return err
				}
				out.Version = version
			}

			switch {
			case perReplica > 0:
				out.PerReplica, out.PerReplicaSource = perReplica, "given"
				out.PerReplicaHow = "given with --per-replica"
			case measure:
				ready := 0
				if v != nil && v.Config != nil {
					ready = v.Config.ReadyReplicas
				}
				if ready <= 0 {
					// With workers, the version's figures come with their
					// heartbeats; their list has the replicas too.
					if wl, err := c.Workers(ctx); err == nil {
						for _, w := range wl.Workers {
							for _, wv := range w.Versions {
								if wv.Version == fmt.Sprintf("%s@%d", model, version) && w.State == "ready" {
									ready += wv.ReadyReplicas
								}
							}
						}
					}
				}
				if ready <= 0 {
					return fmt.Errorf("%s@%d reports no ready replica: nothing to measure", model, version)
				}
				cfg := bench.Config{Server: server, Model: model, Duration: probeDur, Arrivals: bench.Constant, InstancesPerRequest: instances,
					DeadlineMs: int(math.Ceil(float64(slo) / float64(time.Millisecond))), APIKey: c.APIKey, Seed: 1}
				start := measureStart
				if start <= 0 {
					start = 50
					if est, _ := costThroughput(v, slo); est > 0 {
						start = max(1, est*float64(ready)/float64(instances)/4) // a quarter of what the cost model says
					}
				}
				stderr := cmd.ErrOrStderr()
				fellBehind := false
				probe := func(ctx context.Context, rate float64) (bench.Result, error) {
					pc := cfg
					pc.Rate = rate
					r, err := bench.Run(ctx, pc)
					if err == nil {
						verdict := "sustained"
						if why := bench.NotSustained(r, slo); why != "" {
							verdict = "not sustained: " + why
							if r.FellBehind {
								fellBehind = true
							}
						}
						fmt.Fprintf(stderr, "probe %.1f requests/s for %v: good %d of %d, p99 %v, %s\n",
							rate, probeDur, r.Good, r.Scheduled, r.Latency.P99.Round(10*time.Microsecond), verdict)
					}
					return r, err
				}
				best, tried, err := bench.FindCapacity(ctx, bench.CapacitySearch{Start: start, Steps: measureSteps}, probe,
					func(r bench.Result) bool { return bench.Sustained(r, slo) })
				out.MeasuredProbes = tried
				if err != nil {
					return fmt.Errorf("measure %s: %w", model, err)
				}
				if best <= 0 {
					return fmt.Errorf("measure %s: not even %.1f requests/s was sustained within %v (%d instances each); try a lower --measure-start", model, start, slo, instances)
				}
				out.PerReplica, out.PerReplicaSource = best*float64(instances)/float64(ready), "measured"
				out.PerReplicaHow = fmt.Sprintf("measured: open-loop bisection (%d probes of %v, constant arrivals, %d instances a request, deadline %v) against %s as it is routed now; "+
					"best sustained %.1f requests/s (%s of requests good within the deadline and p99 <= SLO) = %.1f instances/s over %d ready replicas of %s@%d, "+
					"divided evenly: assumes replicas add linearly (serve the version with replicas: 1 for a true one-replica figure); includes HTTP and gateway overhead",
					len(tried), probeDur, instances, slo, model, best, fmt.Sprintf("%g%%", 100*bench.SustainedShare), best*float64(instances), ready, model, version)
				if fellBehind {
					out.PerReplicaHow += "; WARNING: the load generator fell behind at a higher rate, so this is a lower bound set by this machine (run it from another machine, or with more --instances a request)"
				}
			default:
				per, n := costThroughput(v, slo)
				if per <= 0 {
					return fmt.Errorf("the server reports no cost model for %s@%d (no batch has run yet, or its replicas run on workers, which do not report it): use --measure or --per-replica", model, version)
				}
				cost := versionCost(v)
				out.PerReplica, out.PerReplicaSource = per, "cost-model"
				out.PerReplicaHow = fmt.Sprintf("the cost model the server learned for %s@%d: %v + %v·n; the largest batch within SLO/2 = %v is %d (maxBatchSize %d): %d every %v. "+
					"Batch compute only: no queueing, HTTP or gateway overhead (check it with --measure)",
					model, version, cost.A, cost.B, slo/2, n, v.Config.MaxBatchSize, n, cost.Batch(n))
			}

			out.Workers, out.WorkersSource = workers, "--workers-hint"
			if !cmd.Flags().Changed("workers-hint") {
				wl, err := c.Workers(ctx)
				if err != nil {
					return err
				}
				out.Workers, out.WorkersSource = 1, "the server runs replicas in its own process"
				if wl.Mode == "workers" {
					n := 0
					for _, w := range wl.Workers {
						if w.State == "ready" {
							n++
						}
					}
					out.Workers, out.WorkersSource = n, "the server's ready workers"
				}
			}
			p, err := autoscale.Plan(autoscale.PlanInput{Peak: peak, PerReplica: out.PerReplica, TargetUtilisation: target, Workers: out.Workers})
			if err != nil {
				return err
			}
			out.Plan, out.TargetUtilisation = p, p.TargetUtilisation
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return writePlan(cmd, out)
		},
	}
	f := cmd.Flags()
	serverFlag(cmd, &server)
	f.StringVar(&apiKey, "api-key", os.Getenv("SLUICE_API_KEY"), "API key sent as a bearer token (default: env SLUICE_API_KEY)")
	f.Float64Var(&peak, "peak", 0, "peak load to plan for, instances per second (required)")
	f.DurationVar(&slo, "slo", 0, "latency objective of a request, e.g. 50ms (required)")
	f.IntVar(&version, "version", 0, "version to plan for (default: the serving version)")
	f.Float64Var(&perReplica, "per-replica", 0, "per-replica throughput at the SLO in instances/s, measured elsewhere (skips the server's figures)")
	f.BoolVar(&measure, "measure", false, "measure the throughput with an open-loop bisection against the model (sends real load)")
	f.DurationVar(&probeDur, "measure-duration", 5*time.Second, "with --measure, how long each probe rate runs")
	f.Float64Var(&measureStart, "measure-start", 0, "with --measure, the first rate in requests/s (default: a quarter of the cost model's figure, or 50)")
	f.IntVar(&measureSteps, "measure-steps", 5, "with --measure, bisection steps after the first failing rate")
	f.IntVar(&instances, "instances", 1, "with --measure, instances per request")
	f.IntVar(&workers, "workers-hint", 0, "workers the replicas spread over (default: the server's ready workers; 1 in-process)")
	f.Float64Var(&target, "target", autoscale.DefaultTargetUtilisation, "target utilisation of a replica")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// costThroughput is the version's per-replica throughput at slo from the
// cost model the server reports (0 when it reports none).
func costThroughput(v *api.Version, slo time.Duration) (float64, int) {
	if v == nil || v.Config == nil {
		return 0, 0
	}
	return autoscale.Throughput(versionCost(v), v.Config.MaxBatchSize, slo)
}

func versionCost(v *api.Version) serving.CostModel {
	sc := v.Config
	return serving.CostModel{A: time.Duration(sc.CostBaseMs * 1e6), B: time.Duration(sc.CostPerInstanceMs * 1e6)}
}

func writePlan(cmd *cobra.Command, o planOutput) error {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	name := o.Model
	if o.Version > 0 {
		name = fmt.Sprintf("%s@%d", o.Model, o.Version)
	}
	r := o.Plan
	p("plan for\t%s: peak %g instances/s, SLO %v, target utilisation %g", name, o.PeakPerSecond, time.Duration(o.SLOMs*1e6), r.TargetUtilisation)
	p("per replica\t%.1f instances/s (%s)", o.PerReplica, o.PerReplicaHow)
	p("workers\t%d (%s)", o.Workers, o.WorkersSource)
	p("at peak\t%d replicas = ceil(%g / (%.1f × %g))", r.AtPeak, o.PeakPerSecond, o.PerReplica, r.TargetUtilisation)
	if r.FailureCovered {
		p("+ a failed worker\t%d replicas, %d per worker over %d: losing the fullest worker leaves %d", r.WithFailure, r.PerWorker, o.Workers, r.WithFailure-r.PerWorker)
	} else {
		p("+ a failed worker\tnot covered: with %d worker a failure is an outage whatever the count", o.Workers)
	}
	p("during a rollout\t%d replicas = %d serving + %d: candidate and baseline are both loaded, and either must take all traffic at once (promotion to 100%% or a rollback)", r.DuringRollout, r.WithFailure, r.AtPeak)
	return tw.Flush()
}
