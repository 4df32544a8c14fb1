package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/testwait"
)

// eventsProc is a running `sluice events`: its stdout lines as they come.
type eventsProc struct {
	lines  chan string
	seen   []string   // lines await read
	mu     sync.Mutex // guards stderr
	stderr strings.Builder
}

func (p *eventsProc) errText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// startEvents runs `sluice events ARGS` straight against the server (not
// through the validating proxy, which reads whole answers) and waits
// until it says the stream is open.
func startEvents(t *testing.T, args ...string) *eventsProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"events"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &eventsProc{lines: make(chan string, 1000)}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() {
		defer wg.Done()
		b := make([]byte, 4096)
		for {
			n, err := stderr.Read(b)
			p.mu.Lock()
			p.stderr.Write(b[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		wg.Wait()
		_ = cmd.Wait()
	})
	testwait.Until(t, 30*time.Second, func() bool { return strings.Contains(p.errText(), "following the events of") })
	return p
}

// await returns the first line containing every one of want, failing
// after 20 s.
func (p *eventsProc) await(t *testing.T, want ...string) string {
	t.Helper()
	match := func(l string) bool {
		for _, w := range want {
			if !strings.Contains(l, w) {
				return false
			}
		}
		return true
	}
	for _, l := range p.seen { // a line read while awaiting another
		if match(l) {
			return l
		}
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l := <-p.lines:
			p.seen = append(p.seen, l)
			if match(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("no event line with %q within 20 s; stderr: %s", want, p.errText())
		}
	}
}

// TestEventsAndStats: `sluice events` follows a real server; a weight
// changed with `sluice traffic` arrives as a deployment line and an audit
// line, a version loaded as a version line; `sluice stats` counts the
// requests sent to each version.
func TestEventsAndStats(t *testing.T) {
	data, models, pkgs := t.TempDir(), t.TempDir(), t.TempDir()
	srv := startServer(t, "--data", data, "--models", models)
	if _, stderr, err := sluice(t, "push", writePackage(t, filepath.Join(pkgs, "v1"), []float64{1, 2}, 3.5), "--server", srv.url); err != nil {
		t.Fatalf("push v1: %v %s", err, stderr)
	}
	ev := startEvents(t, "--server", srv.url, "--models", "calc")
	all := startEvents(t, "--server", srv.url, "-o", "json")

	if _, stderr, err := sluice(t, "push", writePackage(t, filepath.Join(pkgs, "v2"), []float64{2, 2}, 4.5), "--server", srv.url); err != nil {
		t.Fatalf("push v2: %v %s", err, stderr)
	}
	ev.await(t, "version", "calc@2 ready")
	ev.await(t, "audit", "calc publish")

	for range 7 {
		predict(t, srv.url, `{"x":1,"z":2}`)
	}
	sent := time.Now()
	if _, stderr, err := sluice(t, "traffic", "calc", "calc@1=70", "calc@2=30", "--reason", "events e2e", "--server", srv.url); err != nil {
		t.Fatalf("traffic: %v %s", err, stderr)
	}
	line := ev.await(t, "deployment", "calc@1 70%", "calc@2 30%", "events e2e")
	// Reported, not asserted (the goal is 2 s from the change to the page).
	t.Logf("deployment event %v after the traffic command returned: %s", time.Since(sent).Round(time.Millisecond), line)
	ev.await(t, "audit", "calc policy", "calc@1 100→70, calc@2 0→30")

	// -o json: one {"id","event","data"} object a line, data the API's.
	for {
		l := all.await(t, `"event":"deployment"`)
		var e struct {
			ID    string              `json:"id"`
			Event string              `json:"event"`
			Data  api.EventDeployment `json:"data"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("json line %q: %v", l, err)
		}
		if e.Data.Model == "calc" && e.Data.Reason == "events e2e" {
			if e.ID == "" || len(e.Data.Weights) != 2 || e.Data.Actor == "" {
				t.Errorf("json event %s", l)
			}
			break
		}
	}

	out, stderr, err := sluice(t, "stats", "calc", "--window", "5m", "-o", "json", "--server", srv.url)
	if err != nil {
		t.Fatalf("stats: %v %s", err, stderr)
	}
	var st api.ModelStats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stats output %q: %v", out, err)
	}
	counts := map[string]int64{}
	for _, v := range st.Versions {
		for _, p := range v.Points {
			counts[v.Version] += p.Count
			if p.P50Ms <= 0 || p.P99Ms < p.P50Ms {
				t.Errorf("%s point %+v", v.Version, p)
			}
		}
	}
	if counts["calc@1"] != 7 || counts["calc@2"] != 0 || st.Window != "5m" {
		t.Errorf("stats %s: want 7 requests of calc@1, none of calc@2", out)
	}
	table, _, err := sluice(t, "stats", "calc", "--server", srv.url)
	if err != nil || !strings.Contains(table, "P99 MS") || !strings.Contains(table, "last 1h") {
		t.Errorf("stats table: %v\n%s", err, table)
	}
	if _, stderr, err := sluice(t, "stats", "calc", "--window", "2m", "--server", srv.url); err == nil || !strings.Contains(stderr, "window") {
		t.Errorf("a 2m window: %v %q, want a 400 naming window", err, stderr)
	}
}

// TestEventsSlowReaderDoesNotBlockDeploys: a client that opens the event
// stream and never reads holds no deploy: hundreds of traffic changes go
// through while its connection is full, and its stream is then dropped
// (a reset event, then the end), not waited for.
func TestEventsSlowReaderDoesNotBlockDeploys(t *testing.T) {
	data, models, pkgs := t.TempDir(), t.TempDir(), t.TempDir()
	srv := startServer(t, "--data", data, "--models", models)
	for i, w := range [][]float64{{1, 2}, {2, 2}} {
		if _, stderr, err := sluice(t, "push", writePackage(t, filepath.Join(pkgs, fmt.Sprint(i)), w, w[0]+w[1]+0.5), "--server", srv.url); err != nil {
			t.Fatalf("push: %v %s", err, stderr)
		}
	}
	// The reader: a raw connection with a small receive buffer that sends
	// the request and never reads.
	// (The buffer is set before the connect, so the window it offers is
	// small from the start.)
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: sluice\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Changes: each a deployment and an audit event of some 300 bytes, far
	// more than the connection and the stream's buffer of 256 events hold.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a publisher that waited would hang here
	defer cancel()
	const changes = 1000
	for i := range changes {
		w := i % 100
		body := fmt.Sprintf(`{"targets":[{"version":1,"weight":%d},{"version":2,"weight":%d}],"reason":"change %d of a long reason that makes the event bigger"}`, 100-w, w, i)
		req, _ := http.NewRequestWithContext(ctx, "PUT", srv.url+"/v1/deployments/calc", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("change %d while a reader does not read: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("change %d: %d", i, resp.StatusCode)
		}
	}
	// Every change is in force, and a new stream opens and gets events.
	out, _, err := sluice(t, "traffic", "calc", "--server", srv.url)
	if err != nil || !strings.Contains(out, "99%") {
		t.Errorf("traffic after %d changes: %v\n%s", changes, err, out)
	}
	fresh := startEvents(t, "--server", srv.url, "--models", "calc")
	if _, _, err := sluice(t, "traffic", "calc", "calc@1=100", "calc@2=0", "--reason", "after", "--server", srv.url); err != nil {
		t.Fatal(err)
	}
	fresh.await(t, "deployment", "after")
	// The reader, reading at last, finds its stream ended, short of the
	// changes: dropped when it fell behind (a reset saying so, if the
	// server's last write got through) or cut when a write waited 10 s.
	// A stream kept open would not end: the read would time out.
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	b, err := io.ReadAll(io.LimitReader(&untilEnd{r: conn}, 64<<20))
	got := string(b)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the slow reader's stream (%d bytes) is still open: it was never dropped", len(got))
	}
	n := strings.Count(got, "event: deployment")
	if n >= changes {
		t.Errorf("the slow reader got all %d deployment events: it was never dropped", n)
	}
	t.Logf("the slow reader got %d of %d deployment events, %d bytes; reset written: %v", n, changes+1, len(got), strings.Contains(got, "fell behind"))
}

// untilEnd reads r until the chunked body's last chunk ("0\r\n\r\n").
type untilEnd struct {
	r    io.Reader
	tail []byte
	done bool
}

func (u *untilEnd) Read(p []byte) (int, error) {
	if u.done {
		return 0, io.EOF
	}
	n, err := u.r.Read(p)
	u.tail = append(u.tail, p[:n]...)
	if len(u.tail) > 16 {
		u.tail = u.tail[len(u.tail)-16:]
	}
	if strings.HasSuffix(string(u.tail), "\r\n0\r\n\r\n") {
		u.done = true
	}
	return n, err
}
