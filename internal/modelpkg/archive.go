package modelpkg

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/storefile"
)

// MaxArchiveEntries bounds the number of entries of an uploaded package.
const MaxArchiveEntries = 64

// ReadDir reads the package in dir: model.yaml and the artifact it names.
func ReadDir(dir string) (*Package, error) {
	return ReadFS(os.DirFS(dir), ".", dir)
}

// ReadFS reads the package in folder dir of fsys; display names the folder
// in messages.
func ReadFS(fsys fs.FS, dir, display string) (*Package, error) {
	manPath := filepath.Join(display, ManifestFile)
	man, err := readLimited(fsys, path.Join(dir, ManifestFile), manPath, MaxManifestBytes)
	if err != nil {
		return nil, err
	}
	spec, err := Parse(manPath, man)
	if err != nil {
		return nil, err
	}
	art, err := fs.ReadFile(fsys, path.Join(dir, spec.Manifest.Artifact))
	if err != nil {
		return nil, &Error{File: manPath, Problems: []Problem{{Path: "artifact", Message: fmt.Sprintf("cannot read %q: %v", spec.Manifest.Artifact, errors.Unwrap(err))}}}
	}
	files := map[string][]byte{ManifestFile: man, spec.Manifest.Artifact: art}
	if d := spec.Manifest.Drift; d != nil {
		ref, err := fs.ReadFile(fsys, path.Join(dir, d.Reference))
		if err != nil {
			return nil, &Error{File: manPath, Problems: []Problem{{Path: "drift.reference", Message: fmt.Sprintf("cannot read %q: %v", d.Reference, errors.Unwrap(err))}}}
		}
		files[d.Reference] = ref
	}
	return FromFiles(display, files)
}

func readLimited(fsys fs.FS, name, display string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: not found: a model package is a folder with model.yaml and the artifact", display)
		}
		return nil, fmt.Errorf("%s: %w", display, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", display, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than the %d-byte limit", display, limit)
	}
	return b, nil
}

// Packages lists the package folders of root: root itself when it holds a
// model.yaml (a single package), else the folders directly under it that
// hold one, sorted. A folder with neither gives an empty list, no error.
func Packages(fsys fs.FS, root string) ([]string, error) {
	if _, err := fs.Stat(fsys, path.Join(root, ManifestFile)); err == nil {
		return []string{root}, nil
	}
	ents, err := fs.ReadDir(fsys, root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := path.Join(root, e.Name())
		if _, err := fs.Stat(fsys, path.Join(p, ManifestFile)); err == nil {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Fingerprint summarises the files of the package folder dir: every
// file's path, size and modification time, not its content. It changes when
// a file is added, removed or rewritten, so a poll can skip reading and
// hashing packages that did not change.
func Fingerprint(fsys fs.FS, dir string) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%q %d %d\n", p, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// NameOf returns the model name a manifest declares, read leniently (the
// manifest may be invalid otherwise), or "" when it names none that is valid.
// It lets a broken package be reported under its model's name.
func NameOf(manifest []byte) string {
	var m struct {
		Name string `yaml:"name"`
	}
	if yaml.Unmarshal(manifest, &m) != nil || !nameRE.MatchString(m.Name) {
		return ""
	}
	return m.Name
}

// ErrTooLarge is wrapped by archive errors about the size limit.
// ErrTooLarge is wrapped by archive errors about the size limits: the
// inflated total and the compression ratio.
var ErrTooLarge = errors.New("package exceeds the upload size limit")

// ArchiveError is a problem with an uploaded archive.
type ArchiveError struct {
	Msg    string
	TooBig bool  // a size limit was hit (inflated total or compression ratio)
	Err    error // the cause, when reading the stream failed
}

// Unwrap lets errors.Is(err, ErrTooLarge) see size-limit failures and
// errors.As see the cause of a failed read (a *http.MaxBytesError).
func (e *ArchiveError) Unwrap() []error {
	var out []error
	if e.TooBig {
		out = append(out, ErrTooLarge)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

func (e *ArchiveError) Error() string { return "package archive: " + e.Msg }

func archiveErr(format string, args ...any) error {
	return &ArchiveError{Msg: fmt.Sprintf(format, args...)}
}

// Compression bounds of an upload (see Limits).
const (
	// DefaultMaxRatio is the largest inflated/compressed ratio accepted.
	// Real model files compress far less (xgboost JSON about 4:1, ONNX
	// weights about 1.1:1); a 1000:1 stream is a file of zeros.
	DefaultMaxRatio = 100
	// RatioFloor is how many inflated bytes are read before the ratio is
	// judged: small files (model.yaml, tiny models) may compress better.
	RatioFloor = 4 << 20
)

// Limits bound what ReadTarGz inflates.
type Limits struct {
	// MaxBytes bounds the inflated content of the files read, in all.
	MaxBytes int64
	// MaxRatio bounds inflated bytes per compressed byte read so far, once
	// more than RatioFloor bytes are inflated (0: DefaultMaxRatio).
	MaxRatio int64
}

// UploadPrefix starts the name of every temporary file ReadTarGz writes;
// a server may delete such files left in its upload folder by a crash.
const UploadPrefix = "sluice-upload-"

// ReadTarGz reads an uploaded package archive (.tar.gz) from r and returns
// the package, parsed and validated. It streams: model.yaml is read into
// memory (at most MaxManifestBytes), the artifact and the drift reference
// are written to temporary files in dir while they are hashed, so memory
// stays small whatever the archive holds; Close the package to delete them
// (ReadTarGz deletes them itself when it fails).
//
// Only the files the package uses are read: model.yaml, the artifact it
// names and its drift reference. Any other file is refused from its
// header, before its content is inflated. As model.yaml may come after
// the files it names, at most two files are held before it; a third is
// refused. Regular files and folders only; absolute paths, "..", links and
// devices are refused, and so are more than lim.MaxBytes inflated bytes in
// all and a compression ratio beyond lim.MaxRatio. If every file sits under
// one top folder, that folder is stripped.
func ReadTarGz(r io.Reader, lim Limits, dir string) (p *Package, err error) {
	if lim.MaxRatio <= 0 {
		lim.MaxRatio = DefaultMaxRatio
	}
	cr := &countingReader{r: r}
	zr, err := gzip.NewReader(cr)
	if err != nil {
		return nil, &ArchiveError{Msg: fmt.Sprintf("not a gzip stream: %v (send a .tar.gz of the package folder)", err), Err: err}
	}
	defer zr.Close()
	u := &upload{lim: lim, in: cr, dir: dir, held: map[string]*spooled{}}
	defer func() {
		if err != nil {
			u.removeAll()
		}
	}()
	tr := tar.NewReader(zr)
	top, files := "", 0
	for n := 0; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &ArchiveError{Msg: fmt.Sprintf("corrupt tar: %v", err), Err: err}
		}
		if n >= MaxArchiveEntries {
			return nil, archiveErr("more than %d entries", MaxArchiveEntries)
		}
		name := h.Name
		if strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
			return nil, archiveErr("entry %q: absolute paths are not allowed", name)
		}
		for _, part := range strings.Split(name, "/") {
			if part == ".." {
				return nil, archiveErr("entry %q: \"..\" is not allowed", name)
			}
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader, tar.TypeXHeader:
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			return nil, archiveErr("entry %q: links are not allowed", name)
		default:
			return nil, archiveErr("entry %q: only regular files and folders are allowed (type %q)", name, string(h.Typeflag))
		}
		clean := path.Clean(name)
		if files == 0 {
			if i := strings.IndexByte(clean, '/'); i >= 0 {
				top = clean[:i+1]
			}
		}
		files++
		if !strings.HasPrefix(clean, top) {
			return nil, archiveErr("entry %q: outside the folder %q that holds the package's first file", name, strings.TrimSuffix(top, "/"))
		}
		if err := u.entry(tr, h, name, strings.TrimPrefix(clean, top)); err != nil {
			return nil, err
		}
	}
	if files == 0 {
		return nil, archiveErr("no files")
	}
	return u.pkg()
}

// upload is the state of one ReadTarGz.
type upload struct {
	lim      Limits
	in       *countingReader // compressed bytes read so far
	dir      string
	inflated int64 // content bytes read so far
	manifest []byte
	spec     *Spec
	held     map[string]*spooled // package name -> its temporary file
}

// spooled is one file written to a temporary file while hashed.
type spooled struct {
	path string
	size int64
	sha  string
}

const uploadDisplay = "upload/" + ManifestFile

// entry reads one regular file entry named rel in the package.
func (u *upload) entry(tr *tar.Reader, h *tar.Header, name, rel string) error {
	if rel == ManifestFile {
		if u.manifest != nil {
			return archiveErr("entry %q appears twice", name)
		}
		if h.Size > MaxManifestBytes {
			return archiveErr("entry %q: model.yaml is %d bytes, the limit is %d", name, h.Size, MaxManifestBytes)
		}
		if err := u.room(name, h.Size); err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil || int64(len(b)) != h.Size {
			return &ArchiveError{Msg: fmt.Sprintf("entry %q: truncated", name), Err: err}
		}
		u.inflated += h.Size
		spec, err := Parse(uploadDisplay, b)
		if err != nil {
			return err
		}
		u.manifest, u.spec = b, spec
		for held := range u.held {
			if !u.uses(held) {
				return u.unused(held)
			}
		}
		return nil
	}
	if _, dup := u.held[rel]; dup {
		return archiveErr("entry %q appears twice", name)
	}
	if u.spec != nil && !u.uses(rel) {
		return u.unused(name)
	}
	if u.spec == nil {
		// Before model.yaml nobody knows which files are used; a package
		// uses two besides it at most.
		if strings.Contains(rel, "/") || strings.HasPrefix(rel, ".") {
			return u.unused(name)
		}
		if len(u.held) == 2 {
			return archiveErr("entry %q: a third file before model.yaml; a package holds model.yaml, its artifact and its drift reference only (put model.yaml first: sluice push does)", name)
		}
	}
	if err := u.room(name, h.Size); err != nil {
		return err
	}
	s, err := u.spool(tr, name, h.Size)
	if err != nil {
		return err
	}
	u.held[rel] = s
	return nil
}

// uses says whether the package's model.yaml names the file rel.
func (u *upload) uses(rel string) bool {
	m := u.spec.Manifest
	return rel == m.Artifact || (m.Drift != nil && rel == m.Drift.Reference)
}

func (u *upload) unused(name string) error {
	used := fmt.Sprintf("%s, the artifact", ManifestFile)
	if u.spec != nil {
		used = fmt.Sprintf("%s, the artifact %q", ManifestFile, u.spec.Manifest.Artifact)
		if d := u.spec.Manifest.Drift; d != nil {
			used += fmt.Sprintf(" and the drift reference %q", d.Reference)
		}
	} else {
		used += " and the drift reference it names"
	}
	return archiveErr("entry %q: the package does not use it; an upload holds %s only (sluice push sends just those; with tar, name them: tar -czf pkg.tar.gz -C DIR model.yaml ARTIFACT)", name, used)
}

// room refuses an entry whose declared size would pass the inflated total.
func (u *upload) room(name string, size int64) error {
	if size < 0 || size > u.lim.MaxBytes-u.inflated {
		return &ArchiveError{Msg: fmt.Sprintf("entry %q: %d bytes inflated would exceed the %d-byte upload limit (%d bytes read before it)", name, size, u.lim.MaxBytes, u.inflated), TooBig: true}
	}
	return nil
}

// spool copies size bytes of the entry to a temporary file, hashing them
// and checking the compression ratio as they come.
func (u *upload) spool(r io.Reader, name string, size int64) (*spooled, error) {
	f, err := os.CreateTemp(u.dir, UploadPrefix+"*")
	if err != nil {
		return nil, spoolErr(err)
	}
	s := &spooled{path: f.Name()}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(s.path)
		}
	}()
	h := sha256.New()
	w := io.MultiWriter(f, h)
	buf := make([]byte, 32<<10)
	for s.size < size {
		chunk := buf
		if rest := size - s.size; rest < int64(len(chunk)) {
			chunk = chunk[:rest]
		}
		n, rerr := r.Read(chunk)
		if n > 0 {
			if _, err := w.Write(chunk[:n]); err != nil {
				return nil, spoolErr(err)
			}
			s.size += int64(n)
			u.inflated += int64(n)
			if u.inflated > RatioFloor && u.inflated > u.lim.MaxRatio*u.in.n {
				return nil, &ArchiveError{TooBig: true, Msg: fmt.Sprintf("entry %q: inflates more than %d:1 (%d bytes from %d compressed bytes so far); a model package does not compress like that, the archive is refused as a compression bomb", name, u.lim.MaxRatio, u.inflated, u.in.n)}
			}
		}
		if rerr == io.EOF && s.size < size {
			return nil, archiveErr("entry %q: truncated", name)
		}
		if rerr != nil && rerr != io.EOF {
			return nil, &ArchiveError{Msg: fmt.Sprintf("entry %q: truncated: %v", name, rerr), Err: rerr}
		}
	}
	if err := f.Close(); err != nil {
		return nil, spoolErr(err)
	}
	s.sha = hex.EncodeToString(h.Sum(nil))
	ok = true
	return s, nil
}

// spoolErr is a failure to write an upload to the server's disk: the
// server's fault, 503, without the temporary file's path.
func spoolErr(err error) error {
	why := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		why = pe.Op + ": " + pe.Err.Error()
	}
	e := &errs.Error{Code: errs.Unavailable, Err: err, RetryAfter: time.Second,
		Message: fmt.Sprintf("the upload could not be written to the server's disk (%s); the server log has the details", why)}
	if storefile.Full(err) {
		e.Message = "no space left on the server's disk for the upload; free space on the server, then try again"
		e.RetryAfter = 30 * time.Second
	}
	return e
}

func (u *upload) removeAll() {
	for _, s := range u.held {
		os.Remove(s.path)
	}
}

// pkg builds the package once the archive is read.
func (u *upload) pkg() (*Package, error) {
	if u.spec == nil {
		return nil, &Error{File: "upload", Problems: []Problem{{Message: "no model.yaml in the package"}}}
	}
	m := u.spec.Manifest
	art, ok := u.held[m.Artifact]
	if !ok {
		return nil, &Error{File: uploadDisplay, Problems: []Problem{{Path: "artifact", Message: fmt.Sprintf("file %q is not in the package", m.Artifact)}}}
	}
	p := &Package{Spec: u.spec, ManifestYAML: u.manifest, ArtifactSHA: art.sha, artifactPath: art.path, artifactSize: art.size}
	if d := m.Drift; d != nil {
		ref, ok := u.held[d.Reference]
		if !ok {
			return nil, &Error{File: uploadDisplay, Problems: []Problem{{Path: "drift.reference", Message: fmt.Sprintf("file %q is not in the package", d.Reference)}}}
		}
		p.ReferenceSHA, p.referencePath, p.referenceSize = ref.sha, ref.path, ref.size
	}
	p.Digest = digest(u.manifest, p.ArtifactSHA+p.ReferenceSHA)
	return p, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// WriteTarGz writes the package as a .tar.gz: model.yaml first, then the
// artifact and the drift reference (the only files an upload may hold).
func (p *Package) WriteTarGz(w io.Writer) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: ManifestFile, Mode: 0o644, Size: int64(len(p.ManifestYAML)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(p.ManifestYAML); err != nil {
		return err
	}
	add := func(name string, size int64, open func() (io.ReadCloser, error)) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		rc, err := open()
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(tw, rc)
		return err
	}
	if err := add(p.Spec.Manifest.Artifact, p.ArtifactSize(), p.OpenArtifact); err != nil {
		return err
	}
	if d := p.Spec.Manifest.Drift; d != nil {
		if err := add(d.Reference, p.ReferenceSize(), p.OpenReference); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// RemoveUploads deletes the temporary files of uploads (UploadPrefix) that
// a crash left in dir, and returns how many it deleted. A server calls it
// at start, before it accepts uploads into dir.
func RemoveUploads(dir string) (int, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read upload folder: %w", err)
	}
	n := 0
	for _, de := range des {
		if !de.Type().IsRegular() || !strings.HasPrefix(de.Name(), UploadPrefix) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("delete a partial upload: %w", err)
		}
		n++
	}
	return n, nil
}
