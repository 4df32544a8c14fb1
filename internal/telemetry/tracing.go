package telemetry

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names Sluice's tracer.
const TracerName = "github.com/sluiceml/sluice"

// StartTracing exports OpenTelemetry spans over OTLP/HTTP to endpoint
// (e.g. "http://127.0.0.1:4318"; the exporter posts to /v1/traces) and
// installs the W3C trace-context propagator, so a caller's traceparent
// becomes the parent of Sluice's spans. Without it the global tracer is a
// no-op. The returned function flushes and stops the exporter.
func StartTracing(ctx context.Context, endpoint string, build BuildInfo) (func(context.Context) error, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--otlp-endpoint %q: want an http(s) URL of an OTLP/HTTP collector, like http://127.0.0.1:4318", endpoint)
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.JoinPath("/v1/traces").String()))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "sluice"), attribute.String("service.version", build.Version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tracing.Store(true)
	return func(ctx context.Context) error {
		tracing.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// tracing says whether StartTracing is in effect.
var tracing atomic.Bool

// Tracing reports whether spans are exported (StartTracing ran and was not
// stopped). When not, the predict path starts no span at all: even the
// global no-op tracer costs a span and its attributes, a few allocations
// a call that show at 20k calls a second.
func Tracing() bool { return tracing.Load() }

// NoSpan is a span that records nothing, for a path that started none.
func NoSpan() trace.Span { return trace.SpanFromContext(context.Background()) }

// Tracer returns Sluice's tracer from the global provider (a no-op until
// StartTracing).
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// ParseTraceparent accepts a W3C traceparent header
// ("00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>") and returns its
// trace id; anything malformed is ignored, as the spec asks.
func ParseTraceparent(h string) (string, bool) {
	parts := strings.Split(strings.TrimSpace(h), "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return "", false
	}
	for _, p := range parts[:4] {
		if _, err := hex.DecodeString(p); err != nil || strings.ToLower(p) != p {
			return "", false
		}
	}
	if parts[1] == strings.Repeat("0", 32) || parts[2] == strings.Repeat("0", 16) {
		return "", false
	}
	return parts[1], true
}
