package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// BenchmarkRecordLayer is the CPU TLS adds to a 1-row call on a kept-open
// connection: a request of 250 bytes and its answer of 350 bytes (about a
// 1-row fraud predict call and its JSON answer, headers included), both
// ends in one goroutine over an in-memory connection, so that what is
// timed is the work (encrypt, decrypt, framing, copies) and not the
// wake-ups of a network round trip. "plain" is the same exchange without
// TLS; the difference per op is TLS's cost to client and server together.
//
//	go test -run '^$' -bench RecordLayer -count 5 ./internal/certs/
func BenchmarkRecordLayer(b *testing.B) {
	certPEM, keyPEM, err := SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(pair.Leaf)
	for _, tc := range []struct {
		name string
		max  uint16 // 0: no TLS
	}{{"plain", 0}, {"tls13", tls.VersionTLS13}, {"tls12", tls.VersionTLS12}} {
		b.Run(tc.name, func(b *testing.B) {
			a, z := memPipe()
			var client, server net.Conn = a, z
			if tc.max != 0 {
				cc := tls.Client(a, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MaxVersion: tc.max})
				sc := tls.Server(z, &tls.Config{Certificates: []tls.Certificate{pair}, MaxVersion: tc.max})
				errc := make(chan error, 1)
				go func() { errc <- sc.Handshake() }()
				if err := cc.Handshake(); err != nil {
					b.Fatal(err)
				}
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
				client, server = cc, sc
			}
			req, answer := make([]byte, 250), make([]byte, 350)
			got := make([]byte, 350)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(server, req); err != nil {
					b.Fatal(err)
				}
				if _, err := server.Write(answer); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(client, got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// memPipe is a pair of connected in-memory connections whose writes never
// block (each direction a buffer), unlike net.Pipe's.
func memPipe() (net.Conn, net.Conn) {
	ab, ba := &memBuf{}, &memBuf{}
	ab.cond.L, ba.cond.L = &ab.mu, &ba.mu
	return &memConn{r: ba, w: ab}, &memConn{r: ab, w: ba}
}

type memBuf struct {
	mu   sync.Mutex // guards b
	cond sync.Cond
	b    bytes.Buffer
}

type memConn struct {
	net.Conn // only Read, Write and Close are called
	r, w     *memBuf
}

func (c *memConn) Read(p []byte) (int, error) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	for c.r.b.Len() == 0 {
		c.r.cond.Wait()
	}
	return c.r.b.Read(p)
}

func (c *memConn) Write(p []byte) (int, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	c.w.b.Write(p)
	c.w.cond.Broadcast()
	return len(p), nil
}

func (c *memConn) Close() error                     { return nil }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }
