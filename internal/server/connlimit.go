package server

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceml/sluice/internal/telemetry"
)

// Default connection limits of the listeners (--http-max-conns,
// --grpc-max-conns).
const (
	DefaultHTTPMaxConns = 4096
	DefaultGRPCMaxConns = 1024
)

// limitListener holds at most max connections open at once. A connection
// past the limit is accepted and closed at once (refused): the accept loop
// keeps draining the kernel's backlog, no connection waits in it for a
// slot, and the process never holds more than max descriptors for this
// listener, so a flood of idle connections on one listener cannot use up
// the descriptors another one (or the stores) need.
type limitListener struct {
	net.Listener
	name string // "http", "grpc", "control": for the log and the metrics
	flag string // the flag that sets max, for the log
	max  int64
	log  *slog.Logger
	open atomic.Int64
	// refused counts connections closed for the limit since the last log
	// line; lastLog is when that line was written (unix seconds).
	refused atomic.Int64
	lastLog atomic.Int64
	// gauge and counter on /metrics (nil without metrics).
	gauge   prometheus.Gauge
	counter prometheus.Counter
}

func newLimitListener(ln net.Listener, name, flag string, max int, log *slog.Logger, m *telemetry.Metrics) *limitListener {
	l := &limitListener{Listener: ln, name: name, flag: flag, max: int64(max), log: log}
	if m != nil {
		l.gauge, l.counter = m.Listener(name)
	}
	return l
}

// Accept returns the next connection within the limit.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			if l.gauge != nil {
				l.gauge.Inc()
			}
			return &limitConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refusedOne()
		_ = c.Close()
	}
}

// refusedOne counts a refused connection and logs the count at most once
// every 10 seconds.
func (l *limitListener) refusedOne() {
	if l.counter != nil {
		l.counter.Inc()
	}
	n := l.refused.Add(1)
	now := time.Now().Unix()
	last := l.lastLog.Load()
	if now-last < 10 || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	n = l.refused.Swap(0)
	l.log.Warn("connections refused: the listener is at its connection limit", "listener", l.name, "refused", n, "limit", l.max, "flag", l.flag)
}

// LimitListener is ln holding at most max connections open at once, as
// the HTTP and gRPC listeners do (name labels the log line and the
// sluice_connections metrics, the log names flag as what sets max; m may
// be nil): for the process's other listeners (the control plane).
func LimitListener(ln net.Listener, name, flag string, max int, log *slog.Logger, m *telemetry.Metrics) net.Listener {
	return newLimitListener(ln, name, flag, max, log, m)
}

// Open is how many connections are open now.
func (l *limitListener) Open() int64 { return l.open.Load() }

// limitConn gives its slot back on its first Close.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		if c.l.gauge != nil {
			c.l.gauge.Dec()
		}
	})
	return err
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
