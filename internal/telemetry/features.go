package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FeatureBuckets are the bounds of sluice_feature_lookup_seconds: 10 µs to
// about 1.3 s, doubling.
var FeatureBuckets = prometheus.ExponentialBuckets(0.00001, 2, 18)

// featureMetrics are enrichment's series (internal/features), per view
// (model.yaml features.view: as few as the loaded versions' views) and
// tier (memory, redis, database).
type featureMetrics struct {
	lookups *prometheus.CounterVec   // view, tier, result (hit, miss, error)
	filled  *prometheus.CounterVec   // view, origin (default, stale)
	latency *prometheus.HistogramVec // view, tier
	breaker *prometheus.GaugeVec     // store
}

func newFeatureMetrics() *featureMetrics {
	return &featureMetrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "feature_lookups_total",
			Help: "Entities a feature tier was asked for, by view, tier (memory, redis, database) and result (hit, miss; error counts calls that got no answer)."}, []string{"view", "tier", "result"}),
		filled: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "feature_values_total",
			Help: "Filled feature values that were no stored fresh value, by view and origin (default: no tier had it in time; stale: older than maxAge)."}, []string{"view", "origin"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "feature_lookup_seconds",
			Help: "Time one feature tier took to answer a request's entities, by view and tier.", Buckets: FeatureBuckets}, []string{"view", "tier"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "feature_breaker_open",
			Help: "1 while a feature store's circuit breaker is open (requests skip the store; it is probed), else 0."}, []string{"store"}),
	}
}

func (f *featureMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.lookups, f.filled, f.latency, f.breaker}
}

// FeatureLookup counts one tier's answer for a request's entities (or its
// failure to answer) and its time.
func (m *Metrics) FeatureLookup(view, tier string, hits, misses int, took time.Duration, failed bool) {
	f := m.feat
	if failed {
		f.lookups.WithLabelValues(view, tier, "error").Inc()
	} else {
		if hits > 0 {
			f.lookups.WithLabelValues(view, tier, "hit").Add(float64(hits))
		}
		if misses > 0 {
			f.lookups.WithLabelValues(view, tier, "miss").Add(float64(misses))
		}
	}
	f.latency.WithLabelValues(view, tier).Observe(took.Seconds())
}

// FeatureFilled counts values filled by default and stale values served.
func (m *Metrics) FeatureFilled(view string, defaults, stale int) {
	if defaults > 0 {
		m.feat.filled.WithLabelValues(view, "default").Add(float64(defaults))
	}
	if stale > 0 {
		m.feat.filled.WithLabelValues(view, "stale").Add(float64(stale))
	}
}

// FeatureBreaker sets a feature store's breaker state.
func (m *Metrics) FeatureBreaker(store string, open bool) {
	v := 0.0
	if open {
		v = 1
	}
	m.feat.breaker.WithLabelValues(store).Set(v)
}
