package registry_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/registry/registrytest"
)

func openSQLite(t *testing.T, dir string) *registry.SQLite {
	t.Helper()
	s, err := registry.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSQLiteConformance(t *testing.T) {
	registrytest.Run(t, func(t *testing.T) registry.Store { return openSQLite(t, t.TempDir()) })
}

// corruptFile overwrites the file of sha in a Dir rooted at root.
func corruptFile(root string) registrytest.Corrupt {
	return func(t *testing.T, sha string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, "sha256", sha[:2], sha), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDirConformance(t *testing.T) {
	registrytest.RunArtifacts(t, func(t *testing.T) (registry.Artifacts, registrytest.Corrupt) {
		root := t.TempDir()
		d, err := registry.NewDir(root)
		if err != nil {
			t.Fatal(err)
		}
		return d, corruptFile(root)
	})
}

// Open keeps the data directory layout sluice has always used:
// sluice.db and artifacts/sha256/<sha[:2]>/<sha>.
func TestOpenLayout(t *testing.T) {
	dir := t.TempDir()
	s := openSQLite(t, dir)
	p := registrytest.Package("fraud", []byte("weights"), nil)
	if _, _, err := s.Publish(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"sluice.db", filepath.Join("artifacts", "sha256", p.ArtifactSHA[:2], p.ArtifactSHA)} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// Publishing identical content again rewrites a lost or corrupted artifact.
func TestPublishAgainRepairsArtifacts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openSQLite(t, dir)
	p := registrytest.Package("churn", []byte("weights"), []byte("{\"x\":1}\n"))
	v, _, err := s.Publish(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := corruptFile(filepath.Join(dir, "artifacts"))
	corrupt(t, p.ArtifactSHA, []byte("weightz"))
	if err := os.Remove(filepath.Join(dir, "artifacts", "sha256", p.ReferenceSHA[:2], p.ReferenceSHA)); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.ReadArtifact(ctx, s, p.ArtifactSHA); err == nil || !strings.Contains(err.Error(), "artifact sha256 mismatch") {
		t.Fatalf("corrupted artifact read: %v", err)
	}
	if _, err := s.File(ctx, "churn", v.N, "drift.reference"); err == nil {
		t.Fatal("lost reference read without error")
	}
	w, created, err := s.Publish(ctx, p)
	if err != nil || created || w.N != v.N {
		t.Fatalf("publish again = %s created=%v, %v; want %s, not created", w.ID(), created, err, v.ID())
	}
	if b, err := registry.ReadArtifact(ctx, s, p.ArtifactSHA); err != nil || !bytes.Equal(b, p.Artifact) {
		t.Errorf("artifact after publishing again: %q, %v", b, err)
	}
	if b, err := s.File(ctx, "churn", v.N, "drift.reference"); err != nil || !bytes.Equal(b, p.Reference) {
		t.Errorf("reference after publishing again: %q, %v", b, err)
	}
}

// Everything survives closing and opening the data directory again.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := registry.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := registrytest.Package("fraud", []byte("weights"), nil)
	v, _, err := s.Publish(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetState(ctx, "fraud", v.N, registry.Ready, "", registry.Timings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPolicy(ctx, registry.Policy{Model: "fraud", Targets: []registry.Target{{Version: 1, Weight: 100}}}, -1); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRollout(ctx, "fraud", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSQLite(t, dir)
	got, err := s.Get(ctx, "fraud", v.N)
	if err != nil || got.State != registry.Ready || got.Digest != p.Digest {
		t.Errorf("after reopening: %+v, %v", got, err)
	}
	if ps, err := s.Policies(ctx, "fraud"); err != nil || len(ps) != 1 {
		t.Errorf("policies after reopening: %+v, %v", ps, err)
	}
	if rs, err := s.Rollouts(ctx); err != nil || len(rs) != 1 {
		t.Errorf("rollouts after reopening: %q, %v", rs, err)
	}
	if b, err := registry.ReadArtifact(ctx, s, p.ArtifactSHA); err != nil || !bytes.Equal(b, p.Artifact) {
		t.Errorf("artifact after reopening: %q, %v", b, err)
	}
	if _, _, err := s.Publish(ctx, registrytest.Package("fraud", []byte("weights 2"), nil)); err != nil {
		t.Fatal(err)
	}
	if vs, _ := s.List(ctx); len(vs) != 2 || vs[1].N != 2 {
		t.Errorf("numbering after reopening: %+v", vs)
	}
}

// A push killed mid-write (kill -9) leaves a temporary file beside the
// artifacts; opening the folder again deletes it and keeps every artifact.
func TestNewDirRemovesPartialWrites(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := registry.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	art := []byte("weights")
	sha := registrytest.SHA(art)
	if err := d.Put(ctx, sha, bytes.NewReader(art)); err != nil {
		t.Fatal(err)
	}
	shard := filepath.Join(root, "sha256", sha[:2])
	partials := []string{filepath.Join(shard, ".tmp-123456"), filepath.Join(root, "sha256", "ff", ".tmp-99")}
	for _, p := range partials {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("half an artif"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err = registry.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range partials {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after NewDir (stat: %v)", p, err)
		}
	}
	if d.Removed() != len(partials) {
		t.Errorf("Removed() = %d, want %d", d.Removed(), len(partials))
	}
	if got, err := registry.ReadArtifact(ctx, d, sha); err != nil || !bytes.Equal(got, art) {
		t.Errorf("the intact artifact after NewDir: %q, %v", got, err)
	}
}

// A sluice.db truncated to nothing (or overwritten) is refused, naming the
// file and the fix, instead of being replaced by an empty registry; with
// InitStore it is moved aside and an empty registry starts. A fresh data
// directory initialises silently.
func TestOpenRefusesDamagedDatabase(t *testing.T) {
	ctx := context.Background()
	for name, damage := range map[string]func(path string) error{
		"truncated":   func(path string) error { return os.Truncate(path, 0) },
		"overwritten": func(path string) error { return os.WriteFile(path, bytes.Repeat([]byte("junk"), 2048), 0o644) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := registry.Open(dir) // fresh: no file yet
			if err != nil {
				t.Fatalf("fresh data directory: %v", err)
			}
			if _, _, err := s.Publish(ctx, registrytest.Package("fraud", []byte("weights"), nil)); err != nil {
				t.Fatal(err)
			}
			s.Close()
			db := filepath.Join(dir, "sluice.db")
			if err := damage(db); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ { // refused every time, not once
				_, err := registry.Open(dir)
				if err == nil || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "--init-store") {
					t.Fatalf("Open of a %s sluice.db = %v; want a refusal naming %s and --init-store", name, err, db)
				}
			}
			s, err = registry.OpenWith(dir, registry.Options{InitStore: true})
			if err != nil {
				t.Fatalf("OpenWith(InitStore): %v", err)
			}
			defer s.Close()
			if vs, err := s.List(ctx); err != nil || len(vs) != 0 {
				t.Errorf("re-initialised registry: List = %v, %v; want empty", vs, err)
			}
			if s.MovedAside() == "" {
				t.Fatal("MovedAside empty after re-initialising")
			}
			if _, err := os.Stat(s.MovedAside()); err != nil {
				t.Errorf("the damaged file was not kept: %v", err)
			}
			if _, _, err := s.Publish(ctx, registrytest.Package("fraud", []byte("weights"), nil)); err != nil {
				t.Errorf("publish after re-initialising: %v", err)
			}
		})
	}
}
