package telemetry

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluiceml/sluice/internal/errs"
)

func newTest(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return New(reg, BuildInfo{Version: "test", GoVersion: "go1.26"}), reg
}

// observeAll records every metric at least once.
func observeAll(m *Metrics) {
	m.Outcomes("fraud", "3", "accepted", 1)
	m.ExperimentArm("fraud", "3", 10, 5, 0.5)
	m.InitVersion("fraud", "3")
	m.VersionLoaded("fraud", "3")
	m.VersionEvicted("fraud", "3")
	m.ColdStart("fraud", "3", "waited")
	m.VersionQuarantined("fraud", "3")
	m.WorkerMemory("worker-1", 64<<20, 8<<20)
	m.ObserveRequest("fraud", "3", "2xx", 4, Stages{Preprocess: time.Millisecond, Queue: 2 * time.Millisecond, BatchWait: time.Millisecond, Compute: 3 * time.Millisecond, Total: 8 * time.Millisecond})
	m.ObserveRequest("fraud", "3", CodeOf(errs.New(errs.QueueFull, "full")), 1, Stages{Preprocess: time.Millisecond, Total: time.Millisecond})
	m.ObserveBatch("fraud", "3", 12, 32)
	m.ObservePadding("fraud", "3", 0.25)
	m.SetDesiredReplicas("fraud", "3", 4)
	m.Refused("fraud", "3", errs.QueueFull)
	m.ExpiredInQueue("fraud", "3")
	m.DeadlineExceeded("fraud", "3")
	m.ReplicaCrash("fraud", "3")
	m.ReplicaRestart("fraud", "3")
	m.LoadFinished("fraud", "3", LoadTimings{Load: time.Second, Golden: 10 * time.Millisecond, Warmup: 50 * time.Millisecond}, true, 1<<20)
	m.SetVersionState("fraud", "3", "ready")
	m.ShadowCompared("fraud", "4", true, 0.25, 3*time.Millisecond)
	m.SetCanaryShare("fraud", "4", 0.1)
	m.SetDriftPSI("fraud", "4", "amount", 0.31)
	m.SchemaViolation("fraud", "3", "amount", ViolationRange)
	m.MissingFeature("fraud", "3", "country")
	m.FeatureLookup("card_stats", "redis", 3, 1, time.Millisecond, false)
	m.FeatureLookup("card_stats", "database", 0, 0, 2*time.Millisecond, true)
	m.FeatureFilled("card_stats", 2, 1)
	m.FeatureBreaker("redis", true)
	m.TenantRequest("acme", "2xx")
	m.QuotaRefused("acme")
	open, refused := m.Listener("grpc")
	open.Inc()
	refused.Inc()
	m.SetVersionSource(func() []VersionState {
		return []VersionState{{Model: "fraud", Version: "3", Queued: 7, InflightBatches: 2, ReadyReplicas: 3, RestartingReplicas: 1,
			Classes: []ClassState{{Class: "online", Queued: 1, Served: 5}, {Class: "batch", Queued: 6, Served: 900}}}}
	})
	m.SetRecordDrops(func() RecordDrops { return RecordDrops{BufferFull: 1, WriteFailed: 2} })
	m.CacheRequests("fraud", "3", 9, 1)
	m.SetCacheSource(func() []CacheState { return []CacheState{{Model: "fraud", Version: "3", Entries: 10, Bytes: 3500}} })
}

func TestCodeLabel(t *testing.T) {
	tests := []struct {
		status int
		code   errs.Code
		want   string
	}{
		{200, "", "2xx"},
		{400, errs.InvalidArgument, "4xx_invalid_argument"},
		{503, errs.QueueFull, "5xx_queue_full"},
		{429, errs.QuotaExceeded, "4xx_quota_exceeded"},
		{504, errs.ExpiredInQueue, "5xx_expired_in_queue"},
		{0, errs.Internal, "5xx_internal"},
		{404, "", "4xx"},
	}
	for _, tc := range tests {
		if got := CodeLabel(tc.status, tc.code); got != tc.want {
			t.Errorf("CodeLabel(%d, %q) = %q, want %q", tc.status, tc.code, got, tc.want)
		}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "2xx"},
		{errs.New(errs.DeadlineInfeasible, "x"), "5xx_deadline_infeasible"},
		{errs.New(errs.TooManyInstances, "x"), "4xx_too_many_instances"},
		{errors.New("plain"), "5xx_internal"},
	} {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	// Every code label the error table can produce is accepted as is.
	for _, c := range errs.Codes() {
		l := CodeLabel(errs.HTTPStatus(c), c)
		if code(l) != l {
			t.Errorf("code(%q) = %q, want it unchanged", l, code(l))
		}
	}
}

func TestObservationsLandInTheirSeries(t *testing.T) {
	tests := []struct {
		name    string
		observe func(m *Metrics)
		metric  func(m *Metrics) prometheus.Collector
		want    float64
	}{
		{"request counted by code", func(m *Metrics) {
			m.ObserveRequest("fraud", "3", "2xx", 5, Stages{Total: time.Millisecond})
			m.ObserveRequest("fraud", "3", "2xx", 2, Stages{Total: time.Millisecond})
			m.ObserveRequest("fraud", "3", "5xx_queue_full", 9, Stages{Total: time.Millisecond})
		}, func(m *Metrics) prometheus.Collector { return m.requests.WithLabelValues("fraud", "3", "2xx") }, 2},
		{"instances summed", func(m *Metrics) {
			m.ObserveRequest("fraud", "3", "2xx", 5, Stages{Total: time.Millisecond})
			m.ObserveRequest("fraud", "3", "2xx", 2, Stages{Total: time.Millisecond})
		}, func(m *Metrics) prometheus.Collector { return m.instances.WithLabelValues("fraud", "3", "2xx") }, 7},
		{"code outside the table is other", func(m *Metrics) {
			m.ObserveRequest("fraud", "3", "4xx_"+strings.Repeat("x", 40), 1, Stages{})
		}, func(m *Metrics) prometheus.Collector { return m.requests.WithLabelValues("fraud", "3", "other") }, 1},
		{"refusal by reason", func(m *Metrics) {
			m.Refused("fraud", "3", errs.DeadlineInfeasible)
			m.Refused("fraud", "3", errs.DeadlineInfeasible)
			m.Refused("fraud", "3", errs.QueueFull)
		}, func(m *Metrics) prometheus.Collector {
			return m.refusals.WithLabelValues("fraud", "3", string(errs.DeadlineInfeasible))
		}, 2},
		{"unknown refusal reason is other", func(m *Metrics) { m.Refused("fraud", "3", "because") },
			func(m *Metrics) prometheus.Collector { return m.refusals.WithLabelValues("fraud", "3", "other") }, 1},
		{"expired in queue", func(m *Metrics) { m.ExpiredInQueue("fraud", "3") },
			func(m *Metrics) prometheus.Collector { return m.expired.WithLabelValues("fraud", "3") }, 1},
		{"deadline exceeded", func(m *Metrics) { m.DeadlineExceeded("fraud", "3"); m.DeadlineExceeded("fraud", "3") },
			func(m *Metrics) prometheus.Collector { return m.deadline.WithLabelValues("fraud", "3") }, 2},
		{"replica crash", func(m *Metrics) { m.ReplicaCrash("fraud", "3") },
			func(m *Metrics) prometheus.Collector { return m.crashes.WithLabelValues("fraud", "3") }, 1},
		{"replica restart", func(m *Metrics) { m.ReplicaRestart("fraud", "3") },
			func(m *Metrics) prometheus.Collector { return m.restarts.WithLabelValues("fraud", "3") }, 1},
		{"load phase seconds", func(m *Metrics) {
			m.LoadFinished("fraud", "3", LoadTimings{Load: 1500 * time.Millisecond, Golden: time.Millisecond}, true, 42)
		}, func(m *Metrics) prometheus.Collector { return m.loadSeconds.WithLabelValues("fraud", "3", PhaseLoad) }, 1.5},
		{"golden fail", func(m *Metrics) { m.LoadFinished("fraud", "3", LoadTimings{Load: time.Second}, false, 0) },
			func(m *Metrics) prometheus.Collector { return m.golden.WithLabelValues("fraud", "3", "fail") }, 1},
		{"artifact bytes", func(m *Metrics) { m.LoadFinished("fraud", "3", LoadTimings{}, true, 4096) },
			func(m *Metrics) prometheus.Collector { return m.artifact.WithLabelValues("fraud", "3") }, 4096},
		{"version state set", func(m *Metrics) { m.SetVersionState("fraud", "3", "loading"); m.SetVersionState("fraud", "3", "ready") },
			func(m *Metrics) prometheus.Collector { return m.versionState.WithLabelValues("fraud", "3", "ready") }, 1},
		{"version state cleared", func(m *Metrics) { m.SetVersionState("fraud", "3", "loading"); m.SetVersionState("fraud", "3", "ready") },
			func(m *Metrics) prometheus.Collector { return m.versionState.WithLabelValues("fraud", "3", "loading") }, 0},
		{"shadow disagreement", func(m *Metrics) {
			m.ShadowCompared("fraud", "4", true, 0.5, time.Millisecond)
			m.ShadowCompared("fraud", "4", false, 0, time.Millisecond)
		}, func(m *Metrics) prometheus.Collector { return m.shadowDis.WithLabelValues("fraud", "4") }, 1},
		{"drift psi", func(m *Metrics) { m.SetDriftPSI("fraud", "4", "amount", 0.25) },
			func(m *Metrics) prometheus.Collector { return m.driftPSI.WithLabelValues("fraud", "4", "amount") }, 0.25},
		{"canary share", func(m *Metrics) { m.SetCanaryShare("fraud", "4", 0.25) },
			func(m *Metrics) prometheus.Collector { return m.canaryShare.WithLabelValues("fraud", "4") }, 0.25},
		{"schema violation by field and reason", func(m *Metrics) { m.SchemaViolation("fraud", "3", "amount", ViolationRange) },
			func(m *Metrics) prometheus.Collector {
				return m.violations.WithLabelValues("fraud", "3", "amount", ViolationRange)
			}, 1},
		{"unknown field reason always uses _unknown", func(m *Metrics) {
			m.SchemaViolation("fraud", "3", "client_chosen_name", ViolationUnknownField)
		}, func(m *Metrics) prometheus.Collector {
			return m.violations.WithLabelValues("fraud", "3", UnknownField, ViolationUnknownField)
		}, 1},
		{"undeclared field becomes _unknown", func(m *Metrics) {
			m.DeclareFields("fraud", "3", []string{"amount", "country"})
			m.SchemaViolation("fraud", "3", "evil", ViolationType)
		}, func(m *Metrics) prometheus.Collector {
			return m.violations.WithLabelValues("fraud", "3", UnknownField, ViolationType)
		}, 1},
		{"unknown violation reason is other", func(m *Metrics) { m.SchemaViolation("fraud", "3", "amount", "weird") },
			func(m *Metrics) prometheus.Collector {
				return m.violations.WithLabelValues("fraud", "3", "amount", ViolationOther)
			}, 1},
		{"missing feature", func(m *Metrics) {
			m.DeclareFields("fraud", "3", []string{"amount", "country"})
			m.MissingFeature("fraud", "3", "country")
			m.MissingFeature("fraud", "3", "country")
		}, func(m *Metrics) prometheus.Collector { return m.missing.WithLabelValues("fraud", "3", "country") }, 2},
		{"tenant request", func(m *Metrics) { m.TenantRequest("acme", "2xx"); m.TenantRequest("beta", "2xx") },
			func(m *Metrics) prometheus.Collector { return m.tenantReqs.WithLabelValues("acme", "2xx") }, 1},
		{"tenant quota refusal", func(m *Metrics) { m.QuotaRefused("acme"); m.QuotaRefused("acme") },
			func(m *Metrics) prometheus.Collector { return m.tenantQuota.WithLabelValues("acme") }, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTest(t)
			tc.observe(m)
			if got := testutil.ToFloat64(tc.metric(m)); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHistograms(t *testing.T) {
	tests := []struct {
		name    string
		observe func(m *Metrics)
		metric  func(m *Metrics) prometheus.Collector
		count   uint64
		sum     float64
	}{
		{"stages reached are observed", func(m *Metrics) {
			m.ObserveRequest("fraud", "3", "2xx", 1, Stages{Queue: 2 * time.Millisecond, Compute: 3 * time.Millisecond, Total: 5 * time.Millisecond})
			m.ObserveRequest("fraud", "3", "2xx", 1, Stages{Queue: 4 * time.Millisecond, Total: 5 * time.Millisecond})
		}, func(m *Metrics) prometheus.Collector { return m.stage }, 5, 0.019},
		{"queue stage", func(m *Metrics) {
			m.ObserveRequest("fraud", "3", "2xx", 1, Stages{Queue: 2 * time.Millisecond, Total: 5 * time.Millisecond})
			m.ObserveRequest("fraud", "3", "2xx", 1, Stages{Queue: 4 * time.Millisecond, Total: 5 * time.Millisecond})
		}, func(m *Metrics) prometheus.Collector {
			return m.stage.WithLabelValues("fraud", "3", StageQueue).(prometheus.Histogram)
		}, 2, 0.006},
		{"total always observed", func(m *Metrics) {
			m.ObserveRequest("fraud", "3", "4xx_invalid_argument", 1, Stages{})
		}, func(m *Metrics) prometheus.Collector {
			return m.stage.WithLabelValues("fraud", "3", StageTotal).(prometheus.Histogram)
		}, 1, 0},
		{"batch size", func(m *Metrics) { m.ObserveBatch("fraud", "3", 8, 32); m.ObserveBatch("fraud", "3", 32, 32) },
			func(m *Metrics) prometheus.Collector {
				return m.batchSize.WithLabelValues("fraud", "3").(prometheus.Histogram)
			}, 2, 40},
		{"fill ratio", func(m *Metrics) { m.ObserveBatch("fraud", "3", 8, 32); m.ObserveBatch("fraud", "3", 32, 32) },
			func(m *Metrics) prometheus.Collector {
				return m.fillRatio.WithLabelValues("fraud", "3").(prometheus.Histogram)
			}, 2, 1.25},
		{"shadow diff", func(m *Metrics) { m.ShadowCompared("fraud", "4", true, 0.5, time.Millisecond) },
			func(m *Metrics) prometheus.Collector {
				return m.shadowDiff.WithLabelValues("fraud", "4").(prometheus.Histogram)
			}, 1, 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTest(t)
			tc.observe(m)
			count, sum := histogramTotals(t, tc.metric(m))
			if count != tc.count || !near(sum, tc.sum) {
				t.Errorf("count, sum = %d, %v; want %d, %v", count, sum, tc.count, tc.sum)
			}
		})
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

func histogramTotals(t *testing.T, c prometheus.Collector) (uint64, float64) {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var count uint64
	var sum float64
	for met := range ch {
		var pb dto.Metric
		if err := met.Write(&pb); err != nil {
			t.Fatal(err)
		}
		h := pb.GetHistogram()
		count += h.GetSampleCount()
		sum += h.GetSampleSum()
	}
	return count, sum
}

func TestLatencyBucketsSpan(t *testing.T) {
	if LatencyBuckets[0] != 0.0001 {
		t.Errorf("first bucket %v, want 0.0001", LatencyBuckets[0])
	}
	if last := LatencyBuckets[len(LatencyBuckets)-1]; last < 10 {
		t.Errorf("last bucket %v, want >= 10", last)
	}
}

func TestLiveGauges(t *testing.T) {
	m, reg := newTest(t)
	if n := testutil.CollectAndCount(m.live); n != 0 {
		t.Fatalf("without a source: %d series, want 0", n)
	}
	m.SetVersionSource(func() []VersionState {
		return []VersionState{
			{Model: "fraud", Version: "3", Queued: 7, InflightBatches: 2, ReadyReplicas: 3, RestartingReplicas: 1,
				Classes: []ClassState{{Class: "online", Queued: 1, Served: 5}, {Class: "low"}, {Class: "batch", Queued: 6, Served: 900}, {Class: "batch", Queued: 1}}},
			{Model: "fraud", Version: "4", Queued: 0, ReadyReplicas: 1}, // no class figures (a cluster version): no class series
			{Model: "fraud", Version: "4", Queued: 99},                  // duplicate: ignored, not a scrape failure
		}
	})
	want := `
# HELP sluice_queued_instances Instances waiting in a version's queue now.
# TYPE sluice_queued_instances gauge
sluice_queued_instances{model="fraud",version="3"} 7
sluice_queued_instances{model="fraud",version="4"} 0
# HELP sluice_replicas A version's replicas now, by state (ready, restarting).
# TYPE sluice_replicas gauge
sluice_replicas{model="fraud",state="ready",version="3"} 3
sluice_replicas{model="fraud",state="ready",version="4"} 1
sluice_replicas{model="fraud",state="restarting",version="3"} 1
sluice_replicas{model="fraud",state="restarting",version="4"} 0
# HELP sluice_inflight_batches Batches being computed by a version's replicas now.
# TYPE sluice_inflight_batches gauge
sluice_inflight_batches{model="fraud",version="3"} 2
sluice_inflight_batches{model="fraud",version="4"} 0
# HELP sluice_class_queued_instances Instances waiting in a version's queue now, by serving class (online, low, batch).
# TYPE sluice_class_queued_instances gauge
sluice_class_queued_instances{class="batch",model="fraud",version="3"} 6
sluice_class_queued_instances{class="low",model="fraud",version="3"} 0
sluice_class_queued_instances{class="online",model="fraud",version="3"} 1
# HELP sluice_class_served_instances_total Instances a version's replicas computed and answered, by serving class (online, low, batch).
# TYPE sluice_class_served_instances_total counter
sluice_class_served_instances_total{class="batch",model="fraud",version="3"} 900
sluice_class_served_instances_total{class="low",model="fraud",version="3"} 0
sluice_class_served_instances_total{class="online",model="fraud",version="3"} 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_queued_instances", "sluice_replicas", "sluice_inflight_batches",
		"sluice_class_queued_instances", "sluice_class_served_instances_total"); err != nil {
		t.Error(err)
	}
}

// sluice_records_dropped_total reads the records writer's counters on
// scrape, by reason; without a source (records off) it has no series.
func TestRecordsDropped(t *testing.T) {
	m, reg := newTest(t)
	if n := testutil.CollectAndCount(m.drops); n != 0 {
		t.Fatalf("without a source: %d series, want 0", n)
	}
	var d RecordDrops
	m.SetRecordDrops(func() RecordDrops { return d })
	d = RecordDrops{BufferFull: 3, WriteFailed: 500}
	want := `
# HELP sluice_records_dropped_total Prediction records (and attempts bumps) dropped instead of written, by reason (buffer_full, write_failed).
# TYPE sluice_records_dropped_total counter
sluice_records_dropped_total{reason="buffer_full"} 3
sluice_records_dropped_total{reason="write_failed"} 500
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_records_dropped_total"); err != nil {
		t.Error(err)
	}
}

func TestForgetDeletesAVersionsSeries(t *testing.T) {
	m, reg := newTest(t)
	observeAll(m)
	m.ObserveRequest("fraud", "2", "2xx", 1, Stages{Total: time.Millisecond})
	m.Refused("other", "3", errs.NotReady)
	m.Forget("fraud", "3")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var left, kept int
	for _, f := range fams {
		for _, met := range f.GetMetric() {
			var model, version string
			for _, l := range met.GetLabel() {
				switch l.GetName() {
				case "model":
					model = l.GetValue()
				case "version":
					version = l.GetValue()
				}
			}
			if model == "fraud" && version == "3" && !strings.HasPrefix(f.GetName(), "sluice_queued") &&
				!strings.HasPrefix(f.GetName(), "sluice_replicas") && !strings.HasPrefix(f.GetName(), "sluice_inflight") &&
				!strings.HasPrefix(f.GetName(), "sluice_class_") &&
				f.GetName() != "sluice_cache_entries" && f.GetName() != "sluice_cache_bytes" { // read from live state, like the queue's
				left++
				t.Errorf("after Forget: %s still has fraud@3", f.GetName())
			}
			if (model == "fraud" && version == "2") || model == "other" {
				kept++
			}
		}
	}
	if kept < 2 {
		t.Errorf("Forget removed other versions' series (kept %d)", kept)
	}
	// Tenant and build series have no version and survive.
	if got := testutil.ToFloat64(m.tenantQuota.WithLabelValues("acme")); got != 1 {
		t.Errorf("tenant quota after Forget = %v, want 1", got)
	}
}

func TestInitVersionCreatesZeroSeries(t *testing.T) {
	m, _ := newTest(t)
	m.InitVersion("fraud", "3")
	if n := testutil.CollectAndCount(m.refusals, "sluice_refusals_total"); n != len(refusalReasons) {
		t.Errorf("refusal series = %d, want %d", n, len(refusalReasons))
	}
	if got := testutil.ToFloat64(m.expired.WithLabelValues("fraud", "3")); got != 0 {
		t.Errorf("expired = %v, want 0", got)
	}
}

// The refusal reasons are the catalogue's refusal codes; alerts and
// dashboards name them, so none of the published ones may go.
func TestRefusalReasonsAreTheCatalogues(t *testing.T) {
	for _, r := range []string{"not_ready", "quota_exceeded", "queue_full", "deadline_infeasible", "shutting_down", "cold_start"} {
		if oneOf(r, refusalReasons, "other") != r {
			t.Errorf("refusal reason %s is gone from sluice_refusals_total (alerts name it)", r)
		}
	}
	for _, r := range refusalReasons {
		if errs.Lookup(errs.Code(r)).Refusal == "" {
			t.Errorf("reason %s is no refusal in the errs catalogue", r)
		}
	}
	m, _ := newTest(t)
	m.InitVersion("fraud", "3")
	if got := testutil.ToFloat64(m.refusals.WithLabelValues("fraud", "3", "cold_start")); got != 0 {
		t.Errorf("cold_start refusals after InitVersion = %v, want a series at 0", got)
	}
	m.Refused("fraud", "3", errs.ColdStart)
	if got := testutil.ToFloat64(m.refusals.WithLabelValues("fraud", "3", "cold_start")); got != 1 {
		t.Errorf("cold_start refusals = %v, want 1", got)
	}
}

func TestBuildInfo(t *testing.T) {
	_, reg := newTest(t)
	want := `
# HELP sluice_build_info Always 1; labels say which Sluice build is running.
# TYPE sluice_build_info gauge
sluice_build_info{goversion="go1.26",version="test"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_build_info"); err != nil {
		t.Error(err)
	}
}

func TestLint(t *testing.T) {
	m, reg := newTest(t)
	observeAll(m)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	for _, n := range familyNames(t, reg) {
		if !strings.HasPrefix(n, "sluice_") {
			t.Errorf("metric %s lacks the sluice_ prefix", n)
		}
	}
}

// familyNames gathers reg and returns its metric family names, sorted.
func familyNames(t *testing.T, reg prometheus.Gatherer) []string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	sort.Strings(names)
	return names
}

func TestHandlerServesExposition(t *testing.T) {
	reg := NewRegistry()
	m := New(reg, BuildInfo{Version: "test", GoVersion: "go1.26"})
	observeAll(m)
	body := scrape(t, m.Handler())
	for _, want := range []string{"sluice_requests_total{", "sluice_request_stage_seconds_bucket{", "go_goroutines", "sluice_build_info{"} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	// A Registerer that is not a Gatherer gets a handler that says so.
	m2 := New(prometheus.WrapRegistererWith(nil, prometheus.NewRegistry()), BuildInfo{})
	rec := httptest.NewRecorder()
	m2.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("non-gatherer handler status %d, want 500", rec.Code)
	}
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("scrape status %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

// A version forgotten and loaded again counts its requests anew: the
// series ObserveRequest looked up once are looked up again after Forget,
// not kept as handles on series no scrape shows.
func TestForgetThenObserveAgain(t *testing.T) {
	m, reg := newTest(t)
	m.ObserveRequest("fraud", "3", "2xx", 1, Stages{Total: time.Millisecond})
	m.Forget("fraud", "3")
	m.ObserveRequest("fraud", "3", "2xx", 2, Stages{Total: time.Millisecond})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "sluice_requests_total" {
			continue
		}
		for _, met := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range met.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["model"] == "fraud" && labels["version"] == "3" {
				if v := met.GetCounter().GetValue(); v != 1 {
					t.Fatalf("fraud@3 requests after Forget and one more request: %v, want 1", v)
				}
				return
			}
		}
	}
	t.Fatal("no sluice_requests_total series for fraud@3 after it was observed again")
}

// A forgotten worker's series go (issue 18 finding 11: 3,000
// registrations left 6,006 series).
func TestForgetWorker(t *testing.T) {
	m, _ := newTest(t)
	for i := range 100 {
		m.WorkerMemory(fmt.Sprintf("w%d", i), 1, 1)
	}
	for i := range 100 {
		m.ForgetWorker(fmt.Sprintf("w%d", i))
	}
	m.ForgetWorker("never-seen")
	if n := testutil.CollectAndCount(m.workerBudget) + testutil.CollectAndCount(m.workerUsed); n != 0 {
		t.Errorf("%d worker series left after forgetting every worker", n)
	}
}
