package oip

import (
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/schema"
)

// FuzzDecodeJSON: the OIP REST decoder never panics, fails only with
// invalid_argument, what it accepts converts to instances (or fails with a
// message naming the tensor), and its tensors give the same rows, errors
// and input hash straight as through instances.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range decodeJSONSeeds {
		f.Add([]byte(s))
	}
	sch, probs := schema.Compile([]schema.Field{{Name: "a", Type: schema.TypeFloat}, {Name: "c", Type: schema.TypeCategory, Values: []string{"US"}, Optional: true}},
		[]schema.Step{{Op: schema.OpOnehot, Field: "c"}})
	if len(probs) > 0 {
		f.Fatal(probs)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeJSON(body, time.Minute)
		if err != nil {
			if c := errs.CodeOf(err); c != errs.InvalidArgument {
				t.Fatalf("code %s: %v", c, err)
			}
			return
		}
		sameAsInstances(t, req.Inputs, sch) // JSON data straight into rows
		for _, s := range []*schema.Schema{nil, sch} {
			if _, err := Instances(req.Inputs, s); err != nil && errs.CodeOf(err) != errs.InvalidArgument {
				t.Fatalf("instances: %v", err)
			}
		}
	})
}

// decodeJSONSeeds are FuzzDecodeJSON's seeds (FuzzOIPDecodeSame's too).
var decodeJSONSeeds = []string{
	`{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1,2.5]}]}`,
	`{"id":"x","parameters":{"deadline_ms":50,"routing_key":"k"},"inputs":[{"name":"c","shape":[1],"datatype":"BYTES","data":["US"]}],"outputs":[{"name":"y","parameters":{"binary_data":false}}]}`,
	`{"inputs":[{"name":"tokens","shape":[2,3],"datatype":"INT64","data":[[1,2,3],[4,-1,-1]]}]}`,
	`{"inputs":[{"name":"b","shape":[1,1],"datatype":"BOOL","data":[true]}]}`,
	`{"inputs":[{"name":"a","shape":[2],"datatype":"INT32","data":[1]}]}`,
	`{"inputs":[]}`, `[]`, `{"inputs":[{"name":"a","shape":[-1],"datatype":"FP64","data":[]}]}`,
}
