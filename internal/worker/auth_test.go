package worker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/internal/certs"
	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/testwait"
	"github.com/sluiceml/sluice/internal/worker"
	"github.com/sluiceml/sluice/internal/workerpb"
)

var testToken = []byte("0123456789abcdef0123456789abcdef")

// testJoin is the join check of the tests' pools.
var testJoin = cluster.JoinAuth{Token: func() []byte { return testToken }}

// serveControlPlane serves pool's control plane as sluice serve does (TLS
// with a self-signed certificate for 127.0.0.1) and returns its address
// and the worker's client configuration (that certificate as the CA).
func serveControlPlane(t *testing.T, pool *cluster.Pool) (string, *tls.Config) {
	t.Helper()
	certPEM, keyPEM, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	workerpb.RegisterControlPlaneServer(gs, pool)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return ln.Addr().String(), &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

func tokenFunc() ([]byte, error) { return testToken, nil }

// dialWorker connects to w at addr as its control plane does: TLS pinned
// to its certificate, its call secret on every call.
func dialWorker(t *testing.T, w *worker.Worker, addr string) *grpc.ClientConn {
	t.Helper()
	tc, err := certs.PinnedClientConfig(worker.CertSHA(w), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithPerRPCCredentials(hop.NewCredentials(hop.CallKey, worker.CallSecret(w))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// startWorker runs a worker joined to a pool's control plane.
func startWorker(t *testing.T, pool *cluster.Pool, cfg worker.Config) *worker.Worker {
	t.Helper()
	addr, tc := serveControlPlane(t, pool)
	cfg.Join, cfg.ControlTLS, cfg.JoinToken = addr, tc, tokenFunc
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = t.TempDir()
	}
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, 5*time.Second) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return w
}

// The worker's server answers only its control plane: every call without
// the call secret (or with a wrong one) is refused Unauthenticated,
// ModelInfer and Unload included, and changes nothing; health answers
// anyone (probes); the server speaks only TLS.
func TestWorkerRefusesCallsWithoutTheCallSecret(t *testing.T) {
	arts := artifacts{}
	pool := cluster.New(cluster.Config{Artifacts: arts, Join: testJoin, Known: []string{"w1"}, HeartbeatInterval: 20 * time.Millisecond})
	defer pool.Close()
	w := startWorker(t, pool, worker.Config{ID: "w1"})
	sctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, _, err := pool.Start(sctx, linear(t, arts, 1, 3.5)); err != nil {
		t.Fatal(err)
	}
	addr := pool.Workers()[0].Address

	pinned, err := certs.PinnedClientConfig(worker.CertSHA(w), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string][]grpc.DialOption{
		"no secret":    {grpc.WithTransportCredentials(credentials.NewTLS(pinned))},
		"wrong secret": {grpc.WithTransportCredentials(credentials.NewTLS(pinned)), grpc.WithPerRPCCredentials(hop.NewCredentials(hop.CallKey, strings.Repeat("0", 64)))},
	} {
		conn, err := grpc.NewClient(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ic, wc := inferencepb.NewGRPCInferenceServiceClient(conn), workerpb.NewWorkerClient(conn)
		calls := map[string]func() error{
			"ModelInfer": func() error {
				_, err := ic.ModelInfer(sctx, &inferencepb.ModelInferRequest{ModelName: "calc", ModelVersion: "1"})
				return err
			},
			"Unload": func() error {
				_, err := wc.Unload(sctx, &workerpb.UnloadRequest{Model: "calc", Version: 1})
				return err
			},
			"Load": func() error {
				_, err := wc.Load(sctx, &workerpb.LoadRequest{Model: "x", Version: 1, Replicas: 1})
				return err
			},
			"Status": func() error { _, err := wc.Status(sctx, &workerpb.StatusRequest{}); return err },
			"SetReplicas": func() error {
				_, err := wc.SetReplicas(sctx, &workerpb.SetReplicasRequest{Model: "calc", Version: 1, Replicas: 3})
				return err
			},
		}
		for call, f := range calls {
			if err := f(); status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s, %s: %v, want Unauthenticated", name, call, err)
			}
		}
		h, err := healthpb.NewHealthClient(conn).Check(sctx, &healthpb.HealthCheckRequest{})
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("%s: health %v %v", name, h, err)
		}
	}
	// Nothing changed: the version is still there, ready, one replica.
	st, err := workerpb.NewWorkerClient(dialWorker(t, w, addr)).Status(sctx, &workerpb.StatusRequest{})
	if err != nil || len(st.Versions) != 1 || st.Versions[0].State != "ready" || st.Versions[0].ReadyReplicas != 1 {
		t.Fatalf("status with the secret: %+v %v", st, err)
	}
	// In clear the server does not answer at all.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecureCreds()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(sctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("a call in clear: %v, want Unavailable", err)
	}
}

// A worker that cannot prove itself is not registered, says why in its
// log (what to fix), and keeps trying: a wrong token, a control plane
// whose certificate --ca does not sign.
func TestWorkerRefusedRegistrationSaysWhatToFix(t *testing.T) {
	for _, c := range []struct {
		name  string
		mod   func(*worker.Config)
		fixes string
	}{
		{"wrong token", func(c *worker.Config) { c.JoinToken = func() ([]byte, error) { return []byte("nope"), nil } }, "--join-token-file must hold the gateway's join token"},
		{"wrong CA", func(c *worker.Config) { c.ControlTLS = &tls.Config{RootCAs: x509.NewCertPool()} }, "not signed by --ca"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := cluster.New(cluster.Config{Join: testJoin, HeartbeatInterval: 20 * time.Millisecond})
			defer pool.Close()
			addr, tc := serveControlPlane(t, pool)
			var logs syncBuffer
			cfg := worker.Config{ID: "w1", Join: addr, ControlTLS: tc, JoinToken: tokenFunc, CacheDir: t.TempDir(),
				Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			c.mod(&cfg)
			w, err := worker.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx, time.Second) }()
			testwait.Until(t, 10*time.Second, func() bool { return strings.Count(logs.String(), c.fixes) >= 2 })
			stop()
			if err := <-done; err != nil {
				t.Error(err)
			}
			if ws := pool.Workers(); len(ws) != 0 {
				t.Errorf("registered: %+v", ws)
			}
		})
	}
	if _, err := worker.New(worker.Config{ID: "w1", Join: "127.0.0.1:1", CacheDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "--ca is required") {
		t.Errorf("no --ca: %v", err)
	}
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }

// syncBuffer is a log destination the test reads while the worker writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
