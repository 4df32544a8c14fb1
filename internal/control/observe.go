package control

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/drift"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/telemetry"
)

// buildDrift reads the version's reference sample, preprocesses it with the
// schema, predicts it with m, and builds the reference histograms the
// online monitor compares with.
func (c *Controller) buildDrift(ctx context.Context, v registry.Version, spec *modelpkg.Spec, b routing.Backend) (*drift.Monitor, error) {
	d := spec.Manifest.Drift
	raw, err := c.store.File(ctx, v.Model, v.N, "drift.reference")
	if err != nil {
		return nil, fmt.Errorf("drift reference of %s: %w", v.ID(), err)
	}
	if raw == nil {
		return nil, fmt.Errorf("drift reference of %s: %s is not stored (publish the package again)", v.ID(), d.Reference)
	}
	rows, err := ReferenceRows(spec, raw)
	if err != nil {
		return nil, fmt.Errorf("drift reference of %s: %w", v.ID(), err)
	}
	w := spec.Schema.Width()
	var outs [][]float32
	// Through the version's own server, at low priority, in chunks its
	// admission takes: the same path wherever the replicas run.
	chunk := max(1, min(spec.Manifest.Serving.MaxBatchSize, spec.Manifest.Serving.MaxQueueInstances))
	for lo := 0; lo < len(rows); lo += chunk {
		hi := min(lo+chunk, len(rows))
		batch := runtime.Batch{Rows: hi - lo, Cols: w, Data: make([]float32, 0, (hi-lo)*w)}
		for _, r := range rows[lo:hi] {
			batch.Data = append(batch.Data, r...)
		}
		res, err := b.Submit(ctx, serving.Work{Rows: batch, Priority: serving.Low})
		out := res.Out
		if err != nil {
			return nil, fmt.Errorf("drift reference of %s: predict the sample: %w", v.ID(), err)
		}
		for i := 0; i < out.Rows; i++ {
			outs = append(outs, append([]float32(nil), out.Row(i)...))
		}
	}
	// The model's own outputs, before postprocess: (the gateway observes
	// those too).
	outNames := make([]string, len(spec.ModelOutputs))
	for i, n := range spec.ModelOutputs {
		outNames[i] = "output:" + n
	}
	ref := drift.BuildReference(spec.Schema.Features(), outNames, rows, outs, d.Bins)
	return drift.NewMonitor(ref, drift.Config{Window: d.Window.Duration, MinSamples: int64(d.MinSamples)})
}

// ReferenceRows decodes a drift reference sample (one instance per line)
// and preprocesses every line with the schema. Errors name the line.
func ReferenceRows(spec *modelpkg.Spec, raw []byte) ([][]float32, error) {
	w := spec.Schema.Width()
	var rows [][]float32
	err := drift.ReadSample(bytes.NewReader(raw), 100_000, func(line int, b []byte) error {
		inst, err := schema.DecodeInstance(b, "instance")
		if err != nil {
			return err
		}
		row := make([]float32, w)
		if err := spec.Schema.Row("instance", inst, row); err != nil {
			return err
		}
		rows = append(rows, row)
		return nil
	})
	if err != nil && spec.Manifest.Drift != nil && spec.Manifest.Drift.Reference != "reference.jsonl" {
		err = fmt.Errorf("%s: %w", spec.Manifest.Drift.Reference, err)
	}
	return rows, err
}

// DriftReport returns model@n's drift report (ok false without drift:).
func (c *Controller) DriftReport(model string, n int) (drift.Report, bool) {
	c.mu.Lock()
	l := c.versions[key(model, n)]
	c.mu.Unlock()
	if l == nil {
		return drift.Report{}, false
	}
	c.mu.Lock()
	mon := l.Drift
	c.mu.Unlock()
	if mon == nil {
		return drift.Report{}, false
	}
	return mon.Report(), true
}

// exportDrift refreshes the drift gauges of every monitored version.
func (c *Controller) exportDrift() {
	if c.metrics == nil {
		return
	}
	c.mu.Lock()
	var ls []*Loaded
	for _, l := range c.versions {
		if l.Drift != nil {
			ls = append(ls, l)
		}
	}
	c.mu.Unlock()
	for _, l := range ls {
		rep := l.Drift.Report()
		ver := strconv.Itoa(l.Version.N)
		for _, d := range append(rep.Features, rep.Outputs...) {
			c.metrics.SetDriftPSI(l.Version.Model, ver, d.Name, d.PSI)
		}
	}
}

// observer forwards a version server's events to the metrics.
type observer struct {
	m              *telemetry.Metrics
	model, version string
	maxBatch       int
}

func (o *observer) Batch(rows int, _ time.Duration) {
	o.m.ObserveBatch(o.model, o.version, rows, o.maxBatch)
}

func (o *observer) ExpiredInQueue() { o.m.ExpiredInQueue(o.model, o.version) }

func (o *observer) ReplicaCrash() { o.m.ReplicaCrash(o.model, o.version) }

func (o *observer) ReplicaRestart() { o.m.ReplicaRestart(o.model, o.version) }

// LiveState reports every ready version's queue and replicas (for the
// metrics' scrape-time gauges).
func (c *Controller) LiveState() []telemetry.VersionState {
	var out []telemetry.VersionState
	for _, st := range c.Versions() {
		if st.Stats == nil {
			continue
		}
		vs := telemetry.VersionState{Model: st.Version.Model, Version: strconv.Itoa(st.Version.N),
			Queued: st.Stats.QueuedInstances, InflightBatches: st.Stats.InflightBatches,
			ReadyReplicas: st.Stats.ReadyReplicas, RestartingReplicas: st.Stats.Restarting}
		for p, c := range st.Stats.Classes {
			vs.Classes = append(vs.Classes, telemetry.ClassState{Class: serving.Priority(p).String(), Queued: c.Queued, Served: c.Served})
		}
		out = append(out, vs)
	}
	return out
}
