package xgboost

import "math/bits"

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
	return d, nil
}
