package modelpkg

import (
	"reflect"
	"strings"
	"testing"
)

const seqYAML = `name: seq
runtime: linear
artifact: model.onnx
input:
  schema: seq-input@1
  fields:
    - {name: tokens, type: sequence, maxLength: 128}
output:
  schema: seq-output@1
  fields: [{name: score}]
serving:
  lengthBuckets: [16, 32, 64, 128]
  padValue: 0
golden:
  - instance: {tokens: [5, 7, 9]}
    expect: {score: 0.5}
    tolerance: 1e-5
`

func TestSequenceManifest(t *testing.T) {
	spec, err := Parse("model.yaml", []byte(seqYAML))
	if err != nil {
		t.Fatal(err)
	}
	if name, max, ok := spec.Schema.Sequence(); !ok || name != "tokens" || max != 128 {
		t.Fatal(name, max, ok)
	}
	if !reflect.DeepEqual(spec.Manifest.Serving.LengthBuckets, []int{16, 32, 64, 128}) || *spec.Manifest.Serving.PadValue != 0 {
		t.Fatalf("%+v", spec.Manifest.Serving)
	}
	if len(spec.Golden) != 1 || !reflect.DeepEqual(spec.Golden[0].Tokens, []int64{5, 7, 9}) || spec.Golden[0].Row != nil {
		t.Fatalf("%+v", spec.Golden)
	}
	bad := []struct{ from, to, want string }{
		{"[16, 32, 64, 128]", "[16, 32, 64]", "serving.lengthBuckets[2]: the last bucket (64) must be >= tokens's maxLength (128)"},
		{"[16, 32, 64, 128]", "[16, 16, 128]", "serving.lengthBuckets[1]: buckets must be strictly increasing, got 16 after 16"},
		{"[16, 32, 64, 128]", "[0, 128]", "serving.lengthBuckets[0]: must be >= 1"},
		{"padValue: 0", "padValue: -1", "serving.padValue: must be a token id in [0, 2^31)"},
		{"{tokens: [5, 7, 9]}", "{tokens: [5, 7.5]}", "golden[0].instance.tokens[1]: expected an integer token id"},
		{"{tokens: [5, 7, 9]}", "{tokens: []}", "golden[0].instance.tokens: must hold at least 1 token id"},
		{"{tokens: [5, 7, 9]}", "{tokens: [a]}", "golden[0].instance.tokens: expected an array of token ids"},
		{"type: sequence, maxLength: 128}", "type: sequence}", "input.fields[0].maxLength: a sequence field needs maxLength"},
		{"output:", "preprocess: [{op: log1p, field: tokens}]\noutput:", "preprocess[0].field: \"tokens\" is a sequence field"},
		{"output:", "drift: {reference: ref.jsonl}\noutput:", "drift: drift monitoring compares feature histograms and does not apply to sequence inputs"},
	}
	for _, c := range bad {
		y := strings.Replace(seqYAML, c.from, c.to, 1)
		if _, err := Parse("model.yaml", []byte(y)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: got %v, want ...%s...", c.from, c.to, err, c.want)
		}
	}
	// lengthBuckets and padValue need a sequence field.
	tab := strings.Replace(seqYAML, "{name: tokens, type: sequence, maxLength: 128}", "{name: x, type: float}", 1)
	tab = strings.Replace(tab, "{tokens: [5, 7, 9]}", "{x: 1}", 1)
	_, err = Parse("model.yaml", []byte(tab))
	for _, want := range []string{"serving.lengthBuckets: applies to sequence inputs only", "serving.padValue: applies to sequence inputs only"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("tabular: got %v, want ...%s...", err, want)
		}
	}
}
