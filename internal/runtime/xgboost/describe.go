package xgboost

import (
	"math/bits"
	"strconv"
)

// Description is what an XGBoost artifact says about its inputs and
// outputs (for `sluice init`).
type Description struct {
	NumFeature int
	// FeatureNames and FeatureTypes are what the model was trained with
	// (empty when it was trained on an unnamed array). Types are XGBoost's:
	// "float", "int", "i" (indicator), "q" (quantitative), "c" (categorical).
	FeatureNames []string
	FeatureTypes []string
	Objective    string
	Booster      string // gbtree or dart
	NumClass     int    // 0 unless multi-class
	NumTarget    int    // 0 unless multi-target (one output per target or quantile)
	Outputs      int    // output columns Predict returns
	// Categories is, for each feature that a categorical split reads, the
	// number of category codes the splits use (the largest code in any of
	// its sets, plus one); 0 for the other features. XGBoost before 3.1
	// does not save the categories' names, only these codes (the index in
	// the training frame's .cat.categories).
	Categories []int
	// CategoryNames are the training frame's categories of each
	// categorical feature, in code order, when the artifact has them
	// (XGBoost 3.1 and later save them in the model's "cats"); nil entries
	// for the other features, nil when the artifact has none.
	CategoryNames [][]string
}

// Describe validates an artifact as Parse does and reports what it says
// about itself.
func Describe(artifact []byte) (*Description, error) {
	m, err := Parse(artifact)
	if err != nil {
		return nil, err
	}
	d := &Description{NumFeature: m.numFeature, Objective: m.objName, Booster: m.booster, Outputs: m.outCols}
	if m.obj.multi() {
		d.NumClass = m.numGroup
	} else if m.numGroup > 1 {
		d.NumTarget = m.numGroup
	}
	if m.catOf != nil {
		d.Categories = make([]int, m.numFeature)
		for i, c := range m.catOf {
			if c < 0 {
				continue
			}
			sp := m.catSpans[c]
			f := m.nodes[i].feat
			for w := sp.n - 1; w >= 0; w-- {
				if x := m.catWords[sp.off+w]; x != 0 {
					d.Categories[f] = max(d.Categories[f], int(w)*32+bits.Len32(x))
					break
				}
			}
		}
	}
	d.FeatureNames = m.featureNames
	d.FeatureTypes = m.featureTypes
	if d.Categories != nil {
		root, _ := decodeArtifact(artifact) // Parse decoded it already
		d.CategoryNames = categoryNames(root, d.FeatureTypes)
	}
	return d, nil
}

// categoryNames reads the categories XGBoost 3.1 and later keep in
// gradient_booster.model.cats (gradient_booster.gbtree.model.cats for
// dart): "enc" has one entry per feature (empty for a numerical one),
// either {"offsets", "values"} for string categories (values the UTF-8
// bytes of all names, offsets where each starts and ends) or {"type",
// "values"} for integer ones. Anything it cannot read gives nil: the names
// only help `sluice init`, they never change a prediction.
func categoryNames(root any, types []string) [][]string {
	top, _ := root.(map[string]any)
	learner, _ := top["learner"].(map[string]any)
	gb, _ := learner["gradient_booster"].(map[string]any)
	if g, ok := gb["gbtree"].(map[string]any); ok {
		gb = g
	}
	model, _ := gb["model"].(map[string]any)
	cats, _ := model["cats"].(map[string]any)
	enc, _ := cats["enc"].([]any)
	if len(enc) == 0 || len(enc) != len(types) {
		return nil
	}
	out := make([][]string, len(enc))
	found := false
	for f, e := range enc {
		col, _ := e.(map[string]any)
		if types[f] != "c" || col == nil {
			continue
		}
		values, err := int64s(col["values"], "values")
		if err != nil {
			return nil
		}
		if ov, ok := col["offsets"]; ok {
			offs, err := int64s(ov, "offsets")
			if err != nil || len(offs) == 0 {
				return nil
			}
			b := make([]byte, len(values))
			for i, v := range values {
				b[i] = byte(v) // int8 in the model: UTF-8 bytes above 127 are negative
			}
			for i := 1; i < len(offs); i++ {
				lo, hi := offs[i-1], offs[i]
				if lo < 0 || hi < lo || hi > int64(len(b)) {
					return nil
				}
				out[f] = append(out[f], string(b[lo:hi]))
			}
		} else {
			for _, v := range values {
				out[f] = append(out[f], strconv.FormatInt(v, 10))
			}
		}
		found = found || len(out[f]) > 0
	}
	if !found {
		return nil
	}
	return out
}
