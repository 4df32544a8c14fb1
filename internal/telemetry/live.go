package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// liveCollector reports gauges read from the server's live state on scrape,
// so that no code path has to keep a gauge in step with a queue.
type liveCollector struct {
	queued, inflight, replicas *prometheus.Desc
	classQueued, classServed   *prometheus.Desc

	mu  sync.Mutex // guards src
	src func() []VersionState
}

func newLiveCollector() *liveCollector {
	mv := []string{"model", "version"}
	return &liveCollector{
		queued:   prometheus.NewDesc(namespace+"_queued_instances", "Instances waiting in a version's queue now.", mv, nil),
		inflight: prometheus.NewDesc(namespace+"_inflight_batches", "Batches being computed by a version's replicas now.", mv, nil),
		replicas: prometheus.NewDesc(namespace+"_replicas", "A version's replicas now, by state (ready, restarting).", append(mv, "state"), nil),
		classQueued: prometheus.NewDesc(namespace+"_class_queued_instances",
			"Instances waiting in a version's queue now, by serving class (online, low, batch).", append(mv, "class"), nil),
		classServed: prometheus.NewDesc(namespace+"_class_served_instances_total",
			"Instances a version's replicas computed and answered, by serving class (online, low, batch).", append(mv, "class"), nil),
	}
}

func (c *liveCollector) set(f func() []VersionState) {
	c.mu.Lock()
	c.src = f
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queued
	ch <- c.inflight
	ch <- c.replicas
	ch <- c.classQueued
	ch <- c.classServed
}

// Collect implements prometheus.Collector.
func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.src
	c.mu.Unlock()
	if f == nil {
		return
	}
	seen := map[[2]string]bool{}
	for _, v := range f() {
		k := [2]string{v.Model, v.Version}
		if seen[k] { // a duplicate would make the whole scrape fail
			continue
		}
		seen[k] = true
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(v.Queued), v.Model, v.Version)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(v.InflightBatches), v.Model, v.Version)
		ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, float64(v.ReadyReplicas), v.Model, v.Version, "ready")
		ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, float64(v.RestartingReplicas), v.Model, v.Version, "restarting")
		classes := map[string]bool{}
		for _, k := range v.Classes {
			if classes[k.Class] {
				continue
			}
			classes[k.Class] = true
			ch <- prometheus.MustNewConstMetric(c.classQueued, prometheus.GaugeValue, float64(k.Queued), v.Model, v.Version, k.Class)
			ch <- prometheus.MustNewConstMetric(c.classServed, prometheus.CounterValue, float64(k.Served), v.Model, v.Version, k.Class)
		}
	}
}

// Reasons of sluice_records_dropped_total.
const (
	DropBufferFull  = "buffer_full"  // the records buffer was full (or the server was stopping)
	DropWriteFailed = "write_failed" // the database write failed (a full disk, a damaged file)
)

// RecordDrops are the records writer's counts, read on scrape: dropped
// records by reason, records committed, and records accepted but not yet
// committed (what a kill -9 would lose now in async mode).
type RecordDrops struct {
	BufferFull, WriteFailed int64
	Written, Pending        int64
}

// dropsCollector reports sluice_records_dropped_total from the writer's
// own counters, so the writer needs no metrics of its own.
type dropsCollector struct {
	desc, written, pending *prometheus.Desc

	mu  sync.Mutex // guards src
	src func() RecordDrops
}

func newDropsCollector() *dropsCollector {
	return &dropsCollector{desc: prometheus.NewDesc(namespace+"_records_dropped_total",
		"Prediction records (and attempts bumps) dropped instead of written, by reason (buffer_full, write_failed).", []string{"reason"}, nil),
		written: prometheus.NewDesc(namespace+"_records_written_total",
			"Prediction records (and attempts bumps) committed to records.db.", nil, nil),
		pending: prometheus.NewDesc(namespace+"_records_pending",
			"Prediction records (and attempts bumps) accepted and not yet committed: with --records-durability async, what a kill -9 now would lose.", nil, nil)}
}

// Describe implements prometheus.Collector.
func (c *dropsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.written
	ch <- c.pending
}

// Collect implements prometheus.Collector.
func (c *dropsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.src
	c.mu.Unlock()
	if f == nil {
		return // records off: no series
	}
	d := f()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(d.BufferFull), DropBufferFull)
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(d.WriteFailed), DropWriteFailed)
	ch <- prometheus.MustNewConstMetric(c.written, prometheus.CounterValue, float64(d.Written))
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(d.Pending))
}
