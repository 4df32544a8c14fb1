package hop

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// The hop's authentication (docs/design.md, "Processes: the gateway and
// its workers"): both ways the connection is TLS, and every call carries
// a secret the callee gave or chose, as gRPC metadata.
const (
	// CallKey carries the worker's call secret (RegisterRequest.call_secret)
	// on every call of the gateway to the worker.
	CallKey = "x-sluice-call"
	// WorkerKey and SessionKey carry the worker's id and the session secret
	// Register issued (RegisterResponse.session_secret) on every later call
	// of the worker to the control plane.
	WorkerKey  = "x-sluice-worker"
	SessionKey = "x-sluice-session"
	// AuthorizationKey carries the join token on Register, as
	// "Bearer <token>".
	AuthorizationKey = "authorization"
)

// NewSecret returns 32 random bytes as hex: a call or session secret.
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// SecretEqual reports whether got is want, in time independent of where
// they differ; an empty want matches nothing.
func SecretEqual(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// Incoming is the one value of key in the call's incoming metadata ("" if
// absent or given more than once).
func Incoming(ctx context.Context, key string) string {
	if v := metadata.ValueFromIncomingContext(ctx, key); len(v) == 1 {
		return v[0]
	}
	return ""
}

// Bearer is the token of an "authorization: Bearer <token>" value ("" if
// the value is not one).
func Bearer(v string) string {
	const p = "bearer "
	if len(v) > len(p) && strings.EqualFold(v[:len(p)], p) {
		return strings.TrimSpace(v[len(p):])
	}
	return ""
}

// Credentials are gRPC per-call credentials sending fixed metadata, which
// Set replaces (a worker's session changes at each registration). They
// require a secure transport: gRPC refuses to send them in clear. The
// metadata map is built once per Set and shared by every call (gRPC only
// reads it).
type Credentials struct {
	cur atomic.Pointer[credState]
}

// credState is one Set's metadata and the channel the next Set closes.
type credState struct {
	md      map[string]string
	changed chan struct{}
}

// NewCredentials returns credentials sending the given key, value pairs.
func NewCredentials(kv ...string) *Credentials {
	c := &Credentials{}
	c.Set(kv...)
	return c
}

// Set replaces the metadata sent: key, value pairs; a pair with an empty
// value is left out. It closes the channel Changed returned before.
func (c *Credentials) Set(kv ...string) {
	md := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			md[kv[i]] = kv[i+1]
		}
	}
	if old := c.cur.Swap(&credState{md: md, changed: make(chan struct{})}); old != nil {
		close(old.changed)
	}
}

// Changed is closed by the next Set: a call refused for the metadata sent
// now may wait on it and try again with the new (a worker's first call of
// a session can race the Register answer that carries the session).
func (c *Credentials) Changed() <-chan struct{} { return c.cur.Load().changed }

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c *Credentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return c.cur.Load().md, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (c *Credentials) RequireTransportSecurity() bool { return true }

var _ credentials.PerRPCCredentials = (*Credentials)(nil)
