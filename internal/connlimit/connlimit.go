// Package connlimit bounds what a listener holds, whatever its clients
// send (issue 18, findings 14 and 15): a Listener keeps at most a given
// number of connections open at once, and Calls counts the calls open on
// a gRPC server so one past its bound is refused before a goroutine is
// started for it (from a grpc.InTapHandle); GRPC is the server options
// every gRPC listener shares (streams, metadata, handshake, idle and
// keepalive timers). It imports nothing of the module, so the worker
// links it as well as the gateway.
package connlimit

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Listener.
type Config struct {
	Max  int          // connections open at once (≥ 1)
	Name string       // the listener, for the log line ("worker", "health")
	Flag string       // the flag that sets Max, for the log line
	Log  *slog.Logger // nil: no log line
	// Opened is called with +1 when a connection is admitted and -1 when
	// it closes; Refused for each connection closed for the limit (both
	// may be nil: metrics hooks).
	Opened  func(delta int)
	Refused func()
}

// Listener holds at most Config.Max connections open at once. A
// connection past the limit is accepted and closed at once (refused): the
// accept loop keeps draining the kernel's backlog, no connection waits in
// it for a slot, and the process never holds more than Max descriptors
// for this listener.
type Listener struct {
	net.Listener
	cfg  Config
	open atomic.Int64
	// refused counts connections closed for the limit since the last log
	// line; lastLog is when that line was written (unix seconds).
	refused atomic.Int64
	lastLog atomic.Int64
}

// New is ln bounded by cfg (a Max below 1 is taken as 1).
func New(ln net.Listener, cfg Config) *Listener {
	cfg.Max = max(cfg.Max, 1)
	return &Listener{Listener: ln, cfg: cfg}
}

// Accept returns the next connection within the limit.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= int64(l.cfg.Max) {
			if l.cfg.Opened != nil {
				l.cfg.Opened(1)
			}
			return &conn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refusedOne()
		_ = c.Close()
	}
}

// refusedOne counts a refused connection and logs the count at most once
// every 10 seconds.
func (l *Listener) refusedOne() {
	if l.cfg.Refused != nil {
		l.cfg.Refused()
	}
	l.refused.Add(1)
	now := time.Now().Unix()
	last := l.lastLog.Load()
	if l.cfg.Log == nil || now-last < 10 || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	n := l.refused.Swap(0)
	l.cfg.Log.Warn("connections refused: the listener is at its connection limit", "listener", l.cfg.Name, "refused", n, "limit", l.cfg.Max, "flag", l.cfg.Flag)
}

// Open is how many connections are open now.
func (l *Listener) Open() int64 { return l.open.Load() }

// Max is the limit.
func (l *Listener) Max() int { return l.cfg.Max }

// conn gives its slot back on its first Close.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

// NetConn is the connection it wraps (as tls.Conn's NetConn): the
// server's event streams set its socket's send buffer.
func (c *conn) NetConn() net.Conn { return c.Conn }

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		if c.l.cfg.Opened != nil {
			c.l.cfg.Opened(-1)
		}
	})
	return err
}

// Calls counts the calls open on a server and refuses one past its bound.
type Calls struct {
	max  int64
	open atomic.Int64
}

// NewCalls bounds the calls open at once to n (an n below 1 is taken
// as 1).
func NewCalls(n int) *Calls { return &Calls{max: int64(max(n, 1))} }

// Take counts one call open until ctx ends, whatever way it ends (a
// stream's context ends with its call), or says false, counting nothing,
// when max are open. It only counts, so it may run where gRPC calls a tap
// handle (under the transport's lock).
func (c *Calls) Take(ctx context.Context) bool {
	if c.open.Add(1) > c.max {
		c.open.Add(-1)
		return false
	}
	context.AfterFunc(ctx, func() { c.open.Add(-1) })
	return true
}

// Open is how many calls are open now.
func (c *Calls) Open() int64 { return c.open.Load() }

// Max is the bound.
func (c *Calls) Max() int64 { return c.max }
