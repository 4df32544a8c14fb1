package modelpkg

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"testing"
)

// FuzzParse: any model.yaml is either a valid spec or an *Error, never a panic.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/fraud.good.yaml", "testdata/churn.good.yaml", "testdata/wrong-type.bad.yaml", "testdata/golden-misfit.bad.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("name: &a x\nruntime: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := Parse("model.yaml", data)
		if err == nil && (spec == nil || spec.Schema == nil) {
			t.Fatal("nil spec without error")
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
		}
	})
}

func tarGz(entries ...tar.Header) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		h := h
		_ = tw.WriteHeader(&h)
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// FuzzReadTarGz: any upload is read within limits or refused, never a panic.
func FuzzReadTarGz(f *testing.F) {
	f.Add(tarGz(tar.Header{Name: "model.yaml", Size: 3, Typeflag: tar.TypeReg, Mode: 0o644}))
	f.Add(tarGz(tar.Header{Name: "pkg/", Typeflag: tar.TypeDir, Mode: 0o755}, tar.Header{Name: "pkg/a", Size: 10, Typeflag: tar.TypeReg, Mode: 0o644}))
	f.Add(tarGz(tar.Header{Name: "../evil", Size: 1, Typeflag: tar.TypeReg, Mode: 0o644}))
	f.Add(tarGz(tar.Header{Name: "link", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}))
	f.Add([]byte("not gzip"))
	// A valid package, model.yaml last, so the fuzzer starts from the
	// paths that spool, parse and hash.
	var pkg bytes.Buffer
	zw := gzip.NewWriter(&pkg)
	tw := tar.NewWriter(zw)
	for _, e := range [][2]string{{"p/m.json", `{"weights":[[1]],"bias":[0]}`}, {"p/model.yaml", linearYAML}} {
		tw.WriteHeader(&tar.Header{Name: e[0], Size: int64(len(e[1])), Typeflag: tar.TypeReg, Mode: 0o644})
		tw.Write([]byte(e[1]))
	}
	tw.Close()
	zw.Close()
	f.Add(pkg.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p, err := ReadTarGz(bytes.NewReader(data), Limits{MaxBytes: 1 << 16}, dir)
		if err == nil {
			if p.ArtifactSize()+p.ReferenceSize()+int64(len(p.ManifestYAML)) > 1<<16 {
				t.Fatalf("%d bytes accepted over a %d limit", p.ArtifactSize()+p.ReferenceSize(), 1<<16)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("temporary files left behind: %v (err %v)", left, err)
		}
	})
}

func TestReadTarGzRefuses(t *testing.T) {
	cases := map[string][]byte{
		"absolute": tarGz(tar.Header{Name: "/etc/model.yaml", Size: 1, Typeflag: tar.TypeReg, Mode: 0o644}),
		"dotdot":   tarGz(tar.Header{Name: "a/../../model.yaml", Size: 1, Typeflag: tar.TypeReg, Mode: 0o644}),
		"symlink":  tarGz(tar.Header{Name: "model.yaml", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}),
		"hardlink": tarGz(tar.Header{Name: "model.yaml", Linkname: "x", Typeflag: tar.TypeLink}),
		"device":   tarGz(tar.Header{Name: "dev", Typeflag: tar.TypeChar}),
		"too big":  tarGz(tar.Header{Name: "model.json", Size: 2000, Typeflag: tar.TypeReg, Mode: 0o644}),
		"not gzip": []byte("plain"),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := ReadTarGz(bytes.NewReader(data), Limits{MaxBytes: 1000}, dir); err == nil {
				t.Fatal("accepted")
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}
}
