package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/storefile"
)

// MaxArtifactBytes bounds what ReadArtifact reads into memory.
const MaxArtifactBytes int64 = 16 << 30

var shaRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func checkSHA(sha string) error {
	if !shaRE.MatchString(sha) {
		return fmt.Errorf("invalid artifact hash %q", sha)
	}
	return nil
}

// ReadArtifact reads the artifact sha from a, verified against its hash.
// A mismatch is an error saying so; the caller fails that version only.
func ReadArtifact(ctx context.Context, a Artifacts, sha string) ([]byte, error) {
	if err := checkSHA(sha); err != nil {
		return nil, err
	}
	rc, size, err := a.Open(ctx, sha)
	if err != nil {
		return nil, StorageError("read", sha, err)
	}
	defer rc.Close()
	if size > MaxArtifactBytes {
		return nil, fmt.Errorf("artifact sha256:%s is %d bytes, the limit is %d", sha[:12], size, MaxArtifactBytes)
	}
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(size) + bytes.MinRead) // room to see EOF without growing again
	}
	if _, err := buf.ReadFrom(io.LimitReader(rc, MaxArtifactBytes+1)); err != nil {
		return nil, StorageError("read", sha, err)
	}
	if int64(buf.Len()) > MaxArtifactBytes {
		return nil, fmt.Errorf("artifact sha256:%s is larger than the %d-byte limit", sha[:12], MaxArtifactBytes)
	}
	return buf.Bytes(), nil
}

// VerifyingReader returns a reader of rc that hashes what it reads and, at
// the end, returns the mismatch error instead of io.EOF when the content
// does not hash to sha. Implementations of Artifacts wrap their readers in
// it.
func VerifyingReader(rc io.ReadCloser, sha string) io.ReadCloser {
	return &verifying{rc: rc, sha: sha, h: sha256.New()}
}

type verifying struct {
	rc  io.ReadCloser
	sha string
	h   hash.Hash
	err error // sticky: the mismatch, once found
}

func (v *verifying) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.sha {
			v.err = fmt.Errorf("artifact sha256 mismatch: expected %s, stored file hashes to %s (the stored artifact was changed or corrupted; publish the package again)", v.sha, got)
			return n, v.err
		}
	}
	return n, err
}

func (v *verifying) Close() error { return v.rc.Close() }

// Dir is Artifacts in a local folder, content-addressed: the artifact sha
// is the file sha256/<sha[:2]>/<sha> under the root. One server owns the
// folder: NewDir deletes the partial writes it finds there.
type Dir struct {
	root    string
	removed int // partial writes deleted by NewDir
}

// tmpPrefix starts the name of an artifact being written (see Put).
const tmpPrefix = ".tmp-"

// NewDir returns the artifact folder at root, creating it if needed. It
// deletes the temporary files a Put killed mid-write left behind (they are
// never read: an artifact only appears under its hash by rename).
func NewDir(root string) (*Dir, error) {
	if err := os.MkdirAll(filepath.Join(root, "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("registry: create artifact directory: %w", err)
	}
	d := &Dir{root: root}
	if err := d.removePartials(); err != nil {
		return nil, err
	}
	return d, nil
}

// Removed is how many partial writes NewDir deleted.
func (d *Dir) Removed() int { return d.removed }

func (d *Dir) removePartials() error {
	shards, err := os.ReadDir(filepath.Join(d.root, "sha256"))
	if err != nil {
		return fmt.Errorf("registry: read artifact directory: %w", err)
	}
	for _, sh := range shards {
		if !sh.IsDir() {
			continue
		}
		dir := filepath.Join(d.root, "sha256", sh.Name())
		des, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("registry: read artifact directory: %w", err)
		}
		for _, de := range des {
			if !de.Type().IsRegular() || !strings.HasPrefix(de.Name(), tmpPrefix) {
				continue
			}
			if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("registry: delete a partial artifact write: %w", err)
			}
			d.removed++
		}
	}
	return nil
}

func (d *Dir) path(sha string) string {
	return filepath.Join(d.root, "sha256", sha[:2], sha)
}

// Open opens the artifact file; its reader checks ctx on every read.
func (d *Dir) Open(ctx context.Context, sha string) (io.ReadCloser, int64, error) {
	if err := checkSHA(sha); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("read artifact sha256:%s: %w", sha[:12], err)
	}
	f, err := os.Open(d.path(sha))
	if err != nil {
		return nil, 0, StorageError("read", sha, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, StorageError("read", sha, err)
	}
	return VerifyingReader(&ctxFile{ctx: ctx, f: f, sha: sha}, sha), fi.Size(), nil
}

// ctxFile is a file whose reads fail once ctx is done.
type ctxFile struct {
	ctx context.Context
	f   *os.File
	sha string
}

func (c *ctxFile) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, fmt.Errorf("read artifact sha256:%s: %w", c.sha[:12], err)
	}
	n, err := c.f.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = StorageError("read", c.sha, err)
	}
	return n, err
}

func (c *ctxFile) Close() error { return c.f.Close() }

// intact says whether the stored copy of sha is there and hashes to sha.
func (d *Dir) intact(ctx context.Context, sha string) bool {
	rc, _, err := d.Open(ctx, sha)
	if err != nil {
		return false
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err == nil
}

// Put writes the artifact unless an intact copy is there already. It
// writes to a temporary file and renames, so a crash never leaves a
// partial artifact under its hash.
func (d *Dir) Put(ctx context.Context, sha string, r io.Reader) error {
	if err := checkSHA(sha); err != nil {
		return err
	}
	if d.intact(ctx, sha) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("registry: store artifact: %w", err)
	}
	p := d.path(sha)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return StorageError("store", sha, err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), tmpPrefix+"*")
	if err != nil {
		return StorageError("store", sha, err)
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), r); err != nil {
		f.Close()
		return StorageError("store", sha, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sha {
		f.Close()
		return fmt.Errorf("registry: store artifact sha256:%s: the content hashes to %s", sha[:12], got)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return StorageError("store", sha, err)
	}
	if err := f.Close(); err != nil {
		return StorageError("store", sha, err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return StorageError("store", sha, err)
	}
	return nil
}

// Delete removes the artifact file; a missing one is not an error.
func (d *Dir) Delete(ctx context.Context, sha string) error {
	if err := checkSHA(sha); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("registry: delete artifact: %w", err)
	}
	if err := os.Remove(d.path(sha)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return StorageError("delete", sha, err)
	}
	return nil
}

// StorageError turns a failure of artifact storage into an error a client
// may see: its message names the artifact and the problem but no server
// path; the original error is kept as the cause (errors.Is and the log see
// it). op is "read", "store" or "delete". A full disk and any other storage failure
// are Unavailable (503); a missing artifact still wraps fs.ErrNotExist.
// Errors that already carry a code, and context errors, pass through.
func StorageError(op, sha string, err error) error {
	var e *errs.Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	name := sha
	if len(name) > 12 {
		name = name[:12]
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s artifact sha256:%s: %w", op, name, err)
	}
	out := &errs.Error{Code: errs.Unavailable, Err: err}
	switch {
	case storefile.Full(err):
		out.Message = fmt.Sprintf("%s artifact sha256:%s: no space left on the artifact store's disk; free space on the server, then try again", op, name)
		out.RetryAfter = 30 * time.Second
	case errors.Is(err, fs.ErrNotExist):
		out.Message = fmt.Sprintf("%s artifact sha256:%s: the artifact is missing from the artifact store; publish its package again", op, name)
	default:
		why, ok := osReason(err)
		if !ok {
			return err // not a file system error (a hash mismatch): no path to hide
		}
		out.Message = fmt.Sprintf("%s artifact sha256:%s: the artifact store failed (%s); the server log has the details", op, name, why)
		out.RetryAfter = time.Second
	}
	return out
}

// osReason is the system's reason of a file system error without the
// paths *fs.PathError and *os.LinkError carry ("write: input/output
// error"); false when err is none of those.
func osReason(err error) (string, bool) {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error(), true
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + ": " + le.Err.Error(), true
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Error(), true
	}
	return "", false
}
