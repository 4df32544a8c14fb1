package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/apispec"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/testwait"
)

var binary string

// specCheck validates every answer a server the tests started gives to
// http.DefaultClient (http.Get, http.Post, …) against docs/openapi.yaml:
// a mismatch, or a route the file lacks, fails the test that started the
// server (startServerClient watches its address).
var specCheck *apispec.Transport

func TestMain(m *testing.M) {
	spec, err := apispec.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	specCheck = &apispec.Transport{Spec: spec}
	http.DefaultClient.Transport = specCheck
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "sluice")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build sluice: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if checked, failed := specCheck.Counts(); checked > 0 {
		fmt.Fprintf(os.Stderr, "openapi: %d responses validated against docs/openapi.yaml, %d did not match\n", checked, failed)
	}
	if code == 0 {
		// Every goroutine a test started (log readers, servers, clients)
		// has an owner that stopped it.
		// Idle keep-alive connections of an http.Transport (the object
		// store's client keeps its own pool) are owned by that pool, not
		// leaked: they are ignored, every other goroutine is not.
		if err := goleak.Find(goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// proc is a running `sluice serve`.
type proc struct {
	cmd  *exec.Cmd
	url  string
	logs *syncLog
	done chan error
}

// syncLog is a server's stderr as read so far; tests read it while the
// reader goroutine appends.
type syncLog struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *syncLog) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var addrRE = regexp.MustCompile(`msg=serving addr=(127\.0\.0\.1:\d+)`)

// e2eWorkers is SLUICE_E2E_WORKERS: when set, every server the e2e tests
// start runs its replicas on that many worker processes (`make test` runs
// the suite both ways).
var e2eWorkers = os.Getenv("SLUICE_E2E_WORKERS")

// startServer runs the real binary and waits until /readyz answers 200 (or
// wantReady is false and it answers at all).
func startServer(t *testing.T, args ...string) *proc {
	t.Helper()
	return startServerClient(t, http.DefaultClient, args...)
}

// startServerClient is startServer with hc asking /readyz: a server with
// --tls-cert is https://, and hc trusts its CA (and has a client
// certificate with --tls-client-ca).
func startServerClient(t *testing.T, hc *http.Client, args ...string) *proc {
	t.Helper()
	if e2eWorkers != "" && !hasFlag(args, "--workers") {
		args = append(args, "--workers", e2eWorkers)
	}
	p := startProc(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	testwait.Until(t, 60*time.Second, func() bool {
		resp, err := hc.Get(p.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

// startProc runs the binary with args and waits for the HTTP address its
// log announces (https:// with --tls-cert), not for readiness.
func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, logs: &syncLog{}, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.logs.WriteString(line + "\n")
			if m := addrRE.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case a := <-addr:
		p.url = "http://" + a
		if hasFlag(args, "--tls-cert") {
			p.url = "https://" + a
		}
		if len(args) > 0 && args[0] == "serve" {
			watchSpec(t, p.url)
		}
	case err := <-p.done:
		t.Fatalf("server exited: %v\n%s", err, p.logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("server did not start:\n%s", p.logs)
	}
	return p
}

// watchSpec validates the answers of the server at base until the test
// ends: those http.DefaultClient gets, and (over plain HTTP) those of
// every CLI run by sluice(t, …) with base among its arguments, which is
// pointed at a validating proxy in front of the server instead.
func watchSpec(t *testing.T, base string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(specCheck.Watch(u.Host, func(err error) { t.Errorf("openapi: %v", err) }))
	if u.Scheme != "http" {
		return
	}
	px := specCheck.Proxy(u)
	cliProxies.Store(base, px.URL)
	t.Cleanup(func() {
		cliProxies.Delete(base)
		px.CloseClientConnections()
		px.Close()
	})
}

// cliProxies maps a server's base URL to its validating proxy's.
var cliProxies sync.Map

// viaProxy is args with each server URL (alone or in --server=URL)
// replaced by its validating proxy's.
func viaProxy(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		flag, v, ok := strings.Cut(a, "=")
		if !ok {
			flag, v = "", a
		} else {
			flag += "="
		}
		if px, ok := cliProxies.Load(v); ok {
			out[i] = flag + px.(string)
		}
	}
	return out
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("server exited with %v after SIGTERM:\n%s", err, p.logs)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("server did not stop")
	}
}

// sluice runs the CLI and returns its stdout, stderr and error.
// Its calls to a server the test started pass through the validating
// proxy of watchSpec.
func sluice(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(binary, viaProxy(args)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// writePackage writes a linear model package: y = w·(x, z) + 0.5.
func writePackage(t *testing.T, dir string, w []float64, expect float64) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	art, _ := json.Marshal(map[string]any{"weights": [][]float64{w}, "bias": []float64{0.5}, "link": "identity"})
	manifest := fmt.Sprintf(`name: calc
runtime: linear
artifact: model.json
input:
  schema: calc-input@1
  fields: [{name: x, type: float}, {name: z, type: float}]
output:
  schema: calc-output@1
  fields: [{name: y}]
golden:
  - instance: {x: 1, z: 1}
    expect: {y: %v}
`, expect)
	if err := os.WriteFile(filepath.Join(dir, "model.json"), art, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// uploadPackage posts the package in dir as a .tar.gz straight to the
// server (no CLI, so no local check) and returns the status and body.
func uploadPackage(t *testing.T, url, dir string) (int, []byte) {
	t.Helper()
	p, err := modelpkg.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.WriteTarGz(&buf); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url+"/v1/models/"+p.Spec.Manifest.Name+"/versions", "application/gzip", &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// versionStatus is the status of GET /v1/models/{model}/versions/{n}.
func versionStatus(t *testing.T, url, model string, n int) int {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/v1/models/%s/versions/%d", url, model, n))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getVersion(t *testing.T, url string, n int) api.Version {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/v1/models/calc/versions/%d", url, n))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v api.Version
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func predict(t *testing.T, url, body string) api.PredictResponse {
	t.Helper()
	out, stderr, err := sluice(t, "predict", "calc", body, "--server", url)
	if err != nil {
		t.Fatalf("predict: %v %s", err, stderr)
	}
	var p api.PredictResponse
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("predict output %q: %v", out, err)
	}
	return p
}

func TestEndToEnd(t *testing.T) {
	data := t.TempDir()
	models := t.TempDir() // empty: everything arrives by push
	pkgs := t.TempDir()
	srv := startServer(t, "--data", data, "--models", models)

	// Push v1 over HTTP with the CLI, predict.
	v1 := writePackage(t, filepath.Join(pkgs, "v1"), []float64{1, 2}, 3.5)
	out, stderr, err := sluice(t, "push", v1, "--server", srv.url)
	if err != nil || !strings.Contains(out, "calc@1 published") || !strings.Contains(out, "state=ready") {
		t.Fatalf("push v1: %v %q %q", err, out, stderr)
	}
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@1" || p.Predictions[0]["y"] != 5.5 || p.SchemaVersion != "calc-input@1" {
		t.Fatalf("predict v1: %+v", p)
	}
	// Identical content: same version.
	out, _, err = sluice(t, "push", v1, "--server", srv.url)
	if err != nil || !strings.Contains(out, "calc@1 already published") {
		t.Fatalf("push identical: %v %q", err, out)
	}
	// Publishing v2 does not move traffic; a deployment change does.
	v2 := writePackage(t, filepath.Join(pkgs, "v2"), []float64{2, 2}, 4.5)
	if out, _, err = sluice(t, "push", v2, "--server", srv.url); err != nil || !strings.Contains(out, "calc@2 published") {
		t.Fatalf("push v2: %v %q", err, out)
	}
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@1" {
		t.Fatalf("a push moved traffic: %+v", p)
	}
	if out, _, err = sluice(t, "traffic", "calc", "calc@2=100", "--reason", "v2 checked", "--server", srv.url); err != nil || !targetRE("calc@2", "100%").MatchString(out) {
		t.Fatalf("traffic: %v %q", err, out)
	}
	// Without a model: every model's deployment (GET /v1/deployments).
	if out, _, err = sluice(t, "traffic", "--server", srv.url); err != nil || !strings.Contains(out, "calc  policy v") || !targetRE("calc@2", "100%").MatchString(out) || strings.Contains(out, "calc@1  100%") {
		t.Fatalf("traffic of every model: %v %q", err, out)
	}
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@2" || p.Predictions[0]["y"] != 6.5 {
		t.Fatalf("predict v2: %+v", p)
	}
	before := getVersion(t, srv.url, 2)
	srv.stop(t)

	// Restart: same versions, same hashes, v2 serves.
	srv = startServer(t, "--data", data, "--models", models)
	after := getVersion(t, srv.url, 2)
	if after.ArtifactSHA256 != before.ArtifactSHA256 || after.Digest != before.Digest || after.State != "ready" || !after.Serving {
		t.Fatalf("after restart: %+v, before %+v", after, before)
	}
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@2" {
		t.Fatalf("after restart served by %s", p.ModelVersion)
	}
	srv.stop(t)

	// Corrupt v2's stored artifact: v2 fails with a hash error; the
	// deployment routes to v2 only, so calls say why, pinned v1 still
	// answers, and a rollback puts v1 back.
	path := filepath.Join(data, "artifacts", "sha256", before.ArtifactSHA256[:2], before.ArtifactSHA256)
	if err := os.WriteFile(path, []byte(`{"weights":[[9,9]],"bias":[0.5],"link":"identity"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv = startServer(t, "--data", data, "--models", models)
	bad := getVersion(t, srv.url, 2)
	if bad.State != "failed" || !strings.Contains(bad.Reason, "sha256 mismatch") {
		t.Fatalf("corrupt v2: state %s reason %q", bad.State, bad.Reason)
	}
	if _, stderr, err := sluice(t, "predict", "calc", `{"x":1,"z":2}`, "--server", srv.url); err == nil || !strings.Contains(stderr, "503 not_ready") || !strings.Contains(stderr, "sha256 mismatch") {
		t.Fatalf("calc with its only target corrupt: %v %q", err, stderr)
	}
	if _, stderr, err := sluice(t, "predict", "calc", `{"x":1,"z":2}`, "--version", "2", "--server", srv.url); err == nil || !strings.Contains(stderr, "503 not_ready") {
		t.Fatalf("pinned corrupt v2: %v %q", err, stderr)
	}
	if out, _, err := sluice(t, "predict", "calc", `{"x":1,"z":2}`, "--version", "1", "--server", srv.url); err != nil || !strings.Contains(out, `"modelVersion":"calc@1"`) {
		t.Fatalf("pinned v1: %v %q", err, out)
	}
	if out, stderr, err := sluice(t, "rollback", "calc", "--reason", "v2 artifact corrupt", "--server", srv.url); err != nil || !targetRE("calc@1", "100%").MatchString(out) {
		t.Fatalf("rollback: %v %q %q", err, out, stderr)
	}
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@1" || p.Predictions[0]["y"] != 5.5 {
		t.Fatalf("after rollback: %+v", p)
	}

	// Publishing the same package again repairs the artifact and reloads v2.
	out, _, err = sluice(t, "push", v2, "--server", srv.url)
	if err != nil || !strings.Contains(out, "calc@2 already published") || !strings.Contains(out, "state=ready") {
		t.Fatalf("re-push v2: %v %q", err, out)
	}
	if _, _, err = sluice(t, "traffic", "calc", "calc@2=100", "--server", srv.url); err != nil {
		t.Fatal(err)
	}
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@2" {
		t.Fatalf("after repair served by %s", p.ModelVersion)
	}

	// A golden mismatch: push runs the checks of `sluice check` first and
	// refuses it; nothing is uploaded, no version is made, v2 keeps serving.
	v3 := writePackage(t, filepath.Join(pkgs, "v3"), []float64{3, 3}, 99)
	out, stderr, err = sluice(t, "push", v3, "--server", srv.url)
	if err == nil || strings.Contains(out, "calc@3") || !strings.Contains(stderr, "golden example 0: y = 6.5, expected 99") || !strings.Contains(stderr, "nothing was pushed") {
		t.Fatalf("push golden mismatch: %v %q %q", err, out, stderr)
	}
	// The server runs the same checks before it stores a version: the
	// same package uploaded without the CLI is refused, 422 invalid_package.
	status, body := uploadPackage(t, srv.url, v3)
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), "invalid_package") || !strings.Contains(string(body), "golden example 0: y = 6.5, expected 99") {
		t.Fatalf("upload of a package whose golden example fails: %d %s", status, body)
	}
	if code := versionStatus(t, srv.url, "calc", 3); code != http.StatusNotFound {
		t.Fatalf("a refused package made calc@3 (GET answers %d)", code)
	}
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@2" {
		t.Fatalf("after bad v3 served by %s", p.ModelVersion)
	}
	// A version that never served can be deleted; one that served cannot.
	v3 = writePackage(t, filepath.Join(pkgs, "v3"), []float64{3, 3}, 6.5)
	if out, stderr, err = sluice(t, "push", v3, "--server", srv.url); err != nil || !strings.Contains(out, "calc@3 published") {
		t.Fatalf("push v3: %v %q %q", err, out, stderr)
	}
	if _, stderr, err = sluice(t, "delete", "calc@2", "--server", srv.url); err == nil || !strings.Contains(stderr, "calc@2 has served") {
		t.Fatalf("delete of a version that served: %v %q", err, stderr)
	}
	if out, stderr, err = sluice(t, "delete", "calc@3", "--reason", "never used", "--server", srv.url); err != nil || !strings.Contains(out, "calc@3 deleted") {
		t.Fatalf("delete calc@3: %v %q %q", err, out, stderr)
	}
	out, _, err = sluice(t, "models", "--server", srv.url)
	if err != nil || !strings.Contains(out, "calc@2") || !strings.Contains(out, "2:ready") || strings.Contains(out, "3:") {
		t.Fatalf("models after deleting calc@3: %v %q", err, out)
	}
	if out, _, err = sluice(t, "history", "calc", "--server", srv.url); err != nil || !strings.Contains(out, "calc@3 deleted") {
		t.Fatalf("history lacks the delete: %v %q", err, out)
	}
	if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@2" {
		t.Fatalf("after deleting calc@3 served by %s", p.ModelVersion)
	}
	srv.stop(t)
}

// TestServeDefault runs `sluice serve` with only a data dir: it serves the
// built-in examples, and the README's request answers as documented.
func TestServeDefault(t *testing.T) {
	srv := startServer(t, "--data", t.TempDir())
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.url+"/v1/models/fraud:predict",
		strings.NewReader(`{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"}],"deadlineMs":50}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "req-91")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"predictions":[{"riskScore":0.8455931}],"modelVersion":"fraud@1","schemaVersion":"fraud-input@3","requestId":"req-91"}`
	if strings.TrimSpace(string(body)) != want {
		t.Fatalf("got  %s\nwant %s", body, want)
	}
	out, _, err := sluice(t, "models", "--server", srv.url)
	for _, m := range []string{"fraud@1", "iris@1", "churn@1"} {
		if err != nil || !strings.Contains(out, m) {
			t.Fatalf("models lacks %s: %v %q", m, err, out)
		}
	}
	srv.stop(t)
}

// TestONNXExampleThroughTheBinary serves the examples folder (mlp included)
// with --onnxruntime-lib and predicts the mlp example's first golden row.
func TestONNXExampleThroughTheBinary(t *testing.T) {
	lib := os.Getenv("SLUICE_ONNXRUNTIME_LIB")
	if lib == "" {
		t.Fatal("SLUICE_ONNXRUNTIME_LIB is not set: run the tests with `make test`, which fetches ONNX Runtime (scripts/fetch-onnxruntime.sh)")
	}
	srv := startServer(t, "--data", t.TempDir(), "--models", "../../examples", "--onnxruntime-lib", lib)
	var golden []struct {
		Instance map[string]float64 `json:"instance"`
		Expect   map[string]float64 `json:"expect"`
	}
	b, err := os.ReadFile("../../examples/mlp/golden.json")
	if err != nil || json.Unmarshal(b, &golden) != nil || len(golden) == 0 {
		t.Fatalf("golden.json: %v", err)
	}
	inst, _ := json.Marshal(golden[0].Instance)
	out, stderr, err := sluice(t, "predict", "mlp", string(inst), "--server", srv.url)
	if err != nil {
		t.Fatalf("predict mlp: %v %s", err, stderr)
	}
	var p api.PredictResponse
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.ModelVersion != "mlp@1" {
		t.Fatalf("predict mlp: %q", out)
	}
	if got, want := p.Predictions[0]["probability"], golden[0].Expect["probability"]; math.Abs(got-want) > 1e-5 {
		t.Fatalf("mlp probability %v, torch says %v", got, want)
	}
	// The sequence example: token rows of different lengths in one request.
	out, stderr, err = sluice(t, "predict", "seq", `{"instances":[{"tokens":[5,17,3]},{"tokens":[9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9]}]}`, "--server", srv.url)
	if err != nil || !strings.Contains(out, `"modelVersion":"seq@1"`) || strings.Count(out, `"score"`) != 2 {
		t.Fatalf("predict seq: %v %q %s", err, out, stderr)
	}
	srv.stop(t)
}
