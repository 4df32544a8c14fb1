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
				if _, _, seq := spec.Schema.Sequence(); (spec.Schema.Width() == 0 && !seq) || len(spec.OutputNames) == 0 {
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

// Placement defaults: warm with no replicas kept when idle, maxReplicas
// from serving.replicas; hot keeps one; an unwritten serving.replicas
// grows to minReplicas; serving.memory is read exactly.
func TestPlacementDefaults(t *testing.T) {
	y := "name: m\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n"
	tests := []struct {
		name          string
		extra         string
		tier          string
		lo, hi, start int
		memory        int64
	}{
		{name: "nothing written", tier: TierWarm, lo: 0, hi: 1, start: 1},
		{name: "replicas set the bound", extra: "serving: {replicas: 3}\n", tier: TierWarm, lo: 0, hi: 3, start: 3},
		{name: "hot", extra: "placement: {tier: hot}\n", tier: TierHot, lo: 1, hi: 1, start: 1},
		{name: "hot min grows replicas", extra: "placement: {tier: hot, minReplicas: 3}\n", tier: TierHot, lo: 3, hi: 3, start: 3},
		{name: "warm kept", extra: "placement: {minReplicas: 1, maxReplicas: 8}\n", tier: TierWarm, lo: 1, hi: 8, start: 1},
		{name: "cold", extra: "placement: {tier: cold}\n", tier: TierCold, lo: 0, hi: 1, start: 1},
		{name: "memory", extra: "serving: {memory: 512KiB}\n", tier: TierWarm, lo: 0, hi: 1, start: 1, memory: 512 << 10},
		{name: "memory GB", extra: "serving: {memory: 2GB}\n", tier: TierWarm, lo: 0, hi: 1, start: 1, memory: 2e9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := Parse("m.yaml", []byte(y+tt.extra))
			if err != nil {
				t.Fatal(err)
			}
			p, s := spec.Manifest.Placement, spec.Manifest.Serving
			if p.Tier != tt.tier || p.Min() != tt.lo || p.MaxReplicas != tt.hi || s.Replicas != tt.start {
				t.Errorf("placement %s %d..%d, replicas %d; want %s %d..%d, %d", p.Tier, p.Min(), p.MaxReplicas, s.Replicas, tt.tier, tt.lo, tt.hi, tt.start)
			}
			var mem int64
			if s.Memory != nil {
				mem = s.Memory.Bytes
			}
			if mem != tt.memory {
				t.Errorf("memory %d, want %d", mem, tt.memory)
			}
		})
	}
	// Every problem at once, each with its line.
	_, err := Parse("m.yaml", []byte(y+"serving:\n  replicas: 9\n  memory: 1.5GiB\nplacement:\n  tier: hot\n  minReplicas: 0\n  maxReplicas: 4\n"))
	for _, want := range []string{"m.yaml:8: serving.memory: size \"1.5GiB\" is not a size"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error:\n%v\nwant it to contain %q", err, want)
		}
	}
	_, err = Parse("m.yaml", []byte(y+"serving:\n  replicas: 9\nplacement:\n  tier: hot\n  minReplicas: 0\n  maxReplicas: 4\n"))
	for _, want := range []string{"m.yaml:10: placement.minReplicas: a hot version is always loaded", "m.yaml:7: serving.replicas: must be <= placement.maxReplicas (4), got 9"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error:\n%v\nwant it to contain %q", err, want)
		}
	}
}
