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

	"gopkg.in/yaml.v3"
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
var ErrTooLarge = errors.New("package exceeds the upload size limit")

// ArchiveError is a problem with an uploaded archive.
type ArchiveError struct {
	Msg    string
	TooBig bool // the size limit was hit
}

// Unwrap lets errors.Is(err, ErrTooLarge) see size-limit failures.
func (e *ArchiveError) Unwrap() error {
	if e.TooBig {
		return ErrTooLarge
	}
	return nil
}

func (e *ArchiveError) Error() string { return "package archive: " + e.Msg }

func archiveErr(format string, args ...any) error {
	return &ArchiveError{Msg: fmt.Sprintf(format, args...)}
}

// ReadTarGz reads an uploaded package archive (.tar.gz) into memory. It
// accepts regular files and folders only; absolute paths, "..", links and
// devices are refused, and so is more than maxBytes of content in all. If
// every file sits under one top folder, that folder is stripped.
func ReadTarGz(r io.Reader, maxBytes int64) (map[string][]byte, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, archiveErr("not a gzip stream: %v (send a .tar.gz of the package folder)", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	var total int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, archiveErr("corrupt tar: %v", err)
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
		clean := path.Clean(name)
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			return nil, archiveErr("entry %q: links are not allowed", name)
		case tar.TypeXGlobalHeader, tar.TypeXHeader:
			continue
		default:
			return nil, archiveErr("entry %q: only regular files and folders are allowed (type %q)", name, string(h.Typeflag))
		}
		if h.Size < 0 || h.Size > maxBytes-total {
			return nil, &ArchiveError{Msg: fmt.Sprintf("entry %q: content exceeds the %d-byte upload limit", name, maxBytes), TooBig: true}
		}
		if _, dup := files[clean]; dup {
			return nil, archiveErr("entry %q appears twice", name)
		}
		b, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil || int64(len(b)) != h.Size {
			return nil, archiveErr("entry %q: truncated", name)
		}
		total += h.Size
		files[clean] = b
	}
	if len(files) == 0 {
		return nil, archiveErr("no files")
	}
	return stripTop(files), nil
}

// stripTop removes a single leading folder shared by every file.
func stripTop(files map[string][]byte) map[string][]byte {
	top := ""
	for name := range files {
		i := strings.IndexByte(name, '/')
		if i < 0 {
			return files
		}
		if top == "" {
			top = name[:i+1]
		} else if !strings.HasPrefix(name, top) {
			return files
		}
	}
	out := make(map[string][]byte, len(files))
	for name, b := range files {
		out[strings.TrimPrefix(name, top)] = b
	}
	return out
}

// WriteTarGz writes the package (model.yaml and its artifact) as a .tar.gz.
func (p *Package) WriteTarGz(w io.Writer) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	files := map[string][]byte{ManifestFile: p.ManifestYAML, p.Spec.Manifest.Artifact: p.Artifact}
	if d := p.Spec.Manifest.Drift; d != nil {
		files[d.Reference] = p.Reference
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
