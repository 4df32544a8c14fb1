package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sluiceml/sluice/internal/certs"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// The tests' join token, the certificate every fake worker serves and
// the fakes by address (their call secrets, for testRegister).
var (
	testToken = []byte("0123456789abcdef0123456789abcdef")
	fakeCert  = func() (c struct {
		cert tls.Certificate
		sha  string
	}) {
		certPEM, keyPEM, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
		if err != nil {
			panic(err)
		}
		if c.cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
			panic(err)
		}
		c.sha = certs.Fingerprint(c.cert.Certificate[0])
		return c
	}()
	fakes sync.Map // address → *fakeWorker
)

func newTestSecret(t testing.TB) string {
	t.Helper()
	s, err := hop.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newTestPool is New with the tests' join token accepted.
func newTestPool(cfg Config) *Pool {
	if cfg.Join.Token == nil {
		cfg.Join.Token = func() []byte { return testToken }
	}
	return New(cfg)
}

// withMD adds incoming metadata to ctx, as a gRPC server's handler sees it.
func withMD(ctx context.Context, kv ...string) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	md = metadata.Join(md, metadata.Pairs(kv...))
	return metadata.NewIncomingContext(ctx, md)
}

// sessionCtx is ctx with the metadata of id's session, as its worker sends.
func (p *Pool) sessionCtx(ctx context.Context, id string) context.Context {
	p.mu.Lock()
	var secret string
	if w := p.workers[id]; w != nil {
		secret = w.secret
	}
	p.mu.Unlock()
	if secret == "" {
		return ctx
	}
	return withMD(ctx, hop.WorkerKey, id, hop.SessionKey, secret)
}

// testRegister registers as a worker does: the join token, the call
// secret and certificate of the fake at the address (made-up ones for an
// address nobody serves), and the id's session when it has one.
func (p *Pool) testRegister(ctx context.Context, req *workerpb.RegisterRequest) (*workerpb.RegisterResponse, error) {
	if req.CallSecret == "" {
		req.CallSecret = strings.Repeat("c", 64)
		if f, ok := fakes.Load(req.GetStatus().GetAddress()); ok {
			req.CallSecret = f.(*fakeWorker).secret
		}
	}
	if req.TlsCertSha256 == "" {
		req.TlsCertSha256 = fakeCert.sha
	}
	ctx = withMD(p.sessionCtx(ctx, req.GetStatus().GetId()), hop.AuthorizationKey, "Bearer "+string(testToken))
	return p.Register(ctx, req)
}

// testBeat heartbeats with the worker's session.
func (p *Pool) testBeat(ctx context.Context, st *workerpb.WorkerStatus) (*workerpb.HeartbeatResponse, error) {
	return p.Heartbeat(p.sessionCtx(ctx, st.GetId()), st)
}

// codeOf is the catalogue code of an error a pool's handler returned.
func codeOf(err error) errs.Code {
	e, _ := hop.FromStatus(err)
	if e == nil {
		return ""
	}
	return e.Code
}

// Register needs the join credential: no token, a wrong one, a token
// when none is configured are refused (Unauthenticated, naming what to
// fix); the right token, or a verified client certificate when those are
// accepted, joins.
func TestRegisterNeedsTheJoinCredential(t *testing.T) {
	a := startFake(t, "a")
	req := func() *workerpb.RegisterRequest {
		return &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1}, CallSecret: a.secret, TlsCertSha256: fakeCert.sha}
	}
	// A client certificate (self-signed: its own CA) and another CA.
	clientPEM, _, err := certs.SelfSigned([]string{"worker-a"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(clientPEM)
	client, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, _, err := certs.SelfSigned([]string{"other-ca"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := func(p []byte) func() *x509.CertPool {
		cp := x509.NewCertPool()
		cp.AppendCertsFromPEM(p)
		return func() *x509.CertPool { return cp }
	}
	withCert := peer.NewContext(t.Context(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{client}}}})
	cases := []struct {
		name string
		join JoinAuth
		ctx  context.Context
		want errs.Code
		msg  string
	}{
		{"no token", JoinAuth{Token: func() []byte { return testToken }}, t.Context(), errs.Unauthenticated, "--join-token-file"},
		{"wrong token", JoinAuth{Token: func() []byte { return testToken }}, withMD(t.Context(), "authorization", "Bearer nope"), errs.Unauthenticated, "not the gateway's"},
		{"token not configured", JoinAuth{}, withMD(t.Context(), "authorization", "Bearer "+string(testToken)), errs.Unauthenticated, "not the gateway's"},
		{"token in another scheme", JoinAuth{Token: func() []byte { return testToken }}, withMD(t.Context(), "authorization", "Basic "+string(testToken)), errs.Unauthenticated, "no join credential"},
		{"client certificate not accepted", JoinAuth{Token: func() []byte { return testToken }}, withCert, errs.Unauthenticated, "no join credential"},
		{"client certificate of another CA", JoinAuth{ClientCAs: pool(otherPEM)}, withCert, errs.Unauthenticated, "--worker-client-ca"},
		{"token", JoinAuth{Token: func() []byte { return testToken }}, withMD(t.Context(), "authorization", "Bearer "+string(testToken)), "", ""},
		{"client certificate", JoinAuth{ClientCAs: pool(clientPEM)}, withCert, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Join: c.join, HeartbeatInterval: time.Hour})
			defer p.Close()
			resp, err := p.Register(c.ctx, req())
			if got := codeOf(err); got != c.want || (err != nil && !strings.Contains(err.Error(), c.msg)) {
				t.Fatalf("register: %v (code %q), want %q with %q", err, got, c.want, c.msg)
			}
			if err == nil && len(resp.SessionSecret) != 64 {
				t.Errorf("session secret %q", resp.SessionSecret)
			}
			if err != nil && len(p.Workers()) != 0 {
				t.Errorf("a refused registration left a worker: %+v", p.Workers())
			}
		})
	}
	// Without a call secret or the certificate to pin, the pool could not
	// call the worker safely: refused as invalid.
	p := newTestPool(Config{HeartbeatInterval: time.Hour})
	defer p.Close()
	for _, r := range []*workerpb.RegisterRequest{
		{Status: &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1}, TlsCertSha256: fakeCert.sha},
		{Status: &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1}, CallSecret: a.secret, TlsCertSha256: "abc"},
	} {
		if _, err := p.Register(withMD(t.Context(), "authorization", "Bearer "+string(testToken)), r); codeOf(err) != errs.InvalidArgument {
			t.Errorf("register %+v: %v, want invalid_argument", r, err)
		}
	}
}

// An id whose session is live cannot be taken by another registration
// (worker_id_in_use, with a retry delay), even with the join token; the
// session's own secret re-registers; once the session is dead (its
// process exited, or it missed its heartbeats) the id may be taken, and
// the old session's heartbeats are refused from then on.
func TestRegisterRefusesAnIDWithALiveSession(t *testing.T) {
	p := newTestPool(Config{HeartbeatInterval: time.Hour})
	defer p.Close()
	real, rogue := startFake(t, "a"), startFake(t, "a")
	real.register(t, p, 1)
	oldSession := p.sessionCtx(t.Context(), "a")
	join := withMD(t.Context(), "authorization", "Bearer "+string(testToken))
	claim := &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: "a", Address: rogue.addr, Pid: 666}, CallSecret: rogue.secret, TlsCertSha256: fakeCert.sha}

	_, err := p.Register(join, claim)
	var e *errs.Error
	if e, _ = hop.FromStatus(err); e == nil || e.Code != errs.WorkerIDInUse || e.RetryAfter <= 0 {
		t.Fatalf("claim of a live id: %v, want worker_id_in_use with a retry delay", err)
	}
	if ws := p.Workers(); len(ws) != 1 || ws[0].Address != real.addr {
		t.Fatalf("the claim changed the worker: %+v", ws)
	}
	// A wrong session secret is no better.
	if _, err := p.Register(withMD(join, hop.WorkerKey, "a", hop.SessionKey, strings.Repeat("0", 64)), claim); codeOf(err) != errs.WorkerIDInUse {
		t.Fatalf("claim with a wrong session: %v", err)
	}
	// The session's own secret may re-register (same process, again).
	if _, err := p.Register(withMD(oldSession, "authorization", "Bearer "+string(testToken)),
		&workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: "a", Address: real.addr, Pid: 1}, CallSecret: real.secret, TlsCertSha256: fakeCert.sha}); err != nil {
		t.Fatalf("re-register with the session: %v", err)
	}

	// The process exits: the id is free.
	p.MarkDead("a", "exited")
	if _, err := p.Register(join, claim); err != nil {
		t.Fatalf("claim after the exit: %v", err)
	}
	if _, err := p.Heartbeat(oldSession, &workerpb.WorkerStatus{Id: "a", Address: real.addr, Pid: 1}); codeOf(err) != errs.Unauthenticated {
		t.Fatalf("the old session's heartbeat: %v, want unauthenticated", err)
	}

	// A session that stops heartbeating dies too (a pool with a short
	// interval: 3 × 20 ms of silence).
	p = newTestPool(Config{HeartbeatInterval: 20 * time.Millisecond, MissedHeartbeats: 3})
	defer p.Close()
	resp, err := p.Register(join, &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: "b", Address: real.addr, Pid: 2}, CallSecret: real.secret, TlsCertSha256: fakeCert.sha})
	if err != nil || resp.SessionSecret == "" {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := p.Register(join, &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: "b", Address: rogue.addr, Pid: 3}, CallSecret: rogue.secret, TlsCertSha256: fakeCert.sha})
		if err == nil {
			break
		}
		if codeOf(err) != errs.WorkerIDInUse || time.Now().After(deadline) {
			t.Fatalf("claim of a silent id: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Heartbeats carry the worker's session: none, a wrong secret, or another
// worker's session are refused and change nothing; the right one is heard.
func TestHeartbeatNeedsTheSession(t *testing.T) {
	p := newTestPool(Config{HeartbeatInterval: time.Hour})
	defer p.Close()
	a, b := startFake(t, "a"), startFake(t, "b")
	a.register(t, p, 1)
	b.register(t, p, 2)
	forged := &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1, MemoryBudgetBytes: 1}
	for name, c := range map[string]struct {
		ctx  context.Context
		want errs.Code
	}{
		"no session":   {t.Context(), errs.Unauthenticated},
		"wrong secret": {withMD(t.Context(), hop.WorkerKey, "a", hop.SessionKey, strings.Repeat("0", 64)), errs.Unauthenticated},
		"only the id":  {withMD(t.Context(), hop.WorkerKey, "a"), errs.Unauthenticated},
		"b's session":  {p.sessionCtx(t.Context(), "b"), errs.PermissionDenied},
		"secret twice": {withMD(p.sessionCtx(t.Context(), "a"), hop.SessionKey, "x"), errs.Unauthenticated},
		"another id":   {withMD(t.Context(), hop.WorkerKey, "zz", hop.SessionKey, "x"), errs.PermissionDenied},
	} {
		if _, err := p.Heartbeat(c.ctx, forged); codeOf(err) != c.want {
			t.Errorf("%s: %v, want %s", name, err, c.want)
		}
	}
	p.mu.Lock()
	budget := p.workers["a"].status.MemoryBudgetBytes
	p.mu.Unlock()
	if budget == 1 {
		t.Fatal("a refused heartbeat was applied")
	}
	if resp, err := p.Heartbeat(p.sessionCtx(t.Context(), "a"), forged); err != nil || !resp.Known {
		t.Fatalf("heartbeat with the session: %v %v", resp, err)
	}
}

// fetchStream is the server side of a FetchArtifact stream, in memory.
type fetchStream struct {
	grpc.ServerStream
	ctx   context.Context
	bytes int
}

func (s *fetchStream) Context() context.Context { return s.ctx }
func (s *fetchStream) Send(c *workerpb.ArtifactChunk) error {
	s.bytes += len(c.Data)
	return nil
}

// FetchArtifact serves a worker only the artifacts of versions placed on
// it, and nothing without a session.
func TestFetchArtifactOnlyWhatIsPlacedThere(t *testing.T) {
	store := memArtifacts{"00": []byte("placed"), "11": []byte("someone else's")}
	p := newTestPool(Config{Artifacts: store, Known: []string{"a", "b"}, ShardSize: 1, HeartbeatInterval: time.Hour})
	defer p.Close()
	a, b := startFake(t, "a"), startFake(t, "b")
	a.register(t, p, 1)
	b.register(t, p, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	v, _, err := p.Start(ctx, testSpec(t)) // artifact "00", on one worker of two
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	var holder, other string
	for id := range v.on {
		holder = id
	}
	other = map[string]string{"a": "b", "b": "a"}[holder]
	p.mu.Unlock()
	for _, c := range []struct {
		name, sha string
		ctx       context.Context
		want      errs.Code
	}{
		{"no session", "00", t.Context(), errs.Unauthenticated},
		{"wrong session", "00", withMD(t.Context(), hop.WorkerKey, holder, hop.SessionKey, strings.Repeat("0", 64)), errs.Unauthenticated},
		{"not placed anywhere", "11", p.sessionCtx(t.Context(), holder), errs.PermissionDenied},
		{"placed on the other worker", "00", p.sessionCtx(t.Context(), other), errs.PermissionDenied},
		{"placed there", "00", p.sessionCtx(t.Context(), holder), ""},
	} {
		s := &fetchStream{ctx: c.ctx}
		err := p.FetchArtifact(&workerpb.FetchArtifactRequest{Sha256: c.sha}, s)
		if codeOf(err) != c.want || (err == nil) != (s.bytes > 0) {
			t.Errorf("%s: %v (%d bytes), want %q", c.name, err, s.bytes, c.want)
		}
	}
}

// The pool calls its workers with their call secret over TLS pinned to
// the certificate they registered: a fake refuses any call without the
// secret, and none was refused while a version was loaded and served. A
// registration pinning another certificate cannot be called at all.
func TestPoolCallsWorkersWithTheirSecret(t *testing.T) {
	p, v, a, b := twoWorkers(t)
	if _, err := v.Submit(t.Context(), rows(2)); err != nil {
		t.Fatal(err)
	}
	if a.refused.Load()+b.refused.Load() != 0 {
		t.Fatalf("calls refused for want of the secret: %d %d", a.refused.Load(), b.refused.Load())
	}

	c := startFake(t, "c")
	_, err := p.testRegister(t.Context(), &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: "c", Address: c.addr, Pid: 3},
		TlsCertSha256: strings.Repeat("ab", 32)})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	ctl := p.workers["c"].ctl
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = ctl.Status(ctx, &workerpb.StatusRequest{})
	if err == nil || !strings.Contains(err.Error(), "pin") || c.loads.Load() != 0 {
		t.Fatalf("a call to a certificate other than the pinned one: %v", err)
	}
}

// memArtifacts is an artifact store in memory.
type memArtifacts map[string][]byte

func (m memArtifacts) OpenArtifact(_ context.Context, sha string) (io.ReadCloser, int64, error) {
	b, ok := m[sha]
	if !ok {
		return nil, 0, errs.New(errs.NotFound, "no artifact %s", sha)
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}
