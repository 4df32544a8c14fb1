package sklearn

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

// FuzzLoad feeds arbitrary bytes (seeded with small real artifacts, and
// the corpus in testdata/fuzz/FuzzLoad) to the decoder. It must return a
// model or an error, never panic, and a model it accepts must predict
// ordinary, missing and infinite values without panicking.
func FuzzLoad(f *testing.F) {
	f.Add(mustJSON(f, tiny()))
	for _, name := range []string{"dt_clf", "hgb_clf3", "logreg3", "svc"} {
		b, err := os.ReadFile("testdata/" + name + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			if m != nil {
				t.Fatal("Parse returned a model and an error")
			}
			if !strings.HasPrefix(err.Error(), "sklearn: ") {
				t.Fatalf("error without prefix: %v", err)
			}
			return
		}
		info := m.Info()
		if info.Inputs < 1 || info.Outputs < 1 {
			t.Fatalf("accepted model with info %+v", info)
		}
		if info.Inputs > 1<<12 {
			return
		}
		vals := []float32{0, 1, -1, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0.5, 300, 3}
		for _, nan := range []bool{false, true} {
			in := runtime.Batch{Rows: 10, Cols: info.Inputs, Data: make([]float32, 10*info.Inputs)}
			for i := range in.Data {
				in.Data[i] = vals[i%len(vals)]
				if !nan && in.Data[i] != in.Data[i] {
					in.Data[i] = 2
				}
			}
			out, err := m.Predict(context.Background(), in)
			if err != nil {
				if nan {
					continue // a model without missing-value handling refuses NaN
				}
				t.Fatal(err)
			}
			if out.Rows != in.Rows || out.Cols != info.Outputs || len(out.Data) != out.Rows*out.Cols {
				t.Fatalf("output shape %dx%d (%d values), info %+v", out.Rows, out.Cols, len(out.Data), info)
			}
		}
	})
}
