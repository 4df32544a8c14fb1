package jobio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// errNotExist is fs.ErrNotExist, wrapped by every "no such file or
// object" error of a store.
var errNotExist = fs.ErrNotExist

// Location is a parsed job input or output URI.
type Location struct {
	URI    string // as given
	Scheme string // "file" or "s3"
	// Path is the file's path relative to the jobs dir (slash-separated,
	// cleaned, never "..": Resolve refuses those) for "file"; the object
	// key for "s3".
	Path   string
	Bucket string // "s3" only
}

// ParseURI parses a job URI: "file:REL" or "file:///ABS" (a file in the
// jobs dir: jobsDir is needed to turn an absolute path into one relative
// to it) or "s3://BUCKET/KEY". Every refusal names the URI and the fix.
func ParseURI(uri, jobsDir string) (Location, error) {
	switch {
	case strings.HasPrefix(uri, "file:"):
		return parseFile(uri, jobsDir)
	case strings.HasPrefix(uri, "s3://"):
		u, err := url.Parse(uri)
		if err != nil {
			return Location{}, fmt.Errorf("uri %q: %v; write s3://BUCKET/KEY", uri, err)
		}
		key := strings.TrimPrefix(u.Path, "/")
		if u.Host == "" || key == "" || strings.HasSuffix(key, "/") {
			return Location{}, fmt.Errorf("uri %q: an s3 URI names a bucket and an object key; write s3://BUCKET/KEY", uri)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return Location{}, fmt.Errorf("uri %q: an s3 URI takes no user, query or fragment; write s3://BUCKET/KEY", uri)
		}
		for _, part := range strings.Split(key, "/") {
			if part == ".." || part == "." {
				return Location{}, fmt.Errorf("uri %q: key segment %q is refused; write the key without . or .. segments", uri, part)
			}
		}
		return Location{URI: uri, Scheme: "s3", Bucket: u.Host, Path: key}, nil
	default:
		return Location{}, fmt.Errorf("uri %q: unknown scheme; write file:PATH (a file in the jobs dir) or s3://BUCKET/KEY", uri)
	}
}

func parseFile(uri, jobsDir string) (Location, error) {
	p := strings.TrimPrefix(uri, "file:")
	if strings.HasPrefix(p, "//") {
		// file://HOST/PATH: only an empty host (file:///abs) or localhost.
		rest := p[2:]
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return Location{}, fmt.Errorf("uri %q: no path; write file:NAME (relative to the jobs dir) or file:///ABSOLUTE/PATH inside it", uri)
		}
		if host := rest[:i]; host != "" && host != "localhost" {
			return Location{}, fmt.Errorf("uri %q: host %q is refused: file URIs name this server's jobs dir; write file:NAME", uri, host)
		}
		p = rest[i:]
	}
	if dec, err := url.PathUnescape(p); err == nil {
		p = dec
	}
	if p == "" {
		return Location{}, fmt.Errorf("uri %q: no path; write file:NAME (relative to the jobs dir)", uri)
	}
	if strings.ContainsRune(p, 0) || strings.Contains(p, `\`) {
		return Location{}, fmt.Errorf("uri %q: a NUL or backslash in the path is refused; write file:NAME with / separators", uri)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return Location{}, fmt.Errorf("uri %q: \"..\" is refused: job files live in the jobs dir; write the path relative to it without \"..\"", uri)
		}
	}
	if path.IsAbs(p) {
		if jobsDir == "" {
			return Location{}, fmt.Errorf("uri %q: no jobs dir is set (--jobs-dir), so no file URI is allowed; start the server with --jobs-dir DIR", uri)
		}
		absDir, err := filepath.Abs(jobsDir)
		if err != nil {
			return Location{}, fmt.Errorf("uri %q: jobs dir %q: %v", uri, jobsDir, err)
		}
		rel, err := filepath.Rel(absDir, filepath.Clean(filepath.FromSlash(p)))
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return Location{}, fmt.Errorf("uri %q: %s is outside the jobs dir %s; put the file in the jobs dir and write file:NAME", uri, p, absDir)
		}
		p = filepath.ToSlash(rel)
	}
	p = path.Clean(p)
	if p == "." {
		return Location{}, fmt.Errorf("uri %q: names the jobs dir itself; write file:NAME of a file in it", uri)
	}
	return Location{URI: uri, Scheme: "file", Path: p}, nil
}

// Object is one readable input: streamed (Read) or read at offsets
// (ReadAt, for Parquet's footer and row groups and for resuming at a
// chunk's byte offset), of a known Size.
type Object interface {
	io.Reader
	io.ReaderAt
	io.Closer
	Size() int64
}

// ObjectStore is where job files live: the jobs dir (LocalStore) or an
// S3 bucket (the registry's s3 client, plugged in by the runner's
// session). Keys are Location.Path.
type ObjectStore interface {
	// Open opens key for reading; a missing key is an error wrapping
	// fs.ErrNotExist that names the key.
	Open(ctx context.Context, key string) (Object, error)
	// Parts returns the part store of the output at key: the chunks'
	// committed parts and the final assembled output.
	Parts(ctx context.Context, key string) (PartStore, error)
}

// PartStore holds an output's parts. Commit is atomic: after it returns
// nil the part is there whole; a crash before leaves no part by that name
// (at most a stale temporary, removed by CleanStale). On S3 a part is an
// object under KEY.parts/ and Publish a multipart upload of them in order.
type PartStore interface {
	// Commit writes part name through write and commits it.
	Commit(ctx context.Context, name string, write func(io.Writer) error) error
	// Committed lists the committed parts' names, sorted.
	Committed(ctx context.Context) ([]string, error)
	// OpenPart opens a committed part.
	OpenPart(ctx context.Context, name string) (io.ReadCloser, error)
	// CleanStale removes parts written but never committed.
	CleanStale(ctx context.Context) error
	// Publish writes the final output through write and commits it
	// atomically (a reader never sees half an output).
	Publish(ctx context.Context, write func(io.Writer) error) error
	// RemoveAll removes every part (once the output is published and its
	// job recorded done: nothing needs them again).
	RemoveAll(ctx context.Context) error
}

// LocalStore is an ObjectStore over the jobs dir. It opens the dir as an
// os.Root: every open resolves inside it, and a path or symlink that
// leads out of it is refused by construction (the kernel walk of
// os.Root, not a string check).
type LocalStore struct {
	dir  string
	root *os.Root
}

// OpenLocal opens the jobs dir.
func OpenLocal(dir string) (*LocalStore, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("jobs dir %q: %v; create it or pass an existing directory to --jobs-dir", dir, err)
	}
	return &LocalStore{dir: dir, root: r}, nil
}

// Close closes the jobs dir.
func (s *LocalStore) Close() error { return s.root.Close() }

type localObject struct {
	*os.File
	size int64
}

func (o localObject) Size() int64 { return o.size }

func (s *LocalStore) refuse(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file:%s: no such file in the jobs dir %s; put it there first: %w", key, s.dir, err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
		return fmt.Errorf("file:%s: leads out of the jobs dir %s (a symlink or path outside it) and is refused; copy the file into the jobs dir: %w", key, s.dir, err)
	}
	return fmt.Errorf("file:%s: %w", key, err)
}

// Open opens key (a path relative to the jobs dir).
func (s *LocalStore) Open(_ context.Context, key string) (Object, error) {
	f, err := s.root.Open(key)
	if err != nil {
		return nil, s.refuse(key, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, s.refuse(key, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("file:%s: not a regular file; name a file in the jobs dir", key)
	}
	return localObject{f, st.Size()}, nil
}

// Parts returns the parts of the output at key: KEY.parts/ in the jobs dir.
func (s *LocalStore) Parts(_ context.Context, key string) (PartStore, error) {
	dir := key + ".parts"
	if err := s.root.MkdirAll(dir, 0o755); err != nil {
		return nil, s.refuse(dir, err)
	}
	return &localParts{s: s, dir: dir, out: key}, nil
}

type localParts struct {
	s   *LocalStore
	dir string
	out string
}

const tmpSuffix = ".tmp"

func (p *localParts) writeAtomic(name, tmp string, write func(io.Writer) error) error {
	f, err := p.s.root.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return p.s.refuse(tmp, err)
	}
	if err := write(f); err != nil {
		f.Close()
		p.s.root.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		p.s.root.Remove(tmp)
		return p.s.refuse(tmp, err)
	}
	if err := f.Close(); err != nil {
		p.s.root.Remove(tmp)
		return p.s.refuse(tmp, err)
	}
	// The rename is the commit.
	if err := p.s.root.Rename(tmp, name); err != nil {
		return p.s.refuse(name, err)
	}
	return p.syncDir(path.Dir(name))
}

func (p *localParts) syncDir(dir string) error {
	d, err := p.s.root.Open(dir)
	if err != nil {
		return p.s.refuse(dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return p.s.refuse(dir, err)
	}
	return nil
}

func (p *localParts) Commit(_ context.Context, name string, write func(io.Writer) error) error {
	if strings.ContainsAny(name, `/\`) || strings.HasSuffix(name, tmpSuffix) {
		return fmt.Errorf("part name %q: a plain file name without %s is needed", name, tmpSuffix)
	}
	full := p.dir + "/" + name
	return p.writeAtomic(full, full+"."+randomHex()+tmpSuffix, write)
}

// randomHex names a temporary of its own: two runners writing the same
// part at once (one whose lease was lost and the one that took it) each
// rename a whole file, and the last rename stands.
func randomHex() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (p *localParts) list() (committed, stale []string, err error) {
	d, err := p.s.root.Open(p.dir)
	if err != nil {
		return nil, nil, p.s.refuse(p.dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, nil, p.s.refuse(p.dir, err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, tmpSuffix) {
			stale = append(stale, n)
		} else {
			committed = append(committed, n)
		}
	}
	sortStrings(committed)
	return committed, stale, nil
}

func (p *localParts) Committed(context.Context) ([]string, error) {
	c, _, err := p.list()
	return c, err
}

func (p *localParts) OpenPart(_ context.Context, name string) (io.ReadCloser, error) {
	f, err := p.s.root.Open(p.dir + "/" + name)
	if err != nil {
		return nil, p.s.refuse(p.dir+"/"+name, err)
	}
	return f, nil
}

func (p *localParts) CleanStale(context.Context) error {
	_, stale, err := p.list()
	if err != nil {
		return err
	}
	for _, n := range stale {
		if err := p.s.root.Remove(p.dir + "/" + n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return p.s.refuse(p.dir+"/"+n, err)
		}
	}
	return nil
}

// Publish writes the output through a temporary of its own (KEY.RANDOM.tmp
// beside KEY), so two runners assembling the same output at once (two
// processes that both saw the last chunk done) each rename a whole file.
func (p *localParts) Publish(_ context.Context, write func(io.Writer) error) error {
	return p.writeAtomic(p.out, p.out+"."+randomHex()+tmpSuffix, write)
}

func (p *localParts) RemoveAll(context.Context) error {
	if err := p.s.root.RemoveAll(p.dir); err != nil {
		return p.s.refuse(p.dir, err)
	}
	return nil
}
