package connlimit

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/tap"
)

// The bounds every gRPC listener of Sluice shares (the gateway's OIP
// listener, the control plane's, the workers'): what a connection may
// hold and how long it may stay silent, whatever its client sends.
const (
	// MaxHeaderListBytes bounds a call's metadata (HTTP/2 header list).
	MaxHeaderListBytes = 64 << 10
	// HandshakeTimeout bounds a new connection's TLS handshake and HTTP/2
	// preface: a connection that says nothing is closed after it.
	HandshakeTimeout = 10 * time.Second
	// IdleTimeout closes a connection that has had no call open that long
	// (a client dials again at its next call).
	IdleTimeout = 5 * time.Minute
	// PingInterval and PingTimeout: the server pings a connection quiet
	// that long, and closes it when the ping is not answered in time (a
	// peer gone without a FIN).
	PingInterval = 2 * time.Minute
	PingTimeout  = 20 * time.Second
	// MinClientPing is the shortest interval between a client's keepalive
	// pings; a client pinging more often, or at all without a call open,
	// is sent GOAWAY (too_many_pings).
	MinClientPing = 10 * time.Second
)

// GRPC is one gRPC listener's bounds.
type GRPC struct {
	// StreamsPerConn is HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: calls one
	// connection may have open at once (more are refused with
	// REFUSED_STREAM, which clients retry).
	StreamsPerConn uint32
	// Handshake and Idle replace HandshakeTimeout and IdleTimeout when > 0
	// (tests).
	Handshake, Idle time.Duration
	// Tap runs when a call's headers arrive, before a goroutine is started
	// for it: it counts the call (Calls) and may refuse it.
	Tap tap.ServerInHandle
}

// ServerOptions are b's gRPC server options: streams per connection,
// metadata size, handshake, idle and keepalive timers, and the tap.
// (Message sizes and transport credentials are added beside them.)
func (b GRPC) ServerOptions() []grpc.ServerOption {
	handshake, idle := HandshakeTimeout, IdleTimeout
	if b.Handshake > 0 {
		handshake = b.Handshake
	}
	if b.Idle > 0 {
		idle = b.Idle
	}
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(b.StreamsPerConn),
		grpc.MaxHeaderListSize(MaxHeaderListBytes),
		grpc.ConnectionTimeout(handshake),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idle, Time: PingInterval, Timeout: PingTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: MinClientPing, PermitWithoutStream: false}),
		grpc.InTapHandle(b.Tap),
	}
}
