package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"

	"github.com/sluiceml/sluice/internal/server/oipgrpc"
)

// Listeners serves a Server on its listeners: the HTTP API on one and,
// when given, OIP v2 gRPC on a second (internal/server/oipgrpc, through
// the same gateway). It is an actor: Start serves, Wait returns when a
// listener fails or after Stop, Stop stops accepting and finishes the
// in-flight requests of both at once.
type Listeners struct {
	s      *Server
	hs     *http.Server
	ln     net.Listener
	gs     *oipgrpc.Server // nil: no gRPC
	grpcLn net.Listener
	errc   chan error // one per serve loop
	wg     sync.WaitGroup
}

// Listeners returns the actor that serves s on ln and, unless grpcLn is
// nil, gRPC on grpcLn. Nothing is served before Start.
func (s *Server) Listeners(ln, grpcLn net.Listener) *Listeners {
	httpMax, grpcMax := connLimits(s.cfg.HTTPMaxConns, s.cfg.GRPCMaxConns, grpcLn != nil, s.log)
	ln = newLimitListener(ln, "http", "--http-max-conns", httpMax, s.log, s.cfg.Metrics)
	if grpcLn != nil {
		grpcLn = newLimitListener(grpcLn, "grpc", "--grpc-max-conns", grpcMax, s.log, s.cfg.Metrics)
	}
	l := &Listeners{s: s, hs: s.HTTPServer(), ln: ln, grpcLn: grpcLn, errc: make(chan error, 2)}
	if s.cfg.TLS != nil {
		l.hs.TLSConfig = s.cfg.TLS.Clone() // ServeTLS adds h2 and http/1.1 to its ALPN protocols
	}
	if grpcLn != nil {
		l.gs = oipgrpc.New(oipgrpc.Config{Tenants: s.cfg.Tenants, MaxDeadline: s.cfg.MaxDeadline, MaxRecvBytes: int(s.cfg.MaxBodyBytes),
			Version: s.cfg.Version, Logger: s.log, TLS: s.cfg.TLS}, s.gw, s)
	}
	return l
}

// Start serves both listeners, each on a goroutine Stop waits for.
func (l *Listeners) Start(context.Context) error {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		var err error
		if l.hs.TLSConfig != nil {
			err = l.hs.ServeTLS(l.ln, "", "") // the certificate comes from TLSConfig
		} else {
			err = l.hs.Serve(l.ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		l.errc <- err
	}()
	if l.gs != nil {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.errc <- l.gs.Serve(l.grpcLn) // nil once stopped
		}()
		l.s.log.Info("serving grpc", "grpc_addr", l.grpcLn.Addr().String(), "tls", l.s.cfg.TLS != nil)
	}
	return nil
}

// Wait returns when the first listener stops serving: with its error if
// it failed, nil after Stop.
func (l *Listeners) Wait() error { return <-l.errc }

// Stop turns readiness to 503, stops accepting on both listeners and
// waits for their in-flight requests until ctx ends (then cuts them).
func (l *Listeners) Stop(ctx context.Context) error {
	l.s.SetDraining()
	grpcDone := make(chan struct{})
	go func() {
		defer close(grpcDone)
		if l.gs != nil {
			l.gs.Stop(ctx) // graceful within the same grace as HTTP
		}
	}()
	err := l.hs.Shutdown(ctx)
	<-grpcDone
	l.wg.Wait()
	return err
}
