package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/examples"
	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/server/oipgrpc"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/testwait"
)

// serveListeners serves s on two fresh loopback listeners (HTTP, gRPC)
// through Listeners, as sluice serve does, and stops them at the end.
func serveListeners(t *testing.T, s *Server) (httpAddr, grpcAddr string, l *Listeners) {
	t.Helper()
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l = s.Listeners(hln, gln)
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Stop(ctx)
	})
	return hln.Addr().String(), gln.Addr().String(), l
}

// TestGRPCConnectionLimit: past --grpc-max-conns a gRPC connection is
// closed at once, the listener never holds more, and /readyz on the HTTP
// listener answers all along (finding 14: 19,990 idle gRPC connections
// took the descriptors and /readyz with them).
func TestGRPCConnectionLimit(t *testing.T) {
	_, _, s := newTestServerAll(t, Config{GRPCMaxConns: 4}, examples.FS)
	httpAddr, grpcAddr, l := serveListeners(t, s)
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range 4 {
		c, err := net.Dial("tcp", grpcAddr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	gl := l.grpcLn.(*limitListener)
	testwait.Until(t, 10*time.Second, func() bool { return gl.Open() == 4 })
	for range 20 {
		c, err := net.Dial("tcp", grpcAddr)
		if err != nil {
			t.Fatal(err)
		}
		// Refused: closed by the server before it says anything.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil || n != 0 {
			t.Fatalf("a connection past the limit read %d bytes, err %v; want it closed", n, err)
		}
		c.Close()
		if n := gl.Open(); n > 4 {
			t.Fatalf("%d gRPC connections open, limit 4", n)
		}
	}
	resp, err := http.Get("http://" + httpAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %d with the gRPC listener full", resp.StatusCode)
	}
	// A slot freed is taken again.
	conns[0].Close()
	conns = conns[1:]
	testwait.Until(t, 10*time.Second, func() bool { return gl.Open() == 3 })
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pb.NewGRPCInferenceServiceClient(cc).ServerLive(ctx, &pb.ServerLiveRequest{}); err != nil {
		t.Fatalf("ServerLive after a slot was freed: %v", err)
	}
}

// TestHTTPConnectionLimit: the HTTP listener holds at most
// --http-max-conns connections.
func TestHTTPConnectionLimit(t *testing.T) {
	m := telemetry.New(telemetry.NewRegistry(), telemetry.BuildInfo{Version: "test", GoVersion: "go"})
	_, _, s := newTestServerAll(t, Config{HTTPMaxConns: 2, Metrics: m}, examples.FS)
	httpAddr, _, l := serveListeners(t, s)
	hl := l.ln.(*limitListener)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 2 {
		c, err := net.Dial("tcp", httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	testwait.Until(t, 10*time.Second, func() bool { return hl.Open() == 2 })
	c, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || n != 0 {
		t.Fatalf("a connection past the limit read %d bytes, err %v; want it closed", n, err)
	}
	open, refused := m.Listener("http")
	testwait.UntilNil(t, 10*time.Second, func() error {
		if o, r := testutil.ToFloat64(open), testutil.ToFloat64(refused); o != 2 || r != 1 {
			return fmt.Errorf("sluice_connections %v, sluice_connections_refused_total %v; want 2 and 1", o, r)
		}
		return nil
	})
}

// TestConnLimitsFitTheFileLimit: the listeners' limits leave descriptors
// to the process.
func TestConnLimitsFitTheFileLimit(t *testing.T) {
	lim := fdLimit()
	if lim <= 0 {
		t.Skip("no RLIMIT_NOFILE here")
	}
	h, g := connLimits(lim, lim, true, discardLog())
	if h+g > lim-fdReserve && h+g > lim/2 {
		t.Fatalf("limits %d + %d leave too little of RLIMIT_NOFILE %d", h, g, lim)
	}
	if h, g := connLimits(10, 5, true, discardLog()); h != 10 || g != 5 {
		t.Fatalf("small limits changed: %d, %d", h, g)
	}
}

// TestGRPCStreamsBounded: one connection opens at most 100 calls at once
// (finding 15: one connection held 40,000 stalled streams), and the whole
// listener at most Config.MaxStreams, the rest refused with UNAVAILABLE
// before a goroutine is started for them.
func TestGRPCStreamsBounded(t *testing.T) {
	_, _, s := newTestServerAll(t, Config{}, examples.FS)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := oipgrpc.New(oipgrpc.Config{MaxStreams: 120}, s.Gateway(), s)
	go gs.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs.Stop(ctx)
	})
	dial := func() *grpc.ClientConn {
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	method := "/inference.GRPCInferenceService/ModelInfer"
	// Stalled calls: headers sent, the message never.
	open := func(cc *grpc.ClientConn, n int) []grpc.ClientStream {
		var out []grpc.ClientStream
		for range n {
			st, err := cc.NewStream(ctx, desc, method)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, st)
		}
		return out
	}
	a := dial()
	// A call that ends gives its slot back.
	for range 3 {
		if _, err := pb.NewGRPCInferenceServiceClient(a).ServerLive(ctx, &pb.ServerLiveRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Until(t, 10*time.Second, func() bool { return gs.Open() == 0 })
	open(a, oipgrpc.MaxStreamsPerConn)
	testwait.Until(t, 10*time.Second, func() bool { return gs.Open() == oipgrpc.MaxStreamsPerConn })
	// The 101st waits for the server's stream limit (the client sees
	// SETTINGS_MAX_CONCURRENT_STREAMS): the server holds 100.
	go func() {
		if st, err := a.NewStream(ctx, desc, method); err == nil {
			_ = st.CloseSend()
		}
	}()
	// A second connection: 20 more fit under MaxStreams 120, the rest are
	// refused.
	b := dial()
	open(b, 20)
	testwait.Until(t, 10*time.Second, func() bool { return gs.Open() == 120 })
	st, err := b.NewStream(ctx, desc, method)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecvMsg(new(pb.ModelInferResponse)); status.Code(err) != codes.Unavailable {
		t.Fatalf("a call past MaxStreams: %v, want Unavailable", err)
	}
	if n := gs.Open(); n != 120 {
		t.Fatalf("%d calls open, want 120", n)
	}
	// Calls that end give their slots back.
	cancel()
	testwait.Until(t, 10*time.Second, func() bool { return gs.Open() == 0 })
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestUnauthenticatedBodyDoesNotHoldTheConnection: a caller without a key
// that declares a body and trickles it gets its 401 and loses the
// connection at once, instead of net/http reading up to 256 KiB of the
// body after the answer (a connection slot held until the read deadline).
func TestUnauthenticatedBodyDoesNotHoldTheConnection(t *testing.T) {
	set, _, _, _ := routeTenants(t)
	_, _, s := newTestServerAll(t, Config{Tenants: set}, examples.FS)
	httpAddr, _, _ := serveListeners(t, s)
	for _, path := range []string{"/v1/models/fraud:predict", "/v2/models/fraud/infer"} {
		c, err := net.Dial("tcp", httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{\"instan", path)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c) // the answer, then EOF: the server closed
		c.Close()
		if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 401") {
			t.Errorf("%s without a key, body trickling: %v, %.60q; want a 401 and the connection closed", path, err, b)
		}
	}
}

// TestGRPCSilentAndIdleConnectionsClosed: a connection that never sends
// the HTTP/2 preface is closed after the handshake timeout, and one with
// no call open after the idle timeout (finding 14: idle connections were
// kept forever).
func TestGRPCSilentAndIdleConnectionsClosed(t *testing.T) {
	_, _, s := newTestServerAll(t, Config{}, examples.FS)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := oipgrpc.New(oipgrpc.Config{HandshakeTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}, s.Gateway(), s)
	go gs.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs.Stop(ctx)
	})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on a hang, not a timing assertion
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("a silent connection was not closed by the server: %v", err)
	}
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := pb.NewGRPCInferenceServiceClient(cc).ServerLive(context.Background(), &pb.ServerLiveRequest{}); err != nil {
		t.Fatal(err)
	}
	// The server's GOAWAY after the idle timeout puts the channel back to
	// IDLE (it would stay READY on a connection kept open).
	testwait.Until(t, 30*time.Second, func() bool { return cc.GetState() == connectivity.Idle })
}
