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

// FuzzTreeShape builds one-tree regressors from arbitrary child, feature
// and missing-direction arrays (0xff is -1: a leaf). Whatever the loader
// accepts must predict exactly what a plain walk over the arrays gives,
// so the breadth-first relayout and the fixed-depth walk cannot go wrong
// silently on odd shapes.
func FuzzTreeShape(f *testing.F) {
	f.Add([]byte{1, 3, 0xff, 0xff, 0xff}, []byte{2, 4, 0xff, 0xff, 0xff}, []byte{0, 1, 0, 0, 0}, []byte{1, 0, 0, 0, 0})
	f.Add([]byte{0xff}, []byte{0xff}, []byte{0}, []byte{0})
	f.Add([]byte{1, 0xff, 3, 0xff, 0xff}, []byte{2, 0xff, 4, 0xff, 0xff}, []byte{1, 0, 0, 0, 0}, []byte{0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, left, right, feat, miss []byte) {
		n := len(left)
		if n == 0 || n > 64 || len(right) != n || len(feat) != n || len(miss) != n {
			return
		}
		idx := func(b byte) int {
			if b == 0xff {
				return -1
			}
			return int(b)
		}
		const nf = 3
		l, r, fe, th, val, ml := make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n), make([]any, n)
		for i := range n {
			l[i], r[i] = idx(left[i]), idx(right[i])
			fe[i] = int(feat[i]) % nf
			if idx(left[i]) == -1 {
				fe[i] = -1
			}
			th[i] = float64(i%5) - 2
			val[i] = float64(i) + 0.5
			ml[i] = int(miss[i] & 1)
		}
		d := map[string]any{
			"format": Format, "formatVersion": 1, "estimator": "HistGradientBoostingRegressor", "nFeatures": nf,
			"link": "identity", "init": []any{0},
			"trees":   []any{map[string]any{"left": l, "right": r, "feature": fe, "threshold": th, "value": val, "missingLeft": ml}},
			"outputs": []any{"prediction"},
		}
		m, err := Parse(mustJSON(t, d))
		if err != nil {
			return
		}
		vals := []float32{-3, -2, -1.5, 0, 0.5, 1, 2, 3, float32(math.NaN())}
		var rows []float32
		for a := range vals {
			for b := range vals {
				rows = append(rows, vals[a], vals[b], vals[(a+b)%len(vals)])
			}
		}
		in := runtime.Batch{Rows: len(rows) / nf, Cols: nf, Data: rows}
		out, err := m.Predict(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		for row := range in.Rows {
			x := in.Row(row)
			i := 0
			for idx(left[i]) != -1 {
				v := x[int(feat[i])%nf]
				switch {
				case v != v && miss[i]&1 == 1, v == v && float64(v) <= float64(i%5)-2:
					i = idx(left[i])
				default:
					i = idx(right[i])
				}
			}
			if got, want := out.Data[row], float32(float64(i)+0.5); got != want {
				t.Fatalf("row %v: %v, a plain walk gives leaf %d (%v)", x, got, i, want)
			}
		}
	})
}
