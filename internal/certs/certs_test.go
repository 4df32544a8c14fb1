package certs

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/testwait"
)

// testCA is a CA of a test and what it signs.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial = struct {
	sync.Mutex
	n int64
}{n: 100}

func nextSerial() *big.Int {
	serial.Lock()
	defer serial.Unlock()
	serial.n++
	return big.NewInt(serial.n)
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf for 127.0.0.1 and returns its PEM, its key's PEM and
// its serial.
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, sn *big.Int) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sn = nextSerial()
	tmpl := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), sn
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// replace writes b beside path and renames it over path (a new inode, as
// most tools and Kubernetes do).
func replace(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	write(t, tmp, b)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// echo serves cfg on 127.0.0.1 and echoes lines back; it is stopped at
// the end of the test.
func echo(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// dial connects, says hello and returns the connection and the serial of
// the server's certificate.
func dial(addr string, cfg *tls.Config) (*tls.Conn, *big.Int, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := roundTrip(c); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// roundTrip sends a line and reads it back: in TLS 1.3 a refused client
// certificate shows only on the first read.
func roundTrip(c *tls.Conn) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "hello\n" {
		return errors.New("echo: got " + line)
	}
	return nil
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestFirstLoadErrors(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	certPEM, keyPEM, _ := ca.issue(t, "server", x509.ExtKeyUsageServerAuth)
	_, otherKey, _ := ca.issue(t, "other", x509.ExtKeyUsageServerAuth)
	good, key, other, junk := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "other.pem"), filepath.Join(dir, "junk.pem")
	write(t, good, certPEM)
	write(t, key, keyPEM)
	write(t, other, otherKey)
	write(t, junk, []byte("not pem"))
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name, cert, key, ca string
		want                []string
	}{
		{"no key", good, "", "", []string{"both a certificate file and a key file"}},
		{"missing cert", missing, key, "", []string{missing, "readable PEM file"}},
		{"missing key", good, missing, "", []string{missing}},
		{"not pem", junk, key, "", []string{junk, "PEM"}},
		{"key of another cert", good, other, "", []string{good, other, "private key does not match"}},
		{"missing CA", good, key, missing, []string{missing}},
		{"CA not pem", good, key, junk, []string{junk, "no PEM certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ServerConfig(tc.cert, tc.key, tc.ca, quiet())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	for _, tc := range []struct {
		name, ca, cert, key string
		want                string
	}{
		{"CA not pem", junk, "", "", junk},
		{"cert without key", "", good, "", "both a certificate file and a key file"},
		{"key without cert", "", "", key, "both a certificate file and a key file"},
		{"mismatched", "", good, other, other},
	} {
		t.Run("client "+tc.name, func(t *testing.T) {
			_, err := ClientConfig(tc.ca, tc.cert, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestServerConfigDefaults(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	certPEM, keyPEM, _ := ca.issue(t, "server", x509.ExtKeyUsageServerAuth)
	certFile, keyFile, caFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), filepath.Join(dir, "ca.pem")
	write(t, certFile, certPEM)
	write(t, keyFile, keyPEM)
	write(t, caFile, ca.pem)
	for _, tc := range []struct {
		name     string
		clientCA string
		auth     tls.ClientAuthType
	}{{"tls", "", tls.NoClientCert}, {"mtls", caFile, tls.RequireAnyClientCert}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ServerConfig(certFile, keyFile, tc.clientCA, quiet())
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tc.auth || len(cfg.CipherSuites) != 0 {
				t.Errorf("min version %x, client auth %v, suites %v", cfg.MinVersion, cfg.ClientAuth, cfg.CipherSuites)
			}
			if (tc.clientCA != "") != (cfg.VerifyConnection != nil) {
				t.Errorf("client CA %q, VerifyConnection set %v", tc.clientCA, cfg.VerifyConnection != nil)
			}
		})
	}
	cfg, err := ClientConfig("", "", "")
	if err != nil || cfg.RootCAs != nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("client config with no CA: %v, roots %v (want nil: the system's)", err, cfg.RootCAs)
	}
}

func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	certFile, keyFile, caFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), filepath.Join(dir, "ca.pem")
	write(t, caFile, ca.pem)
	c1, k1, sn1 := ca.issue(t, "one", x509.ExtKeyUsageServerAuth)
	write(t, certFile, c1)
	write(t, keyFile, k1)
	r, err := NewReloader(certFile, keyFile, quiet())
	if err != nil {
		t.Fatal(err)
	}
	r.src.interval = 0 // every handshake checks
	addr := echo(t, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate})
	client, err := ClientConfig(caFile, "", "")
	if err != nil {
		t.Fatal(err)
	}

	open, got, err := dial(addr, client)
	if err != nil || got.Cmp(sn1) != 0 {
		t.Fatalf("first: %v, serial %v want %v", err, got, sn1)
	}
	defer open.Close()

	for _, tc := range []struct {
		name    string
		update  func(t *testing.T) *big.Int // the serial to see next; nil: the one before
		wantErr string
	}{
		{"in place", func(t *testing.T) *big.Int {
			c, k, sn := ca.issue(t, "two", x509.ExtKeyUsageServerAuth)
			write(t, certFile, c)
			write(t, keyFile, k)
			return sn
		}, ""},
		{"renamed over", func(t *testing.T) *big.Int {
			c, k, sn := ca.issue(t, "three", x509.ExtKeyUsageServerAuth)
			replace(t, keyFile, k)
			replace(t, certFile, c)
			return sn
		}, ""},
		{"junk keeps the old", func(t *testing.T) *big.Int {
			write(t, certFile, []byte("half written"))
			return nil
		}, certFile},
		{"key of another keeps the old", func(t *testing.T) *big.Int {
			c, _, _ := ca.issue(t, "four", x509.ExtKeyUsageServerAuth)
			write(t, certFile, c)
			return nil
		}, "does not match"},
		{"gone keeps the old", func(t *testing.T) *big.Int {
			if err := os.Remove(certFile); err != nil {
				t.Fatal(err)
			}
			return nil
		}, "readable PEM file"},
		{"fixed again", func(t *testing.T) *big.Int {
			c, k, sn := ca.issue(t, "five", x509.ExtKeyUsageServerAuth)
			write(t, keyFile, k)
			write(t, certFile, c)
			return sn
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := r.Certificate().Leaf.SerialNumber
			want := tc.update(t)
			if want == nil {
				want = before
			}
			// Each step changes the files, so the next handshake reads them.
			c, got, err := dial(addr, client)
			if err != nil {
				t.Fatalf("new connection: %v", err)
			}
			c.Close()
			if got.Cmp(want) != 0 {
				t.Errorf("new connection sees serial %v, want %v", got, want)
			}
			if err := r.Err(); (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Err() = %v, want it to say %q", err, tc.wantErr)
			}
			// The connection opened before any of this still works.
			if err := roundTrip(open); err != nil {
				t.Errorf("the open connection: %v", err)
			}
		})
	}
}

func TestReloadCheckedAtMostOncePerInterval(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	c1, k1, sn1 := ca.issue(t, "one", x509.ExtKeyUsageServerAuth)
	write(t, certFile, c1)
	write(t, keyFile, k1)
	r, err := NewReloader(certFile, keyFile, quiet())
	if err != nil {
		t.Fatal(err)
	}
	r.src.interval = time.Hour
	c2, k2, sn2 := ca.issue(t, "two", x509.ExtKeyUsageServerAuth)
	write(t, certFile, c2)
	write(t, keyFile, k2)
	if got := r.Certificate().Leaf.SerialNumber; got.Cmp(sn1) != 0 {
		t.Fatalf("within the interval: serial %v, want the first %v", got, sn1)
	}
	r.src.checked.Store(0) // the interval has passed
	if got := r.Certificate().Leaf.SerialNumber; got.Cmp(sn2) != 0 {
		t.Fatalf("after the interval: serial %v, want %v", got, sn2)
	}
}

func TestClientCAReload(t *testing.T) {
	dir := t.TempDir()
	serverCA, caA, caB := newCA(t, "server ca"), newCA(t, "a"), newCA(t, "b")
	sc, sk, _ := serverCA.issue(t, "server", x509.ExtKeyUsageServerAuth)
	certFile, keyFile, rootFile, clientCAFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), filepath.Join(dir, "root.pem"), filepath.Join(dir, "clients.pem")
	write(t, certFile, sc)
	write(t, keyFile, sk)
	write(t, rootFile, serverCA.pem)
	write(t, clientCAFile, caA.pem)
	r, err := NewReloader(certFile, keyFile, quiet())
	if err != nil {
		t.Fatal(err)
	}
	pool, err := NewCAPool(clientCAFile, quiet())
	if err != nil {
		t.Fatal(err)
	}
	pool.src.interval = 0
	addr := echo(t, VerifyClients(&tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}, pool, tls.RequireAndVerifyClientCert))

	client := func(ca *testCA, cache tls.ClientSessionCache) *tls.Config {
		c, k, _ := ca.issue(t, "client", x509.ExtKeyUsageClientAuth)
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ClientConfig(rootFile, "", "")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
		cfg.ClientSessionCache = cache
		return cfg
	}
	noCert, _ := ClientConfig(rootFile, "", "")
	resuming := client(caA, tls.NewLRUClientSessionCache(4))
	try := func(cfg *tls.Config) (bool, error) {
		c, _, err := dial(addr, cfg)
		if err != nil {
			return false, err
		}
		defer c.Close()
		return c.ConnectionState().DidResume, nil
	}
	if _, err := try(resuming); err != nil {
		t.Fatalf("a client of CA a: %v", err)
	}
	if _, err := try(noCert); err == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	if _, err := try(client(caB, nil)); err == nil {
		t.Fatal("a client of CA b was accepted while the file holds CA a")
	}
	testwait.UntilNil(t, 10*time.Second, func() error { // TLS 1.3 tickets arrive after the handshake
		resumed, err := try(resuming)
		if err == nil && !resumed {
			err = errors.New("not resumed yet")
		}
		return err
	})

	replace(t, clientCAFile, caB.pem)
	if _, err := try(client(caB, nil)); err != nil {
		t.Fatalf("a client of CA b after the file changed to b: %v", err)
	}
	if _, err := try(client(caA, nil)); err == nil {
		t.Fatal("a client of CA a accepted after the file changed to b")
	}
	if resumed, err := try(resuming); err == nil {
		t.Fatalf("a session of CA a came back on its ticket (resumed %v) after the file changed to b", resumed)
	}

	write(t, clientCAFile, []byte("junk"))
	if _, err := try(client(caB, nil)); err != nil {
		t.Fatalf("a junk CA file did not keep the pool of b: %v", err)
	}
	if err := pool.Err(); err == nil || !strings.Contains(err.Error(), clientCAFile) {
		t.Fatalf("Err() = %v, want the file named", err)
	}
}

func TestSelfSignedAndPinning(t *testing.T) {
	certPEM, keyPEM, err := SelfSigned([]string{"127.0.0.1", "localhost", "::1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf := pair.Leaf
	if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || len(leaf.IPAddresses) != 2 || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "localhost" {
		t.Fatalf("key %T, IPs %v, names %v", leaf.PublicKey, leaf.IPAddresses, leaf.DNSNames)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	for _, h := range []string{"127.0.0.1", "localhost", "::1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: h}); err != nil {
			t.Errorf("verify for %s: %v", h, err)
		}
	}
	other, otherKey, _ := SelfSigned([]string{"127.0.0.1"}, time.Hour)
	otherPair, _ := tls.X509KeyPair(other, otherKey)
	if Fingerprint(leaf.Raw) == Fingerprint(otherPair.Leaf.Raw) || len(Fingerprint(leaf.Raw)) != 64 {
		t.Fatalf("fingerprints %s, %s", Fingerprint(leaf.Raw), Fingerprint(otherPair.Leaf.Raw))
	}

	addr := echo(t, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}})
	for _, tc := range []struct {
		name string
		pin  string
		ok   bool
	}{
		{"the pin", Fingerprint(leaf.Raw), true},
		{"the pin in capitals", strings.ToUpper(Fingerprint(leaf.Raw)), true},
		{"another's pin", Fingerprint(otherPair.Leaf.Raw), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := PinnedClientConfig(tc.pin, &otherPair)
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := dial(addr, cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("dial: %v, want ok %v", err, tc.ok)
			}
			if c != nil {
				c.Close()
			}
		})
	}
	for _, bad := range []string{"", "abc", strings.Repeat("z", 64), Fingerprint(leaf.Raw)[:62]} {
		if _, err := PinnedClientConfig(bad, nil); err == nil || !strings.Contains(err.Error(), "64 hex digits") {
			t.Errorf("pin %q: %v", bad, err)
		}
	}
	for _, tc := range []struct {
		hosts []string
		valid time.Duration
	}{{nil, time.Hour}, {[]string{""}, time.Hour}, {[]string{"x"}, 0}} {
		if _, _, err := SelfSigned(tc.hosts, tc.valid); err == nil {
			t.Errorf("SelfSigned(%q, %s): no error", tc.hosts, tc.valid)
		}
	}
}

func TestVerifyClientsIfGivenKeepsALPN(t *testing.T) {
	dir := t.TempDir()
	serverCA, caA, caB := newCA(t, "server ca"), newCA(t, "a"), newCA(t, "b")
	sc, sk, _ := serverCA.issue(t, "server", x509.ExtKeyUsageServerAuth)
	certFile, keyFile, rootFile, clientCAFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), filepath.Join(dir, "root.pem"), filepath.Join(dir, "clients.pem")
	write(t, certFile, sc)
	write(t, keyFile, sk)
	write(t, rootFile, serverCA.pem)
	write(t, clientCAFile, caA.pem)
	r, err := NewReloader(certFile, keyFile, quiet())
	if err != nil {
		t.Fatal(err)
	}
	pool, err := NewCAPool(clientCAFile, quiet())
	if err != nil {
		t.Fatal(err)
	}
	cfg := VerifyClients(&tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}, pool, tls.VerifyClientCertIfGiven)
	srv := cfg.Clone() // what http.Server.ServeTLS and grpc's credentials do
	srv.NextProtos = []string{"h2", "http/1.1"}
	addr := echo(t, srv)
	for _, tc := range []struct {
		name string
		ca   *testCA
		ok   bool
	}{{"no certificate", nil, true}, {"of CA a", caA, true}, {"of CA b", caB, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var cert, key string
			if tc.ca != nil {
				c, k, _ := tc.ca.issue(t, "client", x509.ExtKeyUsageClientAuth)
				cert, key = filepath.Join(dir, tc.name+".c"), filepath.Join(dir, tc.name+".k")
				write(t, cert, c)
				write(t, key, k)
			}
			cl, err := ClientConfig(rootFile, cert, key)
			if err != nil {
				t.Fatal(err)
			}
			cl.NextProtos = []string{"h2"}
			c, _, err := dial(addr, cl)
			if (err == nil) != tc.ok {
				t.Fatalf("dial: %v, want ok %v", err, tc.ok)
			}
			if c != nil {
				defer c.Close()
				if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
					t.Errorf("ALPN: %q, want h2", p)
				}
			}
		})
	}
}
