package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/certs"
)

// clientTLSFlags registers --ca, --cert and --key on cmd, a command that
// calls the server of --server (*server), and checks them before it runs.
func clientTLSFlags(cmd *cobra.Command, server *string) {
	f := cmd.Flags()
	f.String("ca", "", "verify an https:// --server against the CAs of this PEM file (default: the system's roots)")
	f.String("cert", "", "present this client certificate (PEM, with --key) to a server that requires one (sluice serve --tls-client-ca)")
	f.String("key", "", "the private key of --cert (PEM)")
	next := cmd.PreRunE
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if _, err := clientTLS(cmd, *server); err != nil {
			return err
		}
		if next != nil {
			return next(cmd, args)
		}
		return nil
	}
}

// clientTLS is the TLS configuration of cmd's --ca, --cert and --key (nil
// for an http:// server given none of them). Each error names its flag.
func clientTLS(cmd *cobra.Command, server string) (*tls.Config, error) {
	ca, _ := cmd.Flags().GetString("ca")
	cert, _ := cmd.Flags().GetString("cert")
	key, _ := cmd.Flags().GetString("key")
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: an http:// or https:// URL, like https://127.0.0.1:8080", server)
	}
	switch {
	case (cert == "") != (key == ""):
		return nil, fmt.Errorf("--cert and --key: give both (the client certificate and its private key, PEM files) or neither")
	case u.Scheme == "http" && (ca != "" || cert != ""):
		return nil, fmt.Errorf("--ca, --cert and --key are for TLS: use an https:// --server (got %s)", server)
	case u.Scheme == "http":
		return nil, nil
	}
	cfg, err := certs.ClientConfig(ca, cert, key)
	if err != nil {
		flags := []string{}
		if ca != "" && strings.Contains(err.Error(), ca) {
			flags = append(flags, "--ca "+ca)
		}
		if cert != "" && (strings.Contains(err.Error(), cert) || strings.Contains(err.Error(), key)) {
			flags = append(flags, "--cert "+cert, "--key "+key)
		}
		if len(flags) == 0 {
			flags = []string{"--ca, --cert, --key"}
		}
		return nil, fmt.Errorf("%s: %w", strings.Join(flags, ", "), err)
	}
	return cfg, nil
}

// clientTransport is an http.Transport for server with cmd's TLS (HTTP/2
// or HTTP/1.1 by ALPN, like http.DefaultTransport). The flags were checked
// before the command ran; a file that went bad since fails every call
// with that error.
func clientTransport(cmd *cobra.Command, server string) http.RoundTripper {
	cfg, err := clientTLS(cmd, server)
	if err != nil {
		return failing{err}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg != nil {
		tr.TLSClientConfig = cfg
	}
	return tr
}

// failing is a RoundTripper that fails every request with err.
type failing struct{ err error }

func (f failing) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }
