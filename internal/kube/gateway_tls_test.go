package kube

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGatewayDemandOverTLS: with GatewayTLS the controller calls a
// gateway over https://, checking its certificate for the Service's name
// (or GatewayTLS.ServerName), and presents the client certificate a
// gateway with --tls-client-ca asks for.
func TestGatewayDemandOverTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/workers" || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(`{"mode":"workers","workers":[],"demand":[{"version":"fraud@1","replicas":3,"copies":2,"replicaMemoryBytes":1024}]}`))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	srv.StartTLS()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	// httptest's certificate is for example.com (and 127.0.0.1); it serves
	// as the client's certificate too.
	clientCert := srv.TLS.Certificates[0]
	for _, tc := range []struct {
		name       string
		tls        *tls.Config
		serverName string
		want       string // "" : the demand read
	}{
		{"the Service's name", &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}, "example.com", ""},
		{"ServerName wins", &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}, ServerName: "example.com"}, "sluice.default.svc", ""},
		{"a name the certificate lacks", &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}, "sluice.default.svc", "sluice.default.svc"},
		{"no client certificate", &tls.Config{RootCAs: roots}, "example.com", "gateway https://" + addr}, // TLS 1.3: an alert or a closed connection
		{"plain http to a TLS gateway", nil, "example.com", "400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewController(ControllerConfig{GatewayTLS: tc.tls})
			ds, err := c.gatewayDemand(t.Context(), addr, tc.serverName)
			if tc.want == "" {
				if err != nil || len(ds) != 1 || ds[0].Version != "fraud@1" || ds[0].Replicas != 3 {
					t.Fatalf("demand %+v, %v", ds, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}
