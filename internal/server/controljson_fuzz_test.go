package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
)

// FuzzDecodeControl feeds arbitrary bodies to the control-plane decoder
// for each body type: it decodes or returns a bounded invalid_argument
// error, never panics; what it accepts has no duplicate or unknown key, so
// encoding/json decodes the same bytes without error.
func FuzzDecodeControl(f *testing.F) {
	for _, s := range []string{
		`{"targets":[{"version":1,"weight":90},{"version":2,"weight":10}],"reason":"try","expectPolicyVersion":1}`,
		`{"targets":[{"version":1,"version":2}]}`,
		`{"version":2,"plan":{"steps":[10,50,100],"bake":"30s","minSamples":20,"gates":{"maxP99Ratio":2}},"reason":"r"}`,
		`{"reason":"drill","to":-5}`,
		`{"to":1e400}`,
		`{"reason":"a","reason":"b"}`,
		`{} {}`,
		`[[[[[[[[[[`,
		`{"plan":{"bake":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []any{&api.SetTraffic{}, &api.StartRollout{}, &api.RolloutAction{}, &modelpkg.Release{}} {
			err := decodeControl(body, "", v)
			if err != nil {
				e := errs.As(err)
				if e.Code != errs.InvalidArgument || len(e.Message) > errs.MaxMessage+4 || len(e.Field) > errs.MaxField+4 {
					t.Fatalf("%T: %s error (%d-byte message, %d-byte field): %.200s", v, e.Code, len(e.Message), len(e.Field), e.Message)
				}
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("%T: accepted %q, which encoding/json refuses: %v", v, body, err)
			}
		}
	})
}
