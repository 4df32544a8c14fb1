package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/internal/certs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/testwait"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// hopFiles are a control plane's certificate, key and join token written
// by a test, for a gateway started with them and workers that join it.
type hopFiles struct{ cert, key, token string }

func newHopFiles(t *testing.T) hopFiles {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, err := certs.SelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	h := hopFiles{cert: filepath.Join(dir, "control.pem"), key: filepath.Join(dir, "control-key.pem"), token: filepath.Join(dir, "token")}
	for f, b := range map[string][]byte{h.cert: certPEM, h.key: keyPEM, h.token: []byte("e2e-join-token-0123456789abcdef\n")} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h hopFiles) serverArgs() []string {
	return []string{"--control-tls-cert", h.cert, "--control-tls-key", h.key, "--join-token-file", h.token}
}

func (h hopFiles) workerArgs() []string {
	return []string{"--ca", h.cert, "--join-token-file", h.token}
}

// The worker hop through the real binaries (issue 18, findings 1, 2, 3, 9,
// 10): a gateway with --control-addr and a `sluice worker` holding its CA
// and join token serve; a client that reaches the control plane (over TLS,
// trusting its certificate) cannot register without the token, nor speak
// as the worker without its session; a client that reaches the worker's
// address cannot call it (ModelInfer, Unload) without the call secret,
// and cannot speak to it in clear; the worker serves on untouched.
func TestHopAuthenticated(t *testing.T) {
	addr := freeAddr(t)
	h := newHopFiles(t)
	w := exec.Command(binary, append([]string{"worker", "--join", addr, "--id", "far-1", "--cache-dir", t.TempDir()}, h.workerArgs()...)...)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Kill(); _, _ = w.Process.Wait() })
	srv := startServer(t, append([]string{"--data", t.TempDir(), "--control-addr", addr, "--workers", "0"}, h.serverArgs()...)...)
	testwait.Until(t, 10*time.Second, func() bool { return holders(workers(t, srv.url), "fraud@1") == 1 })
	body := `{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"}]}`
	predict := func(when string) {
		t.Helper()
		if status, out, err := postJSON(srv.url+"/v1/models/fraud:predict", body); err != nil || status != 200 {
			t.Fatalf("predict %s: %d %v %s", when, status, err, out)
		}
	}
	predict("through the worker")
	wl := workers(t, srv.url)
	real := wl.Workers[0]

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	caPEM, err := os.ReadFile(h.cert)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	cpConn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots})))
	if err != nil {
		t.Fatal(err)
	}
	defer cpConn.Close()
	cp := workerpb.NewControlPlaneClient(cpConn)
	rogue := &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: "rogue", Address: "127.0.0.1:1", Pid: 1, MemoryBudgetBytes: 1 << 40},
		CallSecret: strings.Repeat("c", 64), TlsCertSha256: strings.Repeat("ab", 32)}
	for name, c := range map[string]context.Context{
		"no token":    ctx,
		"wrong token": metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer not-the-token-0123456789"),
	} {
		if _, err := cp.Register(c, rogue); status.Code(err) != codes.Unauthenticated {
			t.Errorf("register, %s: %v, want Unauthenticated", name, err)
		}
	}
	// The real worker's id, pid and address are public in /v1/workers:
	// they prove nothing.
	forged := &workerpb.WorkerStatus{Id: real.ID, Address: real.Address, Pid: real.PID, MemoryBudgetBytes: 1}
	if _, err := cp.Heartbeat(ctx, forged); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a heartbeat forged as %s: %v, want Unauthenticated", real.ID, err)
	}
	if _, err := cp.Register(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer not-the-token-0123456789"),
		&workerpb.RegisterRequest{Status: forged, CallSecret: rogue.CallSecret, TlsCertSha256: rogue.TlsCertSha256}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a registration as %s: %v, want Unauthenticated", real.ID, err)
	}
	if s, err := cp.FetchArtifact(ctx, &workerpb.FetchArtifactRequest{Sha256: strings.Repeat("0", 64)}); err == nil {
		if _, err := s.Recv(); status.Code(err) != codes.Unauthenticated {
			t.Errorf("fetch artifact without a session: %v, want Unauthenticated", err)
		}
	}
	if wl := workers(t, srv.url); len(wl.Workers) != 1 || wl.Workers[0].ID != real.ID {
		t.Fatalf("workers after the rogue calls: %+v", wl)
	}

	// The worker's own address: TLS (an attacker skips verification), no
	// call secret.
	wConn, err := grpc.NewClient(real.Address, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer wConn.Close()
	infer := &inferencepb.ModelInferRequest{ModelName: "fraud", ModelVersion: "1"}
	if _, err := inferencepb.NewGRPCInferenceServiceClient(wConn).ModelInfer(ctx, infer); status.Code(err) != codes.Unauthenticated {
		t.Errorf("direct ModelInfer: %v, want Unauthenticated", err)
	}
	wc := workerpb.NewWorkerClient(wConn)
	if _, err := wc.Unload(ctx, &workerpb.UnloadRequest{Model: "fraud", Version: 1}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("direct Unload: %v, want Unauthenticated", err)
	}
	if _, err := wc.Unload(metadata.AppendToOutgoingContext(ctx, hop.CallKey, strings.Repeat("0", 64)), &workerpb.UnloadRequest{Model: "fraud", Version: 1}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("direct Unload with a guessed secret: %v, want Unauthenticated", err)
	}
	clear, err := grpc.NewClient(real.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer clear.Close()
	if _, err := workerpb.NewWorkerClient(clear).Unload(ctx, &workerpb.UnloadRequest{Model: "fraud", Version: 1}); status.Code(err) != codes.Unavailable {
		t.Errorf("Unload in clear: %v, want Unavailable (no TLS, no answer)", err)
	}
	for range 5 {
		predict("after the rogue calls")
	}
	if wl := workers(t, srv.url); holders(wl, "fraud@1") != 1 {
		t.Fatalf("fraud@1 left the worker: %+v", wl)
	}
	srv.stop(t)
}

// --workers N with no credential flags: the gateway makes its control
// plane's certificate and join token in <--data>/control (key and token
// 0600), logs where they are, and its local workers join with them; a
// restart keeps the same files.
func TestLocalWorkersJoinWithTheMadeCredentials(t *testing.T) {
	data := t.TempDir()
	ca, key, token := filepath.Join(data, "control", "ca.pem"), filepath.Join(data, "control", "key.pem"), filepath.Join(data, "control", "join-token")
	var first [][]byte
	for run := range 2 {
		srv := startServer(t, "--data", data, "--workers", "1", "--shard-size", "1")
		if status, out, err := postJSON(srv.url+"/v1/models/fraud:predict", `{"instances":[{"amount":800,"accountAgeDays":91,"declines5m":3,"country":"US"}]}`); err != nil || status != 200 {
			t.Fatalf("run %d: predict: %d %v %s", run, status, err, out)
		}
		logs := srv.logs.String()
		if !strings.Contains(logs, ca) || !strings.Contains(logs, token) {
			t.Errorf("run %d: the log does not say where the CA and the token are:\n%s", run, logs)
		}
		srv.stop(t)
		var now [][]byte
		for f, perm := range map[string]os.FileMode{key: 0o600, token: 0o600, ca: 0o644} {
			info, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != perm {
				t.Errorf("%s: mode %v, want %v", f, info.Mode().Perm(), perm)
			}
		}
		for _, f := range []string{ca, key, token} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			now = append(now, b)
		}
		if run == 0 {
			first = now
			continue
		}
		for i := range now {
			if !bytes.Equal(now[i], first[i]) {
				t.Errorf("file %d changed at the restart", i)
			}
		}
	}
}

// mTLS instead of the token: a worker with a client certificate that the
// gateway's --worker-client-ca signs, and no token file, joins and serves;
// one whose certificate another CA signed is refused at the handshake.
func TestHopMutualTLS(t *testing.T) {
	addr := freeAddr(t)
	h := newHopFiles(t)
	dir := t.TempDir()
	writeCert := func(name string) (string, string) {
		certPEM, keyPEM, err := certs.SelfSigned([]string{name}, time.Hour) // its own CA
		if err != nil {
			t.Fatal(err)
		}
		c, k := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		if err := os.WriteFile(c, certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(k, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	goodCert, goodKey := writeCert("far-1")
	badCert, badKey := writeCert("stranger")
	start := func(id, cert, key string, log *syncLog) *exec.Cmd {
		cmd := exec.Command(binary, "worker", "--join", addr, "--id", id, "--cache-dir", t.TempDir(), "--ca", h.cert, "--cert", cert, "--key", key)
		cmd.Stderr = &logWriter{log}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		return cmd
	}
	var goodLog, badLog syncLog
	start("far-1", goodCert, goodKey, &goodLog)
	start("stranger", badCert, badKey, &badLog)
	srv := startServer(t, append([]string{"--data", t.TempDir(), "--control-addr", addr, "--workers", "0", "--worker-client-ca", goodCert}, h.serverArgs()...)...)
	testwait.Until(t, 10*time.Second, func() bool { return holders(workers(t, srv.url), "fraud@1") == 1 })
	if status, out, err := postJSON(srv.url+"/v1/models/fraud:predict", `{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"}]}`); err != nil || status != 200 {
		t.Fatalf("predict through the mTLS worker: %d %v %s", status, err, out)
	}
	// The stranger is refused once the control plane listens (before, it
	// finds nothing to connect to).
	testwait.Until(t, 10*time.Second, func() bool {
		return strings.Count(badLog.String(), "register refused or failed") >= 2 && strings.Contains(badLog.String(), "--worker-client-ca")
	})
	if wl := workers(t, srv.url); len(wl.Workers) != 1 || wl.Workers[0].ID != "far-1" {
		t.Fatalf("workers: %+v (the stranger joined?)", wl)
	}
	srv.stop(t)
}
