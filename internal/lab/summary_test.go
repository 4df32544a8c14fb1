package lab

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/bench"
)

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for q, want := range map[float64]float64{0: 1, 0.5: 5, 0.9: 9, 0.99: 10, 1: 10} {
		if got := Quantile(xs, q); got != want {
			t.Errorf("Quantile(q=%g) = %g, want %g", q, got, want)
		}
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("the quantile of nothing should be NaN")
	}
}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestTallyOf(t *testing.T) {
	os := []bench.Outcome{
		{Status: 200, Latency: ms(10)},
		{Status: 200, Latency: ms(20)},
		{Status: 200, Latency: ms(80)}, // late for a 50 ms SLO
		{Status: 503, Latency: ms(1), Code: "deadline_infeasible"},
		{Status: 429, Latency: ms(2), Code: "queue_full"},
		{Status: 504, Latency: ms(50), Code: "expired_in_queue"},
		{Status: 0, Latency: ms(20000), Code: "timeout"},
	}
	got := TallyOf(os, 50*time.Millisecond)
	if got.Sent != 7 || got.OK != 3 || got.Good != 2 || got.Refused != 2 || got.Late != 1 || got.NoAnswer != 1 {
		t.Errorf("tally %+v: want sent 7, ok 3, good 2, refused 2, late 1, no answer 1", got)
	}
	if got.P50Ms != 20 || got.P99Ms != 80 || got.RefusedP99Ms != 2 {
		t.Errorf("p50 %v p99 %v refused p99 %v, want 20, 80, 2", got.P50Ms, got.P99Ms, got.RefusedP99Ms)
	}
	if got.ByCode["queue_full"] != 1 || got.ByCode["timeout"] != 1 || len(got.ByCode) != 4 {
		t.Errorf("by code %v", got.ByCode)
	}
	if all := TallyOf(os, 0); all.Good != 3 {
		t.Errorf("without an SLO every 2xx is good: got %d, want 3", all.Good)
	}
}

func TestZipf(t *testing.T) {
	z := NewZipf(300, 1.1, 1)
	sum := 0.0
	for k := 1; k <= 300; k++ {
		sum += z.Share(k)
	}
	if math.Abs(sum-1) > 1e-9 || z.Share(0) != 0 || z.Share(301) != 0 {
		t.Fatalf("shares sum to %g (want 1), out of range %g %g", sum, z.Share(0), z.Share(301))
	}
	// P(1)/P(2) = 2^1.1.
	if r := z.Share(1) / z.Share(2); math.Abs(r-math.Pow(2, 1.1)) > 1e-9 {
		t.Errorf("P(1)/P(2) = %g, want 2^1.1", r)
	}
	const n = 200000
	count := make([]int, 301)
	for range n {
		k := z.Draw()
		if k < 1 || k > 300 {
			t.Fatalf("drew rank %d", k)
		}
		count[k]++
	}
	for _, k := range []int{1, 2, 10} {
		if got, want := float64(count[k])/n, z.Share(k); math.Abs(got-want) > 0.01 {
			t.Errorf("rank %d drawn %.4f of the time, want %.4f", k, got, want)
		}
	}
	a, b := NewZipf(50, 1, 7), NewZipf(50, 1, 7)
	for range 100 {
		if a.Draw() != b.Draw() {
			t.Fatal("the same seed drew different ranks")
		}
	}
}

func TestWindows(t *testing.T) {
	w := 10 * time.Second
	os := []bench.Outcome{
		{Model: "m001", At: ms(1000), Status: 200, Latency: ms(3)},
		{Model: "m002", At: ms(2000), Status: 200, Latency: ms(400)}, // a cold start that waited
		{Model: "m200", At: ms(3000), Status: 503, Code: "cold_start", Latency: ms(1)},
		{Model: "m001", At: ms(12000), Status: 200, Latency: ms(5)},
		{Model: "m150", At: ms(13000), Status: 200, Latency: ms(7)},
		{Model: "m001", At: ms(25000), Status: 200, Latency: ms(2)}, // past the run: left out
	}
	scrapes := []Scrape{
		{At: 0, Requests: 100, Loads: 10, Evictions: 0, ColdWaited: 5, ColdRefused: 5, MemoryUsed: 64 << 20},
		{At: ms(10050), Requests: 110, Loads: 13, Evictions: 2, ColdWaited: 6, ColdRefused: 6, MemoryUsed: 128 << 20},
		{At: ms(19990), Requests: 130, Loads: 13, Evictions: 2, ColdWaited: 6, ColdRefused: 6, MemoryUsed: 128 << 20},
	}
	hot := func(m string) bool { return m == "m001" || m == "m002" }
	got := Windows(os, scrapes, w, 20*time.Second, hot)
	if len(got) != 2 {
		t.Fatalf("%d windows, want 2", len(got))
	}
	a, b := got[0], got[1]
	if a.Sent != 3 || a.OK != 2 || a.ColdRefused != 1 || a.Loads != 3 || a.Evictions != 2 || a.HitRatio != 0.8 || a.MemoryMiB != 128 || a.HotP99Ms != 400 {
		t.Errorf("window 0: %+v; want sent 3, ok 2, cold 1, loads 3, evictions 2, hit ratio 0.8 (2 cold of 10), memory 128, hot p99 400", a)
	}
	if b.Sent != 2 || b.Loads != 0 || b.HitRatio != 1 || b.HotP99Ms != 5 || b.AllP99Ms != 7 {
		t.Errorf("window 1: %+v; want sent 2, no loads, hit ratio 1, hot p99 5, all p99 7", b)
	}
	// Without scrapes the counters are missing, not zero.
	none := Windows(os, nil, w, 20*time.Second, hot)
	if !math.IsNaN(float64(none[0].HitRatio)) || !math.IsNaN(float64(none[0].MemoryMiB)) {
		t.Errorf("without scrapes: %+v, want NaN hit ratio and memory", none[0])
	}
	// A partial last window.
	if n := len(Windows(os, scrapes, w, 25*time.Second, hot)); n != 3 {
		t.Errorf("25 s in windows of 10 s: %d windows, want 3", n)
	}
}

func TestNumJSON(t *testing.T) {
	b, err := json.Marshal(struct{ A, B Num }{Num(math.NaN()), 1.23456})
	if err != nil || string(b) != `{"A":null,"B":1.235}` {
		t.Fatalf("got %s, %v", b, err)
	}
	var back struct{ A, B Num }
	if err := json.Unmarshal(b, &back); err != nil || !math.IsNaN(float64(back.A)) || back.B != 1.235 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP sluice_requests_total x
# TYPE sluice_requests_total counter
sluice_requests_total{code="2xx",model="m001",version="1"} 120
sluice_requests_total{code="cold_start",model="m002",version="1"} 30
sluice_worker_loads_total{model="m001",version="1"} 4
sluice_worker_loads_total{model="m002",version="1"} 2
sluice_evictions_total{model="m002",version="1"} 1
sluice_cold_starts_total{model="m002",outcome="refused",version="1"} 30
sluice_cold_starts_total{model="m003",outcome="waited",version="1"} 3
sluice_worker_memory_used_bytes{worker="worker-1"} 1.048576e+06
sluice_worker_memory_used_bytes{worker="worker-2"} 1048576
sluice_requests_totally_else 99
`
	s, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := Scrape{Requests: 150, Loads: 6, Evictions: 1, ColdRefused: 30, ColdWaited: 3, MemoryUsed: 2 << 20}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
}
