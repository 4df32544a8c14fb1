package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/placement"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	_ "github.com/sluiceml/sluice/internal/runtime/onnx"
	_ "github.com/sluiceml/sluice/internal/runtime/synthetic"
	_ "github.com/sluiceml/sluice/internal/runtime/xgboost"
)

// TestMeasureExamples measures what the worker's meter gives a load and
// what its unload gives back. A synthetic package that holds a known amount
// of resident memory per replica (outside the Go heap, every page touched)
// must measure as that much, alone, at 1 and 4 replicas, and give it back
// when closed. Then every example model must load and be measured alone; its
// figures — the calibration of placement.Estimate, host-dependent (an RSS
// delta can be near zero when the allocator reuses pages) — are logged:
//
//	go test ./internal/worker -run TestMeasureExamples -v
func TestMeasureExamples(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const mib = 1 << 20
	const perReplica = 24 * mib
	const slack = 8 * mib // the test binary's own allocations meanwhile
	synth, err := modelpkg.Parse("model.yaml", []byte("name: held\nruntime: synthetic\nartifact: cost.json\n"+
		"input: {schema: i@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\nserving: {warmupBatches: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	synthArt := []byte(`{"memory": "24MiB"}`)
	for _, n := range []int{1, 4} {
		grew, alone, gaveBack := measureLoad(t, log, "held@1", synth, synthArt, n)
		want := int64(n) * perReplica
		if !alone || grew < want-slack || grew > want+slack {
			t.Errorf("synthetic %d × 24 MiB: measured %.1f MiB (alone %v), want %d ± %d MiB alone", n, float64(grew)/mib, alone, want/mib, slack/mib)
		}
		if gaveBack < want-slack {
			t.Errorf("synthetic %d × 24 MiB: its unload gave back %.1f MiB, want at least %d MiB", n, float64(gaveBack)/mib, (want-slack)/mib)
		}
	}
	for _, ex := range []string{"churn", "iris", "fraud", "mlp", "seq"} {
		p, err := modelpkg.ReadDir("../../examples/" + ex)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 4} {
			grew, alone, gaveBack := measureLoad(t, log, ex+"@1", p.Spec, p.Artifact, n)
			if !alone {
				t.Errorf("%s, %d replicas: measured as overlapping another load, but it loaded alone", ex, n)
			}
			est := placement.Estimate(p.Spec.Manifest.Runtime, int64(len(p.Artifact)), 0)
			t.Logf("%-6s %-8s artifact %7d B, %d replicas: RSS grew %6.2f MiB (%.2f MiB per replica, %.1f× artifact); estimate %.2f MiB per replica; unload gave back %6.2f MiB",
				ex, p.Spec.Manifest.Runtime, len(p.Artifact), n, float64(grew)/mib, float64(grew)/float64(n)/mib,
				float64(grew)/float64(n)/float64(len(p.Artifact)), float64(est)/mib, float64(gaveBack)/mib)
		}
	}
}

// measureLoad starts spec with n replicas between the meter's begin and end,
// as a worker's load does, then closes it: the growth measured, whether it
// was the load's alone, and the RSS its unload gave back.
func measureLoad(t *testing.T, log *slog.Logger, id string, spec *modelpkg.Spec, art []byte, n int) (grew int64, alone bool, gaveBack int64) {
	t.Helper()
	var m meter
	mk, before := m.begin()
	srv, _, err := hosting.Start(context.Background(), hosting.Config{ID: id, Spec: spec, Runtime: spec.Manifest.Runtime,
		Artifact: art, Replicas: n, Logger: log})
	grew, alone = m.end(mk, before)
	if err != nil {
		t.Fatalf("%s, %d replicas: %v", id, n, err)
	}
	loaded := RSS()
	if err := srv.Close(context.Background()); err != nil {
		t.Fatalf("%s: close: %v", id, err)
	}
	giveBack()
	return grew, alone, loaded - RSS()
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
