package sklearn

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

// expectFile is NAME.expect.json: the estimator's input rows (null:
// missing) and scikit-learn's outputs for them.
type expectFile struct {
	Rows    [][]*float64 `json:"rows"`
	Outputs [][]float64  `json:"outputs"`
}

func readExpect(t testing.TB, name string) (runtime.Batch, [][]float64) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expectFile
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	b := runtime.Batch{Rows: len(e.Rows), Cols: len(e.Rows[0])}
	for _, r := range e.Rows {
		for _, v := range r {
			if v == nil {
				b.Data = append(b.Data, float32(math.NaN()))
			} else {
				b.Data = append(b.Data, float32(*v))
			}
		}
	}
	return b, e.Outputs
}

func loadFixture(t testing.TB, name string) *Model {
	t.Helper()
	art, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(art)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fixtureNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.expect.json")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		n := strings.TrimSuffix(filepath.Base(f), ".expect.json")
		if n != "bench500" {
			names = append(names, n)
		}
	}
	if len(names) < 30 {
		t.Fatalf("%d fixtures in testdata; run /usr/bin/python3 scripts/make_sklearn_fixtures.py", len(names))
	}
	return names
}

// TestFixturesMatchScikitLearn predicts every committed fixture's rows
// and compares with scikit-learn's predict / predict_proba (or
// decision_function): within 1e-6, the label exactly. Batches of 1 and
// 13 rows take the other walks.
func TestFixturesMatchScikitLearn(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			m := loadFixture(t, name)
			in, want := readExpect(t, name)
			for _, size := range []int{in.Rows, 1, 13} {
				for start := 0; start < in.Rows; start += size {
					n := min(size, in.Rows-start)
					part := runtime.Batch{Rows: n, Cols: in.Cols, Data: in.Data[start*in.Cols : (start+n)*in.Cols]}
					out, err := m.Predict(context.Background(), part)
					if err != nil {
						t.Fatal(err)
					}
					if out.Cols != len(want[0]) {
						t.Fatalf("%d output columns, scikit-learn gives %d", out.Cols, len(want[0]))
					}
					for r := range n {
						for k, w := range want[start+r] {
							got := float64(out.Row(r)[k])
							tol := 1e-6
							if k == 0 && m.classes != nil {
								tol = 0 // the label
							}
							if math.Abs(got-w) > tol {
								t.Fatalf("batch %d, row %d, output %d (%s): %v, scikit-learn %v", size, start+r, k, m.outputs[k], got, w)
							}
						}
					}
				}
			}
		})
	}
}
