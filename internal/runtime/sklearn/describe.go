package sklearn

// Description is what an exported artifact says about itself, for sluice
// init and sluice export-sklearn.
type Description struct {
	Estimator      string
	SklearnVersion string
	Detail         string
	NFeatures      int
	FeatureNames   []string
	Outputs        []string
	Classes        []string
	// Input is the pipeline in front of the estimator as Sluice fields and
	// steps (nil when the exporter wrote none).
	Input *Input
	// Examples are rows with scikit-learn's own outputs.
	Examples []Example
	// Postprocess is the exporter's postprocess: steps (a
	// CalibratedClassifierCV's calibrator and label), nil when none.
	Postprocess []map[string]any
}

// Describe decodes and validates an artifact and says what it holds.
// Errors start with "sklearn: ".
func Describe(artifact []byte) (*Description, error) {
	d, err := decode(artifact)
	if err != nil {
		return nil, errorf(err)
	}
	m, err := build(d)
	if err != nil {
		return nil, errorf(err)
	}
	return &Description{
		Estimator:      m.estimator,
		SklearnVersion: m.version,
		Detail:         m.detail(),
		NFeatures:      m.nFeatures,
		FeatureNames:   m.featureNames,
		Outputs:        m.outputs,
		Classes:        m.classes,
		Input:          d.Input,
		Examples:       d.Examples,
		Postprocess:    d.Postprocess,
	}, nil
}
