package top

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func parseFile(t *testing.T, name string) Snapshot {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := Parse(f)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return s
}

func TestParse(t *testing.T) {
	s := parseFile(t, "before.prom")
	keys := map[Key]bool{}
	for k := range s.Versions {
		keys[k] = true
	}
	want := map[Key]bool{{"fraud", "1"}: true, {"fraud", "2"}: true, {"iris", "1"}: true, {"old", "1"}: true}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("versions = %v, want %v", keys, want)
	}
	f := s.Versions[Key{"fraud", "1"}]
	if f.Requests["2xx"] != 1000 || f.Requests["4xx_invalid_argument"] != 10 {
		t.Errorf("requests = %v", f.Requests)
	}
	// Only the total stage is kept: compute's 1000 must not leak in.
	wantLat := Histogram{Bounds: []float64{0.001, 0.002, 0.004, math.Inf(1)}, Counts: []float64{500, 900, 1000, 1010}, Sum: 1.5, Count: 1010}
	if !reflect.DeepEqual(f.Latency, wantLat) {
		t.Errorf("latency = %+v, want %+v", f.Latency, wantLat)
	}
	if f.Fill.Count != 400 || f.Fill.Sum != 100 {
		t.Errorf("fill = %+v", f.Fill)
	}
	if f.Ready != 2 || f.Restarting != 0 || f.Queued != 0 {
		t.Errorf("gauges = ready %v restarting %v queued %v", f.Ready, f.Restarting, f.Queued)
	}
	if _, ok := f.Refusals["queue_full"]; !ok {
		t.Errorf("refusals = %v, want queue_full present", f.Refusals)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"sluice_requests_total{model=\"fraud\" 1\n",
		"# TYPE sluice_queued_instances gauge\nsluice_queued_instances{model=\"a\",version=\"1\"} notanumber\n",
	} {
		if _, err := Parse(strings.NewReader(in)); err == nil {
			t.Errorf("Parse(%q): no error", in)
		}
	}
	s, err := Parse(strings.NewReader(""))
	if err != nil || len(s.Versions) != 0 {
		t.Errorf("Parse(\"\") = %v, %v; want empty", s, err)
	}
	// Series without model and version labels are not versions.
	s, err = Parse(strings.NewReader("# TYPE sluice_requests_total counter\nsluice_requests_total{code=\"2xx\"} 3\n"))
	if err != nil || len(s.Versions) != 0 {
		t.Errorf("unlabelled: %v, %v; want empty", s, err)
	}
}

func TestDiff(t *testing.T) {
	rows := Diff(parseFile(t, "before.prom"), parseFile(t, "after.prom"), 2*time.Second)
	want := []Row{
		{Model: "churn", Version: "3", Requests: 4, ReqPerSec: 2, Latencies: 4, P50: 3 * time.Millisecond, P99: 3980 * time.Microsecond, Queued: 1, Ready: 1},
		{Model: "fraud", Version: "1", Requests: 320, ReqPerSec: 160, ErrorPct: 6.25, Latencies: 320,
			// p50: rank 160 of the window's 320 falls in (1 ms, 2 ms] holding
			// 150 after 100 below: 1 + 1×60/150 = 1.4 ms. p99: rank 316.8 is
			// past the 4 ms bucket (310), in +Inf: the highest finite bound.
			P50: 1400 * time.Microsecond, P99: 4 * time.Millisecond,
			Queued: 37, Batches: 80, BatchFill: 0.75, Refusals: map[string]float64{"queue_full": 10}, Ready: 1, Restarting: 1},
		{Model: "fraud", Version: "2", Requests: 100, ReqPerSec: 50, Latencies: 100, P50: 500 * time.Microsecond, P99: 990 * time.Microsecond,
			Batches: 20, BatchFill: 0.25, Ready: 1},
		{Model: "iris", Version: "1", Ready: 1},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("Diff:\n got %+v\nwant %+v", rows, want)
	}
}

func TestDiffCases(t *testing.T) {
	h := func(counts ...float64) Histogram {
		return Histogram{Bounds: []float64{0.01, 0.1, 1, math.Inf(1)}, Counts: counts, Count: counts[len(counts)-1]}
	}
	snap := func(v *Version) Snapshot { return Snapshot{Versions: map[Key]*Version{{"m", "1"}: v}} }
	for _, tc := range []struct {
		name      string
		prev, cur Snapshot
		dt        time.Duration
		check     func(t *testing.T, r Row)
	}{
		{
			name: "counter reset counts from zero",
			prev: snap(&Version{Requests: map[string]float64{"2xx": 500}, Latency: h(400, 500, 500, 500)}),
			cur:  snap(&Version{Requests: map[string]float64{"2xx": 10}, Latency: h(0, 10, 10, 10)}),
			dt:   time.Second,
			check: func(t *testing.T, r Row) {
				if r.Requests != 10 || r.Latencies != 10 {
					t.Errorf("requests %v latencies %v, want 10 10", r.Requests, r.Latencies)
				}
				// All 10 in (0.01, 0.1]: p50 at 0.01 + 0.09×5/10.
				if r.P50 != 55*time.Millisecond {
					t.Errorf("p50 = %v, want 55ms", r.P50)
				}
			},
		},
		{
			name: "all errors",
			prev: snap(&Version{Requests: map[string]float64{"2xx": 5, "5xx_internal": 0}}),
			cur:  snap(&Version{Requests: map[string]float64{"2xx": 5, "5xx_internal": 8}, Refusals: map[string]float64{"not_ready": 0}}),
			dt:   4 * time.Second,
			check: func(t *testing.T, r Row) {
				if r.ErrorPct != 100 || r.ReqPerSec != 2 || r.Refusals != nil {
					t.Errorf("err %v req/s %v refusals %v, want 100 2 nil", r.ErrorPct, r.ReqPerSec, r.Refusals)
				}
			},
		},
		{
			name: "zero interval gives no rates",
			prev: snap(&Version{Requests: map[string]float64{"2xx": 1}}),
			cur:  snap(&Version{Requests: map[string]float64{"2xx": 9}, Refusals: map[string]float64{"queue_full": 3}}),
			dt:   0,
			check: func(t *testing.T, r Row) {
				if r.Requests != 8 || r.ReqPerSec != 0 || r.Refusals["queue_full"] != 0 {
					t.Errorf("requests %v req/s %v refusals %v", r.Requests, r.ReqPerSec, r.Refusals)
				}
			},
		},
		{
			name: "everything in +Inf",
			prev: snap(&Version{Latency: h(0, 0, 0, 0)}),
			cur:  snap(&Version{Latency: h(0, 0, 0, 3)}),
			dt:   time.Second,
			check: func(t *testing.T, r Row) {
				if r.P50 != time.Second || r.P99 != time.Second {
					t.Errorf("p50 %v p99 %v, want the highest finite bound 1s", r.P50, r.P99)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := Diff(tc.prev, tc.cur, tc.dt)
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1", len(rows))
			}
			tc.check(t, rows[0])
		})
	}
}

func TestQuantile(t *testing.T) {
	h := Histogram{Bounds: []float64{1, 2, 4, math.Inf(1)}, Counts: []float64{10, 30, 40, 40}, Count: 40}
	for _, tc := range []struct{ q, want float64 }{
		{0, 0},
		{0.125, 0.5}, // rank 5 of 10 in [0, 1]
		{0.25, 1},
		{0.5, 1.5}, // rank 20: 10 below, 20 in (1, 2]
		{0.875, 3}, // rank 35: 30 below, 10 in (2, 4]
		{1, 4},
	} {
		if got := Quantile(tc.q, h); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := Quantile(0.5, Histogram{}); !math.IsNaN(got) {
		t.Errorf("empty: %v, want NaN", got)
	}
}

// TestRealScrapes reads two scrapes of a real server (`sluice serve` with
// the built-in examples): between them fraud@1 answered 30 predictions of
// two instances and 3 invalid ones.
func TestRealScrapes(t *testing.T) {
	prev, cur := parseFile(t, "real.prom"), parseFile(t, "real-later.prom")
	if n := len(cur.Versions); n != 3 {
		t.Fatalf("%d versions in real-later.prom, want 3 (churn, fraud, iris)", n)
	}
	rows := Diff(prev, cur, 3*time.Second)
	var fraud Row
	for _, r := range rows {
		if r.Model == "fraud" {
			fraud = r
		} else if r.Requests != 0 || r.Ready != 1 {
			t.Errorf("%s@%s: requests %v ready %v, want 0 1", r.Model, r.Version, r.Requests, r.Ready)
		}
	}
	if fraud.Requests != 33 || fraud.ReqPerSec != 11 || math.Abs(fraud.ErrorPct-100.0*3/33) > 1e-9 {
		t.Errorf("fraud requests %v req/s %v err %v", fraud.Requests, fraud.ReqPerSec, fraud.ErrorPct)
	}
	if fraud.Latencies != 33 || fraud.P50 <= 0 || fraud.P99 < fraud.P50 || fraud.P99 > 13*time.Second {
		t.Errorf("fraud latencies %v p50 %v p99 %v", fraud.Latencies, fraud.P50, fraud.P99)
	}
	if fraud.Batches != 30 || fraud.BatchFill <= 0 || fraud.BatchFill > 1 {
		t.Errorf("fraud batches %v fill %v", fraud.Batches, fraud.BatchFill)
	}
	if fraud.Ready != 1 || fraud.Restarting != 0 || fraud.Queued != 0 || fraud.Refusals != nil {
		t.Errorf("fraud %+v", fraud)
	}
}

var deps = map[string]api.Deployment{
	"fraud": {Model: "fraud", Targets: []api.Target{{Version: 1, Weight: 75}, {Version: 2, Weight: 25}},
		Rollout: &api.Rollout{Model: "fraud", Candidate: 2, Baseline: 1, Phase: "canary", Step: 2, Percent: 25, Steps: []int{10, 25, 50, 100}}},
	"iris": {Model: "iris", Targets: []api.Target{{Version: 1, Weight: 100}, {Version: 2, Shadow: true}},
		Rollout: &api.Rollout{Model: "iris", Candidate: 2, Baseline: 1, Phase: "shadow", Step: 1, Steps: []int{50, 100}}},
}

func TestRender(t *testing.T) {
	rows := Diff(parseFile(t, "before.prom"), parseFile(t, "after.prom"), 2*time.Second)
	rows = append(rows, Row{Model: "iris", Version: "2", Ready: 1}) // a shadow with no metrics yet
	for _, tc := range []struct {
		name  string
		width int
	}{{"render.golden", 0}, {"render-narrow.golden", 60}} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Render(&b, rows, deps, tc.width); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b.Bytes())
			for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
				if tc.width > 0 && len([]rune(line)) > tc.width {
					t.Errorf("line wider than %d: %q", tc.width, line)
				}
			}
		})
	}
}

func TestRenderCells(t *testing.T) {
	for _, tc := range []struct {
		r       *api.Rollout
		version string
		want    string
	}{
		{nil, "1", "-"},
		{&api.Rollout{Candidate: 2, Baseline: 1, Phase: "canary", Step: 1, Percent: 5, Steps: []int{5, 50, 100}}, "2", "canary 1/3 5%"},
		{&api.Rollout{Candidate: 2, Baseline: 1, Phase: "canary", Step: 1, Percent: 5, Steps: []int{5, 50, 100}}, "1", "baseline"},
		{&api.Rollout{Candidate: 2, Baseline: 1, Phase: "paused", Step: 2, Percent: 50, Steps: []int{5, 50, 100}}, "2", "paused 2/3 50%"},
		{&api.Rollout{Candidate: 2, Baseline: 1, Phase: "waiting", Step: 1, Steps: []int{5, 50, 100}}, "2", "waiting"},
		{&api.Rollout{Candidate: 2, Baseline: 1, Phase: "promoted", Step: 3, Percent: 100, Steps: []int{5, 50, 100}}, "2", "promoted"},
		{&api.Rollout{Candidate: 2, Baseline: 1, Phase: "promoted", Step: 3, Percent: 100, Steps: []int{5, 50, 100}}, "1", "-"},
		{&api.Rollout{Candidate: 2, Baseline: 1, Phase: "rolled_back", Step: 2, Steps: []int{5, 50, 100}}, "2", "rolled_back"},
		{&api.Rollout{Candidate: 2, Baseline: 1, Phase: "canary", Step: 1, Steps: []int{5}}, "3", "-"},
	} {
		if got := rolloutCell(tc.r, tc.version); got != tc.want {
			t.Errorf("rolloutCell(%+v, %s) = %q, want %q", tc.r, tc.version, got, tc.want)
		}
	}
	for d, want := range map[time.Duration]string{
		0: "0.00ms", 420 * time.Microsecond: "0.42ms", 12345 * time.Microsecond: "12.3ms",
		250 * time.Millisecond: "250ms", 12 * time.Second: "12.0s",
	} {
		if got := latency(d); got != want {
			t.Errorf("latency(%v) = %q, want %q", d, got, want)
		}
	}
	if got := refusals(map[string]float64{"not_ready": 1, "queue_full": 12.5, "quota_exceeded": 1}); got != "queue_full 12.5, not_ready 1.00, quota_exceeded 1.00" {
		t.Errorf("refusals = %q", got)
	}
	var b bytes.Buffer
	if err := Render(&b, nil, nil, 0); err != nil || strings.Count(b.String(), "\n") != 1 || !strings.HasPrefix(b.String(), "MODEL") {
		t.Errorf("no rows: %q, %v; want the header alone", b.String(), err)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

func TestSummary(t *testing.T) {
	rows := Diff(parseFile(t, "before.prom"), parseFile(t, "after.prom"), 2*time.Second)
	// 424 answers in 2 s, 20 of them failed; 20 refusals in 2 s.
	if got, want := Summary(rows), "3 models, 4 versions: 212.0 req/s, 4.7% errors, 10.0 refused/s"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if got, want := Summary(nil), "0 models, 0 versions: 0 req/s, - errors, 0 refused/s"; got != want {
		t.Errorf("Summary(nil) = %q, want %q", got, want)
	}
}
