package worker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/worker"
)

// A worker given the artifact store reads it directly, not through the
// control plane (whose store here is empty), and refuses a corrupted
// artifact with the store's mismatch error.
func TestWorkerReadsTheStoreDirectly(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	root := t.TempDir()
	store, err := registry.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	pool := cluster.New(cluster.Config{Artifacts: artifacts{}, Join: testJoin, Known: []string{"w1"}, HeartbeatInterval: 20 * time.Millisecond, Logger: log})
	defer pool.Close()
	startWorker(t, pool, worker.Config{ID: "w1", Logger: log, Artifacts: store, ArtifactsName: "the test folder"})

	spec := func(n int, bias string) cluster.VersionSpec {
		art := []byte(`{"weights":[[1,2]],"bias":[` + bias + `],"link":"identity"}`)
		sum := sha256.Sum256(art)
		sha := hex.EncodeToString(sum[:])
		if err := store.Put(t.Context(), sha, bytes.NewReader(art)); err != nil {
			t.Fatal(err)
		}
		y := "name: calc\nruntime: linear\nartifact: model.json\ninput:\n  schema: i@1\n  fields: [{name: x, type: float}, {name: z, type: float}]\noutput:\n  schema: o@1\n  fields: [{name: y}]\n"
		ps, err := modelpkg.Parse("model.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return cluster.VersionSpec{Model: "calc", N: n, Manifest: []byte(y), ArtifactSHA: sha, ArtifactBytes: int64(len(art)), Spec: ps}
	}
	sctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	v, _, err := pool.Start(sctx, spec(1, "0.5"))
	if err != nil {
		t.Fatalf("load from the store: %v", err)
	}
	res, err := v.Submit(sctx, serving.Work{Rows: runtime.Batch{Rows: 1, Cols: 2, Data: []float32{1, 1}}})
	if err != nil || res.Out.Data[0] != 3.5 {
		t.Fatalf("predict: %+v %v", res, err)
	}

	bad := spec(2, "0.25")
	if err := os.WriteFile(filepath.Join(root, "sha256", bad.ArtifactSHA[:2], bad.ArtifactSHA), []byte(`{"weights":[[9,9]],"bias":[0.25],"link":"identity"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = pool.Start(sctx, bad)
	if err == nil || !strings.Contains(err.Error(), "artifact sha256 mismatch") || !strings.Contains(err.Error(), bad.ArtifactSHA) {
		t.Errorf("load of a corrupted artifact = %v; want the store's mismatch naming %s", err, bad.ArtifactSHA)
	}
	// The loaded version is untouched.
	if res, err := v.Submit(sctx, serving.Work{Rows: runtime.Batch{Rows: 1, Cols: 2, Data: []float32{1, 1}}}); err != nil || res.Out.Data[0] != 3.5 {
		t.Errorf("predict after the refused load: %+v %v", res, err)
	}
}
