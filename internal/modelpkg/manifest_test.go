package modelpkg

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	_ "github.com/sluiceml/sluice/internal/runtime/oip"
	_ "github.com/sluiceml/sluice/internal/runtime/xgboost"
)

// Each testdata/*.bad.yaml starts with "# want: <substring of the error>".
func TestManifestFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	if len(files) < 10 {
		t.Fatalf("only %d testdata files", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := Parse(filepath.Base(f), data)
			if strings.HasSuffix(f, ".good.yaml") {
				if err != nil {
					t.Fatalf("good file rejected: %v", err)
				}
				if spec.Schema.Width() == 0 || len(spec.OutputNames) == 0 {
					t.Fatalf("empty spec")
				}
				return
			}
			first, _, _ := strings.Cut(string(data), "\n")
			want, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				t.Fatalf("bad file lacks a '# want:' line")
			}
			if err == nil {
				t.Fatalf("accepted; want error %q", want)
			}
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, want)
			}
		})
	}
}

func TestDefaultsAndFeatures(t *testing.T) {
	data, _ := os.ReadFile("testdata/fraud.good.yaml")
	spec, err := Parse("fraud.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	s := spec.Manifest.Serving
	if s.Replicas != 1 || s.MaxQueueInstances != DefaultMaxQueueInstances || s.MaxBatchDelay.Duration != 0 || s.DefaultDeadline.String() != "50ms" {
		t.Errorf("serving defaults: %+v", s)
	}
	got := strings.Join(spec.Schema.Features(), ",")
	if got != "log1p(amount),accountAgeDays,declines5m,country=US,country=GB,country=DE" {
		t.Errorf("features %s", got)
	}
	if len(spec.Golden) != 3 || len(spec.Golden[2].Row) != 6 {
		t.Fatalf("golden %+v", spec.Golden)
	}
	// The third golden example omits declines5m and country: missing values.
	r := spec.Golden[2].Row
	if r[2] == r[2] || r[3] == r[3] {
		t.Errorf("absent optional fields must be NaN, got %v", r)
	}
}

func TestDigestAndArchiveRoundTrip(t *testing.T) {
	p, err := ReadDir("../../examples/churn")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.WriteTarGz(&buf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	q, err := ReadTarGz(&buf, Limits{MaxBytes: 1 << 20}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if q.Digest != p.Digest || q.ArtifactSHA != p.ArtifactSHA || q.ReferenceSHA != p.ReferenceSHA {
		t.Errorf("digest changed through the archive")
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// A different model.yaml is a different package even with the same artifact.
	files := map[string][]byte{ManifestFile: append(bytes.Clone(p.ManifestYAML), []byte("\n# edited\n")...), "model.json": p.Artifact, "reference.jsonl": p.Reference}
	r, err := FromFiles("upload", files)
	if err != nil {
		t.Fatal(err)
	}
	if r.Digest == p.Digest || r.ArtifactSHA != p.ArtifactSHA {
		t.Errorf("edited manifest must change the digest, not the artifact hash")
	}
}

func TestWarmupCanBeTurnedOff(t *testing.T) {
	y := "name: m\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n"
	spec, err := Parse("m.yaml", []byte(y+"serving: {warmupBatches: 0}\n"))
	if err != nil || *spec.Manifest.Serving.WarmupBatches != 0 {
		t.Fatalf("warmupBatches 0: %v", err)
	}
	spec, err = Parse("m.yaml", []byte(y))
	if err != nil || *spec.Manifest.Serving.WarmupBatches != DefaultWarmupBatches {
		t.Fatalf("default warmup: %v", err)
	}
}

// A default never contradicts an explicit setting: the default queue bound
// grows to fit an explicit maxInstancesPerRequest; an explicit one that is
// too small is still refused.
func TestQueueDefaultFitsRequestLimit(t *testing.T) {
	y := "name: m\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n"
	spec, err := Parse("m.yaml", []byte(y+"serving: {maxInstancesPerRequest: 5000}\n"))
	if err != nil {
		t.Fatalf("maxInstancesPerRequest 5000 alone: %v", err)
	}
	if s := spec.Manifest.Serving; s.MaxQueueInstances != 5000 {
		t.Errorf("maxQueueInstances = %d, want 5000 (the default grown to fit)", s.MaxQueueInstances)
	}
	spec, err = Parse("m.yaml", []byte(y+"serving: {maxInstancesPerRequest: 10}\n"))
	if err != nil || spec.Manifest.Serving.MaxQueueInstances != DefaultMaxQueueInstances {
		t.Fatalf("small request limit: %v %+v", err, spec)
	}
	_, err = Parse("m.yaml", []byte(y+"serving: {maxInstancesPerRequest: 5000, maxQueueInstances: 4096}\n"))
	if err == nil || !strings.Contains(err.Error(), "must be >= serving.maxInstancesPerRequest (5000), got 4096") {
		t.Fatalf("explicit queue bound below the request limit: %v", err)
	}
}
