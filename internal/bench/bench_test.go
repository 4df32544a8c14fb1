package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const okBody = `{"predictions":[{"score":0.5}],"modelVersion":"m@1","schemaVersion":"m-input@1","requestId":"x"}`

// server starts a fake Sluice on 127.0.0.1 whose predict endpoint runs
// predict; n is the 1-based number of the request.
func server(t *testing.T, predict func(w http.ResponseWriter, r *http.Request, n int64)) *httptest.Server {
	t.Helper()
	var count atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/models/m:predict" {
			http.Error(w, `{"error":{"code":"not_found","message":"bad path `+r.URL.Path+`"}}`, http.StatusNotFound)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		predict(w, r, count.Add(1))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func ok(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, okBody)
}

func fail(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"error":{"code":"`+code+`","message":"planted"}}`)
}

func cfg(srv *httptest.Server, rate float64, d time.Duration) Config {
	return Config{
		Server:   srv.URL,
		Model:    "m",
		Rate:     rate,
		Duration: d,
		Payload:  []byte(`{"instances":[{"amount":1}]}`),
		Seed:     1,
	}
}

func TestFixedDelayCountsAndPercentiles(t *testing.T) {
	const delay = 5 * time.Millisecond
	var badHeaders atomic.Int64
	srv := server(t, func(w http.ResponseWriter, r *http.Request, n int64) {
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "Bearer k3y" ||
			!strings.HasPrefix(r.Header.Get("X-Request-Id"), "bench-") {
			badHeaders.Add(1)
		}
		time.Sleep(delay) // the fake model's service time
		ok(w)
	})
	c := cfg(srv, 100, 500*time.Millisecond)
	c.APIKey = "k3y"
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	const want = 50 // 100/s × 0.5 s, constant arrivals
	if res.Scheduled != want || res.Sent != want || res.Answered != want || res.OK != want || res.Good != want {
		t.Fatalf("scheduled %d sent %d answered %d ok %d good %d, want %d each", res.Scheduled, res.Sent, res.Answered, res.OK, res.Good, want)
	}
	if res.ByStatus[200] != want || len(res.ByStatus) != 1 || len(res.ByCode) != 0 || res.TransportErrors != 0 || res.DroppedByGenerator != 0 {
		t.Fatalf("byStatus %v byCode %v transport %d dropped %d", res.ByStatus, res.ByCode, res.TransportErrors, res.DroppedByGenerator)
	}
	if n := badHeaders.Load(); n != 0 {
		t.Fatalf("%d requests had wrong headers", n)
	}
	for name, p := range map[string]Percentiles{"corrected": res.Latency, "uncorrected": res.Uncorrected} {
		if p.N != want {
			t.Errorf("%s: N = %d, want %d", name, p.N, want)
		}
		if p.P50 < delay || p.Mean < delay {
			t.Errorf("%s: p50 %v / mean %v below the server's fixed delay %v", name, p.P50, p.Mean, delay)
		}
		if !(p.P50 <= p.P90 && p.P90 <= p.P99 && p.P99 <= p.P999 && p.P999 <= p.Max) {
			t.Errorf("%s: percentiles out of order: %+v", name, p)
		}
	}
	// Corrected latency counts from the intended time, never later than the
	// actual send, so each corrected percentile is at least the uncorrected.
	l, u := res.Latency, res.Uncorrected
	if l.P50 < u.P50 || l.P99 < u.P99 || l.Max < u.Max {
		t.Errorf("corrected %+v below uncorrected %+v", l, u)
	}
	if res.OfferedRate != 100 || res.SendRate != 100 || res.AchievedRate <= 0 || res.AchievedRate > 100 || res.Goodput != res.AchievedRate {
		t.Errorf("offered %v send %v achieved %v goodput %v", res.OfferedRate, res.SendRate, res.AchievedRate, res.Goodput)
	}
}

// A server that stalls every request for 100 ms once, mid-run: the
// corrected latencies must show the stall to every request that arrived
// during it.
func TestStallSeenByCorrectedLatency(t *testing.T) {
	const stall = 100 * time.Millisecond
	for _, conns := range []int{0, 1} {
		t.Run(map[int]string{0: "connection per request", 1: "one connection"}[conns], func(t *testing.T) {
			var mu sync.Mutex
			srv := server(t, func(w http.ResponseWriter, r *http.Request, n int64) {
				if n == 150 { // about 0.75 s in
					mu.Lock()
					time.Sleep(stall) // the planted stall
					mu.Unlock()
				} else {
					mu.Lock()
					mu.Unlock() // waits out the stall
				}
				ok(w)
			})
			c := cfg(srv, 200, 1500*time.Millisecond)
			c.Connections = conns
			res, err := Run(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if res.Answered != res.Sent || res.Sent < 150 {
				t.Fatalf("sent %d answered %d; warnings %q", res.Sent, res.Answered, res.Warnings)
			}
			if res.Latency.Max < stall*9/10 {
				t.Errorf("corrected max %v does not show the %v stall", res.Latency.Max, stall)
			}
			if res.Latency.P99 <= res.Uncorrected.P99 {
				t.Errorf("corrected p99 %v not above uncorrected p99 %v", res.Latency.P99, res.Uncorrected.P99)
			}
			t.Logf("corrected p99 %v max %v, uncorrected p99 %v max %v", res.Latency.P99, res.Latency.Max, res.Uncorrected.P99, res.Uncorrected.Max)
		})
	}
}

func TestErrorsCountedByCode(t *testing.T) {
	outcome := func(n int64) (int, string) {
		switch {
		case n%3 == 0:
			return 503, "queue_full"
		case n%5 == 0:
			return 429, "quota_exceeded"
		case n%7 == 0:
			return 500, "" // not JSON
		}
		return 200, ""
	}
	srv := server(t, func(w http.ResponseWriter, r *http.Request, n int64) {
		switch status, code := outcome(n); {
		case status == 200:
			ok(w)
		case code == "":
			http.Error(w, "oops", status)
		default:
			w.Header().Set("Retry-After", "1")
			fail(w, status, code)
		}
	})
	c := cfg(srv, 200, 500*time.Millisecond)
	c.DeadlineMs = 60_000
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 100 || res.Answered != 100 {
		t.Fatalf("sent %d answered %d, want 100", res.Sent, res.Answered)
	}
	wantStatus, wantCode := map[int]int{}, map[string]int{}
	for n := int64(1); n <= 100; n++ {
		status, code := outcome(n)
		wantStatus[status]++
		if status != 200 {
			if code == "" {
				code = "unparseable"
			}
			wantCode[code]++
		}
	}
	if fmtCounts(res.ByStatus) != fmtCounts(wantStatus) || fmtCounts(res.ByCode) != fmtCounts(wantCode) {
		t.Fatalf("byStatus %v byCode %v, want %v %v", res.ByStatus, res.ByCode, wantStatus, wantCode)
	}
	if res.OK != wantStatus[200] || res.Good != res.OK || res.DeadlineMs != 60_000 {
		t.Fatalf("ok %d good %d deadline %d, want ok = good = %d", res.OK, res.Good, res.DeadlineMs, wantStatus[200])
	}
}

func TestGoodputCountsDeadline(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request, n int64) {
		time.Sleep(30 * time.Millisecond) // always slower than the deadline
		ok(w)
	})
	c := cfg(srv, 50, 200*time.Millisecond)
	c.Payload = []byte(`{"instances":[{"amount":1}],"deadlineMs":10}`) // deadline taken from the body
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 10 || res.Good != 0 || res.Goodput != 0 || res.DeadlineMs != 10 {
		t.Fatalf("ok %d good %d goodput %v deadline %d, want 10 0 0 10", res.OK, res.Good, res.Goodput, res.DeadlineMs)
	}
}

func TestDroppedByGenerator(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	srv := server(t, func(w http.ResponseWriter, r *http.Request, n int64) {
		if n == 1 {
			<-release // held until the generator has dropped something
		}
		ok(w)
	})
	c := cfg(srv, 100, 200*time.Millisecond)
	c.Concurrency = 1
	var warned atomic.Int64
	c.Warnf = func(string, ...any) {
		warned.Add(1)
		once.Do(func() { close(release) })
	}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.DroppedByGenerator < 1 || res.Sent+res.DroppedByGenerator != res.Scheduled || res.Scheduled != 20 || !res.FellBehind {
		t.Fatalf("dropped %d sent %d scheduled %d fellBehind %v", res.DroppedByGenerator, res.Sent, res.Scheduled, res.FellBehind)
	}
	if warned.Load() != 1 || !strings.Contains(strings.Join(res.Warnings, "\n"), "dropped by the generator") {
		t.Fatalf("warnf calls %d, warnings %q", warned.Load(), res.Warnings)
	}
}

func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := server(t, func(w http.ResponseWriter, r *http.Request, n int64) {
		if n == 5 {
			cancel()
		}
		ok(w)
	})
	res, err := Run(ctx, cfg(srv, 100, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Scheduled >= 360_000 || res.Sent < 5 {
		t.Fatalf("interrupted %v scheduled %d sent %d", res.Interrupted, res.Scheduled, res.Sent)
	}
}

func TestTransportErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there now
	res, err := Run(context.Background(), Config{Server: srv.URL, Model: "m", Rate: 100, Duration: 100 * time.Millisecond, Payload: []byte(`{"instances":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 10 || res.TransportErrors != 10 || res.Answered != 0 || res.TransportByReason["connection_refused"] != 10 {
		t.Fatalf("sent %d transport %d %v answered %d", res.Sent, res.TransportErrors, res.TransportByReason, res.Answered)
	}
}

func TestPayloadFromSchema(t *testing.T) {
	desc := `{"name":"m","servingVersion":3,"input":{"schema":"m-input@3","fields":[
		{"name":"amount","type":"float","min":0,"max":10},
		{"name":"count","type":"int","min":-2,"max":2},
		{"name":"flag","type":"bool"},
		{"name":"kind","type":"category","values":["a","b"]},
		{"name":"note","type":"float","optional":true}]}}`
	var mu sync.Mutex
	var bad []string
	var bodies int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models/m" {
			_, _ = io.WriteString(w, desc)
			return
		}
		var req struct {
			Instances  []map[string]any `json:"instances"`
			DeadlineMs int              `json:"deadlineMs"`
		}
		err := json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		defer mu.Unlock()
		bodies++
		if err != nil || len(req.Instances) != 3 || req.DeadlineMs != 50 {
			bad = append(bad, "body")
		}
		for _, in := range req.Instances {
			a, _ := in["amount"].(float64)
			c, _ := in["count"].(float64)
			_, isBool := in["flag"].(bool)
			k, _ := in["kind"].(string)
			if a < 0 || a > 10 || c < -2 || c > 2 || c != math.Trunc(c) || !isBool || (k != "a" && k != "b") {
				bad = append(bad, "instance")
			}
		}
		ok(w)
	}))
	defer srv.Close()
	c := Config{Server: srv.URL + "/", Model: "m", Rate: 100, Duration: 200 * time.Millisecond, InstancesPerRequest: 3, DeadlineMs: 50, Arrivals: Poisson, Seed: 7}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 || bodies != res.Sent || res.OK != res.Sent || res.InstancesPerRequest != 3 {
		t.Fatalf("bad %v bodies %d sent %d ok %d", bad, bodies, res.Sent, res.OK)
	}
}

func TestGeneratorDeterministic(t *testing.T) {
	f := []Field{{Name: "x", Type: "float"}, {Name: "o", Type: "int", Min: ptr(1.5), Max: ptr(3.5), Optional: true}, {Name: "c", Type: "category", Values: []string{"p", "q", "r"}}}
	g1, err := NewGenerator(f, 42)
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := NewGenerator(f, 42)
	g3, _ := NewGenerator(f, 43)
	b1, b2, b3 := g1.Body(20, 0), g2.Body(20, 0), g3.Body(20, 0)
	if !bytes.Equal(b1, b2) || bytes.Equal(b1, b3) {
		t.Fatalf("same seed should give the same bodies, another seed other bodies")
	}
	var absent int
	for range 1000 {
		in := g1.Instance()
		o, has := in["o"]
		if !has {
			absent++
		} else if o != int64(2) && o != int64(3) {
			t.Fatalf("int field out of [1.5, 3.5]: %v", o)
		}
	}
	if absent == 0 || absent > 300 { // one in ten expected
		t.Fatalf("optional field absent %d times in 1000", absent)
	}
	for _, tt := range []struct {
		f    Field
		want string
	}{
		{Field{Name: "t", Type: "tensor"}, `field "t" has type "tensor"`},
		{Field{Name: "c", Type: "category"}, `lists no values`},
		{Field{Name: "r", Type: "float", Min: ptr(2), Max: ptr(1)}, `min 2 > max 1`},
	} {
		if _, err := NewGenerator([]Field{tt.f}, 1); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewGenerator(%+v) = %v, want %q", tt.f, err, tt.want)
		}
	}
}

func ptr(f float64) *float64 { return &f }

func TestSchemaFetchErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail(w, 404, "not_found")
	}))
	defer srv.Close()
	_, err := Run(context.Background(), Config{Server: srv.URL, Model: "nope", Rate: 1, Duration: time.Second})
	if err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("err = %v, want the server's not_found", err)
	}
}

func TestConfigErrors(t *testing.T) {
	good := Config{Server: "http://127.0.0.1:1", Model: "m", Rate: 10, Duration: time.Second, Payload: []byte(`{"instances":[]}`)}
	for _, tt := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Server = "127.0.0.1:8080" }, "not an http(s) URL"},
		{func(c *Config) { c.Model = "" }, "model name is required"},
		{func(c *Config) { c.Rate = 0 }, "rate must be above 0"},
		{func(c *Config) { c.Rate = math.NaN() }, "rate must be above 0"},
		{func(c *Config) { c.Duration = 0 }, "duration must be above 0"},
		{func(c *Config) { c.Rate, c.Duration = 1e6, time.Hour }, "at most 50000000"},
		{func(c *Config) { c.Arrivals = "bursty" }, `unknown arrival process "bursty"`},
		{func(c *Config) { c.InstancesPerRequest = 2 }, "applies to generated payloads"},
		{func(c *Config) { c.Concurrency = -1 }, "concurrency"},
		{func(c *Config) { c.DeadlineMs = -5 }, "deadline"},
		{func(c *Config) { c.Payload = []byte(`[1]`) }, "payload must be a JSON object"},
		{func(c *Config) { c.Payload = []byte(`{"x":1}`) }, `no "instances"`},
	} {
		c := good
		tt.mod(&c)
		if _, err := Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want %q", err, tt.want)
		}
	}
}

func TestPreparePayloadSetsDeadline(t *testing.T) {
	b, d, err := preparePayload([]byte(`{"instances":[{"a":1}],"deadlineMs":5}`), 80)
	if err != nil || d != 80 || !strings.Contains(string(b), `"deadlineMs":80`) {
		t.Fatalf("body %s deadline %d err %v", b, d, err)
	}
}

func TestParseSweep(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []float64
	}{
		{"200:1000:200", []float64{200, 400, 600, 800, 1000}},
		{"100:350:100", []float64{100, 200, 300}},
		{"5:5:1", []float64{5}},
		{"0.5:0.8:0.1", []float64{0.5, 0.6, 0.7, 0.8}},
	} {
		got, err := ParseSweep(tt.in)
		if err != nil || len(got) != len(tt.want) {
			t.Fatalf("ParseSweep(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("ParseSweep(%q) = %v, want %v", tt.in, got, tt.want)
			}
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"200:1000", "want start:end:step"},
		{"200-1000-100", "want start:end:step"},
		{"a:1000:100", `start "a" is not a number`},
		{"200:x:100", `end "x" is not a number`},
		{"200:1000:", `step "" is not a number`},
		{"0:1000:100", "start must be above 0"},
		{"1000:200:100", "end (200) must not be below start (1000)"},
		{"200:1000:0", "step must be above 0"},
		{"200:1000:-5", "step must be above 0"},
		{"1:100000:1", "at most 200 are allowed"},
		{"1:2e6:1e5", "end must be at most"},
		{"1:Inf:1", "not a number"},
	} {
		if _, err := ParseSweep(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSweep(%q) error = %v, want it to contain %q", tt.in, err, tt.want)
		}
	}
}

func TestRunSweepAndReports(t *testing.T) {
	srv := server(t, func(w http.ResponseWriter, r *http.Request, n int64) {
		if n%4 == 0 {
			fail(w, 503, "queue_full")
			return
		}
		ok(w)
	})
	c := cfg(srv, 0, 200*time.Millisecond)
	var progressed int
	rs, err := RunSweep(context.Background(), c, []float64{50, 100}, func(Result) { progressed++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || progressed != 2 || rs[0].Sent != 10 || rs[1].Sent != 20 || rs[1].OfferedRate != 100 {
		t.Fatalf("sweep results %d progress %d", len(rs), progressed)
	}

	var svg bytes.Buffer
	if err := WriteSweepSVG(&svg, rs, "m <sweep>"); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&svg)
	polylines := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if polylines < 5 {
		t.Fatalf("SVG has %d polylines, want axes and 5 series", polylines)
	}

	var text, table, page bytes.Buffer
	if err := WriteText(&text, rs[1]); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"throughput", "p99.9", "uncorrected", "queue_full: 5", "200: 15", "dispatch lag"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	if err := WriteSweepText(&table, rs); err != nil || !strings.Contains(table.String(), "goodput/s") || strings.Count(table.String(), "\n") < 3 {
		t.Errorf("sweep table (%v):\n%s", err, table.String())
	}
	if err := WriteSweepHTML(&page, rs, "t"); err != nil || !strings.Contains(page.String(), "<svg") {
		t.Errorf("HTML page (%v) lacks the chart", err)
	}
	j, err := json.Marshal(rs[1])
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(j, &back); err != nil || back["durationSeconds"] != 0.2 || back["latency"].(map[string]any)["p99Ms"] == nil || back["byCode"].(map[string]any)["queue_full"] != 5.0 {
		t.Fatalf("JSON %s", j)
	}
}

func TestSamples(t *testing.T) {
	s := newSamples(1<<20, 1)
	for i := 1000; i >= 1; i-- {
		s.add(time.Duration(i) * time.Millisecond)
	}
	p := s.percentiles()
	want := Percentiles{N: 1000, Mean: 500500 * time.Microsecond, P50: 500 * time.Millisecond, P90: 900 * time.Millisecond,
		P99: 990 * time.Millisecond, P999: 999 * time.Millisecond, Max: 1000 * time.Millisecond}
	if p != want {
		t.Fatalf("percentiles %+v, want %+v", p, want)
	}
	// Thinned: memory stays at the cap, the max stays exact.
	s = newSamples(100, 1)
	for i := 1; i <= 10000; i++ {
		s.add(time.Duration(i))
	}
	p = s.percentiles()
	if len(s.vals) != 100 || p.N != 10000 || p.Max != 10000 || p.P50 < 2500 || p.P50 > 7500 {
		t.Fatalf("thinned: kept %d, %+v", len(s.vals), p)
	}
	if (&samples{}).percentiles() != (Percentiles{}) {
		t.Fatal("empty samples should give zero percentiles")
	}
}

func TestServerTotal(t *testing.T) {
	for _, tt := range []struct {
		h    string
		want time.Duration
		ok   bool
	}{
		{"preprocess;dur=0.012, queue;dur=0.100, batch_wait;dur=0.000, compute;dur=0.250, total;dur=1.234", 1234 * time.Microsecond, true},
		{"total;dur=0", 0, true},
		{"total;desc=\"x\";dur=2.5", 2500 * time.Microsecond, true},
		{"queue;dur=3", 0, false},
		{"", 0, false},
		{"total;dur=abc", 0, false},
		{"total;dur=-1", 0, false},
	} {
		got, ok := ServerTotal(tt.h)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ServerTotal(%q) = %v, %v; want %v, %v", tt.h, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRouteAndObserve(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/v1/models/b:predict" {
			fail(w, http.StatusServiceUnavailable, "cold_start")
			return
		}
		ok(w)
	}))
	t.Cleanup(srv.Close)
	c := cfg(srv, 200, 200*time.Millisecond) // 40 arrivals
	c.Route = func(i int) string {
		if i%4 == 3 {
			return "b"
		}
		return "a"
	}
	var got []Outcome
	c.Observe = func(o Outcome) { got = append(got, o) } // called one at a time
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 40 || len(got) != 40 {
		t.Fatalf("sent %d, observed %d, want 40 each", res.Sent, len(got))
	}
	if paths["/v1/models/a:predict"] != 30 || paths["/v1/models/b:predict"] != 10 {
		t.Fatalf("requests by path %v, want 30 to a and 10 to b", paths)
	}
	seen := map[int]bool{}
	for _, o := range got {
		seen[o.Index] = true
		wantModel, wantStatus, wantCode := "a", 200, ""
		if o.Index%4 == 3 {
			wantModel, wantStatus, wantCode = "b", 503, "cold_start"
		}
		if o.Model != wantModel || o.Status != wantStatus || o.Code != wantCode {
			t.Errorf("outcome %d: model %q status %d code %q, want %q %d %q", o.Index, o.Model, o.Status, o.Code, wantModel, wantStatus, wantCode)
		}
		if wantAt := time.Duration(o.Index) * 5 * time.Millisecond; o.At != wantAt || o.Latency <= 0 {
			t.Errorf("outcome %d: at %v (want %v), latency %v (want > 0)", o.Index, o.At, wantAt, o.Latency)
		}
	}
	if len(seen) != 40 {
		t.Errorf("%d distinct arrivals observed, want 40", len(seen))
	}
	if res.OK != 30 || res.ByCode["cold_start"] != 10 {
		t.Errorf("ok %d, by code %v: want 30 ok and 10 cold_start", res.OK, res.ByCode)
	}
}
