package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
)

// startOIPServer runs the Python OIP v2 test server (not Sluice) and
// returns its address; it fails, never skips, without python3-grpcio.
func startOIPServer(t *testing.T) string {
	t.Helper()
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import grpc (%v: %s): install Debian's python3-grpcio python3-protobuf", python, err, out)
	}
	cmd := exec.Command(python, "../../internal/runtime/oip/testdata/oipserver/server.py", "--port", "0", "--exit-on-eof")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Scan()
		line <- sc.Text()
		for sc.Scan() {
		}
	}()
	select {
	case l := <-line:
		port, ok := strings.CutPrefix(l, "PORT ")
		if _, err := strconv.Atoi(port); !ok || err != nil {
			t.Fatalf("OIP test server printed %q", l)
		}
		return "127.0.0.1:" + port
	case <-time.After(30 * time.Second):
		t.Fatal("the OIP test server did not start")
	}
	return ""
}

// remoteCalls reads how many ModelInfer calls the test server got for model.
func remoteCalls(t *testing.T, addr, model string) int {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	md, err := inferencepb.NewGRPCInferenceServiceClient(conn).ServerMetadata(t.Context(), &inferencepb.ServerMetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range md.Extensions {
		if v, ok := strings.CutPrefix(e, "calls/"+model+"="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// runtime oip: Sluice in front of an inference server it does not run,
// through the real binary, with its own batching.
func TestOIPRuntimeThroughTheBinary(t *testing.T) {
	addr := startOIPServer(t)
	models := t.TempDir()
	src := "../../internal/runtime/oip/testdata/linear-remote"
	dst := filepath.Join(models, "linear-remote")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"model.yaml", "endpoint.yaml"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.Replace(string(b), "127.0.0.1:8001", addr, 1))
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServer(t, "--data", t.TempDir(), "--models", models)
	before := remoteCalls(t, addr, "linear")
	const n = 64
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := []float64{float64(i) / 10, -0.5, 0.25, 1}
			body := fmt.Sprintf(`{"instances":[{"x0":%g,"x1":%g,"x2":%g,"x3":%g}],"deadlineMs":2000}`, x[0], x[1], x[2], x[3])
			status, out, err := postJSON(srv.url+"/v1/models/linear-remote:predict", body)
			if err != nil || status != 200 {
				errc <- fmt.Errorf("request %d: %d %v %s", i, status, err, out)
				return
			}
			var p api.PredictResponse
			if err := json.Unmarshal(out, &p); err != nil {
				errc <- err
				return
			}
			z := 0.5*x[0] - 1.25*x[1] + 2*x[2] + 0.75*x[3] - 0.3
			if want := 1 / (1 + math.Exp(-z)); math.Abs(p.Predictions[0]["probability"]-want) > 1e-6 {
				errc <- fmt.Errorf("request %d: %v, want %v", i, p.Predictions[0]["probability"], want)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	calls := remoteCalls(t, addr, "linear") - before
	if calls <= 0 || calls >= n {
		t.Errorf("%d concurrent requests reached the remote server as %d calls: Sluice's batcher should have merged them", n, calls)
	}
	t.Logf("%d concurrent 1-row requests → %d ModelInfer calls on the remote server", n, calls)
	srv.stop(t)
}
