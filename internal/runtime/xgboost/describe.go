package xgboost

import "fmt"

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
	root, _ := decodeArtifact(artifact) // Parse decoded it already
	top, _ := root.(map[string]any)
	learner, _ := top["learner"].(map[string]any)
	strs := func(key string) ([]string, error) {
		v, ok := learner[key]
		if !ok {
			return nil, nil
		}
		arr, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("xgboost: learner.%s is %s, want an array of strings", key, typeName(v))
		}
		out := make([]string, len(arr))
		for i, x := range arr {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("xgboost: learner.%s[%d] is %s, want a string", key, i, typeName(x))
			}
			out[i] = s
		}
		if len(out) > 0 && len(out) != d.NumFeature {
			return nil, fmt.Errorf("xgboost: learner.%s has %d entries for %d features", key, len(out), d.NumFeature)
		}
		return out, nil
	}
	if d.FeatureNames, err = strs("feature_names"); err != nil {
		return nil, err
	}
	if d.FeatureTypes, err = strs("feature_types"); err != nil {
		return nil, err
	}
	return d, nil
}
