package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
	"github.com/sluiceml/sluice/internal/registry/s3/s3test"
	"github.com/sluiceml/sluice/internal/testwait"
)

// seaweed is a SeaweedFS of the test's own, started by
// scripts/start-seaweedfs.sh in dir, so the test may stop it.
type seaweed struct {
	dir, endpoint string
	key, secret   string
}

func startSeaweed(t *testing.T) *seaweed {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("bash", "../../scripts/start-seaweedfs.sh", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/start-seaweedfs.sh: %v\n%s", err, out)
	}
	s := &seaweed{dir: dir}
	t.Cleanup(func() { s.stop(t) })
	f, err := os.Open(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "SLUICE_S3_ENDPOINT":
			s.endpoint = v
		case "AWS_ACCESS_KEY_ID":
			s.key = v
		case "AWS_SECRET_ACCESS_KEY":
			s.secret = v
		}
	}
	if s.endpoint == "" || s.key == "" || s.secret == "" {
		t.Fatalf("%s/env lacks the endpoint or the keys", dir)
	}
	return s
}

func (s *seaweed) stop(t *testing.T) {
	if out, err := exec.Command("bash", "../../scripts/stop-seaweedfs.sh", s.dir).CombinedOutput(); err != nil {
		t.Errorf("scripts/stop-seaweedfs.sh: %v\n%s", err, out)
	}
}

// namedSyn writes a synthetic package of model name with its own artifact.
func namedSyn(t *testing.T, dir, name, cost, extra string) string {
	t.Helper()
	synPackage(t, dir, cost, extra)
	p := filepath.Join(dir, "model.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "name: syn", "name: "+name, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Artifacts in an object store, through the real binaries and a real S3
// server: `sluice serve --artifacts s3://… --workers 2` keeps pushed
// artifacts in the bucket and its workers read them from it; a corrupted
// object is refused by name while what is loaded keeps serving; with the
// store stopped, loaded versions keep serving and a push fails 503 naming
// the store. A missing bucket or a refused key stops the start.
func TestS3ArtifactsThroughTheBinary(t *testing.T) {
	s3test.Endpoint(t) // the S3 suite is on (make test-s3); this test runs a store of its own to stop it
	sw := startSeaweed(t)
	t.Setenv("AWS_ACCESS_KEY_ID", sw.key)
	t.Setenv("AWS_SECRET_ACCESS_KEY", sw.secret)
	bucket := s3test.Bucket(t, sw.endpoint)
	store := "s3://" + bucket + "/e2e"
	ctx := context.Background()

	t.Run("start refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			env  []string
			args []string
			want []string
		}{
			{"missing bucket", nil, []string{"--artifacts", "s3://no-such-bucket-e2e/x"}, []string{"--artifacts s3://no-such-bucket-e2e/x", "does not exist"}},
			{"wrong secret", []string{"AWS_SECRET_ACCESS_KEY=hunter2-wrong"}, []string{"--artifacts", store}, []string{"refused the credentials", "AWS_SECRET_ACCESS_KEY"}},
			{"endpoint without --artifacts", nil, nil, []string{"--s3-endpoint and --s3-path-style need --artifacts"}},
		} {
			cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--s3-endpoint", sw.endpoint}, tc.args...)...)
			cmd.Env = append(os.Environ(), tc.env...)
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("%s: serve did not stop:\n%s", tc.name, out)
			}
			if err == nil {
				t.Errorf("%s: serve started", tc.name)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Logf("%s: %s", tc.name, lines[len(lines)-1])
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("%s: output lacks %q:\n%s", tc.name, w, out)
				}
			}
			if strings.Contains(string(out), "hunter2") || strings.Contains(string(out), sw.secret) {
				t.Errorf("%s: a secret is in the output:\n%s", tc.name, out)
			}
		}
	})

	data, pkgs := t.TempDir(), t.TempDir()
	srv := startServer(t, "--data", data, "--models", t.TempDir(), "--workers", "2",
		"--artifacts", store, "--s3-endpoint", sw.endpoint)
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", srv.logs)
		}
		if strings.Contains(srv.logs.String(), sw.secret) {
			t.Errorf("the secret key is in the logs")
		}
	}()
	if !strings.Contains(srv.logs.String(), "artifacts in an object store") {
		t.Errorf("the log does not say where artifacts are:\n%s", srv.logs)
	}
	push := func(dir string) (string, error) {
		out, stderr, err := sluice(t, "push", dir, "--server", srv.url)
		return out + stderr, err
	}
	for _, p := range []string{
		namedSyn(t, filepath.Join(pkgs, "hot"), "hot", `{"base":"100us"}`, ""),
		namedSyn(t, filepath.Join(pkgs, "cold"), "cold", `{"base":"120us"}`, "placement: {tier: cold}\n"),
	} {
		if out, err := push(p); err != nil {
			t.Fatalf("push %s: %v\n%s\n%s", p, err, out, srv.logs)
		}
	}
	predictOK := func(model string) {
		t.Helper()
		status, out, err := postJSON(srv.url+"/v1/models/"+model+":predict", `{"instances":[{"x":1}],"deadlineMs":5000}`)
		if err != nil || status != 200 {
			t.Fatalf("predict %s: %d %v %s\n%s", model, status, err, out, srv.logs)
		}
	}
	predictOK("hot")
	testwait.Until(t, 10*time.Second, func() bool { return strings.Contains(srv.logs.String(), `artifact="fetched from `+store) })

	// The artifacts are objects PREFIX/sha256/SHA in the bucket and not
	// files in --data.
	mc := s3test.Client(t, sw.endpoint)
	hotSHA, coldSHA := getVersionOf(t, srv.url, "hot", 1).ArtifactSHA256, getVersionOf(t, srv.url, "cold", 1).ArtifactSHA256
	for _, sha := range []string{hotSHA, coldSHA} {
		if _, err := mc.StatObject(ctx, bucket, "e2e/sha256/"+sha, minio.StatObjectOptions{}); err != nil {
			t.Errorf("object e2e/sha256/%s: %v", sha, err)
		}
		if _, err := os.Stat(filepath.Join(data, "artifacts", "sha256", sha[:2], sha)); err == nil {
			t.Errorf("artifact %s is in the data folder too", sha[:12])
		}
	}

	// Corrupt the cold version's object: its first request loads it on a
	// worker, which reads the object, finds the mismatch and refuses it
	// by name; the loaded version keeps serving.
	s3test.Overwrite(t, sw.endpoint, bucket, "e2e/sha256/"+coldSHA, []byte(`{"base":"999us"}`))
	status, out, err := postJSON(srv.url+"/v1/models/cold:predict", `{"instances":[{"x":1}],"deadlineMs":5000}`)
	t.Logf("predict cold after the corruption: %d %s", status, out)
	if err != nil || status != 503 || !strings.Contains(string(out), "artifact sha256 mismatch") || !strings.Contains(string(out), "s3://"+bucket+"/e2e/sha256/"+coldSHA) {
		t.Errorf("predict cold: %d %v %s; want 503 naming the mismatch and the object", status, err, out)
	}
	predictOK("hot")

	// The store stops: loaded versions keep serving, a push fails 503
	// naming the store, and nothing is recorded.
	sw.stop(t)
	for range 20 {
		predictOK("hot")
	}
	out2, err := push(namedSyn(t, filepath.Join(pkgs, "late"), "late", `{"base":"140us"}`, ""))
	t.Logf("push with the store down: %v %s", err, out2)
	if err == nil || !strings.Contains(out2, "unavailable") || !strings.Contains(out2, store+" at "+sw.endpoint) {
		t.Errorf("push with the store down: %v %s; want unavailable naming %s", err, out2, store)
	}
	resp, err := http.Get(srv.url + "/v1/models/late/versions/1")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("late@1 after a failed push: %d, want 404", resp.StatusCode)
		}
	}
	// A worker killed now comes back and loads from its disk cache: the
	// store is not needed for what a worker has fetched before.
	testwait.Until(t, 10*time.Second, func() bool { return readyEverywhere(workers(t, srv.url), 2, "hot@1") })
	victim := workers(t, srv.url).Workers[0]
	if err := syscall.Kill(int(victim.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, func() bool {
		wl := workers(t, srv.url)
		for _, w := range wl.Workers {
			if w.ID == victim.ID && w.PID == victim.PID {
				return false
			}
		}
		return readyEverywhere(wl, 2, "hot@1")
	})
	predictOK("hot")
	srv.stop(t)
}

// Two gateways on one PostgreSQL sharing one bucket (no shared folder):
// a push through A is served through B, whose worker reads the artifact
// from the store, a rollback through B reaches A, and both keep serving
// while PostgreSQL is stopped.
func TestS3TwoGatewaysOneDatabase(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	store := pgtest.URL(t)
	bucket := s3test.Bucket(t, endpoint)
	arts := "s3://" + bucket + "/shared"
	models, pkgs := t.TempDir(), t.TempDir()
	args := func() []string {
		return []string{"--data", t.TempDir(), "--models", models, "--store", store, "--artifacts", arts, "--s3-endpoint", endpoint,
			"--workers", "1", "--shard-size", "1"}
	}
	a := startServer(t, args()...)
	b := startServer(t, args()...)
	defer func() {
		if t.Failed() {
			t.Logf("gateway A:\n%s\ngateway B:\n%s", a.logs, b.logs)
		}
	}()
	v1 := writePackage(t, filepath.Join(pkgs, "v1"), []float64{1, 2}, 3.5)
	if out, stderr, err := sluice(t, "push", v1, "--server", a.url); err != nil {
		t.Fatalf("push v1 through A: %v %q %q", err, out, stderr)
	}
	start := time.Now()
	testwait.Until(t, 30*time.Second, func() bool { v, _ := predictAs(t, b.url); return v == "calc@1" })
	t.Logf("calc@1 pushed through A answered through B after %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(b.logs.String(), `artifact="fetched from `+arts) {
		t.Errorf("B's worker did not fetch calc@1 from %s:\n%s", arts, b.logs)
	}
	v2 := writePackage(t, filepath.Join(pkgs, "v2"), []float64{2, 2}, 4.5)
	if out, stderr, err := sluice(t, "push", v2, "--server", a.url); err != nil {
		t.Fatalf("push v2 through A: %v %q %q", err, out, stderr)
	}
	if out, stderr, err := sluice(t, "deploy", "calc@2", "--server", a.url); err != nil {
		t.Fatalf("deploy calc@2 through A: %v %q %q", err, out, stderr)
	}
	testwait.Until(t, 30*time.Second, func() bool { v, _ := predictAs(t, b.url); return v == "calc@2" })
	start = time.Now()
	if out, stderr, err := sluice(t, "rollback", "calc", "--reason", "e2e", "--server", b.url); err != nil {
		t.Fatalf("rollback through B: %v %q %q", err, out, stderr)
	}
	testwait.Until(t, 30*time.Second, func() bool { v, _ := predictAs(t, a.url); return v == "calc@1" })
	t.Logf("rollback through B: A answered with calc@1 %s after the CLI started", time.Since(start).Round(time.Millisecond))
	// PostgreSQL stopped: both gateways keep serving from their last
	// snapshot, their workers from what they loaded from the bucket.
	pgScript(t, "stop-postgres.sh")
	stopped := true
	defer func() {
		if stopped {
			pgScript(t, "start-postgres.sh")
		}
	}()
	for i := range 20 {
		for _, p := range []*proc{a, b} {
			if v, why := predictAs(t, p.url); v != "calc@1" {
				t.Fatalf("predict %d with PostgreSQL stopped: %q %s", i, v, why)
			}
		}
	}
	pgScript(t, "start-postgres.sh")
	stopped = false
	a.stop(t)
	b.stop(t)
}

// A worker attached without --artifacts fetches through the control plane,
// which reads the bucket: both paths serve, and the gateway's path verifies
// too (a corrupted object is refused by name).
func TestS3AttachedWorkerThroughTheGateway(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t, endpoint)
	arts := "s3://" + bucket + "/gw"
	addr := freeAddr(t)
	hop := newHopFiles(t)
	cmd := exec.Command(binary, append([]string{"worker", "--join", addr, "--id", "far-1", "--cache-dir", t.TempDir()}, hop.workerArgs()...)...)
	var wlog syncLog
	cmd.Stderr = &logWriter{&wlog}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	srv := startServer(t, append([]string{"--data", t.TempDir(), "--models", t.TempDir(), "--control-addr", addr, "--workers", "0",
		"--artifacts", arts, "--s3-endpoint", endpoint}, hop.serverArgs()...)...)
	pkgs := t.TempDir()
	for _, p := range []string{
		namedSyn(t, filepath.Join(pkgs, "warm"), "warm", `{"base":"100us"}`, ""),
		namedSyn(t, filepath.Join(pkgs, "cold"), "cold", `{"base":"130us"}`, "placement: {tier: cold}\n"),
	} {
		if out, stderr, err := sluice(t, "push", p, "--server", srv.url); err != nil {
			t.Fatalf("push %s: %v %s %s\n%s", p, err, out, stderr, srv.logs)
		}
	}
	if status, out, err := postJSON(srv.url+"/v1/models/warm:predict", `{"instances":[{"x":1}],"deadlineMs":5000}`); err != nil || status != 200 {
		t.Fatalf("predict warm: %d %v %s\n%s", status, err, out, srv.logs)
	}
	if !strings.Contains(srv.logs.String(), `version=warm@1`) || strings.Contains(srv.logs.String(), "fetched from") {
		t.Errorf("warm@1 was not fetched through the control plane:\n%s", srv.logs)
	}
	coldSHA := getVersionOf(t, srv.url, "cold", 1).ArtifactSHA256
	s3test.Overwrite(t, endpoint, bucket, "gw/sha256/"+coldSHA, []byte("tampered"))
	status, out, err := postJSON(srv.url+"/v1/models/cold:predict", `{"instances":[{"x":1}],"deadlineMs":5000}`)
	t.Logf("predict cold after the corruption, through the gateway's fetch: %d %s", status, out)
	if err != nil || status != 503 || !strings.Contains(string(out), "artifact sha256 mismatch") || !strings.Contains(string(out), "s3://"+bucket+"/gw/sha256/"+coldSHA) {
		t.Errorf("predict cold: %d %v %s; want 503 naming the mismatch and the object", status, err, out)
	}
	srv.stop(t)
}

// logWriter appends what a process writes to a syncLog.
type logWriter struct{ l *syncLog }

func (w *logWriter) Write(p []byte) (int, error) { w.l.WriteString(string(p)); return len(p), nil }
