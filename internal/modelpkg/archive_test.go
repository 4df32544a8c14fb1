package modelpkg

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

const linearYAML = "name: m\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n"

// file is one entry of a test archive: its content, or only a declared
// size (body nil) when the stream is cut after the header.
type file struct {
	name string
	body []byte
	size int64
}

// archive writes the entries in order; an entry with a nil body gets a
// header of its size and no content, and the archive ends there (a
// reader that tried to read that content would find it truncated).
func archive(t *testing.T, files ...file) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		size := int64(len(f.body))
		if f.body == nil {
			size = f.size
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Size: size, Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if f.body == nil {
			tw.Flush() // the header only: the content never comes
			zw.Close()
			return buf.Bytes()
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Errorf("upload folder not empty: %v %v", left, err)
	}
}

// An upload's artifact goes to a temporary file, hashed on the way, not
// into memory; Close deletes it.
func TestReadTarGzStreamsToDisk(t *testing.T) {
	art := []byte(`{"weights":[[1]],"bias":[0]}`)
	for name, files := range map[string][]file{
		"model.yaml first": {{name: ManifestFile, body: []byte(linearYAML)}, {name: "m.json", body: art}},
		"model.yaml last":  {{name: "pkg/m.json", body: art}, {name: "pkg/model.yaml", body: []byte(linearYAML)}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := ReadTarGz(bytes.NewReader(archive(t, files...)), Limits{MaxBytes: 1 << 20}, dir)
			if err != nil {
				t.Fatal(err)
			}
			want, err := FromFiles("upload", map[string][]byte{ManifestFile: []byte(linearYAML), "m.json": art})
			if err != nil {
				t.Fatal(err)
			}
			if p.Artifact != nil || p.ArtifactSize() != int64(len(art)) || p.ArtifactSHA != want.ArtifactSHA || p.Digest != want.Digest {
				t.Errorf("package %d bytes in memory, size %d, sha %s, digest %s; want none in memory, %d, %s, %s", len(p.Artifact), p.ArtifactSize(), p.ArtifactSHA, p.Digest, len(art), want.ArtifactSHA, want.Digest)
			}
			rc, err := p.OpenArtifact()
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(got, art) {
				t.Errorf("artifact %q, want %q", got, art)
			}
			if left, _ := os.ReadDir(dir); len(left) != 1 || !strings.HasPrefix(left[0].Name(), UploadPrefix) {
				t.Errorf("want one temporary file in the upload folder, have %v", left)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			emptyDir(t, dir)
		})
	}
}

// countReader counts the compressed bytes a reader took.
type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A compression bomb is refused once past RatioFloor, naming its entry,
// long before it is inflated, and leaves nothing on disk.
func TestReadTarGzRefusesCompressionBomb(t *testing.T) {
	zeros := make([]byte, 64<<20)
	data := archive(t, file{name: ManifestFile, body: []byte(linearYAML)}, file{name: "m.json", body: zeros})
	dir := t.TempDir()
	cr := &countReader{r: bytes.NewReader(data)}
	_, err := ReadTarGz(cr, Limits{MaxBytes: 1 << 30}, dir)
	var ae *ArchiveError
	if !errors.As(err, &ae) || !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `entry "m.json": inflates more than 100:1`) {
		t.Fatalf("bomb: %v; want a size error naming m.json and the 100:1 bound", err)
	}
	if cr.n >= len(data)/2 {
		t.Errorf("read %d of %d compressed bytes before refusing", cr.n, len(data))
	}
	emptyDir(t, dir)

	// The inflated total is bounded too, whatever the headers say.
	_, err = ReadTarGz(bytes.NewReader(archive(t, file{name: ManifestFile, body: []byte(linearYAML)}, file{name: "m.json", body: zeros[:2<<20]})), Limits{MaxBytes: 1 << 20}, dir)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `entry "m.json"`) {
		t.Errorf("over the inflated limit: %v", err)
	}
	emptyDir(t, dir)

	// A small file may compress well: below RatioFloor the ratio is not judged.
	p, err := ReadTarGz(bytes.NewReader(archive(t, file{name: ManifestFile, body: []byte(linearYAML)}, file{name: "m.json", body: zeros[:1<<20]})), Limits{MaxBytes: 1 << 30}, dir)
	if err != nil {
		t.Fatalf("1 MiB of zeros: %v", err)
	}
	p.Close()
}

// Files the package does not use are refused from their header: their
// content is never read (here it is missing, so reading it would fail as
// "truncated" instead).
func TestReadTarGzRefusesUnusedFiles(t *testing.T) {
	art := []byte(`{"weights":[[1]],"bias":[0]}`)
	man := file{name: ManifestFile, body: []byte(linearYAML)}
	cases := []struct {
		name  string
		files []file
		want  string
	}{
		{"after model.yaml", []file{man, {name: "golden.json", size: 1 << 30}},
			`entry "golden.json": the package does not use it; an upload holds model.yaml, the artifact "m.json" only`},
		{"between", []file{man, {name: "README.md", body: []byte("hi")}, {name: "m.json", body: art}},
			`entry "README.md": the package does not use it`},
		{"after the artifact", []file{{name: "m.json", body: art}, man, {name: "notes.txt", size: 10}},
			`entry "notes.txt": the package does not use it`},
		{"held before model.yaml", []file{{name: "golden.json", body: []byte("[]")}, {name: "m.json", body: art}, man},
			`entry "golden.json": the package does not use it`},
		{"a third before model.yaml", []file{{name: "a", body: []byte("a")}, {name: "b", body: []byte("b")}, {name: "c", size: 1 << 30}},
			`entry "c": a third file before model.yaml`},
		{"in a subfolder", []file{{name: "pkg/sub/x.bin", size: 1 << 30}},
			`entry "pkg/sub/x.bin": the package does not use it`},
		{"hidden", []file{{name: "._model.yaml", size: 1 << 30}},
			`entry "._model.yaml": the package does not use it`},
		{"outside the top folder", []file{{name: "pkg/model.yaml", body: []byte(linearYAML)}, {name: "other/m.json", size: 1 << 30}},
			`entry "other/m.json": outside the folder "pkg"`},
		{"model.yaml twice", []file{man, man}, `entry "model.yaml" appears twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := ReadTarGz(bytes.NewReader(archive(t, c.files...)), Limits{MaxBytes: 1 << 40}, dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant %s", err, c.want)
			}
			emptyDir(t, dir)
		})
	}
}

// A package without its artifact or without model.yaml says so; the held
// files are deleted.
func TestReadTarGzMissingFiles(t *testing.T) {
	for name, c := range map[string]struct {
		files []file
		want  string
	}{
		"no model.yaml": {[]file{{name: "m.json", body: []byte("{}")}}, "upload: no model.yaml in the package"},
		"no artifact":   {[]file{{name: ManifestFile, body: []byte(linearYAML)}}, `upload/model.yaml: artifact: file "m.json" is not in the package`},
		"bad manifest":  {[]file{{name: "m.json", body: []byte("{}")}, {name: ManifestFile, body: []byte("name: [")}}, "upload/model.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := ReadTarGz(bytes.NewReader(archive(t, c.files...)), Limits{MaxBytes: 1 << 20}, dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %s", err, c.want)
			}
			emptyDir(t, dir)
		})
	}
}

// Leftovers of a crash are deleted at start; other files stay.
func TestRemoveUploads(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{UploadPrefix + "1", UploadPrefix + "2", "keep"} {
		if err := os.WriteFile(dir+"/"+n, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := RemoveUploads(dir); n != 2 || err != nil {
		t.Fatalf("RemoveUploads = %d, %v", n, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 || left[0].Name() != "keep" {
		t.Errorf("left %v", left)
	}
}
