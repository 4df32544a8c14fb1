package cluster

// The hop's authentication, the control plane's side (issue 18; the
// worker's side is internal/worker/auth.go, the metadata internal/hop).
// Ids, pids and addresses are never proof of anything:
//
//   - Register needs the join credential: the join token as metadata
//     "authorization: Bearer <token>" (compared in constant time), or a
//     client certificate the control plane's listener verified against
//     --worker-client-ca. It issues a session secret per registration.
//   - A Register for an id whose session is live is refused
//     (worker_id_in_use, retryable) unless it carries that session's
//     secret; once the session is dead (missed heartbeats, its process
//     exited) a new registration may take the id.
//   - Heartbeat and FetchArtifact carry x-sluice-worker and
//     x-sluice-session; FetchArtifact serves only the artifacts of
//     versions the pool placed on the calling worker.
//   - The pool dials a worker over TLS pinned to the certificate it
//     registered (tls_cert_sha256) and presents the worker's call secret
//     (x-sluice-call) on every call.

import (
	"context"
	"crypto/x509"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/sluiceml/sluice/internal/certs"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// JoinAuth is how a worker proves on Register that it may join
// (Config.Join). With neither a token nor client certificates every
// registration is refused.
type JoinAuth struct {
	// Token returns the join token now (sluice serve --join-token-file,
	// re-read when the file changes, so a token is rotated without a
	// restart); nil, or an empty token: no token is accepted.
	Token func() []byte
	// ClientCAs, when set, accepts in place of the token a client
	// certificate of the call's TLS connection that they sign
	// (--worker-client-ca; verified here again, whatever the listener did).
	ClientCAs func() *x509.CertPool
}

// check says whether the call carries a valid join credential.
func (j JoinAuth) check(ctx context.Context) error {
	if j.ClientCAs != nil && verifiedClient(ctx, j.ClientCAs()) {
		return nil
	}
	got := hop.Bearer(hop.Incoming(ctx, hop.AuthorizationKey))
	var want []byte
	if j.Token != nil {
		want = j.Token()
	}
	if got == "" {
		how := "the join token as metadata \"authorization: Bearer <token>\" (sluice worker --join-token-file FILE: a copy of the gateway's --join-token-file)"
		if j.ClientCAs != nil {
			how += ", or a client certificate signed by the gateway's --worker-client-ca (sluice worker --cert, --key)"
		}
		return errs.New(errs.Unauthenticated, "register: no join credential: send %s", how)
	}
	if len(want) == 0 || !hop.SecretEqual(got, string(want)) {
		return errs.New(errs.Unauthenticated, "register: the join token is not the gateway's: copy the gateway's --join-token-file (default <--data>/control/join-token) to the worker's --join-token-file")
	}
	return nil
}

// verifiedClient reports whether the call's TLS connection presented a
// client certificate that roots sign, for client authentication.
func verifiedClient(ctx context.Context, roots *x509.CertPool) bool {
	pr, ok := peer.FromContext(ctx)
	if !ok || roots == nil {
		return false
	}
	ti, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return false
	}
	chain := ti.State.PeerCertificates
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// join checks a Register's credential and the fields of the worker's side
// of the hop (before the pool's lock: a refusal costs no lock).
func (p *Pool) join(ctx context.Context, req *workerpb.RegisterRequest) error {
	if err := p.cfg.Join.check(ctx); err != nil {
		p.refusals.log(p.log, "worker registration refused", err)
		return err
	}
	if len(req.CallSecret) < 32 || len(req.CallSecret) > 256 {
		return errs.Field(errs.InvalidArgument, "call_secret", "register: a call secret of 32 to 256 characters is required (the worker's server refuses calls without it)")
	}
	if len(req.TlsCertSha256) != 64 {
		return errs.Field(errs.InvalidArgument, "tls_cert_sha256", "register: the SHA-256 (64 hex digits) of the worker's server certificate is required")
	}
	return nil
}

// claimLocked says whether a Register may take w (the id's entry): it may
// when no session of the id is live, or when it carries that session's
// secret. now is the wall clock.
func (p *Pool) claimLocked(ctx context.Context, w *worker, now time.Time) error {
	if !p.sessionLiveLocked(w, now) {
		return nil
	}
	if hop.Incoming(ctx, hop.WorkerKey) == w.id && hop.SecretEqual(hop.Incoming(ctx, hop.SessionKey), w.secret) {
		return nil
	}
	err := errs.New(errs.WorkerIDInUse, "register: worker id %q has a live session (it heartbeats); a process taking the id registers once that session is dead (%s without a heartbeat)", w.id, p.silenceLimit())
	err.RetryAfter = p.silenceLimit()
	p.refusals.log(p.log, "worker registration refused", err)
	return err
}

// sessionLiveLocked reports whether w's session is live: registered, its
// process not known to have exited, and heard from (a heartbeat or an
// answer) within the missed heartbeats' limit.
func (p *Pool) sessionLiveLocked(w *worker, now time.Time) bool {
	return w.secret != "" && !w.exited && !Silent(now, w.lastBeat, time.Unix(0, w.seen.Load()), p.silenceLimit())
}

func (p *Pool) silenceLimit() time.Duration {
	return time.Duration(p.cfg.MissedHeartbeats) * p.cfg.HeartbeatInterval
}

// callerLocked is the worker whose session the call carries (id in
// x-sluice-worker, its session secret in x-sluice-session), or why not.
// id, when not empty, is the id the request body names: it must be the
// caller's.
func (p *Pool) callerLocked(ctx context.Context, id string) (*worker, error) {
	wid, secret := hop.Incoming(ctx, hop.WorkerKey), hop.Incoming(ctx, hop.SessionKey)
	if wid == "" || secret == "" {
		return nil, errs.New(errs.Unauthenticated, "no worker session: send the metadata %s and %s that Register issued", hop.WorkerKey, hop.SessionKey)
	}
	if id != "" && wid != id {
		return nil, errs.Field(errs.PermissionDenied, "id", "the status is of worker %q, the session of %q", id, wid)
	}
	w := p.workers[wid]
	if w == nil || !hop.SecretEqual(secret, w.secret) {
		return nil, errs.New(errs.Unauthenticated, "worker %q: no such session (the control plane restarted, or another registration took the id): register again", wid)
	}
	return w, nil
}

// placedSHALocked reports whether the pool placed on w a copy of a version
// whose artifact is sha: the only artifacts w may fetch.
func (p *Pool) placedSHALocked(w *worker, sha string) bool {
	for v := range w.copies {
		if v.on[w.id] != nil && v.spec.ArtifactSHA == sha {
			return true
		}
	}
	return false
}

// newSessionLocked gives w a new session secret (a new registration).
func (p *Pool) newSessionLocked(w *worker) error {
	s, err := hop.NewSecret()
	if err != nil {
		return errs.Wrap(errs.Internal, err, "register: session secret")
	}
	w.secret, w.exited = s, false
	return nil
}

// dialOptions are how the pool dials a worker: TLS pinned to the
// certificate it registered, its call secret on every call.
func dialOptions(req *workerpb.RegisterRequest) ([]grpc.DialOption, error) {
	tc, err := certs.PinnedClientConfig(req.TlsCertSha256, nil)
	if err != nil {
		return nil, errs.Field(errs.InvalidArgument, "tls_cert_sha256", "register: %v", err)
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithPerRPCCredentials(hop.NewCredentials(hop.CallKey, req.CallSecret)),
	}, nil
}

// refusals logs refused registrations and sessions at most once a second,
// with the count since the last line: a flood of bad calls is no flood
// of log lines.
type refusals struct {
	mu     sync.Mutex
	last   time.Time
	missed int
}

func (r *refusals) log(l interface {
	Warn(msg string, args ...any)
}, msg string, err error) {
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.last) < time.Second {
		r.missed++
		r.mu.Unlock()
		return
	}
	n := r.missed
	r.last, r.missed = now, 0
	r.mu.Unlock()
	l.Warn(msg, "err", err, "refused_since_last_line", fmt.Sprint(n))
}

// mayFetch says whether the calling worker may fetch artifact sha.
func (p *Pool) mayFetch(ctx context.Context, sha string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, err := p.callerLocked(ctx, "")
	if err != nil {
		return err
	}
	if !p.placedSHALocked(w, sha) {
		return errs.Field(errs.PermissionDenied, "sha256", "artifact %s: no version placed on worker %q has it", errs.Clip(sha), w.id)
	}
	return nil
}
