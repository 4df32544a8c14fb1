package server

import (
	"log/slog"
	"net"

	"github.com/sluiceml/sluice/internal/connlimit"
	"github.com/sluiceml/sluice/internal/telemetry"
)

// Default connection limits of the listeners (--http-max-conns,
// --grpc-max-conns).
const (
	DefaultHTTPMaxConns = 4096
	DefaultGRPCMaxConns = 1024
)

// limitListener holds at most max connections open at once: a
// connection past the limit is accepted and closed at once (refused), so
// a flood of idle connections on one listener cannot use up the
// descriptors another one (or the stores) need (connlimit.Listener, with
// the sluice_connections metrics).
type limitListener = connlimit.Listener

func newLimitListener(ln net.Listener, name, flag string, max int, log *slog.Logger, m *telemetry.Metrics) *limitListener {
	cfg := connlimit.Config{Max: max, Name: name, Flag: flag, Log: log}
	if m != nil {
		gauge, counter := m.Listener(name)
		cfg.Opened = func(d int) { gauge.Add(float64(d)) }
		cfg.Refused = counter.Inc
	}
	return connlimit.New(ln, cfg)
}

// LimitListener is ln holding at most max connections open at once, as
// the HTTP and gRPC listeners do (name labels the log line and the
// sluice_connections metrics, the log names flag as what sets max; m may
// be nil): for the process's other listeners (the control plane).
func LimitListener(ln net.Listener, name, flag string, max int, log *slog.Logger, m *telemetry.Metrics) net.Listener {
	return newLimitListener(ln, name, flag, max, log, m)
}

// fdReserve is how many descriptors the listeners leave to the rest of the
// process: the stores' files, artifacts, the worker hop, logs.
const fdReserve = 1024

// connLimits returns the listeners' connection limits, lowered (with a
// warning naming the flags) when together they would not leave fdReserve
// descriptors under the process's RLIMIT_NOFILE: a flood of connections
// must never take the descriptors a store or /readyz needs.
func connLimits(httpMax, grpcMax int, grpc bool, log *slog.Logger) (int, int) {
	limit := fdLimit()
	if limit <= 0 {
		return httpMax, grpcMax
	}
	budget := limit - fdReserve
	if limit < 2*fdReserve {
		budget = limit / 2
	}
	want := httpMax
	if grpc {
		want += grpcMax
	}
	if want <= budget {
		return httpMax, grpcMax
	}
	h, g := httpMax*budget/want, grpcMax*budget/want
	h, g = max(h, 1), max(g, 1)
	log.Warn("connection limits lowered to fit the open-file limit: raise it (ulimit -n, LimitNOFILE=) or lower the flags",
		"rlimit_nofile", limit, "http_max_conns", h, "grpc_max_conns", g, "flags", "--http-max-conns, --grpc-max-conns")
	return h, g
}
