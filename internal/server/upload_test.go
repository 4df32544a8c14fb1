package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sluiceml/sluice/internal/modelpkg"
)

// tarGz is a .tar.gz of the named files, in order.
func tarGz(t *testing.T, files ...[2]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Size: int64(len(f[1])), Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f[1]))
	}
	tw.Close()
	zw.Close()
	return buf.String()
}

const bombYAML = "name: bomb\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n"

func uploadDirEmpty(t *testing.T, dir string) {
	t.Helper()
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Errorf("upload folder holds %v (%v); want it empty", left, err)
	}
}

// A small archive that inflates hugely is refused with 413 naming its
// entry, under the default 512 MiB limit: nothing is published, nothing
// stays on disk.
func TestUploadCompressionBomb(t *testing.T) {
	dir := t.TempDir()
	ts, ctl := newTestServerFS(t, Config{UploadDir: dir}, fstest.MapFS{})
	bomb := tarGz(t, [2]string{"model.yaml", bombYAML}, [2]string{"m.json", strings.Repeat("\x00", 16<<20)})
	r := post(t, ts.URL+"/v1/models/bomb/versions", "application/gzip", bomb, nil)
	if r.status != 413 || r.err.Code != "payload_too_large" || !strings.Contains(r.err.Message, `entry "m.json": inflates more than 100:1`) {
		t.Errorf("bomb (%d compressed bytes): %d %s %q; want 413 naming m.json", len(bomb), r.status, r.err.Code, r.err.Message)
	}
	if vs := ctl.Versions(); len(vs) != 0 {
		t.Errorf("published %v", vs[0].Version.ID())
	}
	uploadDirEmpty(t, dir)
}

// Files the package does not use are refused (422, naming the file).
func TestUploadRefusesUnusedFiles(t *testing.T) {
	dir := t.TempDir()
	ts, _ := newTestServerFS(t, Config{UploadDir: dir}, fstest.MapFS{})
	a := tarGz(t, [2]string{"model.yaml", bombYAML}, [2]string{"golden.json", "[]"}, [2]string{"m.json", `{"weights":[[1]],"bias":[0]}`})
	r := post(t, ts.URL+"/v1/models/bomb/versions", "application/gzip", a, nil)
	if r.status != 422 || r.err.Code != "invalid_package" || !strings.Contains(r.err.Message, `entry "golden.json": the package does not use it`) {
		t.Errorf("unused file: %d %s %q", r.status, r.err.Code, r.err.Message)
	}
	uploadDirEmpty(t, dir)
}

// A published upload leaves no temporary file; its artifact is in the store.
func TestUploadLeavesNoTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	ts, _ := newTestServerFS(t, Config{UploadDir: dir}, fstest.MapFS{})
	p, err := modelpkg.ReadDir(filepath.Join("..", "..", "examples", "churn"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.WriteTarGz(&buf); err != nil {
		t.Fatal(err)
	}
	r := post(t, ts.URL+"/v1/models/churn/versions?wait=30s", "application/gzip", buf.String(), nil)
	if r.status != 201 {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	uploadDirEmpty(t, dir)
}
