package worker

// The worker's listener bounds (issue 18, findings 14 and 15 against a
// worker's address): whatever anyone who reaches it sends, the worker
// holds at most Config.MaxConns connections, Config.MaxCalls calls, 64 KiB
// of metadata per call; a connection that completes no handshake is
// closed after HandshakeTimeout, one with no call open after IdleTimeout.
// And a call without the call secret is refused when its headers arrive
// (the tap below), before gRPC starts a goroutine for it or reads its
// message: a stalled call without the secret costs nothing.
//
// No low cap per connection: the gateway sends all its traffic to a
// worker over one connection (internal/cluster dials one per worker), and
// what it may have open there at once is every version's queue
// (serving.maxQueueInstances, 4096 instances by default, each call at
// least one) plus the loads and status calls. A per-connection cap below
// that would make the gateway's calls wait for a stream slot in its own
// transport instead of queueing (or being refused with queue_full) here.
// So HTTP/2's MAX_CONCURRENT_STREAMS is MaxCalls itself, and the bound
// that matters is the one across connections (MaxCalls), which only the
// holder of the call secret can approach.

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/sluiceml/sluice/internal/connlimit"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
)

const (
	// DefaultMaxConns bounds the connections open at once on the worker's
	// listener (sluice worker --max-conns): a gateway holds one, a few
	// gateways sharing a pool one each, probes one each briefly.
	DefaultMaxConns = 256
	// DefaultMaxCalls bounds the calls open at once on it, across
	// connections (--max-calls): four versions' default queues of 4096
	// one-instance calls.
	DefaultMaxCalls = 16384
	// healthMaxConns and healthMaxCalls bound --health-addr (probes only).
	healthMaxConns = 64
	healthMaxCalls = 256
)

// bounds are the bounds of one of the worker's gRPC servers (the main
// one, or --health-addr's) with tap as its one tap handle.
func (w *Worker) bounds(maxStreams int, tap tap.ServerInHandle) []grpc.ServerOption {
	return connlimit.GRPC{StreamsPerConn: uint32(maxStreams), Handshake: w.cfg.HandshakeTimeout, Idle: w.cfg.IdleTimeout, Tap: tap}.ServerOptions()
}

// callTap is the main listener's tap handle: it runs when a call's
// headers arrive, before a goroutine or a message read, under the
// transport's lock (so it only compares and counts). A call without the
// call secret (health excepted) is refused Unauthenticated; one past
// MaxCalls open is refused Unavailable (the gateway tries another worker).
func (w *Worker) callTap(calls *connlimit.Calls) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if !strings.HasPrefix(info.FullMethodName, healthPrefix) {
			v := info.Header.Get(hop.CallKey)
			if len(v) != 1 || !hop.SecretEqual(v[0], w.ident.callSecret) {
				return nil, status.Error(errs.GRPCCode(errs.Unauthenticated), "no call secret (metadata "+hop.CallKey+"): this worker answers only the control plane it registered with")
			}
		}
		return takeCall(ctx, calls, "--max-calls")
	}
}

// healthTap is --health-addr's: health only, counted.
func healthTap(calls *connlimit.Calls) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if !strings.HasPrefix(info.FullMethodName, healthPrefix) {
			return nil, status.Error(errs.GRPCCode(errs.Unauthenticated), "--health-addr answers grpc.health.v1 alone")
		}
		return takeCall(ctx, calls, "")
	}
}

func takeCall(ctx context.Context, calls *connlimit.Calls, flag string) (context.Context, error) {
	if calls.Take(ctx) {
		return ctx, nil
	}
	msg := "too many calls in progress on this worker (more than " + strconv.FormatInt(calls.Max(), 10) + " at once"
	if flag != "" {
		msg += ", " + flag
	}
	return nil, status.Error(errs.GRPCCode(errs.Unavailable), msg+"); retry shortly")
}
