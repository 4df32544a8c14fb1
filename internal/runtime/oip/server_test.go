package oip

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluiceml/sluice/internal/oip/inferencepb"
)

// python is the interpreter that sees Debian's python3-grpcio and
// python3-protobuf (a pyenv python3 on PATH would not).
const python = "/usr/bin/python3"

// The test server's linear model (testdata/oipserver/server.py).
var (
	weights = []float64{0.5, -1.25, 2.0, 0.75}
	bias    = -0.3
)

// formula is what the test server's linear model computes for row x.
func formula(x []float32) float64 {
	z := bias
	for i, v := range x {
		z += weights[i] * float64(v)
	}
	return 1 / (1 + math.Exp(-z))
}

// oipServer is a running testdata/oipserver/server.py.
type oipServer struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// startServer starts the Python OIP v2 server as a subprocess, killed when
// the test ends. It fails (never skips) when python3-grpcio is missing.
func startServer(t testing.TB) *oipServer {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import grpc and protobuf (%v: %s): the oip tests need Debian's python3-grpcio python3-protobuf (apt-get install python3-grpcio python3-protobuf)",
			python, err, strings.TrimSpace(string(out)))
	}
	cmd := exec.Command(python, filepath.Join("testdata", "oipserver", "server.py"), "--port", "0", "--exit-on-eof")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, pw := io.Pipe() // not cmd.StdoutPipe: Wait must not race the reader
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the OIP test server: %v", err)
	}
	s := &oipServer{cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() { // drain until the process exits
		}
	}()
	go func() {
		cmd.Wait()
		pw.Close()
		close(s.done)
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		<-s.done
	})
	select {
	case line, ok := <-lines:
		port, found := strings.CutPrefix(line, "PORT ")
		if !ok || !found {
			t.Fatalf("the OIP test server did not print its port (first line %q)", line)
		}
		if _, err := strconv.Atoi(port); err != nil {
			t.Fatalf("the OIP test server printed %q", line)
		}
		s.addr = "127.0.0.1:" + port
	case <-time.After(30 * time.Second):
		t.Fatal("the OIP test server did not print its port within 30s")
	}
	return s
}

// kill ends the server and waits until it is gone.
func (s *oipServer) kill(t testing.TB) {
	t.Helper()
	s.cmd.Process.Kill()
	<-s.done
}

// endpoint is an artifact for model on s.
func (s *oipServer) endpoint(model, input, output string) []byte {
	return fmt.Appendf(nil, "address: %s\nmodel: %s\ninput: %s\noutput: %s\ntimeout: 10s\n", s.addr, model, input, output)
}

// stats returns the server's counters of ModelInfer calls and rows for a model.
func (s *oipServer) stats(t testing.TB, model string) (calls, rows int) {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := inferencepb.NewGRPCInferenceServiceClient(conn).ServerMetadata(ctx, &inferencepb.ServerMetadataRequest{})
	if err != nil {
		t.Fatalf("server metadata: %v", err)
	}
	for _, e := range md.GetExtensions() {
		k, v, _ := strings.Cut(e, "=")
		n, _ := strconv.Atoi(v)
		switch k {
		case "calls/" + model:
			calls = n
		case "rows/" + model:
			rows = n
		}
	}
	return calls, rows
}
