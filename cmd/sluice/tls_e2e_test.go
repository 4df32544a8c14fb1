package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/testwait"
)

// pki is a test's CA: it signs server and client certificates.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: randSerial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &pki{cert: c, key: key}
}

func randSerial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// writeCA writes the CA's certificate to path.
func (p *pki) writeCA(t *testing.T, path string) {
	t.Helper()
	writeFile(t, path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.cert.Raw}))
}

// issue writes a certificate for 127.0.0.1 and its key to certFile and
// keyFile (each written beside and renamed over, as a rotation does) and
// returns its serial.
func (p *pki) issue(t *testing.T, cn string, usage x509.ExtKeyUsage, certFile, keyFile string) *big.Int {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sn := randSerial(t)
	tmpl := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return sn
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// tlsClient is a client's TLS trusting caFile, with a client certificate
// when certFile is set.
func tlsClient(t *testing.T, caFile, certFile, keyFile string) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(b)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// serverSerial is the serial of the certificate a new TLS connection to
// addr is served.
func serverSerial(addr string, cfg *tls.Config) (*big.Int, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// TestTLSListeners: sluice serve with --tls-cert, --tls-key and
// --tls-client-ca serves HTTPS (HTTP/2) and gRPC over TLS to clients with a
// certificate of the client CA and refuses the others; the CLI predicts
// with --ca, --cert, --key; a certificate (and a client CA) replaced on
// disk is used by new connections while open ones go on, with no restart.
func TestTLSListeners(t *testing.T) {
	dir := t.TempDir()
	f := func(name string) string { return filepath.Join(dir, name) }
	ca, other := newPKI(t, "sluice test ca"), newPKI(t, "another ca")
	ca.writeCA(t, f("ca.pem"))
	ca.writeCA(t, f("clients-ca.pem")) // the server's --tls-client-ca, replaced below
	other.writeCA(t, f("other-ca.pem"))
	sn1 := ca.issue(t, "sluice", x509.ExtKeyUsageServerAuth, f("server.pem"), f("server-key.pem"))
	ca.issue(t, "alice", x509.ExtKeyUsageClientAuth, f("client.pem"), f("client-key.pem"))
	other.issue(t, "mallory", x509.ExtKeyUsageClientAuth, f("other.pem"), f("other-key.pem"))

	models := t.TempDir()
	writePackage(t, filepath.Join(models, "calc"), []float64{1, 2}, 3.5)

	// Flags that do not go together are refused before anything starts.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", f("server.pem")}, "--tls-cert and --tls-key"},
		{[]string{"--tls-key", f("server-key.pem")}, "--tls-cert and --tls-key"},
		{[]string{"--tls-client-ca", f("ca.pem")}, "--tls-client-ca: needs --tls-cert"},
		{[]string{"--tls-cert", f("missing.pem"), "--tls-key", f("server-key.pem")}, "--tls-cert " + f("missing.pem")},
		{[]string{"--tls-cert", f("server.pem"), "--tls-key", f("client-key.pem")}, "private key does not match"},
		{[]string{"--tls-cert", f("server.pem"), "--tls-key", f("server-key.pem"), "--tls-client-ca", f("server-key.pem")}, "--tls-client-ca " + f("server-key.pem")},
	} {
		_, stderr, err := sluice(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--models", models}, tc.args...)...)
		if err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("serve %q: %v, stderr %q; want it to say %q", tc.args, err, stderr, tc.want)
		}
	}

	good := tlsClient(t, f("ca.pem"), f("client.pem"), f("client-key.pem"))
	h2 := &http.Transport{TLSClientConfig: good, ForceAttemptHTTP2: true}
	defer h2.CloseIdleConnections()
	hc := &http.Client{Transport: h2, Timeout: 30 * time.Second}
	grpcAddr := freeAddr(t)
	srv := startServerClient(t, hc, "--data", t.TempDir(), "--models", models, "--grpc-addr", grpcAddr,
		"--tls-cert", f("server.pem"), "--tls-key", f("server-key.pem"), "--tls-client-ca", f("clients-ca.pem"))
	defer srv.stop(t)
	if !strings.HasPrefix(srv.url, "https://") || !strings.Contains(srv.logs.String(), "scheme=https client_certs=required") {
		t.Fatalf("url %s; the log does not say https with client certificates:\n%s", srv.url, srv.logs)
	}
	addr := strings.TrimPrefix(srv.url, "https://")

	// The CLI over HTTPS with a client certificate.
	tlsArgs := []string{"--server", srv.url, "--ca", f("ca.pem"), "--cert", f("client.pem"), "--key", f("client-key.pem")}
	predictCLI := func(args ...string) (float64, string, error) {
		out, stderr, err := sluice(t, append([]string{"predict", "calc", `{"x":1,"z":2}`}, args...)...)
		if err != nil {
			return 0, stderr, err
		}
		var p api.PredictResponse
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("predict output %q: %v", out, err)
		}
		return p.Predictions[0]["y"], stderr, nil
	}
	if y, stderr, err := predictCLI(tlsArgs...); err != nil || y != 5.5 {
		t.Fatalf("predict over https: y %v, %v %s", y, err, stderr)
	}
	if out, stderr, err := sluice(t, append([]string{"models"}, tlsArgs...)...); err != nil || !strings.Contains(out, "calc") {
		t.Fatalf("models over https: %v %s %s", err, out, stderr)
	}

	// Refused: no client certificate, one of another CA (in TLS 1.3 the
	// client may see its alert or only a closed connection, so the server's
	// log says why), a server the CLI cannot verify, plain HTTP to a TLS
	// listener; flags that do not go together are named.
	for _, tc := range []struct {
		name string
		args []string
		want string // in the CLI's stderr, else in the server's log
	}{
		{"no client certificate", []string{"--server", srv.url, "--ca", f("ca.pem")}, "client didn't provide a certificate"},
		{"a client certificate of another CA", []string{"--server", srv.url, "--ca", f("ca.pem"), "--cert", f("other.pem"), "--key", f("other-key.pem")}, `client certificate \"mallory\": x509: certificate signed by unknown authority`},
		{"no --ca", []string{"--server", srv.url, "--cert", f("client.pem"), "--key", f("client-key.pem")}, "certificate signed by unknown authority"},
		{"the wrong --ca", []string{"--server", srv.url, "--ca", f("other-ca.pem"), "--cert", f("client.pem"), "--key", f("client-key.pem")}, "certificate signed by unknown authority"},
		{"plain http", []string{"--server", "http://" + addr}, "400"},
		{"--cert without --key", []string{"--server", srv.url, "--ca", f("ca.pem"), "--cert", f("client.pem")}, "--cert and --key"},
		{"--ca not PEM", []string{"--server", srv.url, "--ca", f("client-key.pem")}, "--ca " + f("client-key.pem")},
		{"--ca missing", []string{"--server", srv.url, "--ca", f("missing.pem")}, "--ca " + f("missing.pem")},
		{"--ca with http://", []string{"--server", "http://" + addr, "--ca", f("ca.pem")}, "use an https:// --server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := predictCLI(tc.args...)
			if err == nil {
				t.Fatal("predict was answered")
			}
			if !strings.Contains(stderr, tc.want) {
				testwait.UntilNil(t, 10*time.Second, func() error {
					if !strings.Contains(srv.logs.String(), tc.want) {
						return fmt.Errorf("predict: stderr %q; neither it nor the server's log says %q", stderr, tc.want)
					}
					return nil
				})
			}
		})
	}

	// gRPC over TLS, with and without a client certificate.
	infer := func(cc *grpc.ClientConn) error {
		resp, err := inferencepb.NewGRPCInferenceServiceClient(cc).ModelInfer(t.Context(), &inferencepb.ModelInferRequest{ModelName: "calc",
			Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
				{Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{1}}},
				{Name: "z", Datatype: "FP32", Shape: []int64{1}, Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{2}}},
			}})
		if err != nil {
			return err
		}
		if got := resp.Outputs[0].Contents.GetFp32Contents(); len(got) != 1 || got[0] != 5.5 {
			return fmt.Errorf("ModelInfer: outputs %v, want y 5.5", resp.Outputs)
		}
		return nil
	}
	dialGRPC := func(cfg *tls.Config) *grpc.ClientConn {
		cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	grpcConn := dialGRPC(good)
	if err := infer(grpcConn); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	if err := infer(dialGRPC(tlsClient(t, f("ca.pem"), "", ""))); err == nil {
		t.Fatal("gRPC without a client certificate was answered")
	}
	if err := infer(dialGRPC(tlsClient(t, f("ca.pem"), f("other.pem"), f("other-key.pem")))); err == nil {
		t.Fatal("gRPC with a client certificate of another CA was answered")
	}

	// An HTTP/2 connection opened now, on the first certificate.
	get := func() (*http.Response, error) {
		resp, err := hc.Get(srv.url + "/v1/models")
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("GET /v1/models: %s", resp.Status)
		}
		return resp, nil
	}
	resp, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Proto != "HTTP/2.0" || resp.TLS.PeerCertificates[0].SerialNumber.Cmp(sn1) != 0 {
		t.Fatalf("first connection: %s, serial %v, want HTTP/2.0 and %v", resp.Proto, resp.TLS.PeerCertificates[0].SerialNumber, sn1)
	}

	// The certificate is replaced on disk: new connections get the new
	// one (checked at most once a second), no restart.
	sn2 := ca.issue(t, "sluice", x509.ExtKeyUsageServerAuth, f("server.pem"), f("server-key.pem"))
	testwait.UntilNil(t, 30*time.Second, func() error {
		got, err := serverSerial(addr, good)
		if err == nil && got.Cmp(sn2) != 0 {
			err = fmt.Errorf("a new connection is served serial %v, want the new %v", got, sn2)
		}
		return err
	})
	if got, err := serverSerial(grpcAddr, good); err != nil || got.Cmp(sn2) != 0 {
		t.Fatalf("a new gRPC connection: serial %v, %v; want %v", got, err, sn2)
	}
	// The HTTP/2 connection opened before goes on (its requests still show
	// the first certificate: the same connection), and so does gRPC's.
	for i := range 3 {
		resp, err := get()
		if err != nil {
			t.Fatalf("request %d on the open connection: %v", i, err)
		}
		if got := resp.TLS.PeerCertificates[0].SerialNumber; got.Cmp(sn1) != 0 {
			t.Fatalf("request %d went on a new connection (serial %v), want the one opened on %v", i, got, sn1)
		}
	}
	if err := infer(grpcConn); err != nil {
		t.Fatalf("the open gRPC connection after the reload: %v", err)
	}
	if y, stderr, err := predictCLI(tlsArgs...); err != nil || y != 5.5 {
		t.Fatalf("predict over https after the reload: y %v, %v %s", y, err, stderr)
	}

	// A bad new certificate keeps the last good one, and says so.
	writeFile(t, f("server.pem"), []byte("not a certificate"))
	testwait.UntilNil(t, 30*time.Second, func() error {
		if !strings.Contains(srv.logs.String(), "keeping the previous one") {
			return fmt.Errorf("no reload error logged yet")
		}
		return nil
	})
	if got, err := serverSerial(addr, good); err != nil || got.Cmp(sn2) != 0 {
		t.Fatalf("after a bad file: serial %v, %v; want the last good %v", got, err, sn2)
	}

	// The client CA is replaced too: the other CA's clients are let in,
	// the first CA's no longer.
	other.writeCA(t, f("clients-ca.pem"))
	otherArgs := []string{"--server", srv.url, "--ca", f("ca.pem"), "--cert", f("other.pem"), "--key", f("other-key.pem")}
	testwait.UntilNil(t, 30*time.Second, func() error {
		_, stderr, err := predictCLI(otherArgs...)
		if err != nil {
			return fmt.Errorf("a client of the new client CA: %v %s", err, stderr)
		}
		return nil
	})
	if _, stderr, err := predictCLI(tlsArgs...); err == nil {
		t.Fatalf("a client of the old client CA was answered after the change: %s", stderr)
	}
	testwait.UntilNil(t, 10*time.Second, func() error {
		if !strings.Contains(srv.logs.String(), `client certificate \"alice\": x509: certificate signed by unknown authority`) {
			return fmt.Errorf("the server's log does not say it refused alice's certificate")
		}
		return nil
	})
}
