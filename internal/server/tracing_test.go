package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sluiceml/sluice/internal/telemetry"
)

// TestPredictSpansReachTheCollector exports spans to a fake OTLP/HTTP
// collector and checks that a predict call's span arrives as a child of
// the caller's trace.
func TestPredictSpansReachTheCollector(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		if r.URL.Path == "/v1/traces" {
			bodies = append(bodies, b)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	stop, err := telemetry.StartTracing(context.Background(), collector.URL, telemetry.BuildInfo{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	}()
	ts := newTestServer(t, Config{})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := post(t, ts.URL+"/v1/models/churn:predict", "application/json", `{"instances":[{"tenureMonths":3,"supportTickets":4,"plan":"basic"}]}`,
		map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
	if r.status != 200 {
		t.Fatalf("predict: %d", r.status)
	}
	if err := stop(context.Background()); err != nil { // flushes the batch
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	raw, _ := hex.DecodeString(traceID)
	for _, b := range bodies {
		if bytes.Contains(b, raw) && bytes.Contains(b, []byte("predict")) && bytes.Contains(b, []byte("sluice.model")) && bytes.Contains(b, []byte("churn")) {
			return
		}
	}
	t.Fatalf("no exported span carries the caller's trace id and the predict attributes (%d exports)", len(bodies))
}

func TestStartTracingRefusesABadEndpoint(t *testing.T) {
	if _, err := telemetry.StartTracing(context.Background(), "localhost:4318", telemetry.BuildInfo{}); err == nil {
		t.Fatal("accepted an endpoint without a scheme")
	}
}
