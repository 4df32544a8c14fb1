package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/bench"
)

// probe is a bench result: rate offered, sent per second, requests sent,
// 2xx answers, the server's p99 and the client's corrected p99.
func probe(offered, sent float64, n, ok int, server, client time.Duration) bench.Result {
	r := bench.Result{OfferedRate: offered, SendRate: sent, Sent: n, Scheduled: n, OK: ok, ByStatus: map[int]int{200: ok, 503: n - ok}, ByCode: map[string]int{}}
	if n > ok {
		r.ByCode["queue_full"] = n - ok
	}
	r.Latency.P99, r.Latency.N = client, n
	if server > 0 {
		r.ServerLatency.P99, r.ServerLatency.N = server, ok
	}
	r.FellBehind = sent < offered || client > 10*time.Millisecond
	return r
}

func TestProbeVerdict(t *testing.T) {
	const slo = 50 * time.Millisecond
	for _, tt := range []struct {
		name string
		r    bench.Result
		sent float64
		ok   bool
	}{
		{"sustained", probe(100, 100, 500, 500, 5*time.Millisecond, 6*time.Millisecond), 100, true},
		// A busy machine: the generator's lag puts the client's corrected
		// p99 at 2 s, the server answered everything in 5 ms. Sustained.
		{"generator lag is not the server's", probe(100, 99, 500, 500, 5*time.Millisecond, 2*time.Second), 99, true},
		{"refusals fail it", probe(100, 100, 500, 480, 5*time.Millisecond, 6*time.Millisecond), 100, false},
		{"the server's own p99 over the SLO fails it", probe(100, 100, 500, 500, 80*time.Millisecond, 90*time.Millisecond), 100, false},
		{"no Server-Timing: the client's p99 is judged", probe(100, 100, 500, 500, 0, 80*time.Millisecond), 100, false},
		{"the generator could not send the rate", probe(400, 200, 1000, 1000, 5*time.Millisecond, 3*time.Second), 200, false},
		{"nothing sent", probe(100, 0, 0, 0, 0, 0), 0, false},
		{"interrupted", func() bench.Result {
			r := probe(100, 100, 500, 500, time.Millisecond, time.Millisecond)
			r.Interrupted = true
			return r
		}(), 100, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sent, why := probeVerdict(tt.r, slo)
			if tt.name == "refusals fail it" && !strings.Contains(why, "queue_full 20") {
				t.Errorf("why = %q, want the refusals' codes named", why)
			}
			if sent != tt.sent || (why == "") != tt.ok {
				t.Fatalf("probeVerdict = %v, %q; want %v, sustained %v", sent, why, tt.sent, tt.ok)
			}
		})
	}
}

func TestPerReplicaFromProbes(t *testing.T) {
	const slo = 50 * time.Millisecond
	ok := func(rate float64) bench.Result {
		return probe(rate, rate, 500, 500, 5*time.Millisecond, 6*time.Millisecond)
	}
	laggy := func(rate float64) bench.Result { return probe(rate, rate, 500, 500, 5*time.Millisecond, 3*time.Second) }
	refused := func(rate float64) bench.Result {
		return probe(rate, rate, 500, 400, 5*time.Millisecond, 6*time.Millisecond)
	}
	for _, tt := range []struct {
		name              string
		tried             []bench.Result
		instances, ready  int
		best, perReplica  float64
		generatorBoundary bool
	}{
		{"the highest sustained rate over the ready replicas", []bench.Result{ok(50), ok(100), refused(200), ok(150), refused(175)}, 4, 2, 150, 300, false},
		// Every probe lagged on a busy machine, and the server answered
		// them all well: the figure is the server's, not a few requests/s
		// that planned 1,374 replicas.
		{"lag on every probe", []bench.Result{laggy(50), laggy(100), laggy(200), refused(400), laggy(300)}, 1, 1, 300, 300, false},
		{"the generator's limit", []bench.Result{ok(50), ok(100), probe(200, 120, 600, 600, 5*time.Millisecond, 4*time.Second)}, 1, 1, 100, 100, true},
		{"nothing sustained", []bench.Result{refused(50)}, 1, 1, 0, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := perReplicaFromProbes(tt.tried, slo, tt.instances, tt.ready)
			if m.best != tt.best || m.perReplica != tt.perReplica || m.generatorBound != tt.generatorBoundary {
				t.Fatalf("perReplicaFromProbes = %+v, want best %v, per replica %v, generator-bound %v", m, tt.best, tt.perReplica, tt.generatorBoundary)
			}
		})
	}
}
