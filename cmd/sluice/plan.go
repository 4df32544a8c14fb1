package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/client"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/autoscale"
	"github.com/sluiceml/sluice/internal/bench"
	"github.com/sluiceml/sluice/internal/control"
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

// planFlags are sluice plan's flags.
type planFlags struct {
	server, apiKey           string
	peak, perReplica, target float64
	slo, probeDur            time.Duration
	version, workers         int
	instances                int
	measure, asJSON          bool
	workersGiven             bool
	measureStart             float64
	measureSteps             int
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan MODEL",
		Short: "Print the replicas MODEL needs for a peak rate within an SLO, with headroom for a failed worker and a rollout",
		Long: `plan applies the capacity formula replicas = ceil(peak / (per-replica
throughput × 0.7)), then adds headroom for one failed worker (the replicas
spread evenly over --workers-hint workers, default the server's ready ones)
and for a rollout (candidate and baseline both loaded, either able to take
all traffic). The per-replica throughput at the SLO comes from, in order:
--per-replica (given by hand), --measure (an open-loop bisection with the
bench load generator against the model, each probe judged by the server's
answers: its own latency and its refusals, divided by the ready replicas),
or the cost model the server learned for the version (A + B·n: the largest
batch that fits in SLO/2 gives n / (A + B·n); with --workers, the one the
workers report). The output names the inputs it used. See docs/capacity.md.`,
		Example: `  sluice plan fraud --peak 50000 --slo 50ms
  sluice plan fraud --peak 50000 --slo 50ms --measure --instances 8 --workers-hint 4
  sluice plan fraud --peak 50000 --slo 50ms --per-replica 1800 --workers-hint 6`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.workersGiven = cmd.Flags().Changed("workers-hint")
			out, err := runPlan(cmd, args[0], f)
			if err != nil {
				return err
			}
			if f.asJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return writePlan(cmd, out)
		},
	}
	fl := cmd.Flags()
	serverFlag(cmd, &f.server)
	fl.StringVar(&f.apiKey, "api-key", os.Getenv("SLUICE_API_KEY"), "API key sent as a bearer token (default: env SLUICE_API_KEY)")
	fl.Float64Var(&f.peak, "peak", 0, "peak load to plan for, instances per second (required)")
	fl.DurationVar(&f.slo, "slo", 0, "latency objective of a request, e.g. 50ms (required)")
	fl.IntVar(&f.version, "version", 0, "version to plan for (default: the serving version)")
	fl.Float64Var(&f.perReplica, "per-replica", 0, "per-replica throughput at the SLO in instances/s, measured elsewhere (skips the server's figures)")
	fl.BoolVar(&f.measure, "measure", false, "measure the throughput with an open-loop bisection against the model (sends real load)")
	fl.DurationVar(&f.probeDur, "measure-duration", 5*time.Second, "with --measure, how long each probe rate runs")
	fl.Float64Var(&f.measureStart, "measure-start", 0, "with --measure, the first rate in requests/s (default: a quarter of the cost model's figure, or 50)")
	fl.IntVar(&f.measureSteps, "measure-steps", 5, "with --measure, bisection steps after the first failing rate")
	fl.IntVar(&f.instances, "instances", 1, "with --measure, instances per request")
	fl.IntVar(&f.workers, "workers-hint", 0, "workers the replicas spread over (default: the server's ready workers; 1 in-process)")
	fl.Float64Var(&f.target, "target", autoscale.DefaultTargetUtilisation, "target utilisation of a replica")
	fl.BoolVar(&f.asJSON, "json", false, "print JSON")
	return cmd
}

// runPlan gathers the plan's inputs from the flags and the server, in
// the order the command's help names, and plans.
func runPlan(cmd *cobra.Command, model string, f planFlags) (planOutput, error) {
	if f.slo <= 0 {
		return planOutput{}, fmt.Errorf("--slo is required and must be > 0 (e.g. --slo 50ms)")
	}
	if !(f.peak > 0) {
		return planOutput{}, fmt.Errorf("--peak is required and must be > 0 instances/s")
	}
	if f.perReplica > 0 && f.measure {
		return planOutput{}, fmt.Errorf("--per-replica and --measure do not go together: one is the figure, the other measures it")
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	c := apiClient(cmd, f.server)
	if f.apiKey != "" {
		c.APIKey = f.apiKey
	}
	out := planOutput{Model: model, PeakPerSecond: f.peak, SLOMs: float64(f.slo) / 1e6, TargetUtilisation: f.target}
	var v *api.Version
	if f.perReplica <= 0 {
		var err error
		if v, out.Version, err = planVersion(ctx, c, model, f.version); err != nil {
			return out, err
		}
	}
	var err error
	switch {
	case f.perReplica > 0:
		out.PerReplica, out.PerReplicaSource = f.perReplica, "given"
		out.PerReplicaHow = "given with --per-replica"
	case f.measure:
		err = measurePerReplica(ctx, cmd, c, v, model, out.Version, f, &out)
	default:
		err = costPerReplica(v, model, out.Version, f.slo, &out)
	}
	if err != nil {
		return out, err
	}
	out.Workers, out.WorkersSource = f.workers, "--workers-hint"
	if !f.workersGiven {
		wl, err := c.Workers(ctx)
		if err != nil {
			return out, err
		}
		out.Workers, out.WorkersSource = readyWorkers(wl)
	}
	p, err := autoscale.Plan(autoscale.PlanInput{Peak: f.peak, PerReplica: out.PerReplica, TargetUtilisation: f.target, Workers: out.Workers})
	if err != nil {
		return out, err
	}
	out.Plan, out.TargetUtilisation = p, p.TargetUtilisation
	return out, nil
}

// planVersion is the version to plan for: n, else the model's serving one.
func planVersion(ctx context.Context, c *client.Client, model string, n int) (*api.Version, int, error) {
	if n == 0 {
		m, err := c.Model(ctx, model)
		if err != nil {
			return nil, 0, err
		}
		if m.ServingVersion == nil {
			return nil, 0, fmt.Errorf("%s has no serving version: name one with --version", model)
		}
		n = *m.ServingVersion
	}
	v, err := c.Version(ctx, model, n)
	return v, n, err
}

// costPerReplica takes the per-replica figure from the cost model the
// server reports for the version (in process, or from its workers).
func costPerReplica(v *api.Version, model string, version int, slo time.Duration, out *planOutput) error {
	per, n := costThroughput(v, slo)
	if per <= 0 {
		return fmt.Errorf("the server reports no cost model for %s@%d (no batch has run yet: send it a request, or use --measure or --per-replica)", model, version)
	}
	cost := versionCost(v)
	out.PerReplica, out.PerReplicaSource = per, "cost-model"
	out.PerReplicaHow = fmt.Sprintf("the cost model the server learned for %s@%d: %v + %v·n; the largest batch within SLO/2 = %v is %d (maxBatchSize %d): %d every %v. "+
		"Batch compute only: no queueing, HTTP or gateway overhead (check it with --measure)",
		model, version, cost.A, cost.B, slo/2, n, v.Config.MaxBatchSize, n, cost.Batch(n))
	return nil
}

// readyReplicas is the version's ready replicas: the version's own figure,
// else (with workers) the sum of the workers' reports.
func readyReplicas(ctx context.Context, c *client.Client, v *api.Version, model string, version int) int {
	ready := 0
	if v != nil && v.Config != nil {
		ready = v.Config.ReadyReplicas
	}
	if ready > 0 {
		return ready
	}
	if wl, err := c.Workers(ctx); err == nil {
		id := fmt.Sprintf("%s@%d", model, version)
		for _, w := range wl.Workers {
			for _, wv := range w.Versions {
				if wv.Version == id && w.State == "ready" {
					ready += wv.ReadyReplicas
				}
			}
		}
	}
	return ready
}

// readyWorkers is how many workers the replicas spread over, and why.
func readyWorkers(wl *api.WorkerList) (int, string) {
	if wl == nil || wl.Mode != "workers" {
		return 1, "the server runs replicas in its own process"
	}
	n := 0
	for _, w := range wl.Workers {
		if w.State == "ready" {
			n++
		}
	}
	return n, "the server's ready workers"
}

// measurePerReplica runs the bisection against the server and takes the
// per-replica figure from the probes (perReplicaFromProbes).
func measurePerReplica(ctx context.Context, cmd *cobra.Command, c *client.Client, v *api.Version, model string, version int, f planFlags, out *planOutput) error {
	ready := readyReplicas(ctx, c, v, model, version)
	if ready <= 0 {
		return fmt.Errorf("%s@%d reports no ready replica: nothing to measure", model, version)
	}
	cfg := bench.Config{Server: f.server, Model: model, Duration: f.probeDur, Arrivals: bench.Constant, InstancesPerRequest: f.instances,
		DeadlineMs: int(math.Ceil(float64(f.slo) / float64(time.Millisecond))), APIKey: c.APIKey, Seed: 1}
	tlsCfg, err := clientTLS(cmd, f.server)
	if err != nil {
		return err
	}
	cfg.TLS = tlsCfg
	start := f.measureStart
	if start <= 0 {
		start = 50
		if est, _ := costThroughput(v, f.slo); est > 0 {
			start = max(1, est*float64(ready)/float64(f.instances)/4) // a quarter of what the cost model says
		}
	}
	stderr := cmd.ErrOrStderr()
	probe := func(ctx context.Context, rate float64) (bench.Result, error) {
		pc := cfg
		pc.Rate = rate
		r, err := bench.Run(ctx, pc)
		if err == nil {
			verdict := "sustained"
			if _, why := probeVerdict(r, f.slo); why != "" {
				verdict = "not sustained: " + why
			}
			fmt.Fprintf(stderr, "probe %.1f requests/s for %v: sent %.1f/s, %d of %d answered 2xx, server p99 %v, %s\n",
				rate, f.probeDur, r.SendRate, r.OK, r.Scheduled, r.ServerLatency.P99.Round(10*time.Microsecond), verdict)
		}
		return r, err
	}
	_, tried, err := bench.FindCapacity(ctx, bench.CapacitySearch{Start: start, Steps: f.measureSteps}, probe,
		func(r bench.Result) bool { _, why := probeVerdict(r, f.slo); return why == "" })
	out.MeasuredProbes = tried
	if err != nil {
		return fmt.Errorf("measure %s: %w", model, err)
	}
	m := perReplicaFromProbes(tried, f.slo, f.instances, ready)
	if m.best <= 0 {
		return fmt.Errorf("measure %s: not even %.1f requests/s was sustained within %v (%d instances each); try a lower --measure-start", model, start, f.slo, f.instances)
	}
	out.PerReplica, out.PerReplicaSource = m.perReplica, "measured"
	out.PerReplicaHow = fmt.Sprintf("measured: open-loop bisection (%d probes of %v, constant arrivals, %d instances a request, deadline %v) against %s as it is routed now, each probe judged by the server's answers "+
		"(at least %s of them 2xx and the server's own p99, its Server-Timing total, <= SLO; the generator's lag is not the server's); "+
		"best sustained %.1f requests/s as sent = %.1f instances/s over %d ready replicas of %s@%d, "+
		"divided evenly: assumes replicas add linearly (serve the version with replicas: 1 for a true one-replica figure); excludes the network between this machine and the server",
		len(tried), f.probeDur, f.instances, f.slo, model, control.FormatNumber(100*bench.SustainedShare)+"%", m.best, m.best*float64(f.instances), ready, model, version)
	if m.generatorBound {
		out.PerReplicaHow += "; WARNING: this machine could not send more than that (the generator fell behind its schedule at the next rate), so this is a lower bound set by the load generator (run it from another machine, or with more --instances a request)"
	}
	return nil
}

// probeVerdict judges one probe by the server's answers: the rate the
// server was offered (what the generator actually sent, which is the
// target rate unless this machine fell behind) and why it was not
// sustained ("" when it was). Sustained: not interrupted, at least
// bench.SustainedShare of the requests sent answered 2xx, and the
// server's own p99 (Server-Timing total; the corrected latency when the
// server sends none) within slo. The generator's dispatch lag is not
// judged: on a busy machine it made every probe fail and planned 1,374
// replicas for a version allowed 64 (issue 17).
func probeVerdict(r bench.Result, slo time.Duration) (float64, string) {
	sent := min(r.OfferedRate, r.SendRate)
	p99, which := r.ServerLatency.P99, "server"
	if r.ServerLatency.N == 0 {
		p99, which = r.Latency.P99, "client"
	}
	switch {
	case r.Interrupted:
		return sent, "interrupted"
	case r.Sent == 0:
		return sent, "nothing sent"
	case float64(r.OK) < bench.SustainedShare*float64(r.Sent):
		return sent, fmt.Sprintf("%d of %d sent answered 2xx, under %s%% (%s)", r.OK, r.Sent, control.FormatNumber(100*bench.SustainedShare), notOK(r))
	case p99 > slo:
		return sent, fmt.Sprintf("%s p99 %v over the SLO %v", which, p99, slo)
	case r.OfferedRate > 0 && sent < generatorShare*r.OfferedRate:
		// The server kept up with what it got, but this machine did not
		// send the rate: a higher one tells nothing more.
		return sent, fmt.Sprintf("the load generator sent only %.1f of %.1f requests/s (a limit of this machine, not of the server)", sent, r.OfferedRate)
	}
	return sent, ""
}

// notOK names what the answers that were not 2xx were: their error
// codes, and the requests that got no answer.
func notOK(r bench.Result) string {
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(r.ByCode)) {
		parts = append(parts, fmt.Sprintf("%s %d", code, r.ByCode[code]))
	}
	if r.TransportErrors > 0 {
		parts = append(parts, fmt.Sprintf("no answer %d", r.TransportErrors))
	}
	if len(parts) == 0 {
		return "no error codes"
	}
	return strings.Join(parts, ", ")
}

// generatorShare is the share of the target rate a probe must have sent
// to count as offered at that rate.
const generatorShare = 0.9

// probeMeasure is what the probes say of one replica.
type probeMeasure struct {
	best           float64 // highest sustained rate, requests/s as sent
	perReplica     float64 // best × instances / ready
	generatorBound bool    // a probe above best failed only because the generator could not send it
}

// perReplicaFromProbes is the planning arithmetic of --measure: the
// highest rate, as sent, of a probe the server sustained (probeVerdict),
// in instances per second per ready replica.
func perReplicaFromProbes(tried []bench.Result, slo time.Duration, instances, ready int) probeMeasure {
	var m probeMeasure
	for _, r := range tried {
		sent, why := probeVerdict(r, slo)
		if why == "" {
			m.best = max(m.best, sent)
		}
	}
	for _, r := range tried {
		sent, why := probeVerdict(r, slo)
		if why != "" && sent >= m.best && float64(r.OK) >= bench.SustainedShare*float64(r.Sent) && r.Sent > 0 && sent < generatorShare*r.OfferedRate {
			m.generatorBound = true
		}
	}
	if ready > 0 {
		m.perReplica = m.best * float64(max(instances, 1)) / float64(ready)
	}
	return m
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
	p("plan for\t%s: peak %s instances/s, SLO %v, target utilisation %s", name, control.FormatNumber(o.PeakPerSecond), time.Duration(o.SLOMs*1e6), control.FormatNumber(r.TargetUtilisation))
	p("per replica\t%.1f instances/s (%s)", o.PerReplica, o.PerReplicaHow)
	p("workers\t%d (%s)", o.Workers, o.WorkersSource)
	p("at peak\t%d replicas = ceil(%s / (%.1f × %s))", r.AtPeak, control.FormatNumber(o.PeakPerSecond), o.PerReplica, control.FormatNumber(r.TargetUtilisation))
	if r.FailureCovered {
		p("+ a failed worker\t%d replicas, %d per worker over %d: losing the fullest worker leaves %d", r.WithFailure, r.PerWorker, o.Workers, r.WithFailure-r.PerWorker)
	} else {
		p("+ a failed worker\tnot covered: with %d worker a failure is an outage whatever the count", o.Workers)
	}
	p("during a rollout\t%d replicas = %d serving + %d: candidate and baseline are both loaded, and either must take all traffic at once (promotion to 100%% or a rollback)", r.DuringRollout, r.WithFailure, r.AtPeak)
	return tw.Flush()
}
