package worker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/placement"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	_ "github.com/sluiceml/sluice/internal/runtime/onnx"
	_ "github.com/sluiceml/sluice/internal/runtime/xgboost"
)

// TestMeasureExamples prints the memory the worker's measure gives each
// example model (1 and 4 replicas) and what its unload gives back: the
// calibration of placement.Estimate. It asserts nothing about the figures
// (they depend on the host) and runs with SLUICE_MEASURE=1:
//
//	SLUICE_MEASURE=1 go test ./internal/worker -run TestMeasureExamples -v
func TestMeasureExamples(t *testing.T) {
	if os.Getenv("SLUICE_MEASURE") == "" {
		t.Skip("set SLUICE_MEASURE=1 to measure the examples")
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, ex := range []string{"churn", "iris", "fraud", "mlp", "seq"} {
		p, err := modelpkg.ReadDir("../../examples/" + ex)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 4} {
			var m meter
			mk, before := m.begin()
			srv, _, err := hosting.Start(context.Background(), hosting.Config{ID: ex + "@1", Spec: p.Spec, Runtime: p.Spec.Manifest.Runtime,
				Artifact: p.Artifact, Replicas: n, Logger: log})
			grew, alone := m.end(mk, before)
			if err != nil {
				t.Logf("%s: %v", ex, err)
				break
			}
			_ = srv.Close(context.Background())
			loaded := RSS()
			giveBack()
			after := RSS()
			est := placement.Estimate(p.Spec.Manifest.Runtime, int64(len(p.Artifact)), 0)
			t.Logf("%-6s %-8s artifact %7d B, %d replicas: RSS grew %6.2f MiB (%.2f MiB per replica, %.1f× artifact; alone %v); estimate %.2f MiB per replica; unload gave back %6.2f MiB",
				ex, p.Spec.Manifest.Runtime, len(p.Artifact), n, float64(grew)/(1<<20), float64(grew)/float64(n)/(1<<20),
				float64(grew)/float64(n)/float64(len(p.Artifact)), alone, float64(est)/(1<<20), float64(before+grew-after)/(1<<20))
			_ = loaded
		}
	}
}

// A version's accounted memory: the measure, never below what its owner
// declared (or its artifact's size); the estimate when loads overlapped.
func TestMemoryOf(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name                     string
		grew                     int64
		alone                    bool
		reported                 int64 // -1: the runtime does not say
		replicas                 int
		declared, artifact, want int64
		measured                 bool
	}{
		{"measured above the declared", 12 * mib, true, -1, 1, 8 * mib, 1 * mib, 12 * mib, true},
		{"measured near zero: the declared", 4096, true, -1, 1, 8 * mib, 1 * mib, 8 * mib, true},
		{"undeclared: at least the artifact", 0, true, -1, 1, 0, 3 * mib, 3 * mib, true},
		{"per replica", 4096, true, -1, 3, 8 * mib, 1 * mib, 24 * mib, true},
		{"the runtime's own figure wins", 104 * mib, true, 32 * mib, 1, 32 * mib, 1 * mib, 32 * mib, true},
		{"the runtime's own figure, even when loads overlapped", 104 * mib, false, 30 * mib, 1, 32 * mib, 1 * mib, 30 * mib, true},
		{"overlapped: the declared estimate", 50 * mib, false, -1, 2, 8 * mib, 1 * mib, 16 * mib, false},
	} {
		got, measured := memoryOf(c.grew, c.alone, max(c.reported, 0), c.reported >= 0, c.replicas, c.declared, c.artifact, "synthetic")
		if got != c.want || measured != c.measured {
			t.Errorf("%s: %d MiB measured=%v, want %d MiB measured=%v", c.name, got/mib, measured, c.want/mib, c.measured)
		}
	}
	if got := GoMemoryLimit(96 * mib); got != 160*mib {
		t.Errorf("GoMemoryLimit(96 MiB) = %d MiB, want 160 (64 MiB of room at least)", got/mib)
	}
	if got := GoMemoryLimit(4096 * mib); got != 5120*mib {
		t.Errorf("GoMemoryLimit(4 GiB) = %d MiB, want 5120 (a quarter more)", got/mib)
	}
}
