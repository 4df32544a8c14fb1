package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
)

// columnStarts returns where each of header's column names starts in it.
func columnStarts(t *testing.T, header string, names ...string) []int {
	t.Helper()
	var at []int
	for _, n := range names {
		i := strings.Index(header, n)
		if i < 0 {
			t.Fatalf("header %q lacks %q", header, n)
		}
		at = append(at, i)
	}
	return at
}

// checkAligned fails unless every row has a value starting at each column
// start (after a space) of the header.
func checkAligned(t *testing.T, lines []string, starts []int) {
	t.Helper()
	for _, l := range lines {
		for _, s := range starts[1:] {
			if len(l) <= s || l[s] == ' ' || l[s-1] != ' ' {
				t.Errorf("line %q has no value at column %d:\n%s", l, s, strings.Join(lines, "\n"))
			}
		}
	}
}

func TestWriteWorkers(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	vs := []api.WorkerVersion{
		{Version: "fraud@1", Tier: "hot", State: "ready", ReadyReplicas: 2, MemoryBytes: 120 << 20, MemoryMeasured: true, LastUsed: now.Add(-3 * time.Second), LoadTimeMs: 812.4, Loads: 1},
		{Version: "a-model-with-a-long-name@12", State: "loading", MemoryBytes: 5 << 20, LoadTimeMs: 0},
		{Version: "iris@1", Tier: "warm", State: "ready", ReadyReplicas: 1, MemoryBytes: 1 << 20, MemoryMeasured: true, Loads: 2, Evictions: 1},
	}
	wl := &api.WorkerList{Mode: "workers", Workers: []api.Worker{
		{ID: "worker-1", Address: "127.0.0.1:40123", PID: 4242, State: "ready", RSSBytes: 300 << 20, MemoryBudgetBytes: 4 << 30, MemoryUsedBytes: 126 << 20, Loads: 3, Evictions: 1, LastHeartbeat: now.Add(-400 * time.Millisecond), Versions: vs},
		{ID: "worker-2", Address: "127.0.0.1:40124", PID: 4243, State: "down", Reason: "heartbeat missed", MemoryBudgetBytes: 4 << 30},
	}}
	var b strings.Builder
	if err := writeWorkers(&b, wl, now, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and one line per worker:\n%s", b.String())
	}
	for _, l := range lines {
		if len(l) > 100 {
			t.Errorf("line of %d characters: %q", len(l), l)
		}
	}
	checkAligned(t, lines, columnStarts(t, lines[0], "WORKER", "STATE", "PID", "MEMORY", "RSS", "VERSIONS", "HEARTBEAT"))
	if !strings.Contains(lines[1], "3 (2 ready)") || !strings.Contains(lines[1], "126MiB/4096MiB") || !strings.Contains(lines[1], "400ms ago") || !strings.Contains(lines[2], "down (heartbeat missed)") {
		t.Errorf("table:\n%s", b.String())
	}

	b.Reset()
	if err := writeWorkers(&b, wl, now, true); err != nil {
		t.Fatal(err)
	}
	workers, versions, ok := strings.Cut(strings.TrimRight(b.String(), "\n"), "\n\n")
	if !ok {
		t.Fatalf("wide: no versions table:\n%s", b.String())
	}
	wlines := strings.Split(workers, "\n")
	checkAligned(t, wlines, columnStarts(t, wlines[0], "WORKER", "STATE", "PID", "ADDRESS", "MEMORY", "RSS", "VERSIONS", "LOADS", "EVICTIONS", "HEARTBEAT"))
	vlines := strings.Split(versions, "\n")
	if len(vlines) != 4 {
		t.Fatalf("wide: want a line per version:\n%s", versions)
	}
	checkAligned(t, vlines, columnStarts(t, vlines[0], "WORKER", "VERSION", "TIER", "STATE", "REPLICAS", "QUEUED", "MEMORY", "LAST USE", "LOAD TIME", "LOADS", "EVICTIONS"))
	for _, want := range []string{"fraud@1", "812.4ms", "3s ago", "never", "5.0MiB (estimate)", "127.0.0.1:40123"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("wide lacks %q:\n%s", want, b.String())
		}
	}

	b.Reset()
	if err := writeWorkers(&b, &api.WorkerList{Mode: "in-process"}, now, false); err != nil || !strings.Contains(b.String(), "no workers") {
		t.Errorf("in process: %v %q", err, b.String())
	}
}
