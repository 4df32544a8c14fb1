package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/tenant"
)

// The allocation budget of the predict path (issue 12, item 7): the fraud
// example (XGBoost, 4 fields → 6 features) served in process with the
// defaults of `sluice serve` minus metrics and records (Config{}:
// idempotency on, so every call hashes its input), for 1 row
// (bench/fraud-payload.json) and 1,000 rows. docs/benchmarks.md, section
// "Allocation budget (issue 12)", keeps the figures and the command.
//
// Besides -benchmem's per-call figures each benchmark reports allocs/row
// and B/row: the process's mallocs and bytes over the loop divided by the
// rows, so the replicas' and batcher's goroutines count too (as they do in
// -benchmem, which reads the same process-wide counters).

// benchDeadline is the deadline of the calls that bypass HTTP: far above
// what a call takes, so that a stall of the shared machine (1-row calls
// were seen past the default 50 ms) does not end a run.
const benchDeadline = 10 * time.Second

// benchRows are the row counts measured.
var benchRows = []int{1, 1000}

// fraudBody is a predict body of n fraud instances: n = 1 is
// bench/fraud-payload.json byte for byte; larger bodies vary the values
// and leave the optional fields out of every fourth and seventh instance.
func fraudBody(tb testing.TB, n int) []byte {
	tb.Helper()
	if n == 1 {
		b, err := os.ReadFile("../../bench/fraud-payload.json")
		if err != nil {
			tb.Fatal(err)
		}
		return bytes.TrimSpace(b)
	}
	countries := []string{"US", "GB", "DE"}
	b := []byte(`{"instances":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"amount":%d.%02d,"accountAgeDays":%d`, (i*37)%2000, i%100, (i*13)%3000)
		if i%4 != 3 {
			b = fmt.Appendf(b, `,"declines5m":%d`, i%6)
		}
		if i%7 != 6 {
			b = fmt.Appendf(b, `,"country":%q`, countries[i%3])
		}
		b = append(b, '}')
	}
	// A deadline far above the ~2 ms these rows take: after a run of
	// 1-row calls the admission estimate for 1,000 rows has been seen
	// above the default 50 ms (refused as deadline_infeasible).
	return append(b, `],"deadlineMs":10000}`...)
}

// benchServer serves the examples (fraud among them) in process.
func benchServer(b *testing.B) *Server {
	b.Helper()
	_, _, s := newTestServerAll(b, Config{}, examples.FS)
	return s
}

// perRow runs body b.N times and reports allocs/row and B/row.
func perRow(b *testing.B, rows int, body func()) {
	var before, after runtime.MemStats
	b.ReportAllocs()
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		body()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	n := float64(b.N) * float64(rows)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/row")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/row")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/row")
}

// BenchmarkPredictHTTP drives the real /v1 handler (httptest, no network):
// routing and request id, body read, decode, gateway (idempotency hash,
// validate, preprocess, batch, model), encode, response headers.
func BenchmarkPredictHTTP(b *testing.B) {
	s := benchServer(b)
	h := s.Handler()
	for _, n := range benchRows {
		body := fraudBody(b, n)
		b.Run("rows="+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			late := 0
			perRow(b, n, func() {
				req := httptest.NewRequest(http.MethodPost, "/v1/models/fraud:predict", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				switch w.Code {
				case http.StatusOK:
				case http.StatusGatewayTimeout:
					// The 1-row body is bench/fraud-payload.json as is, with
					// the default 50 ms deadline, which a stall of a busy
					// shared core can pass: counted, not fatal.
					late++
				default:
					b.Fatalf("status %d: %s", w.Code, w.Body.Bytes())
				}
			})
			b.ReportMetric(float64(late), "late")
		})
	}
}

// BenchmarkPredictGateway is the same call without net/http: decode the
// body, gateway.Predict, encode the answer.
func BenchmarkPredictGateway(b *testing.B) {
	s := benchServer(b)
	for _, n := range benchRows {
		body := fraudBody(b, n)
		b.Run("rows="+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			perRow(b, n, func() {
				a := s.gw.Predict(context.Background(), gateway.Call{Transport: gateway.HTTP, Tenant: tenant.Default, RequestID: "bench", Model: "fraud",
					Decode: func() (gateway.Input, error) {
						req, err := decodePredict(body, s.cfg.MaxDeadline)
						if err != nil {
							return gateway.Input{}, err
						}
						return gateway.Input{Instances: req.Instances, Deadline: benchDeadline}, nil
					}})
				if a.Err != nil {
					b.Fatal(a.Err)
				}
				_ = encodePrediction(a.Prediction, a.RequestID)
			})
		})
	}
}

// BenchmarkPredictStage splits BenchmarkPredictGateway into its stages:
// decode (the body to instances), gateway (instances already decoded:
// input hash, validate, preprocess, batch, model) and encode.
func BenchmarkPredictStage(b *testing.B) {
	s := benchServer(b)
	for _, n := range benchRows {
		body := fraudBody(b, n)
		req, err := decodePredict(body, s.cfg.MaxDeadline)
		if err != nil {
			b.Fatal(err)
		}
		call := gateway.Call{Transport: gateway.HTTP, Tenant: tenant.Default, RequestID: "bench", Model: "fraud",
			Decode: func() (gateway.Input, error) {
				return gateway.Input{Instances: req.Instances, Deadline: benchDeadline}, nil
			}}
		a := s.gw.Predict(context.Background(), call)
		if a.Err != nil {
			b.Fatal(a.Err)
		}
		b.Run("decode/rows="+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			perRow(b, n, func() {
				if _, err := decodePredict(body, s.cfg.MaxDeadline); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run("gateway/rows="+strconv.Itoa(n), func(b *testing.B) {
			perRow(b, n, func() {
				if a := s.gw.Predict(context.Background(), call); a.Err != nil {
					b.Fatal(a.Err)
				}
			})
		})
		b.Run("encode/rows="+strconv.Itoa(n), func(b *testing.B) {
			perRow(b, n, func() { _ = encodePrediction(a.Prediction, a.RequestID) })
		})
	}
}
