package gateway

import (
	"math"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/runtime"
)

// A record keeps the answer as the caller got it: per instance by name,
// a labelled output as its label, a non-finite number as null, nothing
// over records.MaxOutputBytes.
func TestRecordOutputs(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		p    Prediction
		want string
	}{
		{"numbers", Prediction{Outputs: []string{"riskScore"}, Out: runtime.Output{Rows: 2, Cols: 1, Data: []float32{0.8455931, 0.25}}}, `[{"riskScore":0.8455931},{"riskScore":0.25}]`},
		{"a label", Prediction{Outputs: []string{"p", "class"}, Out: runtime.Output{Rows: 1, Cols: 2, Data: []float32{0.9, 1}}, Labels: [][]string{nil, {"neg", "pos"}}}, `[{"p":0.9,"class":"pos"}]`},
		{"NaN", Prediction{Outputs: []string{"y"}, Out: runtime.Output{Rows: 1, Cols: 1, Data: []float32{nan}}}, `[{"y":null}]`},
		{"names do not match the columns", Prediction{Outputs: []string{"a"}, Out: runtime.Output{Rows: 1, Cols: 2, Data: []float32{1, 2}}}, ``},
	} {
		if got := string(tc.p.recordOutputs()); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	big := Prediction{Outputs: []string{strings.Repeat("y", 100)}, Out: runtime.Output{Rows: 1000, Cols: 1, Data: make([]float32, 1000)}}
	if got := big.recordOutputs(); got != nil {
		t.Errorf("an answer over %d bytes kept: %d bytes", records.MaxOutputBytes, len(got))
	}
}
