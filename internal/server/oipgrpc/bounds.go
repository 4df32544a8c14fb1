package oipgrpc

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/sluiceml/sluice/internal/connlimit"
	"github.com/sluiceml/sluice/internal/errs"
)

// The listener's bounds (issue 18, findings 14 and 15): what one
// connection and the whole listener may hold, whatever a client sends. The
// connection limit itself is the listener's (server.Listeners wraps it).
const (
	// MaxStreamsPerConn is how many calls one connection may have open at
	// once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); more are refused
	// (REFUSED_STREAM, which clients retry).
	MaxStreamsPerConn = 100
	// DefaultMaxStreams bounds the calls open at once on the whole
	// listener, across connections (Config.MaxStreams): each holds a
	// goroutine and its buffers until its message arrives.
	DefaultMaxStreams = 4096
	// MaxHeaderListBytes bounds a call's metadata (HTTP/2 header list).
	MaxHeaderListBytes = 64 << 10
	// HandshakeTimeout bounds a new connection's TLS handshake and HTTP/2
	// preface: a connection that says nothing is closed after it.
	HandshakeTimeout = 10 * time.Second
	// IdleTimeout closes a connection that has had no call open that long.
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

// serverOptions are the gRPC server's bounds: message size, streams per
// connection and in all, metadata size, handshake, idle and keepalive
// timers. (Transport credentials are added beside them.)
func serverOptions(cfg Config, streams *streamLimit) []grpc.ServerOption {
	handshake, idle := HandshakeTimeout, IdleTimeout
	if cfg.HandshakeTimeout > 0 {
		handshake = cfg.HandshakeTimeout
	}
	if cfg.IdleTimeout > 0 {
		idle = cfg.IdleTimeout
	}
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxRecvBytes),
		grpc.MaxConcurrentStreams(MaxStreamsPerConn),
		grpc.MaxHeaderListSize(MaxHeaderListBytes),
		grpc.ConnectionTimeout(handshake),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idle, Time: PingInterval, Timeout: PingTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: MinClientPing, PermitWithoutStream: false}),
		grpc.InTapHandle(streams.tap),
	}
}

// Bounds are serverOptions for another gRPC listener of the process (the
// control plane workers register on): the same bounds, with messages up
// to maxRecvBytes and at most maxStreams calls open on it.
func Bounds(maxRecvBytes, maxStreams int) []grpc.ServerOption {
	return serverOptions(Config{MaxRecvBytes: maxRecvBytes}, newStreamLimit(maxStreams))
}

// streamLimit counts the calls open on the listener and refuses one past
// its bound before a goroutine is started for it.
type streamLimit struct{ *connlimit.Calls }

func newStreamLimit(max int) *streamLimit { return &streamLimit{connlimit.NewCalls(max)} }

// tap runs when a call's headers arrive (under the transport's lock: it
// only counts). The stream's context ends when the call does, whatever
// way it ends, and gives the slot back.
func (l *streamLimit) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	if !l.Take(ctx) {
		return nil, status.Error(errs.GRPCCode(errs.Unavailable), "too many calls in progress on this server (more than "+strconv.FormatInt(l.Max(), 10)+" at once); retry shortly")
	}
	return ctx, nil
}

// Open is how many calls are open on the listener now.
func (s *Server) Open() int64 { return s.streams.Open() }
