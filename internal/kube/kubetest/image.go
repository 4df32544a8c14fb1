package kubetest

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// ExtractEntrypoint copies the entrypoint binary of the image in a
// `docker save`-style tarball (what scripts/build-image.sh writes) to
// dst, so the test kubelet runs the very binary the image holds. It
// returns the image's tags.
func ExtractEntrypoint(tarball, dst string) ([]string, error) {
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var config struct {
		Config struct{ Entrypoint []string } `json:"config"`
	}
	if err := readMember(tarball, "manifest.json", func(r io.Reader) error { return json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&manifest) }); err != nil {
		return nil, err
	}
	if len(manifest) != 1 {
		return nil, fmt.Errorf("%s: %d images in manifest.json, want 1", tarball, len(manifest))
	}
	m := manifest[0]
	if err := readMember(tarball, m.Config, func(r io.Reader) error { return json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&config) }); err != nil {
		return nil, err
	}
	if len(config.Config.Entrypoint) == 0 {
		return nil, fmt.Errorf("%s: the image has no entrypoint", tarball)
	}
	want := strings.TrimPrefix(path.Clean(config.Config.Entrypoint[0]), "/")
	// The last layer holding the file wins, as in a container's root.
	found := false
	for _, layer := range m.Layers {
		err := readMember(tarball, layer, func(r io.Reader) error {
			zr, err := gzip.NewReader(r)
			if err != nil {
				return err
			}
			tr := tar.NewReader(zr)
			for {
				h, err := tr.Next()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				if strings.TrimPrefix(path.Clean(h.Name), "/") != want || h.Typeflag != tar.TypeReg {
					continue
				}
				f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
				if err != nil {
					return err
				}
				if _, err := io.Copy(f, io.LimitReader(tr, 1<<30)); err != nil {
					f.Close()
					return err
				}
				found = true
				return f.Close()
			}
		})
		if err != nil {
			return nil, fmt.Errorf("%s: layer %s: %w", tarball, layer, err)
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: no layer holds the entrypoint /%s", tarball, want)
	}
	return m.RepoTags, nil
}

// readMember calls read with the contents of one member of a tarball.
func readMember(tarball, name string, read func(io.Reader) error) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("%s: no member %s", tarball, name)
		}
		if err != nil {
			return err
		}
		if path.Clean(h.Name) == path.Clean(name) {
			return read(tr)
		}
	}
}
