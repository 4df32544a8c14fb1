package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/modelpkg"
	_ "github.com/sluiceml/sluice/internal/runtime/synthetic"
	"github.com/sluiceml/sluice/internal/worker"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// A synthetic version with "memory": its load's RSS growth is reported as
// the version's memory (per replica too) with the worker's budget, and
// unloading it gives the memory back.
func TestMemoryAccountingLoadUnload(t *testing.T) {
	const perReplica = 48 << 20
	const slack = 12 << 20 // other allocations of the test binary meanwhile
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	arts := artifacts{}
	pool := cluster.New(cluster.Config{Artifacts: arts, Join: testJoin, Known: []string{"w1"}, ShardSize: 1, HeartbeatInterval: 20 * time.Millisecond, Logger: log})
	defer pool.Close()
	w := startWorker(t, pool, worker.Config{ID: "w1", Logger: log, MemoryBudget: 3 << 30, MemoryBudgetSource: "test"})

	art := []byte(`{"memory": "48MiB", "loadTime": "1ms"}`)
	sum := sha256.Sum256(art)
	sha := hex.EncodeToString(sum[:])
	arts[sha] = art
	y := "name: big\nruntime: synthetic\nartifact: cost.json\ninput: {schema: i@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\nserving: {replicas: 2, warmupBatches: 0}\n"
	spec, err := modelpkg.Parse("model.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	status := func() *workerpb.WorkerStatus {
		t.Helper()
		ws := pool.Workers()
		if len(ws) != 1 {
			t.Fatalf("workers %+v", ws)
		}
		conn := dialWorker(t, w, ws[0].Address)
		st, err := workerpb.NewWorkerClient(conn).Status(sctx, &workerpb.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	v, _, err := pool.Start(sctx, cluster.VersionSpec{Model: "big", N: 1, Manifest: []byte(y), ArtifactSHA: sha, ArtifactBytes: int64(len(art)), Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	st := status()
	if st.MemoryBudgetBytes != 3<<30 || st.MemoryBudgetSource != "test" {
		t.Errorf("budget %d from %q", st.MemoryBudgetBytes, st.MemoryBudgetSource)
	}
	if len(st.Versions) != 1 {
		t.Fatalf("versions %+v", st.Versions)
	}
	vs := st.Versions[0]
	if !vs.MemoryMeasured || vs.MemoryBytes < 2*perReplica-slack || vs.MemoryBytes > 2*perReplica+slack ||
		vs.ReplicaMemoryBytes < perReplica-slack/2 || vs.ReplicaMemoryBytes > perReplica+slack/2 {
		t.Errorf("version memory %d (per replica %d, measured %v), want about %d (%d)", vs.MemoryBytes, vs.ReplicaMemoryBytes, vs.MemoryMeasured, 2*perReplica, perReplica)
	}
	loaded := st.RssBytes
	if err := v.Close(sctx); err != nil {
		t.Fatal(err)
	}
	after := status()
	if len(after.Versions) != 0 || loaded-after.RssBytes < 2*perReplica-slack {
		t.Errorf("after unload: RSS %d MiB → %d MiB, versions %+v; want it %d MiB lower", loaded>>20, after.RssBytes>>20, after.Versions, 2*perReplica>>20)
	}
	t.Logf("memory %.1f MiB (%.1f MiB per replica), RSS loaded %.1f MiB, after unload %.1f MiB",
		float64(vs.MemoryBytes)/(1<<20), float64(vs.ReplicaMemoryBytes)/(1<<20), float64(loaded)/(1<<20), float64(after.RssBytes)/(1<<20))
}
