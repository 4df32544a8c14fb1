package worker

// The hop's authentication, the worker's side (the control plane's is
// internal/cluster/auth.go). The worker's gRPC server speaks TLS with a
// certificate generated at start, whose SHA-256 it registers (the gateway
// pins it); it answers only calls carrying the call secret it registered
// (metadata x-sluice-call), except grpc.health.v1 (probes). It verifies
// the control plane's certificate (Config.ControlTLS, --ca), presents the
// join token on Register, and the session it was given on every later
// call.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/internal/certs"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
)

// healthPrefix is the one service answered without the call secret.
const healthPrefix = "/grpc.health.v1.Health/"

// serverIdentity is the worker server's certificate (self-signed, made at
// start), its fingerprint and the call secret.
type serverIdentity struct {
	cert       tls.Certificate
	certSHA    string
	callSecret string
}

func newServerIdentity() (serverIdentity, error) {
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	certPEM, keyPEM, err := certs.SelfSigned(hosts, 10*365*24*time.Hour)
	if err != nil {
		return serverIdentity{}, fmt.Errorf("worker: server certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return serverIdentity{}, fmt.Errorf("worker: server certificate: %w", err)
	}
	secret, err := hop.NewSecret()
	if err != nil {
		return serverIdentity{}, fmt.Errorf("worker: call secret: %w", err)
	}
	return serverIdentity{cert: cert, certSHA: certs.Fingerprint(cert.Certificate[0]), callSecret: secret}, nil
}

// authorize refuses a call without the call secret (health excepted).
func (w *Worker) authorize(ctx context.Context, method string) error {
	if strings.HasPrefix(method, healthPrefix) || hop.SecretEqual(hop.Incoming(ctx, hop.CallKey), w.ident.callSecret) {
		return nil
	}
	return hop.Status(errs.New(errs.Unauthenticated, "%s: no call secret (metadata %s): this worker answers only the control plane it registered with", method, hop.CallKey))
}

func (w *Worker) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := w.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (w *Worker) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := w.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

// joinContext adds the join token to a Register's context.
func (w *Worker) joinContext(ctx context.Context) (context.Context, error) {
	if w.cfg.JoinToken == nil {
		return ctx, nil
	}
	tok, err := w.cfg.JoinToken()
	if err != nil {
		return ctx, err
	}
	if len(tok) == 0 {
		return ctx, errors.New("the join token is empty")
	}
	return metadata.AppendToOutgoingContext(ctx, hop.AuthorizationKey, "Bearer "+string(tok)), nil
}

// registerHint says what to fix when the control plane refused or could
// not be verified ("" when nothing the operator can fix shows).
func registerHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "x509: certificate signed by unknown authority"), strings.Contains(msg, "failed to verify certificate"):
		if strings.Contains(msg, "is valid for") {
			return "the control plane's certificate does not name the address in --join: use a name it is valid for, or add the address to the gateway's --control-tls-hosts"
		}
		return "the control plane's certificate is not signed by --ca: pass the gateway's control CA (<--data>/control/ca.pem on the gateway host, or the CA of its --control-tls-cert)"
	case strings.Contains(msg, "bad certificate"), strings.Contains(msg, "certificate required"), strings.Contains(msg, "unknown certificate authority"):
		return "the control plane refused this worker's client certificate: --cert must be signed by the gateway's --worker-client-ca (or join with --join-token-file instead)"
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "TLS with the control plane failed: --join must be the gateway's --control-addr (which always speaks TLS), --ca its control CA"
	}
	switch status.Code(err) {
	case codes.Unauthenticated:
		return "the gateway refused the join credential: --join-token-file must hold the gateway's join token (<--data>/control/join-token on the gateway host), or --cert/--key a certificate its --worker-client-ca signed"
	case codes.AlreadyExists:
		return "another process holds this --id with a live session; retrying until it is dead"
	}
	return ""
}
