// Package linear is the "linear" runtime: a generalized linear model stored
// as a small JSON artifact (docs/model-yaml.md, "linear artifact"):
//
//	{"weights": [[0.5, -1.2, 3.0]], "bias": [0.1], "link": "logistic"}
//
// weights has one row per output and one column per feature; link is
// identity, logistic or softmax (softmax needs two or more outputs). A
// missing feature (NaN) contributes nothing to the sum. The runtime knows
// rows of float32 only.
package linear

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/sluiceml/sluice/internal/runtime"
)

// Limits on artifact size.
const (
	MaxFeatures = 1 << 20
	MaxOutputs  = 1 << 12
	MaxParams   = 1 << 24
)

func init() { runtime.Register("linear", Runtime{}) }

// Runtime loads linear artifacts.
type Runtime struct{}

// Artifact is the JSON artifact.
type Artifact struct {
	Weights [][]float64 `json:"weights"`
	Bias    []float64   `json:"bias"`
	Link    string      `json:"link"`
}

// Model is a loaded linear model.
type Model struct {
	w    []float64 // k×d row-major
	b    []float64
	k, d int
	link string
}

// Load decodes and checks the artifact.
func (Runtime) Load(_ context.Context, spec runtime.Spec, data []byte) (runtime.Model, error) {
	return Decode(data)
}

// Decode parses a linear artifact.
func Decode(data []byte) (*Model, error) {
	var a Artifact
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("linear: decode artifact: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("linear: trailing data after the artifact object")
	}
	k := len(a.Weights)
	if k == 0 || k > MaxOutputs {
		return nil, fmt.Errorf("linear: weights must have between 1 and %d rows (one per output), got %d", MaxOutputs, k)
	}
	d := len(a.Weights[0])
	if d == 0 || d > MaxFeatures || k*d > MaxParams {
		return nil, fmt.Errorf("linear: weights rows must have between 1 and %d columns, got %d", MaxFeatures, d)
	}
	m := &Model{k: k, d: d, w: make([]float64, 0, k*d)}
	for i, row := range a.Weights {
		if len(row) != d {
			return nil, fmt.Errorf("linear: weights[%d] has %d columns, weights[0] has %d", i, len(row), d)
		}
		m.w = append(m.w, row...)
	}
	switch len(a.Bias) {
	case 0:
		m.b = make([]float64, k)
	case k:
		m.b = a.Bias
	default:
		return nil, fmt.Errorf("linear: bias has %d values, want %d (one per output)", len(a.Bias), k)
	}
	for _, v := range append(append([]float64(nil), m.w...), m.b...) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("linear: weights and bias must be finite")
		}
	}
	switch a.Link {
	case "", "identity":
		m.link = "identity"
	case "logistic":
		m.link = a.Link
	case "softmax":
		if k < 2 {
			return nil, fmt.Errorf("linear: link softmax needs at least 2 outputs, got %d", k)
		}
		m.link = a.Link
	default:
		return nil, fmt.Errorf("linear: unknown link %q (use identity, logistic or softmax)", a.Link)
	}
	return m, nil
}

// Info reports the model's shape.
func (m *Model) Info() runtime.Info {
	return runtime.Info{Inputs: m.d, Outputs: m.k, Detail: fmt.Sprintf("linear, %d features, %d outputs, link %s", m.d, m.k, m.link)}
}

// Predict computes link(W·x + b) for each row.
func (m *Model) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	if in.Cols != m.d {
		return runtime.Output{}, fmt.Errorf("linear: batch has %d features per row, model expects %d", in.Cols, m.d)
	}
	out := runtime.Output{Rows: in.Rows, Cols: m.k, Data: make([]float32, in.Rows*m.k)}
	z := make([]float64, m.k)
	for r := 0; r < in.Rows; r++ {
		x := in.Row(r)
		for j := 0; j < m.k; j++ {
			s := m.b[j]
			w := m.w[j*m.d : (j+1)*m.d]
			for i, v := range x {
				if v == v { // not NaN
					s += w[i] * float64(v)
				}
			}
			z[j] = s
		}
		o := out.Row(r)
		switch m.link {
		case "identity":
			for j, v := range z {
				o[j] = float32(v)
			}
		case "logistic":
			for j, v := range z {
				o[j] = float32(1 / (1 + math.Exp(-v)))
			}
		case "softmax":
			mx := z[0]
			for _, v := range z {
				mx = math.Max(mx, v)
			}
			var sum float64
			for j, v := range z {
				z[j] = math.Exp(v - mx)
				sum += z[j]
			}
			for j, v := range z {
				o[j] = float32(v / sum)
			}
		}
	}
	return out, nil
}

// Close releases nothing; linear models hold only memory.
func (m *Model) Close() error { return nil }
