package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/testwait"
)

// gogcPercent reads go_gc_gogc_percent from a server's /metrics.
func gogcPercent(t *testing.T, url string) float64 {
	t.Helper()
	v, ok := metricSample(t, url, "go_gc_gogc_percent")
	if !ok {
		t.Fatal("/metrics has no go_gc_gogc_percent")
	}
	return v
}

// workerCmdline is the command line (NUL-separated) of the one worker of
// the server at url.
func workerCmdline(t *testing.T, url string) string {
	t.Helper()
	wl := workers(t, url)
	if len(wl.Workers) != 1 {
		t.Fatalf("workers: %+v", wl)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(wl.Workers[0].PID)) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The GC floor (--gc-floor, serve's default 64MiB): serve raises GOGC
// above Go's 100 while its live heap is small, --gc-floor 0 leaves 100,
// an operator's GOGC wins, workers get the floor only when serve's flag
// is set, and a bad size stops the start naming the flag.
func TestGCFloor(t *testing.T) {
	body := `{"instances":[{"amount":800,"accountAgeDays":91,"declines5m":3,"country":"US"}]}`
	busy := func(url string) { // garbage, so that collections happen
		for range 20 {
			_, _, _ = postJSON(url+"/v1/models/fraud:predict", body)
		}
	}
	t.Run("default", func(t *testing.T) {
		srv := startServer(t, "--data", t.TempDir(), "--workers", "0")
		testwait.Until(t, 30*time.Second, func() bool { busy(srv.url); return gogcPercent(t, srv.url) > 100 })
		srv.stop(t)
	})
	t.Run("off", func(t *testing.T) {
		srv := startServer(t, "--data", t.TempDir(), "--workers", "0", "--gc-floor", "0")
		busy(srv.url)
		if g := gogcPercent(t, srv.url); g != 100 {
			t.Errorf("GOGC %v with --gc-floor 0, want 100", g)
		}
		srv.stop(t)
	})
	t.Run("operator's GOGC", func(t *testing.T) {
		t.Setenv("GOGC", "50")
		srv := startServer(t, "--data", t.TempDir(), "--workers", "0")
		busy(srv.url)
		if g := gogcPercent(t, srv.url); g != 50 {
			t.Errorf("GOGC %v with GOGC=50 in the environment, want 50", g)
		}
		if !strings.Contains(srv.logs.String(), "GC floor off: GOGC is set in the environment") {
			t.Errorf("no log line saying GOGC wins:\n%s", srv.logs)
		}
		srv.stop(t)
	})
	t.Run("workers", func(t *testing.T) {
		srv := startServer(t, "--data", t.TempDir(), "--workers", "1", "--shard-size", "1", "--gc-floor", "32MiB")
		if cmdline := workerCmdline(t, srv.url); !strings.Contains(cmdline, "\x00--gc-floor\x0032MiB\x00") {
			t.Errorf("worker started without --gc-floor 32MiB: %q", cmdline)
		}
		srv.stop(t)
	})
	t.Run("workers keep theirs off by default", func(t *testing.T) {
		srv := startServer(t, "--data", t.TempDir(), "--workers", "1", "--shard-size", "1")
		if cmdline := workerCmdline(t, srv.url); strings.Contains(cmdline, "--gc-floor") {
			t.Errorf("worker started with a floor serve was not asked to pass: %q", cmdline)
		}
		srv.stop(t)
	})
	for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--gc-floor", "12"}, {"worker", "--join", "127.0.0.1:1", "--gc-floor", "-1MiB"}} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), `--gc-floor "`+args[len(args)-1]+`"`) || !strings.Contains(string(out), "0 turns the floor off") {
			t.Errorf("sluice %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
}
