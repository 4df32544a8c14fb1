package registry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/registry/registrytest"
)

// fullDisk is an artifact store on a full disk: Put fails as os.File.Write
// does when the file system answers ENOSPC, with the temporary file's path
// in the error.
type fullDisk struct {
	registry.Artifacts
	root string
}

func (f fullDisk) Put(ctx context.Context, sha string, r io.Reader) error {
	return &fs.PathError{Op: "write", Path: filepath.Join(f.root, "sha256", sha[:2], ".tmp-4242"), Err: syscall.ENOSPC}
}

// Storage failures reach callers as coded errors whose message names the
// artifact but no server path; the cause stays in the chain for the log.
func TestStorageErrorsCarryNoPath(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "artifacts")
	d, err := registry.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("push on a full disk", func(t *testing.T) {
		s, err := registry.OpenSQLite(filepath.Join(dir, "sluice.db"), fullDisk{d, root})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, _, err = s.Publish(ctx, registrytest.Package("fraud", []byte("weights"), nil))
		e := errs.As(err)
		if e.Code != errs.Unavailable || strings.Contains(e.Message, dir) || !strings.Contains(e.Message, "no space left") {
			t.Errorf("Publish on a full disk = %s %q; want unavailable, no space left, no path", e.Code, e.Message)
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("the cause is lost: %v", err)
		}
		if vs, _ := s.List(ctx); len(vs) != 0 {
			t.Errorf("a version was recorded without its artifact: %v", vs)
		}
	})

	t.Run("missing artifact", func(t *testing.T) {
		art := []byte("weights")
		sha := registrytest.SHA(art)
		if err := d.Put(ctx, sha, bytes.NewReader(art)); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(root, "sha256", sha[:2], sha)); err != nil {
			t.Fatal(err)
		}
		_, err := registry.ReadArtifact(ctx, d, sha)
		if !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), sha[:12]) || !strings.Contains(err.Error(), "missing") {
			t.Errorf("ReadArtifact(missing) = %v; want not exist, naming sha256:%s, without %s", err, sha[:12], dir)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Path, root) {
			t.Errorf("the path is not kept in the cause for the log: %v", err)
		}
	})

	t.Run("mismatch passes through", func(t *testing.T) {
		err := registry.StorageError("read", strings.Repeat("a", 64), errors.New("artifact sha256 mismatch: expected a, stored file hashes to b"))
		if errs.CodeOf(err) != errs.Internal || !strings.Contains(err.Error(), "mismatch") {
			t.Errorf("StorageError(mismatch) = %v (%s)", err, errs.CodeOf(err))
		}
	})
}

// failPut is an artifact store whose Put of one hash fails, after the
// other blobs of the publish were stored.
type failPut struct {
	registry.Artifacts
	sha string
}

func (f failPut) Put(ctx context.Context, sha string, r io.Reader) error {
	if sha == f.sha {
		return &fs.PathError{Op: "write", Path: "/x/.tmp-1", Err: syscall.EIO}
	}
	return f.Artifacts.Put(ctx, sha, r)
}

// A publish that fails after it stored the artifact deletes it, unless a
// version uses it; nothing is recorded.
func TestFailedPublishLeavesNoBytes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "artifacts")
	d, err := registry.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ref := []byte("{\"x\":1}\n")
	s, err := registry.OpenSQLite(filepath.Join(dir, "sluice.db"), failPut{d, registrytest.SHA(ref)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stored := func(sha string) bool {
		_, err := os.Stat(filepath.Join(root, "sha256", sha[:2], sha))
		return err == nil
	}

	p := registrytest.Package("churn", []byte("big weights"), ref)
	if _, _, err := s.Publish(ctx, p); err == nil {
		t.Fatal("Publish succeeded though the reference could not be stored")
	}
	if stored(p.ArtifactSHA) {
		t.Errorf("the artifact of a failed publish stays in the store")
	}
	if vs, _ := s.List(ctx); len(vs) != 0 {
		t.Errorf("a failed publish recorded %v", vs)
	}

	// An artifact that a published version uses stays.
	kept := registrytest.Package("fraud", []byte("shared weights"), nil)
	if _, _, err := s.Publish(ctx, kept); err != nil {
		t.Fatal(err)
	}
	again := registrytest.Package("fraud2", []byte("shared weights"), ref)
	if _, _, err := s.Publish(ctx, again); err == nil {
		t.Fatal("Publish succeeded though the reference could not be stored")
	}
	if !stored(kept.ArtifactSHA) {
		t.Errorf("a failed publish deleted the artifact of fraud@1")
	}
	if b, err := registry.ReadArtifact(ctx, s, kept.ArtifactSHA); err != nil || !bytes.Equal(b, []byte("shared weights")) {
		t.Errorf("fraud@1's artifact: %q, %v", b, err)
	}
}

// stallPut holds the Put of one hash until released and fails another.
type stallPut struct {
	registry.Artifacts
	hold, fail string
	started    chan struct{}
	release    chan struct{}
}

func (s stallPut) Put(ctx context.Context, sha string, r io.Reader) error {
	switch sha {
	case s.hold:
		close(s.started)
		<-s.release
	case s.fail:
		return &fs.PathError{Op: "write", Path: "/x/.tmp-2", Err: syscall.EIO}
	}
	return s.Artifacts.Put(ctx, sha, r)
}

// A failed publish does not delete an artifact that a publish still
// under way has stored and is about to record.
func TestFailedPublishSparesAPublishUnderWay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := registry.NewDir(filepath.Join(dir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	art, refOK, refBad := []byte("shared weights"), []byte("{\"x\":1}\n"), []byte("{\"x\":2}\n")
	sp := stallPut{Artifacts: d, hold: registrytest.SHA(refOK), fail: registrytest.SHA(refBad), started: make(chan struct{}), release: make(chan struct{})}
	s, err := registry.OpenSQLite(filepath.Join(dir, "sluice.db"), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := make(chan error, 1)
	go func() {
		_, _, err := s.Publish(ctx, registrytest.Package("a", art, refOK))
		first <- err
	}()
	<-sp.started // a has stored the artifact and is storing its reference
	if _, _, err := s.Publish(ctx, registrytest.Package("b", art, refBad)); err == nil {
		t.Fatal("b published though its reference could not be stored")
	}
	close(sp.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if b, err := registry.ReadArtifact(ctx, s, registrytest.SHA(art)); err != nil || !bytes.Equal(b, art) {
		t.Errorf("a@1's artifact after b's failed publish: %q, %v", b, err)
	}
}
