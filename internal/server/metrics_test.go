package server

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/tenant"
	"github.com/sluiceml/sluice/internal/testwait"
)

// scrape reads /metrics into "name{k=v,…}" → value (histograms: _count).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			key := name + "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

// TestMetricsAfterMixedTraffic sends successes, every refusal reason, schema
// violations and a canary split, then checks the series moved by exactly
// the right amounts per version.
func TestMetricsAfterMixedTraffic(t *testing.T) {
	reg := telemetry.NewRegistry()
	m := telemetry.New(reg, telemetry.BuildInfo{Version: "test", GoVersion: "go"})
	fsys := fstest.MapFS{
		"lin1/model.yaml": {Data: []byte("name: lin\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float, min: 0}, {name: c, type: category, values: [a, b]}, {name: o, type: float, optional: true}]}\npreprocess: [{op: ordinal, field: c}]\noutput: {schema: o@1, fields: [{name: y}]}\n")},
		"lin1/m.json":     {Data: []byte(`{"weights":[[1,1,0]],"bias":[0]}`)},
		"syn/model.yaml":  {Data: []byte("name: syn\nruntime: synthetic\nartifact: cost.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\nserving: {maxBatchSize: 1, maxQueueInstances: 2, maxInstancesPerRequest: 2, warmupBatches: 5}\n")},
		"syn/cost.json":   {Data: []byte(`{"base":"30ms","perInstance":"0ms","mode":"sleep"}`)},
		"bad/model.yaml":  {Data: []byte("name: bad\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\ngolden: [{instance: {x: 1}, expect: {y: 9}}]\n")},
		"bad/m.json":      {Data: []byte(`{"weights":[[1]],"bias":[0]}`)},
	}
	set, err := tenant.Parse("t.yaml", []byte(`tenants:
  - {name: ops, keys: ["sha256:`+sha256hex("ops-key")+`"], models: ["*"], admin: true}
  - {name: small, keys: ["sha256:`+sha256hex("small-key")+`"], models: ["lin"], quota: {instancesPerSecond: 0.001, burst: 2}}
`))
	if err != nil {
		t.Fatal(err)
	}
	ts, ctl, _ := newTestServerCtl(t, Config{Metrics: m, Tenants: set}, control.Config{Metrics: m}, fsys)
	// A second lin version, then a 50/50 split.
	fsys2 := fstest.MapFS{"lin2/model.yaml": {Data: append(fsys["lin1/model.yaml"].Data, []byte("description: v2\n")...)}, "lin2/m.json": fsys["lin1/m.json"]}
	if _, err := ctl.PublishFS(t.Context(), fsys2, ".", "more"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() bool { _, err := ctl.Table.Load().Pinned("lin", 2); return err == nil })
	if _, err := ctl.SetTargets(t.Context(), "lin", []registry.Target{{Version: 1, Weight: 50}, {Version: 2, Weight: 50}}, "ops", "split", -1); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, ts.URL)
	ops := map[string]string{"Authorization": "Bearer ops-key"}
	small := map[string]string{"Authorization": "Bearer small-key"}
	okBody := `{"instances":[{"x":1,"c":"a"}]}`
	// 40 successes spread by routing key over lin@1 and lin@2; 10 of them lack the optional field.
	for i := 0; i < 40; i++ {
		h := map[string]string{"Authorization": "Bearer ops-key", "X-Routing-Key": fmt.Sprintf("k%d", i)}
		if r := post(t, ts.URL+"/v1/models/lin:predict", "application/json", okBody, h); r.status != 200 {
			t.Fatalf("success %d: %d %s", i, r.status, r.body)
		}
	}
	// Schema violations: 3 range, 2 category, 1 missing, 1 unknown field (all pinned to lin@1).
	for _, b := range []string{`{"x":-1,"c":"a"}`, `{"x":-2,"c":"a"}`, `{"x":-3,"c":"a"}`, `{"x":1,"c":"z"}`, `{"x":1,"c":"q"}`, `{"c":"a"}`, `{"x":1,"c":"a","zz":1}`} {
		if r := post(t, ts.URL+"/v1/models/lin/versions/1:predict", "application/json", `{"instances":[`+b+`]}`, ops); r.status != 400 {
			t.Fatalf("violation %s: %d", b, r.status)
		}
	}
	// Quota: the small tenant's burst is 2 instances.
	for i, want := range []int{200, 200, 429, 429} {
		if r := post(t, ts.URL+"/v1/models/lin/versions/1:predict", "application/json", okBody, small); r.status != want {
			t.Fatalf("quota call %d: %d", i, r.status)
		}
	}
	// not_ready: the failed version, pinned.
	if r := post(t, ts.URL+"/v1/models/bad/versions/1:predict", "application/json", `{"instances":[{"x":1}]}`, ops); r.status != 503 {
		t.Fatalf("not ready: %d", r.status)
	}
	// deadline_infeasible: 30 ms model, 5 ms deadline.
	if r := post(t, ts.URL+"/v1/models/syn:predict", "application/json", `{"instances":[{"x":1}],"deadlineMs":5}`, ops); r.status != 503 || r.err.Code != "deadline_infeasible" {
		t.Fatalf("infeasible: %d %s", r.status, r.err.Code)
	}
	// queue_full: 8 concurrent 2-instance requests on a 2-instance queue.
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := post(t, ts.URL+"/v1/models/syn:predict", "application/json", `{"instances":[{"x":1},{"x":2}],"deadlineMs":5000}`, ops)
			mu.Lock()
			codes[r.err.Code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	after := scrape(t, ts.URL)
	delta := func(key string) float64 { return after[key] - before[key] }

	v1 := delta("sluice_requests_total{code=2xx,model=lin,version=1}")
	v2 := delta("sluice_requests_total{code=2xx,model=lin,version=2}")
	if v1+v2 != 40+2 || v1 < 10 || v2 < 10 { // +2: the small tenant's successes on lin@1
		t.Errorf("2xx on lin@1 %v, lin@2 %v: want 42 in all, split about evenly", v1, v2)
	}
	if s1, s2 := after["sluice_canary_traffic_share{model=lin,version=1}"], after["sluice_canary_traffic_share{model=lin,version=2}"]; s1 != 0.5 || s2 != 0.5 {
		t.Errorf("traffic shares %v %v, want 0.5 each", s1, s2)
	}
	checks := map[string]float64{
		"sluice_schema_violations_total{field=x,model=lin,reason=range,version=1}":                3,
		"sluice_schema_violations_total{field=c,model=lin,reason=category,version=1}":             2,
		"sluice_schema_violations_total{field=x,model=lin,reason=missing,version=1}":              1,
		"sluice_schema_violations_total{field=_unknown,model=lin,reason=unknown_field,version=1}": 1,
		"sluice_requests_total{code=4xx_invalid_argument,model=lin,version=1}":                    7,
		"sluice_refusals_total{model=lin,reason=quota_exceeded,version=1}":                        2,
		"sluice_tenant_quota_refusals_total{tenant=small}":                                        2,
		"sluice_tenant_requests_total{code=2xx,tenant=small}":                                     2,
		"sluice_refusals_total{model=bad,reason=not_ready,version=1}":                             1,
		"sluice_refusals_total{model=syn,reason=deadline_infeasible,version=1}":                   1,
		"sluice_refusals_total{model=syn,reason=queue_full,version=1}":                            float64(codes["queue_full"]),
		"sluice_missing_features_total{field=o,model=lin,version=1}":                              v1 + 2,
		"sluice_missing_features_total{field=o,model=lin,version=2}":                              v2,
	}
	for k, want := range checks {
		if got := delta(k); got != want {
			t.Errorf("%s moved by %v, want %v", k, got, want)
		}
	}
	if codes["queue_full"] == 0 || codes[""] == 0 {
		t.Errorf("queue_full test sent no refusal or no success: %v", codes)
	}
	if n := delta("sluice_request_stage_seconds{model=lin,stage=total,version=1}") + delta("sluice_request_stage_seconds{model=lin,stage=total,version=2}"); n != 40+2+7+2 {
		t.Errorf("total-stage observations %v, want 51 (every answered lin request)", n)
	}
	if after["sluice_build_info{goversion=go,version=test}"] != 1 {
		t.Error("sluice_build_info missing")
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("exposition lint: %v %v", err, problems)
	}
}
