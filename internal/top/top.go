// Package top turns two scrapes of a Sluice server's /metrics into the rows
// `sluice top` shows: per model version, the request rate, error share,
// latency quantiles, queue, batch fill, refusals and replicas over the time
// between the scrapes. It is pure: the CLI does the fetching and the
// screen handling.
package top

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names read from the exposition (see internal/telemetry).
const (
	metricRequests  = "sluice_requests_total"
	metricStage     = "sluice_request_stage_seconds"
	metricQueued    = "sluice_queued_instances"
	metricFill      = "sluice_batch_fill_ratio"
	metricRefusals  = "sluice_refusals_total"
	metricReplicas  = "sluice_replicas"
	stageTotal      = "total"
	replicasReady   = "ready"
	replicasRestart = "restarting"
)

// Key names one model version as the metrics label it.
type Key struct {
	Model, Version string
}

// Histogram is one cumulative histogram: Counts[i] observations were at
// most Bounds[i]. The last bound is +Inf and its count is Count.
type Histogram struct {
	Bounds []float64
	Counts []float64
	Sum    float64
	Count  float64
}

// Version is what one scrape says about one model version.
type Version struct {
	Requests   map[string]float64 // sluice_requests_total by code
	Latency    Histogram          // sluice_request_stage_seconds{stage="total"}
	Fill       Histogram          // sluice_batch_fill_ratio
	Refusals   map[string]float64 // sluice_refusals_total by reason
	Queued     float64            // sluice_queued_instances
	Ready      float64            // sluice_replicas{state="ready"}
	Restarting float64            // sluice_replicas{state="restarting"}
}

// Snapshot is one scrape: every model version found in it.
type Snapshot struct {
	Versions map[Key]*Version
}

// Parse reads a Prometheus text exposition (what GET /metrics answers) and
// keeps the per-version series `sluice top` shows. Series without a model
// or version label are ignored, as are all other metrics.
func Parse(exposition io.Reader) (Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(exposition)
	if err != nil {
		return Snapshot{}, fmt.Errorf("parse metrics: %w", err)
	}
	s := Snapshot{Versions: map[Key]*Version{}}
	get := func(m *dto.Metric) (*Version, map[string]string) {
		l := labels(m)
		if l["model"] == "" || l["version"] == "" {
			return nil, l
		}
		k := Key{l["model"], l["version"]}
		v := s.Versions[k]
		if v == nil {
			v = &Version{Requests: map[string]float64{}, Refusals: map[string]float64{}}
			s.Versions[k] = v
		}
		return v, l
	}
	for _, m := range fams[metricRequests].GetMetric() {
		if v, l := get(m); v != nil {
			v.Requests[l["code"]] += value(m)
		}
	}
	for _, m := range fams[metricRefusals].GetMetric() {
		if v, l := get(m); v != nil {
			v.Refusals[l["reason"]] += value(m)
		}
	}
	for _, m := range fams[metricStage].GetMetric() {
		if labels(m)["stage"] != stageTotal || m.GetHistogram() == nil {
			continue
		}
		if v, _ := get(m); v != nil {
			v.Latency = histogram(m.GetHistogram())
		}
	}
	for _, m := range fams[metricFill].GetMetric() {
		if m.GetHistogram() == nil {
			continue
		}
		if v, _ := get(m); v != nil {
			v.Fill = histogram(m.GetHistogram())
		}
	}
	for _, m := range fams[metricQueued].GetMetric() {
		if v, _ := get(m); v != nil {
			v.Queued = value(m)
		}
	}
	for _, m := range fams[metricReplicas].GetMetric() {
		if v, l := get(m); v != nil {
			switch l["state"] {
			case replicasReady:
				v.Ready = value(m)
			case replicasRestart:
				v.Restarting = value(m)
			}
		}
	}
	return s, nil
}

func labels(m *dto.Metric) map[string]string {
	l := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// value is a counter's, gauge's or untyped sample's value.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

func histogram(h *dto.Histogram) Histogram {
	count := float64(h.GetSampleCount())
	if h.SampleCountFloat != nil {
		count = h.GetSampleCountFloat()
	}
	out := Histogram{Sum: h.GetSampleSum(), Count: count}
	for _, b := range h.GetBucket() {
		c := float64(b.GetCumulativeCount())
		if b.CumulativeCountFloat != nil {
			c = b.GetCumulativeCountFloat()
		}
		out.Bounds = append(out.Bounds, b.GetUpperBound())
		out.Counts = append(out.Counts, c)
	}
	// Buckets may come in any order; the +Inf bucket is implied by _count.
	idx := make([]int, len(out.Bounds))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return out.Bounds[idx[a]] < out.Bounds[idx[b]] })
	bounds, counts := make([]float64, 0, len(idx)+1), make([]float64, 0, len(idx)+1)
	for _, i := range idx {
		bounds, counts = append(bounds, out.Bounds[i]), append(counts, out.Counts[i])
	}
	if n := len(bounds); n == 0 || !math.IsInf(bounds[n-1], +1) {
		bounds, counts = append(bounds, math.Inf(+1)), append(counts, count)
	}
	out.Bounds, out.Counts = bounds, counts
	return out
}

// Row is one model version's line in `sluice top`, over the window between
// two scrapes.
type Row struct {
	Model, Version string

	Requests  float64 // requests answered in the window (refusals included)
	ReqPerSec float64
	ErrorPct  float64 // share of non-2xx answers, 0–100; 0 without requests

	Latencies float64       // total-stage latency observations in the window
	P50, P99  time.Duration // from the window's histogram; 0 without observations

	Queued int // instances waiting now

	Batches   float64 // batches run in the window
	BatchFill float64 // mean rows per batch ÷ maxBatchSize (0–1); 0 without batches

	Refusals map[string]float64 // refusals per second by reason; reasons with none are left out

	Ready, Restarting int // replicas now
}

// Refused is the refusals per second over every reason.
func (r Row) Refused() float64 {
	var t float64
	for _, v := range r.Refusals {
		t += v
	}
	return t
}

// Diff computes one Row per model version of cur, from what changed since
// prev over dt: rates from counter deltas, quantiles and mean fill from
// the histograms' deltas, gauges as cur has them. A version absent from
// prev is taken to have started from zero; a counter that went down (the
// server restarted) is taken to have restarted from zero, as Prometheus's
// rate() does. Rows are sorted by model, then version (numerically).
func Diff(prev, cur Snapshot, dt time.Duration) []Row {
	secs := dt.Seconds()
	perSec := func(n float64) float64 {
		if secs <= 0 {
			return 0
		}
		return n / secs
	}
	rows := make([]Row, 0, len(cur.Versions))
	for k, c := range cur.Versions {
		p := prev.Versions[k]
		if p == nil {
			p = &Version{}
		}
		r := Row{Model: k.Model, Version: k.Version, Queued: int(c.Queued), Ready: int(c.Ready), Restarting: int(c.Restarting)}

		var total, failed float64
		for code, n := range c.Requests {
			d := delta(p.Requests[code], n)
			total += d
			if !isSuccess(code) {
				failed += d
			}
		}
		r.Requests, r.ReqPerSec = total, perSec(total)
		if total > 0 {
			r.ErrorPct = 100 * failed / total
		}

		lat := histDelta(p.Latency, c.Latency)
		r.Latencies = lat.Count
		if lat.Count > 0 {
			r.P50 = seconds(Quantile(0.5, lat))
			r.P99 = seconds(Quantile(0.99, lat))
		}

		fill := histDelta(p.Fill, c.Fill)
		r.Batches = fill.Count
		if fill.Count > 0 {
			r.BatchFill = fill.Sum / fill.Count
		}

		for reason, n := range c.Refusals {
			if d := delta(p.Refusals[reason], n); d > 0 {
				if r.Refusals == nil {
					r.Refusals = map[string]float64{}
				}
				r.Refusals[reason] = perSec(d)
			}
		}
		rows = append(rows, r)
	}
	SortRows(rows)
	return rows
}

// SortRows sorts rows by model, then version: numerically when both
// versions are numbers, as strings otherwise.
func SortRows(rows []Row) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		na, ea := strconv.Atoi(a.Version)
		nb, eb := strconv.Atoi(b.Version)
		if ea == nil && eb == nil {
			return na < nb
		}
		return a.Version < b.Version
	})
}

// isSuccess reports whether a code label is a success: "2xx" (see
// telemetry.CodeLabel).
func isSuccess(code string) bool {
	return len(code) >= 3 && code[:3] == "2xx"
}

// delta is a counter's increase; a decrease means it restarted from zero.
func delta(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// histDelta is the histogram of the observations made between prev and
// cur. If cur has fewer observations than prev (a restart) or its buckets
// differ, cur itself is the delta.
func histDelta(prev, cur Histogram) Histogram {
	if cur.Count < prev.Count || (len(prev.Bounds) > 0 && !sameBounds(prev.Bounds, cur.Bounds)) {
		return cur
	}
	d := Histogram{Bounds: cur.Bounds, Counts: make([]float64, len(cur.Counts)), Sum: cur.Sum - prev.Sum, Count: cur.Count - prev.Count}
	for i, c := range cur.Counts {
		if i < len(prev.Counts) {
			c -= prev.Counts[i]
		}
		d.Counts[i] = math.Max(c, 0)
	}
	return d
}

func sameBounds(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Quantile estimates the q-quantile (0 ≤ q ≤ 1) of a cumulative histogram
// the way PromQL's histogram_quantile does: find the bucket holding the
// rank q×Count and interpolate linearly inside it, the first bucket
// starting at 0. A rank in the +Inf bucket gives the highest finite
// bound. It returns NaN for an empty histogram.
func Quantile(q float64, h Histogram) float64 {
	if h.Count <= 0 || len(h.Bounds) == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	q = math.Max(0, math.Min(1, q))
	total := h.Counts[len(h.Counts)-1]
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(len(h.Counts), func(i int) bool { return h.Counts[i] >= rank })
	if i >= len(h.Bounds) {
		i = len(h.Bounds) - 1
	}
	if math.IsInf(h.Bounds[i], +1) {
		if i == 0 {
			return math.NaN()
		}
		return h.Bounds[i-1]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.Bounds[i-1], h.Counts[i-1]
	} else if h.Bounds[0] <= 0 {
		return h.Bounds[0]
	}
	in := h.Counts[i] - below
	if in <= 0 {
		return h.Bounds[i]
	}
	return lower + (h.Bounds[i]-lower)*(rank-below)/in
}

func seconds(s float64) time.Duration {
	if math.IsNaN(s) || s < 0 {
		return 0
	}
	return time.Duration(math.Round(s * float64(time.Second)))
}
