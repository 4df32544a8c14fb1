package xgboost

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
	NumClass     int // 0 unless multi-class
	Outputs      int // output columns Predict returns
}

// Describe validates an artifact as Parse does and reports what it says
// about itself.
func Describe(artifact []byte) (*Description, error) {
	m, err := Parse(artifact)
	if err != nil {
		return nil, err
	}
	d := &Description{NumFeature: m.numFeature, Objective: m.objName, Outputs: m.outCols}
	if m.obj.multi() {
		d.NumClass = m.numGroup
	}
	d.FeatureNames = m.featureNames
	d.FeatureTypes = m.featureTypes
	return d, nil
}
