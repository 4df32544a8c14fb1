package gcfloor

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/testwait"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		live, floor int64
		want        int
	}{
		{"no floor", 10 * mib, 0, 100},
		{"negative floor", 10 * mib, -1, 100},
		{"unknown live heap", 0, 64 * mib, 100},
		{"small heap: target at the floor", 16 * mib, 64 * mib, 300},
		{"uneven: rounded down", 10 * mib, 64 * mib, 540},
		{"live half the floor: GOGC's own 2x", 32 * mib, 64 * mib, 100},
		{"live above half: never below base", 40 * mib, 64 * mib, 100},
		{"live above the floor", 100 * mib, 64 * mib, 100},
		{"nearly empty heap: bounded", 1 << 10, 64 * mib, maxPercent},
		{"huge floor: no overflow", 10 * mib, math.MaxInt64, maxPercent},
	} {
		if got := Percent(tc.live, tc.floor, 100); got != tc.want {
			t.Errorf("%s: Percent(%d, %d) = %d, want %d", tc.name, tc.live, tc.floor, got, tc.want)
		}
	}
}

// gcPercent reads GOGC (setting it is the only way) and leaves it as it was.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// The tuner sets GOGC at start and again after each collection, follows
// the live heap when it grows, and Stop puts the default back.
func TestTunerFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "") // an operator's GOGC would switch it off
	defer debug.SetGCPercent(100)
	runtime.GC()
	tu := Start(1 << 30) // a floor far above this test's heap
	if tu == nil {
		t.Fatal("Start returned nil")
	}
	defer tu.Stop()
	if got := gcPercent(); got != tu.GOGC() || got <= 100 {
		t.Fatalf("GOGC %d after Start (tuner says %d), want above 100", got, tu.GOGC())
	}
	small := tu.GOGC()
	// Hold 256 MiB live: after a collection the floor's GOGC drops.
	hold := make([][]byte, 256)
	for i := range hold {
		hold[i] = make([]byte, 1<<20)
	}
	testwait.UntilNil(t, 20*time.Second, func() error {
		if got := tu.GOGC(); got >= small {
			runtime.GC() // the finalizer runs on its own goroutine
			return fmt.Errorf("GOGC stayed %d with 256 MiB live (was %d)", got, small)
		}
		return nil
	})
	if got := gcPercent(); got != tu.GOGC() {
		t.Errorf("runtime GOGC %d, tuner %d", got, tu.GOGC())
	}
	runtime.KeepAlive(hold)
	tu.Stop()
	if got := gcPercent(); got != 100 {
		t.Errorf("GOGC %d after Stop, want 100", got)
	}
	runtime.GC() // the chain ends: nothing changes GOGC again
	time.Sleep(10 * time.Millisecond)
	if got := gcPercent(); got != 100 {
		t.Errorf("GOGC %d after Stop and a collection, want 100", got)
	}
}

func TestOperatorGOGCWins(t *testing.T) {
	t.Setenv("GOGC", "200")
	if tu := Start(64 << 20); tu != nil {
		tu.Stop()
		t.Fatal("Start tuned with GOGC set")
	}
	var nilTuner *Tuner
	nilTuner.Stop() // no-op
	if nilTuner.GOGC() != 0 {
		t.Error("nil tuner GOGC")
	}
}
