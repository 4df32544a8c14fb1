package synthetic

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/runtime"
)

// rss is this process's resident set size in bytes.
func rss(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm: RSS is not measurable here")
	}
	var size, res int64
	if _, err := fmt.Sscan(string(b), &size, &res); err != nil {
		t.Fatal(err)
	}
	return res * int64(os.Getpagesize())
}

// A model with "memory" holds that much resident memory from Load to
// Close; Close gives it back at once (an unmapped mapping, no GC needed).
func TestMemoryIsHeldAndGivenBack(t *testing.T) {
	const mem = 64 << 20
	const slack = 8 << 20 // the test binary's own allocations meanwhile
	before := rss(t)
	m, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "mem@1"}, []byte(`{"memory": "64MiB"}`))
	if err != nil {
		t.Fatal(err)
	}
	loaded := rss(t)
	if loaded-before < mem-slack {
		t.Fatalf("RSS grew by %d bytes at load, want about %d", loaded-before, mem)
	}
	if got := m.(runtime.MemoryReporter).MemoryBytes(); got != mem {
		t.Errorf("MemoryBytes() = %d, want %d (the runtime's own figure placement counts)", got, mem)
	}
	if !strings.Contains(m.Info().Detail, "memory 64MiB") {
		t.Errorf("Info().Detail = %q, want the memory named", m.Info().Detail)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	after := rss(t)
	if got := m.(runtime.MemoryReporter).MemoryBytes(); got != 0 {
		t.Errorf("MemoryBytes() after Close = %d, want 0", got)
	}
	if loaded-after < mem-slack {
		t.Fatalf("RSS fell by %d bytes at Close, want about %d (before %d, loaded %d, after %d)", loaded-after, mem, before, loaded, after)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	t.Logf("RSS before %d MiB, loaded %d MiB, after Close %d MiB", before>>20, loaded>>20, after>>20)
}

// Load takes loadTime, and gives up when ctx ends first. No clock is
// asserted: a cancelled ctx must end a 10-minute load (the test binary's
// timeout would catch one that waited).
func TestLoadTimeHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Runtime{}.Load(ctx, runtime.Spec{Name: "slow@1"}, []byte(`{"loadTime": "10m", "memory": "1MiB"}`))
		done <- err
	}()
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Load after cancel = %v, want context.Canceled", err)
	}
	m, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "quick@1"}, []byte(`{"loadTime": "1ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if d := m.(*Model).Cost().LoadTime; d != time.Millisecond {
		t.Fatalf("LoadTime = %v", d)
	}
}
