package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// liveCollector reports gauges read from the server's live state on scrape,
// so that no code path has to keep a gauge in step with a queue.
type liveCollector struct {
	queued, inflight, replicas *prometheus.Desc

	mu  sync.Mutex // guards src
	src func() []VersionState
}

func newLiveCollector() *liveCollector {
	mv := []string{"model", "version"}
	return &liveCollector{
		queued:   prometheus.NewDesc(namespace+"_queued_instances", "Instances waiting in a version's queue now.", mv, nil),
		inflight: prometheus.NewDesc(namespace+"_inflight_batches", "Batches being computed by a version's replicas now.", mv, nil),
		replicas: prometheus.NewDesc(namespace+"_replicas", "A version's replicas now, by state (ready, restarting).", append(mv, "state"), nil),
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
	}
}
