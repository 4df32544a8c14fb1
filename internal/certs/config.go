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
)

// ServerConfig is the configuration of a listener: TLS 1.2 or later with
// Go's defaults otherwise (cipher suites, curves, ALPN left to the server
// that uses it), the certificate of certFile and keyFile reloaded when they
// change, and, when clientCAFile is set, client certificates required and
// verified against the CAs of that file (reloaded too; see VerifyClients). log gets reload
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
// and verifies it against pool as it is at each handshake, so a new CA file
// is used without a restart. auth says whether a certificate is required
// (tls.RequireAndVerifyClientCert) or checked only when given
// (tls.VerifyClientCertIfGiven, where another credential may stand in for
// one). The check runs in VerifyConnection, which Go calls on every
// connection, resumed ones included: a client whose CA was removed does not
// come back on an old session ticket. (Go's own verification is left off,
// ClientAuth is RequireAnyClientCert or RequestClientCert, because it reads
// a fixed ClientCAs; swapping configs per handshake with GetConfigForClient
// would drop the ALPN protocols the HTTP and gRPC servers add to a clone.)
func VerifyClients(base *tls.Config, pool *CAPool, auth tls.ClientAuthType) *tls.Config {
	c := base.Clone()
	required := auth == tls.RequireAndVerifyClientCert || auth == tls.RequireAnyClientCert
	if required {
		c.ClientAuth = tls.RequireAnyClientCert
	} else {
		c.ClientAuth = tls.RequestClientCert
	}
	next := base.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := verifyClient(cs.PeerCertificates, pool.Pool(), required); err != nil {
			return err
		}
		if next != nil {
			return next(cs)
		}
		return nil
	}
	return c
}

func verifyClient(chain []*x509.Certificate, roots *x509.CertPool, required bool) error {
	if len(chain) == 0 {
		if required {
			return errors.New("certs: a client certificate is required")
		}
		return nil
	}
	inter := x509.NewCertPool()
	for _, ic := range chain[1:] {
		inter.AddCert(ic)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("certs: client certificate %q: %w", chain[0].Subject.CommonName, err)
	}
	return nil
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
