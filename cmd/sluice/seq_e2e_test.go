package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluiceml/sluice/internal/api"
)

// seqPackage writes a package serving internal/runtime/onnx/testdata/seq.onnx
// (token ids -> masked mean embedding -> sigmoid) with length buckets, and
// returns torch's reference rows.
func seqPackage(t *testing.T, dir string) []struct {
	Tokens []int64
	Score  float64
} {
	t.Helper()
	td := filepath.Join("..", "..", "internal", "runtime", "onnx", "testdata")
	art, err := os.ReadFile(filepath.Join(td, "seq.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Rows []struct {
			Tokens []int64
			Score  float64
		}
	}
	b, err := os.ReadFile(filepath.Join(td, "seq_ref.json"))
	if err != nil || json.Unmarshal(b, &ref) != nil || len(ref.Rows) < 5 {
		t.Fatalf("seq_ref.json: %v", err)
	}
	g, _ := json.Marshal(ref.Rows[2].Tokens)
	manifest := fmt.Sprintf(`name: seq
runtime: onnx
artifact: seq.onnx
input:
  schema: seq-input@1
  fields:
    - {name: tokens, type: sequence, maxLength: 128}
output:
  schema: seq-output@1
  fields: [{name: score}]
serving:
  maxBatchSize: 16
  maxBatchDelay: 2ms
  lengthBuckets: [16, 32, 64, 128]
golden:
  - instance: {tokens: %s}
    expect: {score: %v}
    tolerance: 1e-5
`, g, ref.Rows[2].Score)
	if err := os.MkdirAll(filepath.Join(dir, "seq"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "seq", "seq.onnx"), art, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "seq", "model.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return ref.Rows
}

// TestSequenceModelThroughTheBinary serves a sequence model with the real
// binary and ONNX Runtime: rows of different lengths, in one request and
// one request each (concurrently, so they batch within their buckets),
// match torch's unpadded outputs; bad token arrays are 400s naming the field.
func TestSequenceModelThroughTheBinary(t *testing.T) {
	lib := os.Getenv("SLUICE_ONNXRUNTIME_LIB")
	if lib == "" {
		t.Fatal("SLUICE_ONNXRUNTIME_LIB is not set: run the tests with `make test`, which fetches ONNX Runtime (scripts/fetch-onnxruntime.sh)")
	}
	models := t.TempDir()
	ref := seqPackage(t, models)
	srv := startServer(t, "--data", t.TempDir(), "--models", models, "--onnxruntime-lib", lib)
	url := srv.url + "/v1/models/seq:predict"

	post := func(body string) (int, []byte) {
		a, err := postRaw(t, url, body, nil)
		if err != nil {
			t.Fatal(err)
		}
		return a.status, a.body
	}
	inst := func(toks []int64) string {
		b, _ := json.Marshal(map[string]any{"tokens": toks})
		return string(b)
	}

	// All rows in one request: padded to the longest (128) in one batch.
	var all []string
	for _, r := range ref {
		all = append(all, inst(r.Tokens))
	}
	status, body := post(`{"instances":[` + strings.Join(all, ",") + `]}`)
	if status != 200 {
		t.Fatalf("predict all rows: %d %s", status, body)
	}
	var p api.PredictResponse
	if err := json.Unmarshal(body, &p); err != nil || p.ModelVersion != "seq@1" || len(p.Predictions) != len(ref) {
		t.Fatalf("predict all rows: %s", body)
	}
	for i, r := range ref {
		if got := p.Predictions[i]["score"]; math.Abs(got-r.Score) > 1e-5 {
			t.Errorf("row %d (length %d) in one request: %v, torch %v", i, len(r.Tokens), got, r.Score)
		}
	}

	// One request per row, concurrently, several times over.
	var wg sync.WaitGroup
	for k := 0; k < 4; k++ {
		for i, r := range ref {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := postRaw(t, url, `{"instances":[`+inst(r.Tokens)+`]}`, nil)
				if err != nil || a.status != 200 {
					t.Errorf("row %d alone: %v %d %s", i, err, a.status, a.body)
					return
				}
				var p api.PredictResponse
				if err := json.Unmarshal(a.body, &p); err != nil || len(p.Predictions) != 1 {
					t.Errorf("row %d alone: %s", i, a.body)
					return
				}
				if got := p.Predictions[0]["score"]; math.Abs(got-r.Score) > 1e-5 {
					t.Errorf("row %d (length %d) alone: %v, torch %v", i, len(r.Tokens), got, r.Score)
				}
			}()
		}
	}
	wg.Wait()

	long := make([]string, 129)
	for i := range long {
		long[i] = "1"
	}
	bad := []struct{ name, body, field, msg string }{
		{"string in the array", `{"instances":[{"tokens":[1,2]},{"tokens":[1,"x"]}]}`, "instances[1].tokens[1]", "expected a number"},
		{"fraction", `{"instances":[{"tokens":[1,2.5]}]}`, "instances[0].tokens[1]", "expected an integer"},
		{"negative", `{"instances":[{"tokens":[-3]}]}`, "instances[0].tokens[0]", "[0, 2^31)"},
		{"nested array", `{"instances":[{"tokens":[1,[2]]}]}`, "instances[0].tokens[1]", "nested"},
		{"object", `{"instances":[{"tokens":{"a":1}}]}`, "instances[0].tokens", "nested"},
		{"too long", `{"instances":[{"tokens":[` + strings.Join(long, ",") + `]}]}`, "instances[0].tokens", "maxLength is 128"},
		{"empty", `{"instances":[{"tokens":[]}]}`, "instances[0].tokens", "at least 1"},
		{"not an array", `{"instances":[{"tokens":5}]}`, "instances[0].tokens", "expected an array"},
		{"missing", `{"instances":[{}]}`, "instances[0].tokens", "missing"},
		{"unknown field", `{"instances":[{"tokens":[1],"x":1}]}`, "instances[0].x", "unknown field"},
	}
	for _, c := range bad {
		status, body := post(c.body)
		var e api.ErrorBody
		if status != 400 || json.Unmarshal(body, &e) != nil || e.Error.Field != c.field || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %s; want 400 naming %s: ...%s...", c.name, status, body, c.field, c.msg)
		}
	}
	srv.stop(t)
}
