package worker_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/hop"
	rt "github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/testwait"
	"github.com/sluiceml/sluice/internal/worker"
)

// h2 is a raw HTTP/2 client connection over TLS (what an attacker who
// reaches a worker's address can open): it answers SETTINGS and PINGs and
// counts the streams the server ended (a trailers-only answer or a reset).
type h2 struct {
	c       net.Conn
	wmu     sync.Mutex
	ended   atomic.Int64
	maxStr  atomic.Int64
	goaway  atomic.Bool
	pingAck chan struct{}
	done    chan struct{}
}

func frame(typ, flags byte, stream uint32, payload []byte) []byte {
	b := make([]byte, 9, 9+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], stream&0x7fffffff)
	return append(b, payload...)
}

// literal appends a header as an HPACK literal without indexing (names
// and values shorter than 127 bytes).
func literal(b []byte, name, value string) []byte {
	b = append(b, 0, byte(len(name)))
	b = append(b, name...)
	b = append(b, byte(len(value)))
	return append(b, value...)
}

// dialTCP connects and sends nothing.
func dialTCP(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialH2 completes TLS (unverified) and the HTTP/2 preface; nil when the
// server closed the connection first (past its connection limit).
func dialH2(t *testing.T, addr string) *h2 {
	t.Helper()
	raw := dialTCP(t, addr)
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		return nil
	}
	_ = c.SetDeadline(time.Time{})
	h := &h2{c: c, pingAck: make(chan struct{}, 4), done: make(chan struct{})}
	h.maxStr.Store(-1)
	if err := h.write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), frame(0x4, 0, 0, nil)...)); err != nil {
		return nil
	}
	go h.read()
	t.Cleanup(func() { c.Close(); <-h.done })
	return h
}

func (h *h2) write(b []byte) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_ = h.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := h.c.Write(b)
	return err
}

func (h *h2) read() {
	defer close(h.done)
	r := bufio.NewReader(h.c)
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return
		}
		payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		switch typ, flags := hdr[3], hdr[4]; typ {
		case 0x1: // HEADERS
			if flags&0x1 != 0 {
				h.ended.Add(1)
			}
		case 0x3: // RST_STREAM (after a trailers-only answer to a stream the client left open: not counted twice)
		case 0x4:
			if flags&0x1 == 0 {
				for i := 0; i+6 <= len(payload); i += 6 {
					if binary.BigEndian.Uint16(payload[i:]) == 0x3 {
						h.maxStr.Store(int64(binary.BigEndian.Uint32(payload[i+2:])))
					}
				}
				_ = h.write(frame(0x4, 0x1, 0, nil))
			}
		case 0x6:
			if flags&0x1 == 0 {
				_ = h.write(frame(0x6, 0x1, 0, payload))
			} else {
				h.pingAck <- struct{}{}
			}
		case 0x7:
			h.goaway.Store(true)
		}
	}
}

// stall opens n ModelInfer streams that never send their message (HEADERS
// without END_STREAM), with the given call secret ("" none), and waits
// until the server has read them all (a PING answered after them).
func (h *h2) stall(t *testing.T, first, n int, secret string) {
	t.Helper()
	var block []byte
	block = literal(block, ":method", "POST")
	block = literal(block, ":scheme", "https")
	block = literal(block, ":path", "/inference.GRPCInferenceService/ModelInfer")
	block = literal(block, ":authority", "worker")
	block = literal(block, "content-type", "application/grpc")
	block = literal(block, "te", "trailers")
	if secret != "" {
		block = literal(block, hop.CallKey, secret)
	}
	var batch []byte
	for i := range n {
		batch = append(batch, frame(0x1, 0x4, uint32(2*(first+i)+1), block)...)
		if len(batch) > 32<<10 || i == n-1 {
			if err := h.write(batch); err != nil {
				t.Fatalf("after %d streams: %v", i, err)
			}
			batch = batch[:0]
		}
	}
	if err := h.write(frame(0x6, 0, 0, []byte("stalled!"))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.pingAck:
	case <-h.done:
		t.Fatal("the worker closed the connection")
	case <-time.After(60 * time.Second):
		t.Fatal("no PING answer")
	}
}

// closed says whether the server closed c (a read ends in EOF or a reset
// within d; a read timeout is "still open").
func closed(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	var b [1024]byte
	for {
		_, err := c.Read(b[:])
		if err == nil {
			continue
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

// A worker's listener holds a bounded number of goroutines whatever
// anyone who reaches its address sends: connections past --max-conns are
// closed at once, stalled calls without the call secret cost no goroutine
// (refused when their headers arrive), stalled calls with it are bounded
// by --max-calls across connections; and the gateway's calls keep
// working throughout.
func TestWorkerListenerBounded(t *testing.T) {
	arts := artifacts{}
	pool := cluster.New(cluster.Config{Artifacts: arts, Join: testJoin, Known: []string{"w1"}, HeartbeatInterval: 20 * time.Millisecond})
	defer pool.Close()
	const maxConns, maxCalls = 16, 64
	w := startWorker(t, pool, worker.Config{ID: "w1", MaxConns: maxConns, MaxCalls: maxCalls})
	sctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	v, _, err := pool.Start(sctx, linear(t, arts, 1, 3.5))
	if err != nil {
		t.Fatal(err)
	}
	predict := func(what string) {
		t.Helper()
		res, err := v.Submit(sctx, serving.Work{Rows: rt.Batch{Rows: 1, Cols: 2, Data: []float32{1, 1}}})
		if err != nil || res.Out.Data[0] != 3.5 {
			t.Fatalf("predict %s: %+v %v", what, res, err)
		}
	}
	predict("before")
	addr := pool.Workers()[0].Address
	g0 := runtime.NumGoroutine()

	// Connections past the limit are closed at once: the gateway holds
	// one, so maxConns-1 of these are admitted.
	var hs []*h2
	refused := 0
	for range 3 * maxConns {
		if h := dialH2(t, addr); h != nil {
			hs = append(hs, h)
		} else {
			refused++
		}
	}
	testwait.Until(t, 20*time.Second, func() bool {
		n := 0
		for _, h := range hs {
			select {
			case <-h.done:
			default:
				n++
			}
		}
		return n <= maxConns-1 && worker.OpenConns(w) <= maxConns
	})
	var open []*h2
	for _, h := range hs {
		select {
		case <-h.done:
		default:
			open = append(open, h)
		}
	}
	t.Logf("%d connections tried: %d open (limit %d, the gateway's included), %d refused", 3*maxConns, len(open), maxConns, 3*maxConns-len(open))
	if len(open) == 0 {
		t.Fatal("no connection admitted")
	}
	if m := open[0].maxStr.Load(); m != maxCalls {
		t.Errorf("MAX_CONCURRENT_STREAMS %d, want --max-calls (%d): no lower cap per connection (the gateway's one connection carries all its calls)", m, maxCalls)
	}

	// 2,000 stalled calls without the secret on each open connection:
	// every one refused at its headers, none held.
	const stalled = 2000
	for _, h := range open {
		h.stall(t, 0, stalled, "")
	}
	testwait.Until(t, 20*time.Second, func() bool {
		for _, h := range open {
			if h.ended.Load() < stalled {
				return false
			}
		}
		return true
	})
	if n := worker.OpenCalls(w); n > 0 {
		t.Errorf("%d calls open after %d stalled calls without the secret", n, stalled*len(open))
	}
	// Goroutines: the admitted connections' own (a few each), none per
	// stalled call.
	bound := g0 + 8*maxConns + 32
	testwait.Until(t, 20*time.Second, func() bool { return runtime.NumGoroutine() <= bound })
	t.Logf("%d stalled calls without the secret on %d connections: goroutines %d → %d (bound %d)", stalled*len(open), len(open), g0, runtime.NumGoroutine(), bound)
	predict("under stalled calls without the secret")

	// With the secret (the gateway's own, or a leak of it), stalled calls
	// are held up to --max-calls across connections, the rest refused.
	secret := worker.CallSecret(w)
	for i, h := range open[:min(4, len(open))] {
		h.stall(t, stalled+i, 100, secret)
	}
	testwait.Until(t, 20*time.Second, func() bool { return worker.OpenCalls(w) == maxCalls })
	g1 := runtime.NumGoroutine()
	if g1 > bound+2*maxCalls {
		t.Errorf("goroutines %d with %d stalled calls holding the secret, want at most %d", g1, maxCalls, bound+2*maxCalls)
	}
	t.Logf("%d stalled calls with the secret: %d held (--max-calls %d), goroutines %d", 4*100, worker.OpenCalls(w), maxCalls, g1)

	for _, h := range open {
		h.c.Close()
		<-h.done
	}
	testwait.Until(t, 20*time.Second, func() bool { return worker.OpenCalls(w) == 0 && worker.OpenConns(w) <= 1 })
	predict("after")
	if refused == 0 {
		t.Error("no connection refused past the limit")
	}
}

// A connection that says nothing is closed after the handshake timeout,
// one with no call open after the idle timeout; the gateway's calls
// still work (its client dials again).
func TestWorkerClosesSilentAndIdleConnections(t *testing.T) {
	arts := artifacts{}
	pool := cluster.New(cluster.Config{Artifacts: arts, Join: testJoin, Known: []string{"w1"}, HeartbeatInterval: 20 * time.Millisecond})
	defer pool.Close()
	w := startWorker(t, pool, worker.Config{ID: "w1", HandshakeTimeout: 200 * time.Millisecond, IdleTimeout: 500 * time.Millisecond})
	sctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	v, _, err := pool.Start(sctx, linear(t, arts, 1, 3.5))
	if err != nil {
		t.Fatal(err)
	}
	addr := pool.Workers()[0].Address
	silent := dialTCP(t, addr)
	idle := dialH2(t, addr)
	if idle == nil {
		t.Fatal("TLS and the preface refused")
	}
	testwait.UntilNil(t, 30*time.Second, func() error {
		if !closed(silent, 10*time.Millisecond) {
			return errors.New("a silent connection still open")
		}
		select {
		case <-idle.done:
		default:
			return fmt.Errorf("an idle connection still open (GOAWAY %v)", idle.goaway.Load())
		}
		return nil
	})
	if !idle.goaway.Load() {
		t.Error("the idle connection was closed without a GOAWAY")
	}
	res, err := v.Submit(sctx, serving.Work{Rows: rt.Batch{Rows: 1, Cols: 2, Data: []float32{1, 1}}})
	if err != nil || res.Out.Data[0] != 3.5 {
		t.Fatalf("predict after idle: %+v %v", res, err)
	}
	_ = w
}
