package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of sluice_cache_requests_total.
const (
	CacheHit  = "hit"  // an instance answered from the prediction cache
	CacheMiss = "miss" // an instance computed (and stored)
)

// CacheState is one version's prediction cache, read on scrape.
type CacheState struct {
	Model, Version string
	Entries, Bytes int64
}

// cacheMetrics are the prediction cache's: per-instance lookups (hit +
// miss is the instances a cached version answered) and the caches' size,
// read on scrape from the gateway's caches.
type cacheMetrics struct {
	requests *prometheus.CounterVec
	entries  *prometheus.Desc
	bytes    *prometheus.Desc

	mu  sync.Mutex // guards src
	src func() []CacheState

	// hot holds each version's two counters, looked up once ([2]string
	// {model, version} → *[2]prometheus.Counter: hit, miss); forget
	// drops a version's.
	hot sync.Map
}

func (c *cacheMetrics) counters(model, version string) *[2]prometheus.Counter {
	k := [2]string{model, version}
	if v, ok := c.hot.Load(k); ok {
		return v.(*[2]prometheus.Counter)
	}
	v, _ := c.hot.LoadOrStore(k, &[2]prometheus.Counter{c.requests.WithLabelValues(model, version, CacheHit), c.requests.WithLabelValues(model, version, CacheMiss)})
	return v.(*[2]prometheus.Counter)
}

// forget drops a version's counters (after Metrics.Forget deleted its series).
func (c *cacheMetrics) forget(model, version string) { c.hot.Delete([2]string{model, version}) }

func newCacheMetrics() *cacheMetrics {
	mv := []string{"model", "version"}
	return &cacheMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "cache_requests_total",
			Help: "Instances of successful prediction requests to a version with a prediction cache, by result (hit: answered from the cache, miss: computed); hit + miss is the instances answered."},
			[]string{"model", "version", "result"}),
		entries: prometheus.NewDesc(namespace+"_cache_entries", "Entries in a version's prediction cache now.", mv, nil),
		bytes:   prometheus.NewDesc(namespace+"_cache_bytes", "Bytes a version's prediction cache holds now (keys, outputs and per-entry overhead), bounded by model.yaml cache.maxBytes.", mv, nil),
	}
}

// Describe implements prometheus.Collector (the gauges; the counter
// registers itself).
func (c *cacheMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.entries
	ch <- c.bytes
}

// Collect implements prometheus.Collector.
func (c *cacheMetrics) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.src
	c.mu.Unlock()
	if f == nil {
		return
	}
	seen := map[[2]string]bool{}
	for _, s := range f() {
		k := [2]string{s.Model, s.Version}
		if seen[k] {
			continue
		}
		seen[k] = true
		ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(s.Entries), s.Model, s.Version)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes), s.Model, s.Version)
	}
}

// CacheRequests counts one successful request's instances to a version
// with a prediction cache: hits answered from it, misses computed.
func (m *Metrics) CacheRequests(model, version string, hits, misses int) {
	cs := m.cache.counters(model, version)
	if hits > 0 {
		cs[0].Add(float64(hits))
	}
	if misses > 0 {
		cs[1].Add(float64(misses))
	}
}

// SetCacheSource makes sluice_cache_entries and sluice_cache_bytes read
// f on every scrape (quick, safe for concurrent use; nil: no series).
func (m *Metrics) SetCacheSource(f func() []CacheState) {
	m.cache.mu.Lock()
	m.cache.src = f
	m.cache.mu.Unlock()
}
