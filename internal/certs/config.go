package certs

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
)

// ServerConfig is the configuration of a listener: TLS 1.2 or later with
// Go's defaults otherwise (cipher suites, curves, ALPN left to the server
// that uses it), the certificate of certFile and keyFile reloaded when they
// change, and, when clientCAFile is set, client certificates required and
// verified against the CAs of that file (reloaded too). log gets reload
// errors (nil: slog.Default()).
func ServerConfig(certFile, keyFile, clientCAFile string, log *slog.Logger) (*tls.Config, error) {
	r, err := NewReloader(certFile, keyFile, log)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
	if clientCAFile == "" {
		return cfg, nil
	}
	pool, err := NewCAPool(clientCAFile, log)
	if err != nil {
		return nil, err
	}
	return VerifyClients(cfg, pool, tls.RequireAndVerifyClientCert), nil
}

// VerifyClients returns a copy of base that asks clients for a certificate
// (auth: tls.RequireAndVerifyClientCert, or tls.VerifyClientCertIfGiven
// where another credential may stand in for one) and verifies it against
// pool as it is at each handshake, so a new CA file is used without a
// restart. A resumed session is verified again against the current pool:
// a client whose CA was removed does not come back on an old ticket.
func VerifyClients(base *tls.Config, pool *CAPool, auth tls.ClientAuthType) *tls.Config {
	type built struct {
		pool *x509.CertPool
		cfg  *tls.Config
	}
	var last atomic.Pointer[built]
	forPool := func(p *x509.CertPool) *tls.Config {
		if b := last.Load(); b != nil && b.pool == p {
			return b.cfg
		}
		c := base.Clone()
		c.ClientAuth = auth
		c.ClientCAs = p
		c.GetConfigForClient = nil
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if !cs.DidResume || len(cs.PeerCertificates) == 0 {
				return nil // a full handshake was verified against p already
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: p, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			return err
		}
		last.Store(&built{pool: p, cfg: c})
		return c
	}
	out := forPool(pool.Pool()).Clone()
	out.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return forPool(pool.Pool()), nil
	}
	return out
}

// ClientConfig is the configuration of a client of a Sluice listener: TLS
// 1.2 or later; the server verified against the CAs of caFile, or the
// system's roots when caFile is empty; with certFile and keyFile (both or
// neither), a client certificate, reloaded when the files change.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile == "" && keyFile == "":
	case certFile == "" || keyFile == "":
		return nil, errors.New("certs: a client certificate needs both a certificate file and a key file")
	default:
		r, err := NewReloader(certFile, keyFile, nil)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = r.GetClientCertificate
	}
	return cfg, nil
}

// PinnedClientConfig is the configuration of a client that accepts exactly
// one server: the one whose leaf certificate's DER bytes have the SHA-256
// sha256hex (Fingerprint), whatever its names, issuer or dates. cert, when
// not nil, is presented as the client's certificate.
func PinnedClientConfig(sha256hex string, cert *tls.Certificate) (*tls.Config, error) {
	pin, err := hex.DecodeString(strings.ToLower(sha256hex))
	if err != nil || len(pin) != 32 {
		return nil, fmt.Errorf("certs: pin %q is not a SHA-256 in hex (64 hex digits, as Fingerprint writes it)", sha256hex)
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is not verified against any root: the pin below is the
		// whole check, made on every connection, resumed ones included.
		InsecureSkipVerify: true, //nolint:gosec // pinned in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("certs: the server presented no certificate")
			}
			got, err := hex.DecodeString(Fingerprint(cs.PeerCertificates[0].Raw))
			if err != nil || subtle.ConstantTimeCompare(got, pin) != 1 {
				return fmt.Errorf("certs: the server's certificate has SHA-256 %s, want the pinned %s", Fingerprint(cs.PeerCertificates[0].Raw), strings.ToLower(sha256hex))
			}
			return nil
		},
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg, nil
}
