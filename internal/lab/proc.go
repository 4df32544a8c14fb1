package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/sluiceml/sluice/internal/api"
)

// server is one `sluice serve` the lab started.
type server struct {
	cmd  *exec.Cmd
	url  string
	line string        // its command line, for the report
	done chan struct{} // closed when the process has exited
	err  error         // its exit, once done is closed
	log  string        // path of its log
}

var servingRE = regexp.MustCompile(`msg=serving addr=(127\.0\.0\.1:\d+)`)

// startServer runs bin serve with args (plus --addr 127.0.0.1:0), its
// output into logPath, and returns once it answers /readyz 200.
func startServer(ctx context.Context, bin, logPath string, args ...string) (*server, error) {
	args = append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logf
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{cmd: cmd, line: "sluice " + strings.Join(args, " "), done: make(chan struct{}), log: logPath}
	addr := make(chan string, 1)
	go func() { // owned by the process: ends when its stderr closes
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := servingRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(logf, stderr)
		s.err = cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	fail := func(err error) (*server, error) {
		s.stop()
		return nil, fmt.Errorf("%w (server log: %s)", err, logPath)
	}
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.done:
		return nil, fmt.Errorf("sluice serve exited at start: %v (log: %s)", s.err, logPath)
	case <-time.After(90 * time.Second):
		return fail(errors.New("sluice serve did not announce its address within 90s"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	if err := s.until(ctx, 120*time.Second, "ready", func(c *http.Client) bool {
		resp, err := c.Get(s.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		return fail(err)
	}
	return s, nil
}

// until calls cond every 200 ms until it holds, the server exits, ctx
// ends or d passes.
func (s *server) until(ctx context.Context, d time.Duration, what string, cond func(*http.Client) bool) error {
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond(c) {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("sluice serve exited before %s: %v", what, s.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("sluice serve: not %s within %v", what, d)
		case <-tick.C:
		}
	}
}

// waitModels waits until GET /v1/models lists at least n models.
func (s *server) waitModels(ctx context.Context, n int) error {
	return s.until(ctx, 5*time.Minute, fmt.Sprintf("listing %d models", n), func(c *http.Client) bool {
		resp, err := c.Get(s.url + "/v1/models")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var l api.ModelList
		return resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&l) == nil && len(l.Models) >= n
	})
}

// waitAnswer waits until one predict call to model answers 2xx.
func (s *server) waitAnswer(ctx context.Context, model, body string) error {
	return s.until(ctx, 2*time.Minute, model+" answering", func(c *http.Client) bool {
		resp, err := c.Post(s.url+"/v1/models/"+model+":predict", "application/json", strings.NewReader(body))
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		return resp.StatusCode/100 == 2
	})
}

// stop sends SIGTERM, waits up to 40 s (its --grace is shorter), then
// kills it.
func (s *server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(40 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
