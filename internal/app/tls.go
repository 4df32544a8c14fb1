package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluiceml/sluice/internal/certs"
)

// listenerTLS is the TLS of the HTTP and gRPC listeners (nil: none): the
// certificate of --tls-cert and --tls-key, reloaded when the files change,
// and with --tls-client-ca client certificates required and verified
// against its CAs (reloaded too). Each error names its flag.
func listenerTLS(c Config, log *slog.Logger) (*tls.Config, error) {
	switch {
	case c.TLSCert == "" && c.TLSKey == "" && c.TLSClientCA == "":
		return nil, nil
	case c.TLSCert == "" || c.TLSKey == "":
		return nil, errors.New("--tls-cert and --tls-key: give both (the server's certificate chain and its private key, PEM) or neither")
	}
	r, err := certs.NewReloader(c.TLSCert, c.TLSKey, log)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", c.TLSCert, c.TLSKey, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
	if c.TLSClientCA == "" {
		return cfg, nil
	}
	pool, err := certs.NewCAPool(c.TLSClientCA, log)
	if err != nil {
		return nil, fmt.Errorf("--tls-client-ca %s: %w", c.TLSClientCA, err)
	}
	return certs.VerifyClients(cfg, pool, tls.RequireAndVerifyClientCert), nil
}

// scheme is what the listeners speak, for the log: http, https, or
// https with client certificates required.
func (a *app) scheme() slog.Attr {
	switch {
	case a.tls == nil:
		return slog.String("scheme", "http")
	case a.cfg.TLSClientCA != "":
		return slog.Group("", "scheme", "https", "client_certs", "required")
	}
	return slog.String("scheme", "https")
}
