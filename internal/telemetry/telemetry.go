// Package telemetry defines Sluice's Prometheus metrics and the methods the
// server calls to record them.
//
// Every metric is registered on a Registerer the caller injects (never the
// global one). Label values are bounded: model and version come from the
// registry, stage/reason/phase/result/state from fixed sets defined here,
// code from the fixed error-code table (see CodeLabel), tenant from the
// tenant config file, and field from a model's declared schema. Values
// outside a fixed set are recorded as "other" rather than minting a series.
package telemetry

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluiceml/sluice/internal/errs"
)

const namespace = "sluice"

// Stage names of sluice_request_stage_seconds.
const (
	StagePreprocess = "preprocess" // decode + validate + preprocess into feature rows
	StageQueue      = "queue"      // enqueued → first row taken into a batch
	StageBatchWait  = "batch_wait" // taken → its first batch starts computing
	StageCompute    = "compute"    // first batch starts → last batch ends
	StageTotal      = "total"      // request received → response ready
)

// Schema violation reasons of sluice_schema_violations_total.
const (
	ViolationMissing      = "missing"       // required field absent
	ViolationNull         = "null"          // null where a value is required
	ViolationType         = "type"          // wrong JSON type
	ViolationRange        = "range"         // outside min/max
	ViolationCategory     = "category"      // not one of a category's values
	ViolationInteger      = "integer"       // non-integral value for an int field
	ViolationOverflow     = "overflow"      // number too large for its type
	ViolationUnknownField = "unknown_field" // field not in the schema (field label "_unknown")
	ViolationDuplicate    = "duplicate"     // field sent twice in one instance
	ViolationOther        = "other"
)

// UnknownField is the field label used for fields the schema does not
// declare; the client's string is never used as a label value.
const UnknownField = "_unknown"

// Load phases of sluice_model_load_seconds.
const (
	PhaseLoad   = "load"
	PhaseGolden = "golden"
	PhaseWarmup = "warmup"
)

// Version states of sluice_version_state (the registry's load states).
var versionStates = []string{"published", "loading", "validating", "ready", "failed"}

var (
	// refusalReasons of sluice_refusals_total: the catalogue's refusal
	// codes (errs.Refusals), each pre-registered for every version.
	refusalReasons   = codeStrings(errs.Refusals())
	violationReasons = []string{ViolationMissing, ViolationNull, ViolationType, ViolationRange, ViolationCategory, ViolationInteger, ViolationOverflow, ViolationUnknownField, ViolationDuplicate, ViolationOther}
	stages           = []string{StagePreprocess, StageQueue, StageBatchWait, StageCompute, StageTotal}
)

// LatencyBuckets are the bucket bounds of every *_seconds histogram:
// 0.1 ms × 2^k for k = 0..17, i.e. 100 µs to about 13.1 s.
var LatencyBuckets = prometheus.ExponentialBuckets(0.0001, 2, 18)

// BatchSizeBuckets are the bounds of sluice_batch_size: 1, 2, 4, … 1024 rows.
var BatchSizeBuckets = prometheus.ExponentialBuckets(1, 2, 11)

// FillRatioBuckets are the bounds of sluice_batch_fill_ratio.
var FillRatioBuckets = []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}

// AbsDiffBuckets are the bounds of sluice_shadow_abs_diff: 1e-6 … 1e2.
var AbsDiffBuckets = prometheus.ExponentialBuckets(1e-6, 10, 9)

// BuildInfo labels sluice_build_info.
type BuildInfo struct {
	Version   string // Sluice's version, e.g. "0.3.0" or "dev"
	GoVersion string // runtime.Version()
}

// Stages are one request's time in each stage. A zero stage was not reached
// (a refused request has no queue or compute time) and is not observed;
// Total is always observed.
type Stages struct {
	Preprocess, Queue, BatchWait, Compute, Total time.Duration
}

// LoadTimings are the durations of a version's load phases. A zero phase
// did not run (warmup turned off) and is not recorded.
type LoadTimings struct {
	Load, Golden, Warmup time.Duration
}

// VersionState is the live state of one loaded version, read on scrape.
type VersionState struct {
	Model              string
	Version            string
	Queued             int // instances waiting in the queue
	InflightBatches    int // batches being computed now
	ReadyReplicas      int
	RestartingReplicas int
	// Classes are the version's queued and served instances by serving
	// class (nil: not counted, no per-class series).
	Classes []ClassState
}

// ClassState is one serving class's instances in a version: queued now,
// and served (computed and answered) so far.
type ClassState struct {
	Class  string // "online", "low", "batch"
	Queued int
	Served int64
}

// Metrics records Sluice's metrics. Its methods are safe for concurrent use.
type Metrics struct {
	gatherer prometheus.Gatherer // nil when the Registerer is not a Gatherer
	hot      sync.Map            // hotKey → *hotSeries (ObserveRequest); Forget drops a version's

	requests     *prometheus.CounterVec
	instances    *prometheus.CounterVec
	stage        *prometheus.HistogramVec
	batchSize    *prometheus.HistogramVec
	fillRatio    *prometheus.HistogramVec
	padRatio     *prometheus.HistogramVec
	refusals     *prometheus.CounterVec
	expired      *prometheus.CounterVec
	deadline     *prometheus.CounterVec
	crashes      *prometheus.CounterVec
	restarts     *prometheus.CounterVec
	loadSeconds  *prometheus.GaugeVec
	golden       *prometheus.CounterVec
	artifact     *prometheus.GaugeVec
	versionState *prometheus.GaugeVec
	shadowDis    *prometheus.CounterVec
	shadowDiff   *prometheus.HistogramVec
	shadowLat    *prometheus.HistogramVec
	canaryShare  *prometheus.GaugeVec
	driftPSI     *prometheus.GaugeVec
	desired      *prometheus.GaugeVec
	violations   *prometheus.CounterVec
	missing      *prometheus.CounterVec
	feat         *featureMetrics // enrichment (features.go)
	out          *outcomeMetrics // outcomes and experiments (outcomes.go)
	tenantReqs   *prometheus.CounterVec
	tenantQuota  *prometheus.CounterVec
	// placement (workers mode)
	placeLoads   *prometheus.CounterVec
	evictions    *prometheus.CounterVec
	coldStarts   *prometheus.CounterVec
	quarantines  *prometheus.CounterVec
	conns        *prometheus.GaugeVec
	connsRefused *prometheus.CounterVec
	workerBudget *prometheus.GaugeVec
	workerUsed   *prometheus.GaugeVec

	// perVersion lists every vector labelled by model and version, for Forget.
	perVersion []interface {
		DeletePartialMatch(prometheus.Labels) int
	}

	live  *liveCollector
	drops *dropsCollector
	cache *cacheMetrics

	mu sync.Mutex // guards fields
	// fields holds each version's declared field names, when declared; a
	// field label outside the set becomes UnknownField.
	fields map[[2]string]map[string]bool
}

// New creates Sluice's metrics and registers them on reg. It panics if a
// metric is already registered there (a wiring bug, like MustRegister).
func New(reg prometheus.Registerer, build BuildInfo) *Metrics {
	mv := []string{"model", "version"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	}
	with := func(extra ...string) []string { return append(append([]string{}, mv...), extra...) }

	m := &Metrics{
		requests:     counter("requests_total", "Prediction requests answered, by model version and response code (status class and error code).", with("code")...),
		instances:    counter("instances_total", "Instances in answered prediction requests, by model version and response code.", with("code")...),
		stage:        histogram("request_stage_seconds", "Time a prediction request spent in each stage (preprocess, queue, batch_wait, compute, total).", LatencyBuckets, with("stage")...),
		batchSize:    histogram("batch_size", "Rows per batch run on a replica.", BatchSizeBuckets, mv...),
		fillRatio:    histogram("batch_fill_ratio", "Rows per batch divided by the version's maximum batch size.", FillRatioBuckets, mv...),
		padRatio:     histogram("batch_padding_ratio", "Sequence models: padded cells of a batch divided by rows times its longest row.", FillRatioBuckets, mv...),
		refusals:     counter("refusals_total", "Requests refused before computing, by reason.", with("reason")...),
		expired:      counter("expired_in_queue_total", "Requests whose deadline passed while they waited in the queue.", mv...),
		deadline:     counter("deadline_exceeded_total", "Requests whose deadline passed after they were admitted.", mv...),
		crashes:      counter("replica_crashes_total", "Replica crashes (panics or runtime failures that took a replica down).", mv...),
		restarts:     counter("replica_restarts_total", "Replicas started to replace a crashed one.", mv...),
		loadSeconds:  gauge("model_load_seconds", "Duration of the last load of a version, by phase (load, golden, warmup).", with("phase")...),
		golden:       counter("golden_checks_total", "Golden-example checks run when loading a version, by result (pass, fail).", with("result")...),
		artifact:     gauge("model_artifact_bytes", "Size of a loaded version's model artifact.", mv...),
		versionState: gauge("version_state", "1 for a version's current load state, 0 for the others.", with("state")...),
		shadowDis:    counter("shadow_disagreements_total", "Shadow predictions that disagreed with the primary's.", mv...),
		shadowDiff:   histogram("shadow_abs_diff", "Absolute difference between a shadow prediction and the primary's.", AbsDiffBuckets, mv...),
		shadowLat:    histogram("shadow_latency_seconds", "Latency of shadow predictions.", LatencyBuckets, mv...),
		canaryShare:  gauge("canary_traffic_share", "Share of a model's traffic routed to a canary version (0 to 1).", mv...),
		desired:      gauge("replicas_desired", "Replicas the autoscaler wants for a version (sluice_replicas has the ready ones).", mv...),
		driftPSI:     gauge("drift_psi", "Population stability index of a feature or output over the drift window against the reference sample (> 0.2: drifted).", "model", "version", "feature"),
		violations:   counter("schema_violations_total", "Input values rejected by a version's schema, by declared field and reason.", with("field", "reason")...),
		missing:      counter("missing_features_total", "Optional input fields absent from an instance (filled by their default).", with("field")...),
		tenantReqs:   counter("tenant_requests_total", "Prediction requests by tenant and response code.", "tenant", "code"),
		tenantQuota:  counter("tenant_quota_refusals_total", "Requests refused because the tenant was over its quota.", "tenant"),
		placeLoads:   counter("worker_loads_total", "Loads of a version onto a worker process (at start, on demand, after a worker restart).", mv...),
		evictions:    counter("evictions_total", "Unloads of a version from a worker process to make room for another.", mv...),
		coldStarts:   counter("cold_starts_total", "Requests that found their version loaded on no worker, by outcome (waited: for the load; refused: 503 cold_start).", with("outcome")...),
		quarantines:  counter("quarantines_total", "Versions quarantined for making their worker processes exit.", mv...),
		conns:        gauge("connections", "Connections a listener (http, grpc) holds open now.", "listener"),
		connsRefused: counter("connections_refused_total", "Connections a listener closed at once because it held its --http-max-conns or --grpc-max-conns.", "listener"),
		workerBudget: gauge("worker_memory_budget_bytes", "The memory a worker process's versions may hold.", "worker"),
		workerUsed:   gauge("worker_memory_used_bytes", "The memory a worker process's versions hold, as placement counts it.", "worker"),
		fields:       map[[2]string]map[string]bool{},
		feat:         newFeatureMetrics(),
		out:          newOutcomeMetrics(),
	}
	m.perVersion = []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{
		m.requests, m.instances, m.stage, m.batchSize, m.fillRatio, m.padRatio, m.refusals, m.expired, m.deadline,
		m.crashes, m.restarts, m.loadSeconds, m.golden, m.artifact, m.versionState, m.shadowDis,
		m.shadowDiff, m.shadowLat, m.canaryShare, m.driftPSI, m.violations, m.missing, m.desired,
		m.placeLoads, m.evictions, m.coldStarts, m.quarantines,
	}
	m.live = newLiveCollector()
	m.drops = newDropsCollector()
	m.cache = newCacheMetrics()
	m.perVersion = append(m.perVersion, m.cache.requests, m.out.posted, m.out.units, m.out.outcomes, m.out.mean)
	buildInfo := gauge("build_info", "Always 1; labels say which Sluice build is running.", "version", "goversion")
	buildInfo.WithLabelValues(build.Version, build.GoVersion).Set(1)

	reg.MustRegister(m.requests, m.instances, m.stage, m.batchSize, m.fillRatio, m.padRatio, m.refusals, m.expired,
		m.deadline, m.crashes, m.restarts, m.loadSeconds, m.golden, m.artifact, m.versionState,
		m.shadowDis, m.shadowDiff, m.shadowLat, m.canaryShare, m.driftPSI, m.violations, m.missing, m.desired,
		m.tenantReqs, m.tenantQuota, buildInfo, m.live, m.drops,
		m.placeLoads, m.evictions, m.coldStarts, m.quarantines, m.workerBudget, m.workerUsed, m.conns, m.connsRefused, m.cache.requests, m.cache)
	reg.MustRegister(m.feat.collectors()...)
	reg.MustRegister(m.out.collectors()...)
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	}
	return m
}

// NewRegistry returns a fresh registry with the Go runtime and process
// collectors, ready to pass to New.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Handler serves the metrics in the Prometheus exposition format. It needs
// the Registerer given to New to also be a Gatherer (a *prometheus.Registry
// is); otherwise it answers 500.
func (m *Metrics) Handler() http.Handler {
	if m.gatherer == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "telemetry: the registerer is not a gatherer; serve metrics with promhttp.HandlerFor", http.StatusInternalServerError)
		})
	}
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// CodeLabel is the code label of a response: the status class alone for a
// success ("2xx"), the class and the error code for a failure
// ("4xx_invalid_argument", "5xx_queue_full"). An empty code gives the class
// alone whatever the status.
func CodeLabel(status int, code errs.Code) string {
	class := "5xx"
	if status >= 100 && status < 600 {
		class = strconv.Itoa(status/100) + "xx"
	}
	if code == "" {
		return class
	}
	return class + "_" + string(code)
}

// CodeOf is the code label of a request's final error; nil is "2xx".
// Non-*errs.Error errors count as "5xx_internal".
func CodeOf(err error) string {
	if err == nil {
		return "2xx"
	}
	c := errs.CodeOf(err)
	return CodeLabel(errs.HTTPStatus(c), c)
}

// validCodes is every label CodeLabel can produce from the error table, plus
// the bare classes.
var validCodes = func() map[string]bool {
	v := map[string]bool{"1xx": true, "2xx": true, "3xx": true, "4xx": true, "5xx": true}
	for _, c := range errs.Codes() {
		v[CodeLabel(errs.HTTPStatus(c), c)] = true
	}
	return v
}()

// code bounds a code label: anything CodeLabel would not produce is "other".
func code(c string) string {
	if validCodes[c] {
		return c
	}
	return "other"
}

func oneOf(v string, set []string, fallback string) string {
	for _, s := range set {
		if v == s {
			return v
		}
	}
	return fallback
}

// InitVersion creates a version's counters at zero (requests by "2xx",
// refusals by every reason, expirations, deadlines, crashes, restarts), so
// that rate() and increase() see them from the first scrape. Call it when a
// version becomes ready.
func (m *Metrics) InitVersion(model, version string) {
	m.requests.WithLabelValues(model, version, "2xx")
	m.instances.WithLabelValues(model, version, "2xx")
	for _, r := range refusalReasons {
		m.refusals.WithLabelValues(model, version, r)
	}
	m.expired.WithLabelValues(model, version)
	m.deadline.WithLabelValues(model, version)
	m.crashes.WithLabelValues(model, version)
	m.restarts.WithLabelValues(model, version)
}

// ObserveRequest records one answered prediction request: its code label
// (see CodeLabel), how many instances it carried, and its stage times.
func (m *Metrics) ObserveRequest(model, version, codeLabel string, instances int, st Stages) {
	hs := m.series(model, version, code(codeLabel))
	hs.requests.Inc()
	if instances > 0 {
		hs.instances.Add(float64(instances))
	}
	for i, d := range [...]time.Duration{st.Preprocess, st.Queue, st.BatchWait, st.Compute} {
		if d > 0 {
			hs.stage[i].Observe(d.Seconds())
		}
	}
	hs.stage[4].Observe(st.Total.Seconds())
}

// hotKey names the series one answered request touches.
type hotKey struct{ model, version, code string }

// hotSeries are those series, looked up once: a request then costs one
// map load instead of six label-value lookups (each hashing its labels
// under the vector's lock).
type hotSeries struct {
	requests, instances prometheus.Counter
	stage               [5]prometheus.Observer // preprocess, queue, batch_wait, compute, total
}

func (m *Metrics) series(model, version, c string) *hotSeries {
	k := hotKey{model, version, c}
	if v, ok := m.hot.Load(k); ok {
		return v.(*hotSeries)
	}
	hs := &hotSeries{requests: m.requests.WithLabelValues(model, version, c), instances: m.instances.WithLabelValues(model, version, c)}
	for i, name := range [...]string{StagePreprocess, StageQueue, StageBatchWait, StageCompute, StageTotal} {
		hs.stage[i] = m.stage.WithLabelValues(model, version, name)
	}
	v, _ := m.hot.LoadOrStore(k, hs)
	return v.(*hotSeries)
}

// ObserveBatch records one batch of rows run on a replica of a version whose
// maximum batch size is maxBatch.
func (m *Metrics) ObserveBatch(model, version string, rows, maxBatch int) {
	m.batchSize.WithLabelValues(model, version).Observe(float64(rows))
	if maxBatch > 0 {
		m.fillRatio.WithLabelValues(model, version).Observe(float64(rows) / float64(maxBatch))
	}
}

// ObservePadding records a sequence model's batch padding ratio: padded
// cells / (rows × the batch's longest row), 0 to 1.
func (m *Metrics) ObservePadding(model, version string, ratio float64) {
	m.padRatio.WithLabelValues(model, version).Observe(ratio)
}

// Refused counts a request refused before computing. reason is the
// refusal's code (a refusal in the errs catalogue); others count as "other".
func (m *Metrics) Refused(model, version string, reason errs.Code) {
	m.refusals.WithLabelValues(model, version, oneOf(string(reason), refusalReasons, "other")).Inc()
}

func codeStrings(cs []errs.Code) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// ExpiredInQueue counts a request whose deadline passed while it was queued.
func (m *Metrics) ExpiredInQueue(model, version string) {
	m.expired.WithLabelValues(model, version).Inc()
}

// DeadlineExceeded counts a request whose deadline passed after admission.
func (m *Metrics) DeadlineExceeded(model, version string) {
	m.deadline.WithLabelValues(model, version).Inc()
}

// ReplicaCrash counts a replica crash.
func (m *Metrics) ReplicaCrash(model, version string) {
	m.crashes.WithLabelValues(model, version).Inc()
}

// ReplicaRestart counts a replica started to replace a crashed one.
func (m *Metrics) ReplicaRestart(model, version string) {
	m.restarts.WithLabelValues(model, version).Inc()
}

// LoadFinished records a finished load of a version: its phase durations,
// the golden check's result and the artifact's size. Call it for failed
// loads too (goldenOK false) with the phases that ran.
func (m *Metrics) LoadFinished(model, version string, t LoadTimings, goldenOK bool, artifactBytes int64) {
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{PhaseLoad, t.Load}, {PhaseGolden, t.Golden}, {PhaseWarmup, t.Warmup}} {
		if p.d > 0 {
			m.loadSeconds.WithLabelValues(model, version, p.name).Set(p.d.Seconds())
		}
	}
	result := "pass"
	if !goldenOK {
		result = "fail"
	}
	m.golden.WithLabelValues(model, version, result).Inc()
	if artifactBytes > 0 {
		m.artifact.WithLabelValues(model, version).Set(float64(artifactBytes))
	}
}

// SetVersionState sets sluice_version_state: 1 for state, 0 for the other
// registry states (published, loading, validating, ready, failed).
func (m *Metrics) SetVersionState(model, version, state string) {
	for _, s := range versionStates {
		v := 0.0
		if s == state {
			v = 1
		}
		m.versionState.WithLabelValues(model, version, s).Set(v)
	}
}

// ShadowCompared records one shadow prediction of version compared with the
// primary's: whether it disagreed, the absolute difference of the scores and
// the shadow's latency.
func (m *Metrics) ShadowCompared(model, version string, disagreed bool, absDiff float64, latency time.Duration) {
	if disagreed {
		m.shadowDis.WithLabelValues(model, version).Inc()
	} else {
		m.shadowDis.WithLabelValues(model, version).Add(0)
	}
	m.shadowDiff.WithLabelValues(model, version).Observe(absDiff)
	m.shadowLat.WithLabelValues(model, version).Observe(latency.Seconds())
}

// SetCanaryShare sets the share (0 to 1) of a model's traffic sent to version.
func (m *Metrics) SetCanaryShare(model, version string, share float64) {
	m.canaryShare.WithLabelValues(model, version).Set(share)
}

// DeclareFields bounds the field label of a version's schema metrics to its
// declared field names: SchemaViolation and MissingFeature then record any
// other name as UnknownField. Versions not declared are not checked, so the
// caller must pass declared names (or UnknownField) itself.
func (m *Metrics) DeclareFields(model, version string, fields []string) {
	set := make(map[string]bool, len(fields))
	for _, f := range fields {
		set[f] = true
	}
	m.mu.Lock()
	m.fields[[2]string{model, version}] = set
	m.mu.Unlock()
}

func (m *Metrics) field(model, version, f string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if set, ok := m.fields[[2]string{model, version}]; ok && !set[f] {
		return UnknownField
	}
	return f
}

// SchemaViolation counts an input value a version's schema rejected. field
// is the declared field name, or UnknownField for a field the schema does
// not declare; reason is one of the Violation* constants (others count as
// "other").
func (m *Metrics) SchemaViolation(model, version, field, reason string) {
	reason = oneOf(reason, violationReasons, ViolationOther)
	f := m.field(model, version, field)
	if reason == ViolationUnknownField {
		f = UnknownField
	}
	m.violations.WithLabelValues(model, version, f, reason).Inc()
}

// MissingFeature counts an optional field absent from an instance.
func (m *Metrics) MissingFeature(model, version, field string) {
	m.missing.WithLabelValues(model, version, m.field(model, version, field)).Inc()
}

// TenantRequest counts a prediction request of a configured tenant with its
// code label. tenant must come from the tenant config, never from a header
// the client chose freely.
func (m *Metrics) TenantRequest(tenant, codeLabel string) {
	m.tenantReqs.WithLabelValues(tenant, code(codeLabel)).Inc()
}

// Listener returns the gauge of the connections listener ("http",
// "grpc") holds open and the counter of those it refused.
func (m *Metrics) Listener(listener string) (open prometheus.Gauge, refused prometheus.Counter) {
	return m.conns.WithLabelValues(listener), m.connsRefused.WithLabelValues(listener)
}

// QuotaRefused counts a request refused because tenant was over its quota.
func (m *Metrics) QuotaRefused(tenant string) {
	m.tenantQuota.WithLabelValues(tenant).Inc()
}

// Forget deletes every series of a version (call it when the version is
// unloaded), so that dead versions do not linger in scrapes.
func (m *Metrics) Forget(model, version string) {
	l := prometheus.Labels{"model": model, "version": version}
	for _, v := range m.perVersion {
		v.DeletePartialMatch(l)
	}
	// After the deletion: a handle looked up before it would keep counting
	// into a series no scrape shows.
	m.hot.Range(func(k, _ any) bool {
		if hk := k.(hotKey); hk.model == model && hk.version == version {
			m.hot.Delete(k)
		}
		return true
	})
	m.cache.forget(model, version)
	m.mu.Lock()
	delete(m.fields, [2]string{model, version})
	m.mu.Unlock()
}

// SetDesiredReplicas sets the autoscaler's replica count for a version.
func (m *Metrics) SetDesiredReplicas(model, version string, n int) {
	m.desired.WithLabelValues(model, version).Set(float64(n))
}

// SetDriftPSI sets the PSI of one feature or output ("output:NAME") of a
// version; names come from the version's schema, so the set is bounded.
func (m *Metrics) SetDriftPSI(model, version, feature string, psi float64) {
	m.driftPSI.WithLabelValues(model, version, feature).Set(psi)
}

// SetVersionSource sets the function read on every scrape for the live
// gauges sluice_queued_instances, sluice_inflight_batches and
// sluice_replicas. It must be quick and safe for concurrent use; nil turns
// the gauges off.
func (m *Metrics) SetVersionSource(f func() []VersionState) {
	m.live.set(f)
}

// SetRecordDrops makes sluice_records_dropped_total read f on every
// scrape (the records writer's counters). Without it the metric has no
// series.
func (m *Metrics) SetRecordDrops(f func() RecordDrops) {
	m.drops.mu.Lock()
	m.drops.src = f
	m.drops.mu.Unlock()
}

// VersionLoaded counts a load of a version onto a worker (cluster.Metrics).
func (m *Metrics) VersionLoaded(model, version string) {
	m.placeLoads.WithLabelValues(model, version).Inc()
}

// VersionEvicted counts an eviction of a version from a worker.
func (m *Metrics) VersionEvicted(model, version string) {
	m.evictions.WithLabelValues(model, version).Inc()
}

// ColdStart counts a request that found its version loaded nowhere, by
// outcome: "waited" or "refused".
func (m *Metrics) ColdStart(model, version, outcome string) {
	m.coldStarts.WithLabelValues(model, version, outcome).Inc()
}

// VersionQuarantined counts a quarantine.
func (m *Metrics) VersionQuarantined(model, version string) {
	m.quarantines.WithLabelValues(model, version).Inc()
}

// WorkerMemory sets a worker's memory budget and use.
func (m *Metrics) WorkerMemory(worker string, budget, used int64) {
	m.workerBudget.WithLabelValues(worker).Set(float64(budget))
	m.workerUsed.WithLabelValues(worker).Set(float64(used))
}

// ForgetWorker deletes a forgotten worker's series: a worker id is a
// label only while the pool knows the worker.
func (m *Metrics) ForgetWorker(worker string) {
	m.workerBudget.DeleteLabelValues(worker)
	m.workerUsed.DeleteLabelValues(worker)
}
