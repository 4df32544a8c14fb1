//go:build security

package main

// The regression suite of issue 18's attacks (make test-security): each
// finding of the adversarial run is a TestSecurity* test that starts the
// real `sluice serve --workers 2 --tenants FILE` and attacks it from this
// process as the run did: a rogue worker on the control plane (no
// credential, a wrong one, or a worker's real credential used to lie), the
// worker's own gRPC service, the OIP gRPC listener, and REST. Bounds are
// read from /proc (VmRSS, open descriptors) and the gateway's /metrics
// (go_goroutines, the Go heap), never from wall-clock times. The figures
// are printed with t.Logf (docs/benchmarks.md, "Issue 18: the attack
// suite").
//
// Two kinds of attacker:
//   - the outsider knows no credential: it speaks to the control plane in
//     clear and over TLS without verifying the gateway, with no join token,
//     or with a wrong one; every call of it must be refused.
//   - the insider holds a worker's real credential (the join token and the
//     gateway's CA from <--data>/control, read as a worker would be given
//     them): it registers, and then lies in its reports. Registering must
//     work for it; what it says must stay bounded. Against a gateway that
//     has no credential yet (no <--data>/control/join-token) the insider
//     is the outsider: that is the old code, which must fail these tests.
//
// New message fields (call_secret, tls_cert_sha256, session_secret) are set
// and read by name through protobuf reflection, so this file builds against
// any version of internal/workerpb, old or new.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	ebin "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/testwait"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// The goal for every memory figure: gateway RSS < 200 MB.
const rssGoal = 200 << 20

// fraudBody is the README's request (with a deadline a busy shared
// machine meets: the suite asserts that the attacks leave serving right,
// not its latency) and fraudAnswer what fraud@1 says.
const (
	fraudBody   = `{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"}],"deadlineMs":2000}`
	fraudAnswer = `"riskScore":0.8455931`
)

// secServer is a running `sluice serve --workers 2` with a tenants file:
// ops (admin, every model) and app (fraud and iris only).
type secServer struct {
	*proc
	data, controlAddr, grpcAddr string
	adminKey, appKey            string
	pid                         int
}

// serveHelp is the help of `sluice serve`, read once: a flag the suite
// uses only to stay short (--forget-after) is passed when the binary has it.
var serveHelp = sync.OnceValue(func() string {
	out, _ := exec.Command(binary, "serve", "--help").CombinedOutput()
	return string(out)
})

func hasServeFlag(flag string) bool { return strings.Contains(serveHelp(), flag) }

// startSecure starts the gateway with two local workers, the control plane
// and the OIP gRPC listener on fixed loopback ports, and a tenants file,
// and waits until both workers hold fraud@1 ready.
func startSecure(t *testing.T, extra ...string) *secServer {
	t.Helper()
	s := &secServer{data: t.TempDir(), controlAddr: freeAddr(t), grpcAddr: freeAddr(t),
		adminKey: "sk_ops_" + randHex(t, 16), appKey: "sk_app_" + randHex(t, 16)}
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	body := fmt.Sprintf(`tenants:
  - name: ops
    keys: [%q]
    models: ["*"]
    admin: true
  - name: app
    keys: [%q]
    models: ["fraud", "iris"]
`, keyHash(s.adminKey), keyHash(s.appKey))
	if err := os.WriteFile(tenants, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--data", s.data, "--workers", "2", "--control-addr", s.controlAddr,
		"--grpc-addr", s.grpcAddr, "--tenants", tenants}, extra...)
	s.proc = startServer(t, args...)
	s.pid = s.cmd.Process.Pid
	err := testwait.Poll(60*time.Second, func() error {
		ws, err := s.workers()
		if err != nil {
			return err
		}
		if !readyEverywhere(ws, 2, "fraud@1") {
			return fmt.Errorf("workers not both ready with fraud@1: %+v", ws.Workers)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\ngateway's log:\n%s", err, s.logs)
	}
	return s
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// call sends one HTTP request with key (none if empty).
func (s *secServer) call(method, path, key, body string, hdr map[string]string) (int, []byte, http.Header, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		return 0, nil, nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := secHTTP.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, b, resp.Header, err
}

var secHTTP = &http.Client{Timeout: 30 * time.Second}

func (s *secServer) workers() (api.WorkerList, error) {
	var wl api.WorkerList
	code, b, _, err := s.call("GET", "/v1/workers", s.adminKey, "", nil)
	if err != nil {
		return wl, err
	}
	if code != 200 {
		return wl, fmt.Errorf("GET /v1/workers: %d %s", code, b)
	}
	return wl, json.Unmarshal(b, &wl)
}

// realWorkers is the two workers the gateway started (worker-1, worker-2).
func (s *secServer) realWorkers(t *testing.T) []api.Worker {
	t.Helper()
	wl, err := s.workers()
	if err != nil {
		t.Fatal(err)
	}
	var out []api.Worker
	for _, w := range wl.Workers {
		if strings.HasPrefix(w.ID, "worker-") {
			out = append(out, w)
		}
	}
	if len(out) != 2 {
		t.Fatalf("want the 2 local workers, got %+v", wl.Workers)
	}
	return out
}

// predictions sends n README requests to fraud and returns how many
// answered 200 from fraud@1 with its right score, and the others' answers.
func (s *secServer) predictions(n int) (int, []string) {
	ok := 0
	var bad []string
	for range n {
		code, b, _, err := s.call("POST", "/v1/models/fraud:predict", s.adminKey, fraudBody, nil)
		if err == nil && code == 200 && bytes.Contains(b, []byte(`"modelVersion":"fraud@1"`)) && bytes.Contains(b, []byte(fraudAnswer)) {
			ok++
			continue
		}
		if len(bad) < 5 {
			bad = append(bad, fmt.Sprintf("%d %v %.200s", code, err, b))
		}
	}
	return ok, bad
}

// mustServe asserts that n of n predictions answer right.
func (s *secServer) mustServe(t *testing.T, n int) {
	t.Helper()
	ok, bad := s.predictions(n)
	t.Logf("predictions: %d/%d answered by fraud@1 with its score", ok, n)
	if ok != n {
		t.Errorf("%d/%d predictions answered right; others: %v", ok, n, bad)
	}
}

// rss is the gateway's resident set (VmRSS of /proc/PID/status).
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status: no VmRSS", pid)
	return 0
}

// openFDs counts the gateway's open file descriptors.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// metrics is the gateway's /metrics text.
func (s *secServer) metrics(t *testing.T) string {
	t.Helper()
	code, b, _, err := s.call("GET", "/metrics", "", "", nil)
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	return string(b)
}

// gauge is the value of an unlabelled series (go_goroutines, …).
func gauge(t *testing.T, text, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// sumSeries sums every series of name whose labels contain each of labels.
func sumSeries(text, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if i := strings.LastIndexByte(line, ' '); ok && i > 0 {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			sum += v
		}
	}
	return sum
}

func mibs(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// --- the control plane, as an outsider and as an insider ---

// cpClient is one way of reaching the control plane.
type cpClient struct {
	how  string
	conn *grpc.ClientConn
	cp   workerpb.ControlPlaneClient
	md   []string // metadata sent on every call
}

func (c cpClient) ctx(parent context.Context, kv ...string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, 10*time.Second)
	if md := append(append([]string{}, c.md...), kv...); len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	return ctx, cancel
}

// outsiders are the ways an attacker without credentials reaches addr:
// in clear, and over TLS without verifying the server (it has no CA), each
// with no join token and with a wrong one.
func outsiders(t *testing.T, addr string) []cpClient {
	t.Helper()
	var out []cpClient
	for _, tr := range []struct {
		how   string
		creds credentials.TransportCredentials
	}{
		{"in clear", insecure.NewCredentials()},
		{"over TLS, unverified", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})},
	} {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tr.creds), grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		cp := workerpb.NewControlPlaneClient(conn)
		out = append(out, cpClient{how: tr.how + ", no token", conn: conn, cp: cp},
			cpClient{how: tr.how + ", wrong token", conn: conn, cp: cp, md: []string{"authorization", "Bearer " + strings.Repeat("0", 64)}})
	}
	return out
}

// insiderClient reaches the control plane as a worker given the real
// credential would: TLS verified against <data>/control/ca.pem, the token
// of <data>/control/join-token. Without those files (a gateway with no
// credential) it speaks in clear with no token, and says so.
func insiderClient(t *testing.T, s *secServer) cpClient {
	t.Helper()
	dir := filepath.Join(s.data, "control")
	ca, errCA := os.ReadFile(filepath.Join(dir, "ca.pem"))
	token, errTok := os.ReadFile(filepath.Join(dir, "join-token"))
	var creds credentials.TransportCredentials
	c := cpClient{}
	if errCA == nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			t.Fatalf("%s/ca.pem: no certificate", dir)
		}
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		c.how = "TLS verified with the gateway's ca.pem"
	} else {
		creds = insecure.NewCredentials()
		c.how = "in clear (the gateway wrote no control/ca.pem)"
	}
	if errTok == nil {
		c.md = []string{"authorization", "Bearer " + strings.TrimSpace(string(token))}
		c.how += ", the real join token"
	} else {
		c.how += ", no token (the gateway wrote no control/join-token)"
	}
	t.Logf("insider: %s", c.how)
	conn, err := grpc.NewClient(s.controlAddr, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c.conn, c.cp = conn, workerpb.NewControlPlaneClient(conn)
	return c
}

// setField sets a string field by name if the message has it.
func setField(m proto.Message, name, value string) {
	r := m.ProtoReflect()
	if f := r.Descriptor().Fields().ByName(protoreflect.Name(name)); f != nil && f.Kind() == protoreflect.StringKind {
		r.Set(f, protoreflect.ValueOfString(value))
	}
}

// getField reads a string field by name ("" if the message has none).
func getField(m proto.Message, name string) string {
	r := m.ProtoReflect()
	if f := r.Descriptor().Fields().ByName(protoreflect.Name(name)); f != nil && f.Kind() == protoreflect.StringKind {
		return r.Get(f).String()
	}
	return ""
}

// hasField says whether a message type has a field (new protocol).
func hasField(m proto.Message, name string) bool {
	return m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name)) != nil
}

// session is one registration of the insider: what its later calls carry.
type session struct {
	id, secret string
	st         *workerpb.WorkerStatus
}

// register registers st through c, presenting fw's call secret and
// certificate (if fw is not nil), and returns the session.
func (c cpClient) register(st *workerpb.WorkerStatus, fw *fakeWorker, kv ...string) (session, error) {
	req := &workerpb.RegisterRequest{Status: st}
	if fw != nil {
		setField(req, "call_secret", fw.secret)
		setField(req, "tls_cert_sha256", fw.certSHA)
	}
	ctx, cancel := c.ctx(context.Background(), kv...)
	defer cancel()
	resp, err := c.cp.Register(ctx, req)
	if err != nil {
		return session{}, err
	}
	return session{id: st.Id, secret: getField(resp, "session_secret"), st: st}, nil
}

// beat sends st as a heartbeat of session se (its id and secret as
// metadata). accepted: the call answered and the gateway knows the worker.
func (c cpClient) beat(se session, st *workerpb.WorkerStatus) (bool, error) {
	var kv []string
	if se.id != "" {
		kv = []string{"x-sluice-worker", se.id, "x-sluice-session", se.secret}
	}
	ctx, cancel := c.ctx(context.Background(), kv...)
	defer cancel()
	resp, err := c.cp.Heartbeat(ctx, st)
	if err != nil {
		return false, err
	}
	return resp.Known, nil
}

// forged is a report in the name of a real worker (id, pid and address as
// GET /v1/workers shows them).
func forged(w api.Worker, versions ...*workerpb.VersionStatus) *workerpb.WorkerStatus {
	return &workerpb.WorkerStatus{Id: w.ID, Address: w.Address, Pid: w.PID, Healthy: true, RssBytes: 50 << 20,
		MemoryBudgetBytes: w.MemoryBudgetBytes, StartedUnixMs: w.Started.UnixMilli(), Versions: versions}
}

// fakeWorker is a worker's gRPC service run by the test: it answers Load,
// Unload, Status and SetReplicas as a worker would (without running
// anything) and counts every call, so a test sees whether the gateway
// placed or sent anything there. With the new protocol it speaks TLS with
// a self-signed certificate and a call secret, as the real worker does.
type fakeWorker struct {
	workerpb.UnimplementedWorkerServer
	inferencepb.UnimplementedGRPCInferenceServiceServer
	addr, secret, certSHA                    string
	loads, unloads, infers, others, noSecret atomic.Int64

	mu     sync.Mutex          // guards held, loaded, drop
	held   map[string]bool     // model@version loaded and not unloaded
	loaded map[string]int      // model@version: Load calls
	drop   map[string]struct{} // left out of the reports
}

func startFakeWorker(t *testing.T) *fakeWorker {
	t.Helper()
	fw := &fakeWorker{secret: randHex(t, 32), held: map[string]bool{}, loaded: map[string]int{}, drop: map[string]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fw.addr = ln.Addr().String()
	opts := []grpc.ServerOption{grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("x-sluice-call"); len(v) != 1 || v[0] != fw.secret {
			fw.noSecret.Add(1)
		}
		return h(ctx, req)
	})}
	if hasField(&workerpb.RegisterRequest{}, "tls_cert_sha256") {
		cert := selfSigned(t)
		sum := sha256.Sum256(cert.Certificate[0])
		fw.certSHA = hex.EncodeToString(sum[:])
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	}
	gs := grpc.NewServer(opts...)
	workerpb.RegisterWorkerServer(gs, fw)
	inferencepb.RegisterGRPCInferenceServiceServer(gs, fw)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(ln) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return fw
}

// selfSigned is a certificate for 127.0.0.1, as a worker makes at start.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "fake-worker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func vkey(model string, version int64) string { return fmt.Sprintf("%s@%d", model, version) }

func (fw *fakeWorker) Load(_ context.Context, r *workerpb.LoadRequest) (*workerpb.LoadResponse, error) {
	fw.loads.Add(1)
	fw.mu.Lock()
	k := vkey(r.Model, r.Version)
	fw.held[k] = true
	fw.loaded[k]++
	fw.mu.Unlock()
	return &workerpb.LoadResponse{MemoryBytes: 1 << 20, MemoryMeasured: true, ArtifactSource: "cache"}, nil
}

func (fw *fakeWorker) Unload(_ context.Context, r *workerpb.UnloadRequest) (*workerpb.UnloadResponse, error) {
	fw.unloads.Add(1)
	fw.mu.Lock()
	delete(fw.held, vkey(r.Model, r.Version))
	fw.mu.Unlock()
	return &workerpb.UnloadResponse{}, nil
}

func (fw *fakeWorker) Status(context.Context, *workerpb.StatusRequest) (*workerpb.WorkerStatus, error) {
	fw.others.Add(1)
	return &workerpb.WorkerStatus{Healthy: true}, nil
}

func (fw *fakeWorker) SetReplicas(_ context.Context, r *workerpb.SetReplicasRequest) (*workerpb.SetReplicasResponse, error) {
	fw.others.Add(1)
	return &workerpb.SetReplicasResponse{ReadyReplicas: r.Replicas}, nil
}

func (fw *fakeWorker) ModelInfer(context.Context, *inferencepb.ModelInferRequest) (*inferencepb.ModelInferResponse, error) {
	fw.infers.Add(1)
	return nil, status.Error(codes.Unavailable, "fake worker: answers nothing")
}

// report is what the fake worker holds, as a heartbeat lists it (less what
// it was told to drop).
func (fw *fakeWorker) report() []*workerpb.VersionStatus {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	var vs []*workerpb.VersionStatus
	for k := range fw.held {
		if _, ok := fw.drop[k]; ok {
			continue
		}
		name, n, _ := strings.Cut(k, "@")
		v, _ := strconv.ParseInt(n, 10, 64)
		vs = append(vs, &workerpb.VersionStatus{Model: name, Version: v, State: "ready", ReadyReplicas: 1, MemoryBytes: 1 << 20,
			ReplicaMemoryBytes: 1 << 20, MemoryMeasured: true, CostANs: 100000, CostBNs: 10000, MaxBatch: 8})
	}
	return vs
}

// status is the fake worker's own report under id, with budget.
func (fw *fakeWorker) status(id string, budget int64) *workerpb.WorkerStatus {
	return &workerpb.WorkerStatus{Id: id, Address: fw.addr, Pid: int64(os.Getpid()), Healthy: true, RssBytes: 30 << 20,
		StartedUnixMs: time.Now().UnixMilli(), Build: "fake", MemoryBudgetBytes: budget, MemoryBudgetSource: "test"}
}

// refusedAll fails the test for every outsider whose call was accepted.
func refusedAll(t *testing.T, what string, cs []cpClient, call func(cpClient) error) {
	t.Helper()
	for _, c := range cs {
		if err := call(c); err == nil {
			t.Errorf("%s %s: accepted, want refused", what, c.how)
		} else {
			t.Logf("%s %s: refused: %v", what, c.how, oneLine(err))
		}
	}
}

func oneLine(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// --- 1, 2: a rogue worker takes a model's traffic, or another worker's id ---

// Finding 1: a worker registers with no credential (or a wrong one) and
// forges heartbeats as the real workers with memory_budget_bytes 1; the
// real workers keep every version and answer 40/40, and the rogue sees no
// Load, no request.
func TestSecurityRogueWorkerTakesNoTraffic(t *testing.T) {
	s := startSecure(t)
	real := s.realWorkers(t)
	rogue := startFakeWorker(t)
	out := outsiders(t, s.controlAddr)
	refusedAll(t, "rogue Register", out, func(c cpClient) error {
		_, err := c.register(rogue.status("rogue-1", 8<<30), rogue)
		return err
	})
	// Forged heartbeats for the real ids, no session: refused or unknown.
	accepted := 0
	for range 20 {
		for _, c := range out {
			for _, w := range real {
				st := forged(w)
				st.MemoryBudgetBytes = 1
				if known, err := c.beat(session{}, st); err == nil && known {
					accepted++
				}
			}
		}
	}
	// A worker with the real join token and a session of its own cannot
	// speak for another: its secret under a real worker's id is refused.
	in := insiderClient(t, s)
	if se, err := in.register(rogue.status("rogue-2", 1), rogue); err == nil {
		for _, w := range real {
			st := forged(w)
			st.MemoryBudgetBytes = 1
			if known, err := in.beat(session{id: w.ID, secret: se.secret}, st); err == nil && known {
				accepted++
			}
		}
	} else {
		t.Logf("the insider's Register: refused: %v", oneLine(err))
	}
	if accepted > 0 {
		t.Errorf("%d forged heartbeats with memory_budget_bytes 1 accepted as the real workers', want 0", accepted)
	}
	s.mustServe(t, 40)
	for _, w := range s.realWorkers(t) {
		if w.MemoryBudgetBytes <= 1 {
			t.Errorf("%s's budget is %d: a forged report was taken", w.ID, w.MemoryBudgetBytes)
		}
	}
	if n, m := rogue.loads.Load(), rogue.infers.Load(); n+m > 0 {
		t.Errorf("the rogue worker got %d Loads and %d requests, want none", n, m)
	}
	s.stop(t)
}

// Finding 2: a Register in the name of a live worker (its id, pid and
// address) is refused, with no credential and with the real join token
// but not the session's secret; the worker keeps its connection and the
// answers stay right.
func TestSecurityWorkerIDNotClaimed(t *testing.T) {
	s := startSecure(t)
	real := s.realWorkers(t)
	rogue := startFakeWorker(t)
	out := outsiders(t, s.controlAddr)
	in := insiderClient(t, s)
	accepted := 0
	for i := range 60 {
		w := real[i%2]
		st := forged(w)
		if i%3 == 0 {
			st.Address, st.Pid = rogue.addr, int64(os.Getpid()) // take it over
		}
		for _, c := range append(out, in) {
			if _, err := c.register(st, rogue); err == nil {
				accepted++
			}
		}
	}
	if accepted > 0 {
		t.Errorf("%d of %d Registers of a live worker's id accepted, want 0", accepted, 60*(len(out)+1))
	}
	after := s.realWorkers(t)
	for i := range real {
		for _, w := range after {
			if w.ID == real[i].ID && (w.PID != real[i].PID || w.Address != real[i].Address || w.State != "ready") {
				t.Errorf("%s was %d at %s, now %d at %s (%s)", w.ID, real[i].PID, real[i].Address, w.PID, w.Address, w.State)
			}
		}
	}
	s.mustServe(t, 60)
	if n, m := rogue.loads.Load(), rogue.infers.Load(); n+m > 0 {
		t.Errorf("the rogue worker got %d Loads and %d requests, want none", n, m)
	}
	s.stop(t)
}

// --- 3, 10: the worker's own service ---

// workerCaller is one way an attacker reaches a worker's gRPC service.
type workerCaller struct {
	how string
	ctl workerpb.WorkerClient
	inf inferencepb.GRPCInferenceServiceClient
}

// workerCallers reach addr in clear and over TLS without verifying the
// worker's certificate, with no call secret.
func workerCallers(t *testing.T, addr string) []workerCaller {
	t.Helper()
	var out []workerCaller
	for _, tr := range []struct {
		how   string
		creds credentials.TransportCredentials
	}{
		{"in clear", insecure.NewCredentials()},
		{"over TLS, unverified", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})},
	} {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tr.creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		out = append(out, workerCaller{tr.how, workerpb.NewWorkerClient(conn), inferencepb.NewGRPCInferenceServiceClient(conn)})
	}
	return out
}

// reached says whether a call got past authentication: it succeeded, or a
// handler judged its content (anything but Unauthenticated,
// PermissionDenied, or a transport that never carried it).
func reached(err error) bool {
	if err == nil {
		return true
	}
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unavailable:
		return false
	}
	return true
}

// Finding 3: one Unload to a worker's address without the call secret is
// refused and the version keeps serving; and a copy the pool placed that
// a worker's report stops listing (as after an Unload the pool did not
// ask for) is placed again.
func TestSecurityUnloadNeedsTheCallSecret(t *testing.T) {
	s := startSecure(t)
	for _, w := range s.realWorkers(t) {
		for _, c := range workerCallers(t, w.Address) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := c.ctl.Unload(ctx, &workerpb.UnloadRequest{Model: "fraud", Version: 1, DrainMs: 1})
			cancel()
			if reached(err) {
				t.Errorf("Unload fraud@1 on %s %s without the call secret: %v, want refused", w.ID, c.how, err)
			} else {
				t.Logf("Unload on %s %s: refused: %v", w.ID, c.how, oneLine(err))
			}
		}
	}
	s.mustServe(t, 40)
	s.stop(t)

	t.Run("the pool heals", func(t *testing.T) {
		// A gateway whose only worker is the test's: it places every
		// version there; the worker then stops listing fraud@1.
		g := startBare(t)
		fw := startFakeWorker(t)
		in := insiderClient(t, g)
		se, err := in.register(fw.status("heal-1", 8<<30), fw)
		if err != nil {
			t.Fatalf("the insider's Register: %v", err)
		}
		stop := beatLoop(t, in, se, fw)
		defer stop()
		testwait.UntilNil(t, 60*time.Second, func() error {
			fw.mu.Lock()
			defer fw.mu.Unlock()
			if fw.loaded["fraud@1"] == 0 {
				return fmt.Errorf("fraud@1 never loaded on the only worker (loads %v)", fw.loaded)
			}
			return nil
		})
		fw.mu.Lock()
		fw.drop["fraud@1"] = struct{}{}
		before := fw.loaded["fraud@1"]
		fw.mu.Unlock()
		err = testwait.Poll(30*time.Second, func() error {
			fw.mu.Lock()
			defer fw.mu.Unlock()
			if fw.loaded["fraud@1"] == before {
				return errors.New("fraud@1 gone from the worker's reports and not placed again")
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		if n := fw.noSecret.Load(); hasField(&workerpb.RegisterRequest{}, "call_secret") && n > 0 {
			t.Errorf("the gateway called its worker %d times without the call secret", n)
		}
		g.stop(t)
	})
}

// startBare starts a gateway with a control plane and no local workers.
func startBare(t *testing.T) *secServer {
	t.Helper()
	s := &secServer{data: t.TempDir(), controlAddr: freeAddr(t)}
	s.proc = startProc(t, "serve", "--addr", "127.0.0.1:0", "--data", s.data, "--control-addr", s.controlAddr)
	s.pid = s.cmd.Process.Pid
	// The control plane's files exist once it listens.
	testwait.Until(t, 30*time.Second, func() bool {
		c, err := net.Dial("tcp", s.controlAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return s
}

// beatLoop heartbeats the fake worker's holdings every 200 ms until stopped.
func beatLoop(t *testing.T, c cpClient, se session, fw *fakeWorker) (stop func()) {
	t.Helper()
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			st := fw.status(se.id, se.st.MemoryBudgetBytes)
			st.StartedUnixMs = se.st.StartedUnixMs
			st.Versions = fw.report()
			if known, err := c.beat(se, st); err == nil && !known {
				if ns, err := c.register(se.st, fw); err == nil {
					se = ns
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// Finding 10: GET /v1/workers needs a key and admin, and the worker's own
// service (Load, Unload, Status, SetReplicas, ModelInfer) refuses every
// call without the call secret.
func TestSecurityWorkersAPIAndWorkerServiceAuthenticated(t *testing.T) {
	s := startSecure(t)
	for _, c := range []struct {
		who  string
		key  string
		want int
	}{{"no key", "", 401}, {"a wrong key", "sk_nobody", 401}, {"app (not admin)", s.appKey, 403}, {"ops (admin)", s.adminKey, 200}} {
		code, b, _, err := s.call("GET", "/v1/workers", c.key, "", nil)
		if err != nil || code != c.want {
			t.Errorf("GET /v1/workers with %s: %d %v %.200s, want %d", c.who, code, err, b, c.want)
		}
	}
	real := s.realWorkers(t)
	for _, w := range real {
		for _, c := range workerCallers(t, w.Address) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			calls := map[string]error{}
			_, calls["Status"] = c.ctl.Status(ctx, &workerpb.StatusRequest{})
			_, calls["SetReplicas"] = c.ctl.SetReplicas(ctx, &workerpb.SetReplicasRequest{Model: "fraud", Version: 1, Replicas: 1})
			_, calls["Load"] = c.ctl.Load(ctx, &workerpb.LoadRequest{Model: "evil", Version: 1, Replicas: 1})
			_, calls["ModelInfer"] = c.inf.ModelInfer(ctx, &inferencepb.ModelInferRequest{ModelName: "fraud", ModelVersion: "1"})
			_, calls["ModelReady"] = c.inf.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: "fraud", Version: "1"})
			cancel()
			for name, err := range calls {
				if reached(err) {
					t.Errorf("%s on %s %s without the call secret: %v, want refused", name, w.ID, c.how, err)
				}
			}
		}
	}
	s.mustServe(t, 20)
	s.stop(t)
}

// --- 4–9, 11: what a worker says ---

// Finding 4: heartbeats listing 50,000 new version names each beat; the
// gateway's RSS stays under the goal and serving is unharmed.
func TestSecurityHeartbeatVersionFlood(t *testing.T) {
	s := startSecure(t)
	real := s.realWorkers(t)
	flood := func(beat int) []*workerpb.VersionStatus {
		vs := make([]*workerpb.VersionStatus, 50000)
		for i := range vs {
			vs[i] = &workerpb.VersionStatus{Model: fmt.Sprintf("m%d-%d", beat, i), Version: 1, State: "ready", ReadyReplicas: 1, QueuedInstances: 1}
		}
		return vs
	}
	// The outsider, as the real workers: refused.
	accepted := 0
	for _, c := range outsiders(t, s.controlAddr) {
		if known, err := c.beat(session{}, forged(real[0], flood(0)...)); err == nil && known {
			accepted++
		}
	}
	if accepted > 0 {
		t.Errorf("%d forged 50,000-version heartbeats accepted, want 0", accepted)
	}
	// The insider, in its own name.
	fw := startFakeWorker(t)
	in := insiderClient(t, s)
	se, err := in.register(fw.status("flood-1", 1), fw)
	if err != nil {
		t.Fatalf("the insider's Register: %v", err)
	}
	before := rss(t, s.pid)
	refusedBeats := 0
	for b := range 25 {
		st := fw.status(se.id, 1)
		st.StartedUnixMs = se.st.StartedUnixMs
		st.Versions = flood(b + 1)
		if _, err := in.beat(se, st); err != nil {
			refusedBeats++
		}
	}
	after := rss(t, s.pid)
	t.Logf("gateway RSS under 25 heartbeats of 50,000 new versions each: %s before, %s after (%d beats refused whole)", mibs(before), mibs(after), refusedBeats)
	if after > rssGoal {
		t.Errorf("gateway RSS %s after the flood, goal < %s", mibs(after), mibs(rssGoal))
	}
	if code, b, _, err := s.call("GET", "/v1/workers", s.adminKey, "", nil); err != nil || code != 200 || len(b) > 4<<20 {
		t.Errorf("GET /v1/workers after the flood: %d %v, %d bytes", code, err, len(b))
	}
	s.mustServe(t, 40)
	s.stop(t)
}

// Finding 5: 20,000 registrations: the outsider's all refused; the
// insider's capped (--max-workers); the gateway's goroutines and RSS
// bounded, and every model loads and answers after.
func TestSecurityRegistrationFlood(t *testing.T) {
	var extra []string
	if hasServeFlag("--forget-after") {
		extra = append(extra, "--forget-after", "2s")
	}
	s := startSecure(t, extra...)
	for _, c := range outsiders(t, s.controlAddr)[:2] {
		n := 0
		for i := range 500 {
			st := &workerpb.WorkerStatus{Id: fmt.Sprintf("out-%d", i), Address: "127.0.0.1:1", Pid: int64(i + 1), Healthy: true, MemoryBudgetBytes: 1}
			if _, err := c.register(st, nil); err == nil {
				n++
			}
		}
		if n > 0 {
			t.Errorf("%s: %d of 500 registrations accepted, want 0", c.how, n)
		}
	}
	// The insider's registrations are valid in every other way (the
	// fake worker's address, call secret and certificate): only the cap
	// may refuse them.
	fw := startFakeWorker(t)
	in := insiderClient(t, s)
	g0 := gauge(t, s.metrics(t), "go_goroutines")
	r0 := rss(t, s.pid)
	const total = 20000
	var accepted atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	t0 := time.Now()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				st := fw.status(fmt.Sprintf("reg-%d", i), 1)
				st.Pid = i
				if _, err := in.register(st, fw); err == nil {
					accepted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	g1 := gauge(t, s.metrics(t), "go_goroutines")
	r1 := rss(t, s.pid)
	t.Logf("%d registrations (%d accepted): gateway goroutines %.0f → %.0f, RSS %s → %s", total, accepted.Load(), g0, g1, mibs(r0), mibs(r1))
	// The cap is of workers registered at once: with --forget-after 2s a
	// flood worker that never beats is forgotten 2 s after it registered
	// (and its place taken), so at most 256 more each 2 s.
	limit := int64(256)
	if len(extra) > 0 {
		limit *= 1 + int64(time.Since(t0)/(2*time.Second))
	}
	if n := accepted.Load(); n > limit {
		t.Errorf("%d of %d registrations accepted in %s, want at most --max-workers (256) registered at once (%d)", n, total, time.Since(t0).Round(time.Millisecond), limit)
	}
	if g1 > g0+2000 {
		t.Errorf("gateway goroutines %.0f → %.0f after %d registrations", g0, g1, total)
	}
	if r1 > rssGoal {
		t.Errorf("gateway RSS %s after %d registrations, goal < %s", mibs(r1), total, mibs(rssGoal))
	}
	// Every model loads and answers (dead ids out of the shards).
	for _, m := range []struct{ model, body string }{
		{"iris", `{"instances":[{"sepalLength":6.7,"sepalWidth":3.1,"petalLength":5.6,"petalWidth":2.4}]}`},
		{"churn", `{"instances":[{"tenureMonths":1,"supportTickets":1,"plan":"pro"}]}`},
		{"fraud", fraudBody},
	} {
		testwait.UntilNil(t, 90*time.Second, func() error {
			code, b, _, err := s.call("POST", "/v1/models/"+m.model+":predict", s.adminKey, m.body, nil)
			if err != nil || code != 200 {
				return fmt.Errorf("%s after the flood: %d %v %.200s", m.model, code, err, b)
			}
			return nil
		})
	}
	// A model published after the flood loads and answers: its shard is
	// chosen among live workers, not the flood's dead ids.
	pkg := writePackage(t, filepath.Join(t.TempDir(), "calc"), []float64{1, 2}, 3.5)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	push := exec.CommandContext(ctx, binary, "push", pkg, "--server", s.url)
	push.Env = append(os.Environ(), "SLUICE_API_KEY="+s.adminKey)
	if out, err := push.CombinedOutput(); err != nil {
		t.Errorf("push calc after the flood: %v\n%s", err, out)
	}
	testwait.UntilNil(t, 60*time.Second, func() error {
		code, b, _, err := s.call("POST", "/v1/models/calc:predict", s.adminKey, `{"instances":[{"x":1,"z":2}],"deadlineMs":2000}`, nil)
		if err != nil || code != 200 {
			return fmt.Errorf("calc, published after the flood: %d %v %.200s", code, err, b)
		}
		return nil
	})
	s.mustServe(t, 40)
	s.stop(t)
}

// Finding 6: spoofed state "failed" beats for the real workers' versions
// (by an outsider as them, by an insider in its own name) change nothing.
func TestSecuritySpoofedFailedState(t *testing.T) {
	s := startSecure(t)
	real := s.realWorkers(t)
	out := outsiders(t, s.controlAddr)
	fw := startFakeWorker(t)
	in := insiderClient(t, s)
	se, err := in.register(fw.status("liar-1", 1), fw)
	if err != nil {
		t.Fatalf("the insider's Register: %v", err)
	}
	failed := &workerpb.VersionStatus{Model: "fraud", Version: 1, State: "failed", Reason: "spoofed"}
	accepted, ok := 0, 0
	var bad []string
	for i := range 50 {
		for _, c := range out {
			if known, err := c.beat(session{}, forged(real[i%2], failed)); err == nil && known {
				accepted++
			}
		}
		st := fw.status(se.id, 1)
		st.StartedUnixMs, st.Versions = se.st.StartedUnixMs, []*workerpb.VersionStatus{failed}
		_, _ = in.beat(se, st)
		n, b := s.predictions(1)
		ok += n
		bad = append(bad, b...)
	}
	if accepted > 0 {
		t.Errorf("%d forged failed-state heartbeats accepted as the real workers', want 0", accepted)
	}
	t.Logf("predictions among spoofed failed beats: %d/50", ok)
	if ok != 50 {
		t.Errorf("%d/50 predictions right among spoofed failed beats: %v", ok, bad[:min(len(bad), 5)])
	}
	s.stop(t)
}

// Finding 7: forged counters (MaxInt64 ↔ 0) count no crash and no expiry.
func TestSecurityForgedCounters(t *testing.T) {
	s := startSecure(t)
	real := s.realWorkers(t)
	out := outsiders(t, s.controlAddr)
	fw := startFakeWorker(t)
	in := insiderClient(t, s)
	se, err := in.register(fw.status("liar-1", 1), fw)
	if err != nil {
		t.Fatalf("the insider's Register: %v", err)
	}
	crashes0 := sumSeries(s.metrics(t), "sluice_replica_crashes_total", `model="fraud"`)
	accepted := 0
	for i := range 40 {
		v := int64(math.MaxInt64)
		if i%2 == 1 {
			v = 0
		}
		vs := &workerpb.VersionStatus{Model: "fraud", Version: 1, State: "ready", ReadyReplicas: 1, Crashes: v, ExpiredInQueue: v}
		for _, c := range out {
			if known, err := c.beat(session{}, forged(real[i%2], vs)); err == nil && known {
				accepted++
			}
		}
		st := fw.status(se.id, 1)
		st.StartedUnixMs, st.Versions = se.st.StartedUnixMs, []*workerpb.VersionStatus{vs}
		_, _ = in.beat(se, st)
	}
	if accepted > 0 {
		t.Errorf("%d forged-counter heartbeats accepted as the real workers', want 0", accepted)
	}
	text := s.metrics(t)
	crashes1 := sumSeries(text, "sluice_replica_crashes_total", `model="fraud"`)
	t.Logf("fraud's crashes counted: %.0f before 40 forged beats, %.0f after", crashes0, crashes1)
	if crashes1 != crashes0 {
		t.Errorf("fraud's crash count went %.0f → %.0f on forged counters", crashes0, crashes1)
	}
	s.mustServe(t, 40)
	s.stop(t)
}

// Finding 8: out-of-range fields (started_unix_ms MinInt64, negative
// memory and queue) leave GET /v1/workers answering, with sane values.
func TestSecurityOutOfRangeFields(t *testing.T) {
	s := startSecure(t)
	real := s.realWorkers(t)
	insane := func(st *workerpb.WorkerStatus) *workerpb.WorkerStatus {
		st.StartedUnixMs, st.RssBytes, st.CacheBytes, st.MemoryBudgetBytes = math.MinInt64, -1<<40, -1, -1<<40
		st.Build, st.MemoryBudgetSource = strings.Repeat("b", 100000), strings.Repeat("s", 100000)
		st.Versions = []*workerpb.VersionStatus{{Model: "fraud", Version: 1, State: "ready", ReadyReplicas: 1,
			QueuedInstances: math.MinInt64, MemoryBytes: -1 << 40, InflightBatches: math.MinInt32, CostANs: -1, CostBNs: math.MinInt64}}
		return st
	}
	accepted := 0
	for _, c := range outsiders(t, s.controlAddr) {
		for _, w := range real {
			if known, err := c.beat(session{}, insane(forged(w))); err == nil && known {
				accepted++
			}
		}
	}
	if accepted > 0 {
		t.Errorf("%d out-of-range heartbeats accepted as the real workers', want 0", accepted)
	}
	fw := startFakeWorker(t)
	in := insiderClient(t, s)
	se, err := in.register(insane(fw.status("liar-1", 1)), fw)
	if err == nil {
		for range 5 {
			_, _ = in.beat(se, insane(fw.status("liar-1", 1)))
		}
	} else {
		t.Logf("the insider's out-of-range Register: refused: %v", oneLine(err))
	}
	wl, err := s.workers()
	if err != nil {
		t.Fatalf("GET /v1/workers after out-of-range reports: %v", err)
	}
	now := time.Now()
	for _, w := range wl.Workers {
		if w.RSSBytes < 0 || w.CacheBytes < 0 || w.MemoryBudgetBytes < 0 || w.MemoryUsedBytes < 0 ||
			(!w.Started.IsZero() && (w.Started.Before(now.AddDate(-10, 0, 0)) || w.Started.After(now.AddDate(10, 0, 0)))) {
			t.Errorf("worker %s shown with out-of-range values: rss %d cache %d budget %d used %d started %v",
				w.ID, w.RSSBytes, w.CacheBytes, w.MemoryBudgetBytes, w.MemoryUsedBytes, w.Started)
		}
		if len(w.MemoryBudgetSource) > 1024 {
			t.Errorf("worker %s shown with a %d-byte memory budget source", w.ID, len(w.MemoryBudgetSource))
		}
	}
	s.mustServe(t, 40)
	s.stop(t)
}

// Finding 9: FetchArtifact serves no artifact without a session, nor one
// of a version the pool did not place on the caller.
func TestSecurityFetchArtifactNeedsASession(t *testing.T) {
	s := startSecure(t)
	code, b, _, err := s.call("GET", "/v1/models/fraud/versions/1", s.adminKey, "", nil)
	var v api.Version
	if err != nil || code != 200 || json.Unmarshal(b, &v) != nil || v.ArtifactSHA256 == "" {
		t.Fatalf("fraud@1: %d %v %s", code, err, b)
	}
	fetch := func(c cpClient, kv ...string) error {
		ctx, cancel := c.ctx(context.Background(), kv...)
		defer cancel()
		st, err := c.cp.FetchArtifact(ctx, &workerpb.FetchArtifactRequest{Sha256: v.ArtifactSHA256})
		if err != nil {
			return err
		}
		n := 0
		for {
			ch, err := st.Recv()
			if err == io.EOF {
				if n == 0 {
					return errors.New("empty stream")
				}
				return nil
			}
			if err != nil {
				return err
			}
			n += len(ch.Data)
		}
	}
	refusedAll(t, "FetchArtifact of fraud@1's artifact", outsiders(t, s.controlAddr), func(c cpClient) error { return fetch(c) })
	// A real worker's id without its session secret.
	refusedAll(t, "FetchArtifact as worker-1 without its session", outsiders(t, s.controlAddr), func(c cpClient) error {
		return fetch(c, "x-sluice-worker", "worker-1", "x-sluice-session", strings.Repeat("0", 64))
	})
	fw := startFakeWorker(t)
	in := insiderClient(t, s)
	se, err := in.register(fw.status("thief-1", 1), fw)
	if err != nil {
		t.Fatalf("the insider's Register: %v", err)
	}
	if err := fetch(in, "x-sluice-worker", se.id, "x-sluice-session", se.secret); err == nil {
		t.Errorf("FetchArtifact of fraud@1's artifact by a worker it was not placed on: served, want refused")
	} else {
		t.Logf("FetchArtifact by the insider: refused: %v", oneLine(err))
	}
	s.stop(t)
}

// Finding 11: worker-id metric series leave with the workers: 3,000
// registrations (each with a heartbeat) leave no series behind.
func TestSecurityWorkerSeriesForgotten(t *testing.T) {
	var extra []string
	if hasServeFlag("--forget-after") {
		extra = append(extra, "--forget-after", "2s")
	}
	s := startSecure(t, extra...)
	fw := startFakeWorker(t)
	in := insiderClient(t, s)
	const total = 3000
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				st := fw.status(fmt.Sprintf("series-%d", i), 1)
				st.Pid = i
				if se, err := in.register(st, fw); err == nil {
					_, _ = in.beat(se, st)
				}
			}
		}()
	}
	wg.Wait()
	count := func() int { return strings.Count(s.metrics(t), `worker="series-`) }
	peak := count()
	t.Logf("series with a flood worker's id after %d registrations: %d", total, peak)
	if peak > 2*256 {
		t.Errorf("%d series name the flood's workers, want at most 2 per --max-workers (256)", peak)
	}
	err := testwait.Poll(90*time.Second, func() error {
		if n := count(); n > 0 {
			return fmt.Errorf("%d series still name dead flood workers", n)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	s.mustServe(t, 20)
	s.stop(t)
}

// Finding 16: Register dials only addresses allowed by policy: addresses
// off loopback are refused, even with the real join token. The addresses
// are documentation ranges (RFC 5737, RFC 3849) and a name that never
// resolves (RFC 6761), so the old code's dials reach nobody: the cloud
// metadata service (169.254.169.254) the attack aimed at is not touched.
func TestSecurityRegisterAddressPolicy(t *testing.T) {
	s := startSecure(t)
	fw := startFakeWorker(t)
	in := insiderClient(t, s)
	for i, addr := range []string{"192.0.2.1:80", "198.51.100.7:8080", "[2001:db8::1]:80", "worker.invalid:80"} {
		st := fw.status(fmt.Sprintf("ssrf-%d", i), 8<<30)
		st.Address = addr
		if _, err := in.register(st, fw); err == nil {
			t.Errorf("Register with address %s (%s): accepted, want refused by the address policy", addr, in.how)
		} else {
			t.Logf("Register with address %s: refused: %v", addr, oneLine(err))
		}
	}
	wl, err := s.workers()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wl.Workers {
		if strings.HasPrefix(w.ID, "ssrf-") {
			t.Errorf("worker %s at %s is in the pool", w.ID, w.Address)
		}
	}
	s.mustServe(t, 20)
	s.stop(t)

	t.Run("refused without a dial", func(t *testing.T) {
		// The policy narrowed to 127.0.0.2: a worker address on 127.0.0.1
		// is outside it, and the listener there sees no connection.
		if !hasServeFlag("--worker-cidrs") {
			t.Fatal("sluice serve has no --worker-cidrs")
		}
		s := startSecure(t, "--worker-cidrs", "127.0.0.2/32")
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var dials atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				dials.Add(1)
				c.Close()
			}
		}()
		defer func() { ln.Close(); <-done }()
		fw := startFakeWorker(t)
		st := fw.status("ssrf-local", 8<<30)
		st.Address = ln.Addr().String()
		if _, err := insiderClient(t, s).register(st, fw); err == nil {
			t.Errorf("Register with address %s outside --worker-cidrs 127.0.0.2/32: accepted, want refused", st.Address)
		} else {
			t.Logf("Register with address %s: refused: %v", st.Address, oneLine(err))
		}
		s.mustServe(t, 20)
		if n := dials.Load(); n > 0 {
			t.Errorf("the gateway dialled the refused address %d times", n)
		}
		s.stop(t)
	})
}

// --- 12–15: the public surfaces ---

// Finding 12: an OIP gRPC model_name of 900 KB is refused as invalid, 600
// such calls leave records.db within a bound, and a 10,000-row records page
// is bounded.
func TestSecurityRecordsBomb(t *testing.T) {
	s := startSecure(t)
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	oc := inferencepb.NewGRPCInferenceServiceClient(conn)
	dbSize := func() int64 {
		var n int64
		for _, f := range []string{"records.db", "records.db-wal"} {
			if fi, err := os.Stat(filepath.Join(s.data, f)); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	size0 := dbSize()
	// Random letters: a record store that compresses does not make the
	// bomb small.
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	raw := make([]byte, 900<<10)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	for i, b := range raw {
		raw[i] = letters[int(b)%len(letters)]
	}
	name := string(raw)
	codesSeen := map[codes.Code]int{}
	for i := range 600 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// The admin may call every model: only the name's validation
		// refuses the call.
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.adminKey)
		_, err := oc.ModelInfer(ctx, &inferencepb.ModelInferRequest{ModelName: name[i%1000:] + name[:i%1000], Id: fmt.Sprintf("bomb-%d", i),
			Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "amount", Datatype: "FP32", Shape: []int64{1},
				Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{1}}}}})
		cancel()
		codesSeen[status.Code(err)]++
	}
	t.Logf("600 ModelInfer calls with a 900 KB model_name: %v", codesSeen)
	if n := codesSeen[codes.InvalidArgument] + codesSeen[codes.ResourceExhausted]; n != 600 {
		t.Errorf("600 calls with a 900 KB model_name answered %v, want all refused as invalid (or over a message bound)", codesSeen)
	}
	// A request after them: once its record is in, theirs are too.
	if code, b, _, err := s.call("POST", "/v1/models/fraud:predict", s.adminKey, fraudBody, map[string]string{"X-Request-Id": "after-the-bomb"}); err != nil || code != 200 {
		t.Fatalf("predict after the bomb: %d %v %s", code, err, b)
	}
	testwait.UntilNil(t, 60*time.Second, func() error {
		code, b, _, err := s.call("GET", "/v1/records?limit=5", s.adminKey, "", nil)
		if err != nil || code != 200 {
			return fmt.Errorf("GET /v1/records: %d %v", code, err)
		}
		if !bytes.Contains(b, []byte("after-the-bomb")) {
			return errors.New("the marker's record is not written yet")
		}
		return nil
	})
	size1 := dbSize()
	t.Logf("records.db (with its WAL): %s before, %s after 600 calls", mibs(size0), mibs(size1))
	if size1-size0 > 16<<20 {
		t.Errorf("records.db grew %s on 600 refused calls, want < 16 MiB", mibs(size1-size0))
	}
	r0 := rss(t, s.pid)
	code, b, _, err := s.call("GET", "/v1/records?limit=10000", s.adminKey, "", nil)
	r1 := rss(t, s.pid)
	t.Logf("GET /v1/records?limit=10000: %d, %s; gateway RSS %s → %s", code, mibs(int64(len(b))), mibs(r0), mibs(r1))
	if err != nil || (code != 200 && code != 400) {
		t.Errorf("GET /v1/records?limit=10000: %d %v", code, err)
	}
	if len(b) > 32<<20 {
		t.Errorf("a records page of %s, want < 32 MiB", mibs(int64(len(b))))
	}
	if r1 > rssGoal {
		t.Errorf("gateway RSS %s after a records page, goal < %s", mibs(r1), mibs(rssGoal))
	}
	s.stop(t)
}

// raiseFDLimit sets this process's open-file limit to its hard limit.
func raiseFDLimit(t *testing.T) uint64 {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	return lim.Cur
}

// Finding 13: 3,000 connections that declare 1 MiB predict bodies and
// trickle them pin no memory: the gateway's RSS and Go heap stay under
// the goal.
func TestSecurityTricklingBodies(t *testing.T) {
	const conns = 3000
	if lim := raiseFDLimit(t); lim < conns+500 {
		t.Fatalf("open-file limit %d: the test needs %d connections", lim, conns)
	}
	s := startSecure(t)
	host := strings.TrimPrefix(s.url, "http://")
	text := s.metrics(t)
	r0, h0 := rss(t, s.pid), int64(gauge(t, text, "go_memstats_heap_inuse_bytes"))
	head := fmt.Sprintf("POST /v1/models/fraud:predict HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"instances\":[",
		host, s.appKey, 1<<20)
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	dialFailed := 0
	for range conns {
		c, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			dialFailed++
			continue
		}
		if _, err := io.WriteString(c, head); err != nil {
			c.Close()
			continue
		}
		cs = append(cs, c)
	}
	var peakRSS, peakHeap int64
	for round := range 5 {
		open := 0
		for _, c := range cs {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := c.Write(bytes.Repeat([]byte(" "), 512)); err == nil {
				open++
			}
		}
		r, h := rss(t, s.pid), int64(gauge(t, s.metrics(t), "go_memstats_heap_inuse_bytes"))
		peakRSS, peakHeap = max(peakRSS, r), max(peakHeap, h)
		t.Logf("round %d: %d connections still trickling; gateway RSS %s, heap in use %s", round, open, mibs(r), mibs(h))
	}
	t.Logf("%d trickling connections declaring 1 MiB (%d dials failed): RSS %s → peak %s, heap %s → peak %s",
		len(cs), dialFailed, mibs(r0), mibs(peakRSS), mibs(h0), mibs(peakHeap))
	if peakRSS > rssGoal || peakHeap > rssGoal {
		t.Errorf("gateway RSS peak %s, heap peak %s under %d trickling bodies, goal < %s", mibs(peakRSS), mibs(peakHeap), conns, mibs(rssGoal))
	}
	for _, c := range cs {
		c.Close()
	}
	cs = nil
	s.mustServe(t, 20)
	s.stop(t)
}

// --- raw HTTP/2, for the gRPC listener's bounds ---

const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

func h2Frame(typ, flags byte, stream uint32, payload []byte) []byte {
	b := make([]byte, 9, 9+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	ebin.BigEndian.PutUint32(b[5:], stream&0x7fffffff)
	return append(b, payload...)
}

// hpackLiteral appends a header as a literal without indexing, new name,
// no Huffman coding.
func hpackLiteral(b []byte, name, value string) []byte {
	b = append(b, 0)
	b = hpackString(b, name)
	return hpackString(b, value)
}

func hpackString(b []byte, s string) []byte {
	n := len(s)
	if n < 127 {
		b = append(b, byte(n))
	} else {
		b = append(b, 127)
		n -= 127
		for n >= 128 {
			b = append(b, byte(n%128+128))
			n /= 128
		}
		b = append(b, byte(n))
	}
	return append(b, s...)
}

// h2Conn is a raw HTTP/2 client connection: it answers the server's
// SETTINGS and PINGs and counts what the server sends.
type h2Conn struct {
	c       net.Conn
	wmu     sync.Mutex // guards writes to c
	maxStr  atomic.Int64
	rsts    atomic.Int64
	goaway  atomic.Bool
	pingAck chan struct{}
	done    chan struct{}
}

func dialH2(addr string) (*h2Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	h := &h2Conn{c: c, pingAck: make(chan struct{}, 16), done: make(chan struct{})}
	h.maxStr.Store(-1)
	if err := h.write(append([]byte(h2Preface), h2Frame(0x4, 0, 0, nil)...)); err != nil {
		c.Close()
		return nil, err
	}
	return h, nil
}

func (h *h2Conn) write(b []byte) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_ = h.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := h.c.Write(b)
	return err
}

// read runs until the connection closes.
func (h *h2Conn) read() {
	defer close(h.done)
	r := bufio.NewReader(h.c)
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := hdr[3], hdr[4]
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		switch typ {
		case 0x4: // SETTINGS
			if flags&0x1 == 0 {
				for i := 0; i+6 <= len(payload); i += 6 {
					if ebin.BigEndian.Uint16(payload[i:]) == 0x3 {
						h.maxStr.Store(int64(ebin.BigEndian.Uint32(payload[i+2:])))
					}
				}
				_ = h.write(h2Frame(0x4, 0x1, 0, nil))
			}
		case 0x6: // PING
			if flags&0x1 == 0 {
				_ = h.write(h2Frame(0x6, 0x1, 0, payload))
			} else {
				select {
				case h.pingAck <- struct{}{}:
				default:
				}
			}
		case 0x3: // RST_STREAM
			h.rsts.Add(1)
		case 0x7: // GOAWAY
			h.goaway.Store(true)
		}
	}
}

// Finding 15: one connection opening 40,000 streams that never send their
// message holds at most MaxConcurrentStreams of them: the gateway's
// goroutines and RSS stay bounded.
func TestSecurityStalledStreams(t *testing.T) {
	s := startSecure(t)
	text := s.metrics(t)
	g0, r0 := gauge(t, text, "go_goroutines"), rss(t, s.pid)
	h, err := dialH2(s.grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	go h.read()
	defer h.c.Close()
	const streams = 40000
	var block []byte
	block = hpackLiteral(block, ":method", "POST")
	block = hpackLiteral(block, ":scheme", "http")
	block = hpackLiteral(block, ":path", "/inference.GRPCInferenceService/ModelInfer")
	block = hpackLiteral(block, ":authority", s.grpcAddr)
	block = hpackLiteral(block, "content-type", "application/grpc")
	block = hpackLiteral(block, "te", "trailers")
	block = hpackLiteral(block, "authorization", "Bearer "+s.appKey)
	sent := 0
	var batch []byte
	for i := range streams {
		batch = append(batch, h2Frame(0x1, 0x4, uint32(2*i+1), block)...) // HEADERS, END_HEADERS, no END_STREAM
		if len(batch) > 64<<10 || i == streams-1 {
			if err := h.write(batch); err != nil {
				t.Logf("the server closed the connection after %d streams: %v", sent, err)
				break
			}
			batch = batch[:0]
		}
		sent = i + 1
	}
	// A PING after every HEADERS: its ACK says the server read them all.
	_ = h.write(h2Frame(0x6, 0, 0, []byte("stalled!")))
	select {
	case <-h.pingAck:
	case <-h.done:
		t.Logf("the server closed the connection (GOAWAY %v)", h.goaway.Load())
	case <-time.After(120 * time.Second):
		t.Fatalf("no PING answer after %d HEADERS", sent)
	}
	text = s.metrics(t)
	g1, r1 := gauge(t, text, "go_goroutines"), rss(t, s.pid)
	held := int64(sent) - h.rsts.Load()
	t.Logf("%d stalled streams on one connection: the server advertised MAX_CONCURRENT_STREAMS %d, refused %d; goroutines %.0f → %.0f, RSS %s → %s",
		sent, h.maxStr.Load(), h.rsts.Load(), g0, g1, mibs(r0), mibs(r1))
	if m := h.maxStr.Load(); m < 0 || m > 100 {
		t.Errorf("the gRPC listener advertises MAX_CONCURRENT_STREAMS %d, want at most 100", m)
	}
	if !h.goaway.Load() && held > 1000 {
		t.Errorf("%d of %d stalled streams held by one connection", held, sent)
	}
	if g1 > g0+1000 {
		t.Errorf("gateway goroutines %.0f → %.0f on %d stalled streams", g0, g1, sent)
	}
	if r1-r0 > 100<<20 || r1 > rssGoal {
		t.Errorf("gateway RSS %s → %s on %d stalled streams", mibs(r0), mibs(r1), sent)
	}
	s.mustServe(t, 20)
	// The attack ends before the stop: a stream held open waits out the
	// whole --grace of a graceful stop.
	h.c.Close()
	<-h.done
	s.stop(t)
}

// Finding 14: thousands of idle HTTP/2 connections to the gRPC listener do
// not take the process's descriptors: /readyz and predictions answer, and
// the gateway holds a bounded number of descriptors.
func TestSecurityIdleGRPCConnections(t *testing.T) {
	lim := raiseFDLimit(t)
	conns := min(19000, int(lim)-800) // this machine: a hard limit of 20,000 descriptors
	s := startSecure(t)
	fd0, r0 := openFDs(t, s.pid), rss(t, s.pid)
	var mu sync.Mutex
	var cs []net.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	var failed, next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(conns) || failed.Load() > 256 {
					return
				}
				c, err := net.DialTimeout("tcp", s.grpcAddr, 2*time.Second)
				if err == nil {
					_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
					_, err = c.Write(append([]byte(h2Preface), h2Frame(0x4, 0, 0, nil)...))
				}
				if err != nil {
					failed.Add(1)
					if c != nil {
						c.Close()
					}
					continue
				}
				mu.Lock()
				cs = append(cs, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fd1, r1 := openFDs(t, s.pid), rss(t, s.pid)
	code, _, _, err := s.call("GET", "/readyz", "", "", nil)
	t.Logf("%d idle gRPC connections opened (%d dials or writes failed): gateway descriptors %d → %d, RSS %s → %s, /readyz %d %v",
		len(cs), failed.Load(), fd0, fd1, mibs(r0), mibs(r1), code, err)
	if err != nil || code != 200 {
		t.Errorf("/readyz under %d idle gRPC connections: %d %v", len(cs), code, err)
	}
	if fd1 > 4096 {
		t.Errorf("the gateway holds %d descriptors under %d idle gRPC connections, want at most 4096 (--grpc-max-conns 1024)", fd1, len(cs))
	}
	if r1 > rssGoal {
		t.Errorf("gateway RSS %s under %d idle gRPC connections, goal < %s", mibs(r1), len(cs), mibs(rssGoal))
	}
	s.mustServe(t, 20)
	for _, c := range cs {
		c.Close()
	}
	cs = nil
	s.stop(t)
}

// --- 14, 15 against a worker's own listener ---

// dialH2TLS is dialH2 over TLS without verifying the server (a worker's
// listener speaks only TLS, and anyone can complete its handshake); nil
// when the server closed the connection before the preface went out.
func dialH2TLS(addr string) *h2Conn {
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil
	}
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		raw.Close()
		return nil
	}
	_ = c.SetDeadline(time.Time{})
	h := &h2Conn{c: c, pingAck: make(chan struct{}, 16), done: make(chan struct{})}
	h.maxStr.Store(-1)
	if err := h.write(append([]byte(h2Preface), h2Frame(0x4, 0, 0, nil)...)); err != nil {
		c.Close()
		return nil
	}
	go h.read()
	return h
}

// Findings 14 and 15 against a worker's address (from GET /v1/workers):
// 1,500 connections that never finish a handshake, 400 idle HTTP/2
// connections over TLS and 20,000 stalled ModelInfer streams without the
// call secret hold a bounded number of the worker's descriptors and
// memory; every stalled stream is refused when its headers arrive; the
// gateway's predictions through the worker keep answering.
func TestSecurityWorkerListenerBounded(t *testing.T) {
	raiseFDLimit(t)
	s := startSecure(t)
	w := s.realWorkers(t)[0]
	pid := int(w.PID)
	fd0, r0 := openFDs(t, pid), rss(t, pid)

	// Silent TCP connections: past --max-conns (256) each is closed at
	// once; the others are closed after the 10 s handshake timeout.
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range 1500 {
		c, err := net.DialTimeout("tcp", w.Address, 2*time.Second)
		if err != nil {
			break
		}
		silent = append(silent, c)
	}
	fd1 := openFDs(t, pid)
	t.Logf("%d silent connections to %s (%s): worker descriptors %d → %d", len(silent), w.ID, w.Address, fd0, fd1)
	if fd1 > fd0+256+64 {
		t.Errorf("worker %s holds %d descriptors under %d silent connections (from %d), want at most %d more (--max-conns 256)", w.ID, fd1, len(silent), fd0, 256+64)
	}
	s.mustServe(t, 20)
	testwait.Until(t, 60*time.Second, func() bool { return openFDs(t, pid) <= fd0+16 })
	for _, c := range silent {
		c.Close()
	}
	silent = nil

	// Idle HTTP/2 connections over TLS, then stalled streams on some of
	// them.
	var hs []*h2Conn
	defer func() {
		for _, h := range hs {
			h.c.Close()
			<-h.done
		}
	}()
	refused := 0
	for range 400 {
		if h := dialH2TLS(w.Address); h != nil {
			hs = append(hs, h)
		} else {
			refused++
		}
	}
	var open []*h2Conn
	testwait.Until(t, 30*time.Second, func() bool {
		open = open[:0]
		for _, h := range hs {
			select {
			case <-h.done:
			default:
				open = append(open, h)
			}
		}
		return len(open) <= 256
	})
	fd2 := openFDs(t, pid)
	t.Logf("%d idle TLS HTTP/2 connections tried: %d open, %d closed (refused); worker descriptors %d", len(hs)+refused, len(open), len(hs)+refused-len(open), fd2)
	if fd2 > fd0+256+64 {
		t.Errorf("worker %s holds %d descriptors under %d idle connections, want at most %d more", w.ID, fd2, len(hs), 256+64)
	}
	if len(open) == 0 {
		t.Fatal("no connection admitted")
	}
	var block []byte
	block = hpackLiteral(block, ":method", "POST")
	block = hpackLiteral(block, ":scheme", "https")
	block = hpackLiteral(block, ":path", "/inference.GRPCInferenceService/ModelInfer")
	block = hpackLiteral(block, ":authority", w.Address)
	block = hpackLiteral(block, "content-type", "application/grpc")
	block = hpackLiteral(block, "te", "trailers")
	const perConn = 2000
	attack := open[:min(10, len(open))]
	for _, h := range attack {
		var batch []byte
		for i := range perConn {
			batch = append(batch, h2Frame(0x1, 0x4, uint32(2*i+1), block)...) // HEADERS, END_HEADERS, no END_STREAM
			if len(batch) > 64<<10 || i == perConn-1 {
				if err := h.write(batch); err != nil {
					t.Fatalf("the worker closed a connection after %d streams: %v", i, err)
				}
				batch = batch[:0]
			}
		}
		_ = h.write(h2Frame(0x6, 0, 0, []byte("stalled!")))
	}
	sent := perConn * len(attack)
	err := testwait.Poll(60*time.Second, func() error {
		var refused int64
		for _, h := range attack {
			refused += h.rsts.Load()
		}
		if refused < int64(sent) {
			return fmt.Errorf("%d of %d stalled streams without the call secret refused", refused, sent)
		}
		return nil
	})
	r1, fd3 := rss(t, pid), openFDs(t, pid)
	t.Logf("%d stalled streams without the call secret on %d connections (MAX_CONCURRENT_STREAMS %d): worker RSS %s → %s, descriptors %d",
		sent, len(attack), attack[0].maxStr.Load(), mibs(r0), mibs(r1), fd3)
	if err != nil {
		t.Error(err)
	}
	if r1-r0 > 64<<20 {
		t.Errorf("worker %s RSS %s → %s under %d stalled streams", w.ID, mibs(r0), mibs(r1), sent)
	}
	s.mustServe(t, 20)
	for _, h := range hs {
		h.c.Close()
		<-h.done
	}
	hs = nil
	s.stop(t)
}
