package worker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	_ "github.com/sluiceml/sluice/internal/runtime/synthetic"
	"github.com/sluiceml/sluice/internal/worker"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// mapSource is an object store of artifacts by SHA-256.
type mapSource map[string][]byte

func (m mapSource) Open(_ context.Context, sha string) (io.ReadCloser, int64, error) {
	b := m[sha]
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

// A worker refuses a load its budget cannot hold (what its versions hold,
// measured, plus the load's reservation: here what the artifact declares,
// the manifest declaring nothing) with ResourceExhausted, which is
// not the version's failure: after an unload the same load goes through.
func TestWorkerRefusesLoadsOverItsBudget(t *testing.T) {
	art := []byte(`{"base":"0s","memory":"40MiB"}`)
	sum := sha256.Sum256(art)
	sha := hex.EncodeToString(sum[:])
	w, err := worker.New(worker.Config{ID: "w1", Join: "127.0.0.1:1", ControlTLS: &tls.Config{}, CacheDir: t.TempDir(), MemoryBudget: 100 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Artifacts: mapSource{sha: art}, ArtifactsName: "a map"})
	if err != nil {
		t.Fatal(err)
	}
	// Run owns the worker's connection (its control plane is absent
	// here: registering fails and is retried); the test calls the
	// control service directly.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, time.Second) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	manifest := func(name string) []byte {
		return []byte("name: " + name + "\nruntime: synthetic\nartifact: cost.json\ninput:\n  schema: i@1\n  fields: [{name: x, type: float}]\noutput:\n  schema: o@1\n  fields: [{name: y}]\nserving: {warmupBatches: 0}\n")
	}
	load := func(name string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := w.Load(ctx, &workerpb.LoadRequest{Model: name, Version: 1, Manifest: manifest(name), ArtifactSha256: sha, ArtifactBytes: int64(len(art)), Replicas: 1})
		return err
	}
	for _, name := range []string{"a", "b"} {
		if err := load(name); err != nil {
			t.Fatalf("load %s (40 MiB of 100): %v", name, err)
		}
	}
	err = load("c")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "at its memory budget") {
		t.Fatalf("load c (120 MiB of 100): %v, want ResourceExhausted naming the budget", err)
	}
	st, _ := w.Status(context.Background(), &workerpb.StatusRequest{})
	var used int64
	for _, v := range st.Versions {
		if v.Model == "c" {
			t.Errorf("the refused load is listed: %+v", v)
		}
		used += v.MemoryBytes
	}
	if used > st.MemoryBudgetBytes {
		t.Errorf("versions hold %d MiB of a %d MiB budget", used>>20, st.MemoryBudgetBytes>>20)
	}
	if _, err := w.Unload(context.Background(), &workerpb.UnloadRequest{Model: "a", Version: 1, DrainMs: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := load("c"); err != nil {
		t.Fatalf("load c after a's unload: %v", err)
	}
	for _, name := range []string{"b", "c"} {
		_, _ = w.Unload(context.Background(), &workerpb.UnloadRequest{Model: name, Version: 1, DrainMs: 1000})
	}
}
