package oipgrpc

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/sluiceml/sluice/internal/connlimit"
	"github.com/sluiceml/sluice/internal/errs"
)

// The listener's bounds (issue 18, findings 14 and 15): what one
// connection and the whole listener may hold, whatever a client sends;
// the timers and metadata bound are connlimit's, shared with every gRPC
// listener. The connection limit itself is the listener's
// (server.Listeners wraps it).
const (
	// MaxStreamsPerConn is how many calls one connection may have open at
	// once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); more are refused
	// (REFUSED_STREAM, which clients retry).
	MaxStreamsPerConn = 100
	// DefaultMaxStreams bounds the calls open at once on the whole
	// listener, across connections (Config.MaxStreams): each holds a
	// goroutine and its buffers until its message arrives.
	DefaultMaxStreams = 4096
)

// serverOptions are the gRPC server's bounds: message size, streams per
// connection and in all, metadata size, handshake, idle and keepalive
// timers. (Transport credentials are added beside them.)
func serverOptions(cfg Config, streams *streamLimit) []grpc.ServerOption {
	b := connlimit.GRPC{StreamsPerConn: MaxStreamsPerConn, Handshake: cfg.HandshakeTimeout, Idle: cfg.IdleTimeout, Tap: streams.tap}
	return append(b.ServerOptions(), grpc.MaxRecvMsgSize(cfg.MaxRecvBytes))
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
