package sklearn

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/sluiceml/sluice/internal/runtime"
)

func init() { runtime.Register("sklearn", Runtime{}) }

// Runtime loads the JSON scripts/sluice_export_sklearn.py writes.
type Runtime struct{}

// Load decodes and validates an exported scikit-learn model. If
// spec.Features is set it must equal the estimator's nFeatures.
func (Runtime) Load(ctx context.Context, spec runtime.Spec, artifact []byte) (runtime.Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	where := "sklearn: "
	if spec.Name != "" {
		where += spec.Name + ": "
	}
	if spec.Artifact != "" {
		where += spec.Artifact + ": "
	}
	m, err := parse(artifact)
	if err != nil {
		return nil, fmt.Errorf("%s%w", where, err)
	}
	if spec.Features > 0 && spec.Features != m.nFeatures {
		return nil, fmt.Errorf("%sthe estimator reads %d features (nFeatures), the package schema produces %d", where, m.nFeatures, spec.Features)
	}
	return m, nil
}

// Parse decodes and validates an exported model. Errors start with
// "sklearn: " and name the artifact's key ("trees[3].left: …").
func Parse(artifact []byte) (*Model, error) {
	m, err := parse(artifact)
	if err != nil {
		return nil, fmt.Errorf("sklearn: %w", err)
	}
	return m, nil
}

func parse(artifact []byte) (*Model, error) {
	d, err := decode(artifact)
	if err != nil {
		return nil, err
	}
	m, err := build(d)
	if err != nil {
		return nil, err
	}
	m.info = runtime.Info{Inputs: m.nFeatures, Outputs: m.outCols, Detail: m.detail(), FeatureNames: m.featureNames}
	return m, nil
}

// Model is a loaded scikit-learn estimator. Its methods never modify it,
// so it may be shared between goroutines.
type Model struct {
	estimator    string
	version      string
	nFeatures    int
	fam          family
	tf           transform
	label        labelRule
	classes      []string  // the classes as the artifact writes them
	labels       []float32 // predict's label for each class: the class, or its index for string classes
	labelIsIndex bool
	decision     bool // a binary classifier answers its decision_function, not predict_proba
	rawCols      int  // raw scores per row
	outCols      int
	average      int // forests: the number of trees the sum is divided by
	init         []float64
	trees        *treeSet
	coef         []float64 // rawCols rows of nFeatures
	intercept    []float64
	featureNames []string
	outputs      []string
	info         runtime.Info
}

var (
	_ runtime.Model        = (*Model)(nil)
	_ runtime.FeatureNamer = Runtime{}
)

func (m *Model) detail() string {
	var b strings.Builder
	b.WriteString(m.estimator)
	if m.trees != nil {
		fmt.Fprintf(&b, ", %d trees", len(m.trees.roots))
		if m.trees.catOf != nil {
			b.WriteString(", categorical splits")
		}
	} else {
		fmt.Fprintf(&b, ", %d coefficients", len(m.coef))
	}
	if m.classes != nil {
		fmt.Fprintf(&b, ", %d classes", len(m.classes))
	}
	if m.version != "" {
		fmt.Fprintf(&b, " (scikit-learn %s)", clip(m.version))
	}
	return b.String()
}

// Info reports nFeatures inputs and the output columns: a regressor's
// predictions; a classifier's label, then its predict_proba columns (a
// LinearSVC: its decision_function columns).
func (m *Model) Info() runtime.Info { return m.info }

// Close releases nothing; the model is plain memory.
func (m *Model) Close() error { return nil }

// Outputs names the output columns as the exporter did.
func (m *Model) Outputs() []string { return append([]string(nil), m.outputs...) }

// ctxBlock is how many rows are predicted between context checks.
const ctxBlock = 1024

// Predict returns what scikit-learn's predict and predict_proba (or
// decision_function) return for the rows, as float32.
func (m *Model) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	if in.Rows < 0 || in.Cols < 0 {
		return runtime.Output{}, fmt.Errorf("sklearn: invalid batch shape %d x %d", in.Rows, in.Cols)
	}
	if in.Cols != m.nFeatures {
		return runtime.Output{}, fmt.Errorf("sklearn: batch has %d columns, the estimator reads %d features", in.Cols, m.nFeatures)
	}
	if len(in.Data) != in.Rows*in.Cols {
		return runtime.Output{}, fmt.Errorf("sklearn: batch data has %d values, want %d rows x %d columns", len(in.Data), in.Rows, in.Cols)
	}
	if m.trees == nil || !m.trees.nanSplit {
		for i, v := range in.Data {
			if v != v {
				r, c := i/in.Cols, i%in.Cols
				name := fmt.Sprintf("feature %d", c)
				if m.featureNames != nil {
					name = fmt.Sprintf("feature %d (%s)", c, m.featureNames[c])
				}
				return runtime.Output{}, fmt.Errorf("sklearn: row %d: %s is missing (NaN), and a %s has no missing-value handling (scikit-learn refuses NaN too): give the field a default, or make it required", r, name, m.estimator)
			}
		}
	}
	out := runtime.Output{Rows: in.Rows, Cols: m.outCols, Data: make([]float32, in.Rows*m.outCols)}
	raw := make([]float64, min(in.Rows, ctxBlock)*m.rawCols)
	for start := 0; start < in.Rows; start += ctxBlock {
		if err := ctx.Err(); err != nil {
			return runtime.Output{}, err
		}
		n := min(ctxBlock, in.Rows-start)
		acc := raw[:n*m.rawCols]
		m.rawScores(in.Data[start*in.Cols:(start+n)*in.Cols], in.Cols, acc)
		for r := range n {
			m.head(acc[r*m.rawCols:(r+1)*m.rawCols], out.Data[(start+r)*m.outCols:(start+r+1)*m.outCols])
		}
	}
	return out, nil
}

// rawScores writes the raw scores of the rows into acc: the forest's
// mean leaf vector, the boosted init plus leaves, or coef · x + intercept.
func (m *Model) rawScores(data []float32, cols int, acc []float64) {
	rc := m.rawCols
	rows := len(acc) / rc
	switch m.fam {
	case famForest:
		clear(acc)
		m.trees.raw(data, cols, acc, rc)
		n := float64(m.average)
		for i := range acc {
			acc[i] /= n
		}
	case famBoost:
		for r := range rows {
			copy(acc[r*rc:(r+1)*rc], m.init)
		}
		m.trees.raw(data, cols, acc, rc)
	case famLinear:
		for r := range rows {
			x := data[r*cols : (r+1)*cols]
			for k := range rc {
				w := m.coef[k*cols : (k+1)*cols]
				s := 0.0
				for j, v := range x {
					s += w[j] * float64(v)
				}
				acc[r*rc+k] = s + m.intercept[k]
			}
		}
	}
}

// head turns one row's raw scores into its outputs.
func (m *Model) head(raw []float64, out []float32) {
	if m.label == labelNone {
		for k, v := range raw {
			if m.tf == tfExp {
				v = math.Exp(v)
			}
			out[k] = float32(v)
		}
		return
	}
	var buf [16]float64
	var p []float64
	switch m.tf {
	case tfIdentity: // forest probabilities, LinearSVC decisions
		p = raw
	case tfExpit, tfExpit2, tfSoftmax2:
		x := raw[0]
		switch m.tf {
		case tfExpit2:
			x *= 2
		case tfSoftmax2:
			x *= 2 // softmax([-d, d]) = [1 - expit(2d), expit(2d)]
		}
		p1 := expit(x)
		p = append(buf[:0], 1-p1, p1)
	case tfSoftmax:
		p = softmax(raw, buf[:0])
	case tfOVR:
		p = buf[:0]
		sum := 0.0
		for _, v := range raw {
			e := expit(v)
			p = append(p, e)
			sum += e
		}
		for k := range p {
			p[k] /= sum
		}
	}
	var c int
	switch m.label {
	case labelArgmaxProba:
		c = argmax(p)
	case labelArgmaxRaw:
		c = argmax(raw)
	case labelPositive:
		c = int(b2i(raw[0] > 0))
	case labelNonNegative:
		c = int(b2i(raw[0] >= 0))
	}
	out[0] = m.labels[c]
	if m.decision {
		out[1] = float32(raw[0])
		return
	}
	for k, v := range p {
		out[1+k] = float32(v)
	}
}

// expit is scipy.special.expit: 1 / (1 + exp(-x)).
func expit(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// softmax is exp(x - max) / sum, as scikit-learn's softmax computes it.
func softmax(x []float64, dst []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = max(mx, v)
	}
	sum := 0.0
	for _, v := range x {
		e := math.Exp(v - mx)
		dst = append(dst, e)
		sum += e
	}
	for k := range dst {
		dst[k] /= sum
	}
	return dst
}

// argmax is numpy's: the first of the largest.
func argmax(x []float64) int {
	best := 0
	for k, v := range x {
		if v > x[best] {
			best = k
		}
	}
	return best
}
