package gateway

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/runtime"
)

// A saved answer reads back as the same Answer, outputs bit for bit, so a
// replay after a restart renders the same bytes; one over the bound is not
// saved.
func TestSavedAnswerRoundTrip(t *testing.T) {
	pred := &Prediction{Model: "fraud", Version: 3, ID: "fraud@3", InputSchema: "fraud-input@3", OutputSchema: "fraud-output@1",
		Outputs: []string{"riskScore", "other"}, Out: runtime.Output{Rows: 2, Cols: 2, Data: []float32{0.8455931, 1e-38, float32(math.Inf(-1)), -0}}}
	cases := []struct {
		name string
		a    *Answer
	}{
		{"prediction", &Answer{RequestID: "r1", ModelVersion: "fraud@3", Prediction: pred}},
		{"validation error", &Answer{RequestID: "r1", ModelVersion: "fraud@3", Err: errs.Field(errs.InvalidArgument, "instances[0].amount", "NaN is not allowed")}},
		{"no version picked", &Answer{RequestID: "r1", Err: errs.New(errs.InvalidArgument, "no instances")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := encodeAnswer(c.a)
			if b == nil {
				t.Fatal("not saved")
			}
			got, err := decodeAnswer(b, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.a) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, c.a)
			}
		})
	}
	big := &Answer{RequestID: "r1", Prediction: &Prediction{Outputs: []string{"y"}, Out: runtime.Output{Rows: records.MaxReplayBytes, Cols: 1, Data: make([]float32, records.MaxReplayBytes)}}}
	if b := encodeAnswer(big); b != nil {
		t.Errorf("an answer of %d outputs was saved (%d bytes)", records.MaxReplayBytes, len(b))
	}
	if _, err := decodeAnswer([]byte(`{"v":2}`), "r1"); err == nil || !strings.Contains(err.Error(), "format 2") {
		t.Errorf("unknown format: %v", err)
	}
}
