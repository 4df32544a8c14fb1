package xgboost

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sluiceml/sluice/internal/runtime"
)

func init() { runtime.Register("xgboost", Runtime{}) }

// Runtime loads XGBoost models saved as JSON or UBJSON.
type Runtime struct{}

// Load decodes and validates an XGBoost model artifact. If spec.Features is
// set it must equal the model's num_feature.
func (Runtime) Load(ctx context.Context, spec runtime.Spec, artifact []byte) (runtime.Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := parseModel(artifact)
	if err != nil {
		if spec.Name != "" {
			return nil, fmt.Errorf("xgboost: %s: %w", spec.Name, err)
		}
		return nil, fmt.Errorf("xgboost: %w", err)
	}
	m := newModel(p)
	if spec.Features > 0 && spec.Features != m.numFeature {
		return nil, fmt.Errorf("xgboost: %s: model reads %d features, package schema produces %d", spec.Name, m.numFeature, spec.Features)
	}
	return m, nil
}

// Model is a loaded XGBoost tree model (gbtree or dart). Its methods never modify it, so
// it may be shared between goroutines.
type Model struct {
	parsed
	outCols int
	info    runtime.Info
}

var _ runtime.Model = (*Model)(nil)

// Parse decodes and validates an XGBoost model (JSON if the first byte is
// '{', otherwise UBJSON). Errors start with "xgboost: ".
func Parse(artifact []byte) (*Model, error) {
	p, err := parseModel(artifact)
	if err != nil {
		return nil, fmt.Errorf("xgboost: %w", err)
	}
	return newModel(p), nil
}

func newModel(p *parsed) *Model {
	m := &Model{parsed: *p, outCols: p.numGroup}
	if p.obj.transform == transformSoftmax {
		m.outCols = 1
	}
	detail := fmt.Sprintf("%s, %d trees, %s", p.booster, len(p.roots), p.objName)
	if p.catSpans != nil {
		detail += fmt.Sprintf(", %d categorical splits", len(p.catSpans))
	}
	if !p.obj.multi() && p.numGroup > 1 {
		detail += fmt.Sprintf(", %d targets", p.numGroup)
	}
	m.info = runtime.Info{
		Inputs:  p.numFeature,
		Outputs: m.outCols,
		Detail:  detail,
		// The artifact's own names for its columns, for the check of
		// the package schema's field order.
		FeatureNames: p.featureNames,
	}
	if p.obj.multi() {
		m.info.Detail += fmt.Sprintf(", %d classes", p.numGroup)
	}
	return m
}

// Info reports num_feature inputs and the number of output columns: 1 for
// binary, ranking, survival and single-target regression, 1 for
// multi:softmax (the class index), num_class for multi:softprob, num_target
// for a multi-target model (one column per target or quantile).
func (m *Model) Info() runtime.Info { return m.info }

// Close releases nothing; the model is plain memory.
func (m *Model) Close() error { return nil }

// NumGroups is the number of margin columns PredictMargin returns (num_class
// for multi-class objectives, num_target for multi-target ones, else 1).
func (m *Model) NumGroups() int { return m.numGroup }

// Predict returns the objective's transformed predictions, as XGBoost's
// Booster.predict does.
func (m *Model) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	margins, err := m.PredictMargin(ctx, in)
	if err != nil {
		return runtime.Output{}, err
	}
	return m.transform(margins), nil
}

// PredictMargin returns raw margins, NumGroups columns per row, bit-for-bit
// equal to XGBoost's Booster.predict(output_margin=True).
func (m *Model) PredictMargin(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	if err := m.check(in); err != nil {
		return runtime.Output{}, err
	}
	out := runtime.Output{Rows: in.Rows, Cols: m.numGroup, Data: make([]float32, in.Rows*m.numGroup)}
	for start := 0; start < in.Rows; start += ctxBlock {
		if err := ctx.Err(); err != nil {
			return runtime.Output{}, err
		}
		end := min(start+ctxBlock, in.Rows)
		m.margins(in.Data[start*in.Cols:end*in.Cols], in.Cols, out.Data[start*m.numGroup:end*m.numGroup])
	}
	return out, nil
}

// ctxBlock is how many rows are predicted between context checks.
const ctxBlock = 1024

func (m *Model) check(in runtime.Batch) error {
	if in.Rows < 0 || in.Cols < 0 {
		return fmt.Errorf("xgboost: invalid batch shape %d x %d", in.Rows, in.Cols)
	}
	if in.Cols != m.numFeature {
		return fmt.Errorf("xgboost: batch has %d columns, model reads %d features", in.Cols, m.numFeature)
	}
	if len(in.Data) != in.Rows*in.Cols {
		return fmt.Errorf("xgboost: batch data has %d values, want %d rows x %d columns", len(in.Data), in.Rows, in.Cols)
	}
	return nil
}

// transform applies the objective's prediction transform to margins.
func (m *Model) transform(mg runtime.Output) runtime.Output {
	switch m.obj.transform {
	case transformSigmoid:
		for i, x := range mg.Data {
			mg.Data[i] = sigmoid(x)
		}
	case transformExp:
		for i, x := range mg.Data {
			mg.Data[i] = float32(math.Exp(float64(x)))
		}
	case transformHinge:
		for i, x := range mg.Data {
			mg.Data[i] = float32(b2i(x > 0))
		}
	case transformSort:
		for r := range mg.Rows {
			slices.Sort(mg.Row(r))
		}
	case transformSoftprob:
		for r := range mg.Rows {
			softmax(mg.Row(r))
		}
	case transformSoftmax:
		out := runtime.Output{Rows: mg.Rows, Cols: 1, Data: make([]float32, mg.Rows)}
		for r := range mg.Rows {
			row := mg.Row(r)
			best := 0
			for k, v := range row {
				if v > row[best] {
					best = k
				}
			}
			out.Data[r] = float32(best)
		}
		return out
	}
	return mg
}

// sigmoid is XGBoost's common::Sigmoid, in float32 as it is there:
// 1 / (expf(min(-x, 88.7)) + 1 + 1e-16). expf is the float64 exponential
// rounded to float32 (glibc's expf is correctly rounded but in rare cases).
func sigmoid(x float32) float32 {
	const eps = float32(1e-16)
	e := float32(math.Exp(float64(min(-x, float32(88.7)))))
	denom := e + float32(1)
	denom += eps
	return float32(1) / denom
}

// softmax mirrors XGBoost's common::Softmax: subtract the max, exponentiate,
// sum in double, divide.
func softmax(row []float32) {
	wmax := row[0]
	for _, v := range row[1:] {
		wmax = max(wmax, v)
	}
	var sum float64
	for i, v := range row {
		e := float32(math.Exp(float64(v - wmax)))
		row[i] = e
		sum += float64(e)
	}
	for i := range row {
		row[i] /= float32(sum)
	}
}
