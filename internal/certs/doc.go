// Package certs is TLS for every listener and hop of Sluice: certificates
// and keys read from files and reloaded when the files change (no restart,
// no dropped connection), server and client configurations (TLS 1.2+ with
// Go's defaults; client certificates required and verified against a CA
// file when one is given), self-signed certificates for the control plane
// and the workers' servers, and the pinning of a peer's certificate by the
// SHA-256 of its DER bytes. It links crypto/tls and crypto/x509 only: no
// library does file reloading with these semantics (the field's reloaders,
// e.g. certmagic or dyncert, come with ACME or their own file layouts).
package certs
