package telemetry

import "github.com/prometheus/client_golang/prometheus"

// outcomeMetrics are the outcomes' and experiments' series.
type outcomeMetrics struct {
	posted   *prometheus.CounterVec // model, version, result
	units    *prometheus.GaugeVec   // model, version
	outcomes *prometheus.GaugeVec   // model, version
	mean     *prometheus.GaugeVec   // model, version
}

func newOutcomeMetrics() *outcomeMetrics {
	mv := []string{"model", "version"}
	return &outcomeMetrics{
		posted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "outcomes_total",
			Help: "Outcomes posted, by result (accepted; duplicate: stored before; unknown: no prediction of a model the caller may use, model and version empty)."}, append(mv, "result")),
		units: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "experiment_units",
			Help: "Units (distinct routing keys) an experiment's arm answered since it started, at its last refresh."}, mv),
		outcomes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "experiment_outcomes",
			Help: "Outcomes of the experiment's metric joined to an arm since it started, at its last refresh."}, mv),
		mean: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "experiment_mean",
			Help: "Mean of the experiment's metric on an arm, at its last refresh."}, mv),
	}
}

func (o *outcomeMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.posted, o.units, o.outcomes, o.mean}
}

// Outcomes counts n outcomes posted with result (accepted, duplicate,
// unknown).
func (m *Metrics) Outcomes(model, version, result string, n int) {
	m.out.posted.WithLabelValues(model, version, result).Add(float64(n))
}

// ExperimentArm sets an experiment arm's figures.
func (m *Metrics) ExperimentArm(model, version string, units, outcomes int64, mean float64) {
	m.out.units.WithLabelValues(model, version).Set(float64(units))
	m.out.outcomes.WithLabelValues(model, version).Set(float64(outcomes))
	m.out.mean.WithLabelValues(model, version).Set(mean)
}

// ExperimentEnded drops a model's experiment series.
func (m *Metrics) ExperimentEnded(model string) {
	for _, g := range []*prometheus.GaugeVec{m.out.units, m.out.outcomes, m.out.mean} {
		g.DeletePartialMatch(prometheus.Labels{"model": model})
	}
}
