package sklearn

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// family is how an estimator's raw scores are made.
type family int

const (
	famForest family = iota // mean of the trees' leaf vectors
	famBoost                // init + the sum of the trees' leaves, one tree per group and stage
	famLinear               // coef · x + intercept
)

// transform turns raw scores into the outputs after the label.
type transform int

const (
	tfIdentity transform = iota
	tfExp                // exp(raw): HistGradientBoosting's log link (poisson)
	tfExpit              // binary: p1 = expit(raw); [1-p1, p1]
	tfExpit2             // GradientBoosting's exponential loss: p1 = expit(2 raw)
	tfSoftmax            // multinomial: softmax(raw)
	tfSoftmax2           // a binary multinomial LogisticRegression: softmax([-d, d])
	tfOVR                // one-vs-rest LogisticRegression: expit(raw_k), normalized
)

// labelRule says how predict picks the class.
type labelRule int

const (
	labelNone        labelRule = iota // a regressor
	labelArgmaxProba                  // argmax of the probabilities, first of equals
	labelArgmaxRaw                    // argmax of the raw scores
	labelPositive                     // binary: raw > 0
	labelNonNegative                  // binary: raw >= 0 (GradientBoosting, exponential loss)
)

// estimators maps every supported estimator to its family.
var estimators = map[string]family{
	"RandomForestClassifier":         famForest,
	"RandomForestRegressor":          famForest,
	"ExtraTreesClassifier":           famForest,
	"ExtraTreesRegressor":            famForest,
	"DecisionTreeClassifier":         famForest,
	"DecisionTreeRegressor":          famForest,
	"GradientBoostingClassifier":     famBoost,
	"GradientBoostingRegressor":      famBoost,
	"HistGradientBoostingClassifier": famBoost,
	"HistGradientBoostingRegressor":  famBoost,
	"LogisticRegression":             famLinear,
	"LinearSVC":                      famLinear,
	"LinearRegression":               famLinear,
	"Ridge":                          famLinear,
	"Lasso":                          famLinear,
	"ElasticNet":                     famLinear,
}

func supported() string {
	names := make([]string, 0, len(estimators))
	for n := range estimators {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// build validates d and turns it into a model.
func build(d *doc) (*Model, error) {
	fam, ok := estimators[d.Estimator]
	if !ok {
		return nil, fmt.Errorf("estimator: %q is not supported (supported: %s)", d.Estimator, supported())
	}
	if d.NFeatures < 1 || d.NFeatures > MaxFeatures {
		return nil, fmt.Errorf("nFeatures: must be between 1 and %d, got %d", MaxFeatures, d.NFeatures)
	}
	m := &Model{estimator: d.Estimator, version: d.SklearnVersion, nFeatures: d.NFeatures, fam: fam}
	classifier := strings.HasSuffix(d.Estimator, "Classifier") || d.Estimator == "LogisticRegression" || d.Estimator == "LinearSVC"
	if classifier {
		if err := m.readClasses(d.Classes); err != nil {
			return nil, err
		}
	} else if len(d.Classes) > 0 {
		return nil, fmt.Errorf("classes: a %s has no classes", d.Estimator)
	}
	var err error
	switch fam {
	case famForest:
		err = m.buildForest(d, classifier)
	case famBoost:
		err = m.buildBoost(d, classifier)
	case famLinear:
		err = m.buildLinear(d, classifier)
	}
	if err != nil {
		return nil, err
	}
	if fam != famLinear && (len(d.Coef) > 0 || len(d.Intercept) > 0) {
		return nil, fmt.Errorf("coef: a %s has trees, not coefficients", d.Estimator)
	}
	if fam == famLinear && len(d.Trees) > 0 {
		return nil, fmt.Errorf("trees: a %s has coefficients, not trees", d.Estimator)
	}
	if d.Decision {
		switch {
		case !classifier:
			return nil, fmt.Errorf("decision: a %s is no classifier", d.Estimator)
		case d.Estimator == "LinearSVC":
			return nil, fmt.Errorf("decision: a LinearSVC answers its decision_function already; remove the key")
		case fam == famForest:
			return nil, fmt.Errorf("decision: a %s has no decision_function", d.Estimator)
		case len(m.classes) != 2 || m.rawCols != 1:
			return nil, fmt.Errorf("decision: only a binary classifier answers one decision value; this %s has %d classes", d.Estimator, len(m.classes))
		}
		m.decision = true
	}
	m.outCols = m.rawCols
	if classifier {
		m.outCols = 1 + m.probCols()
	}
	if err := m.checkNames(d); err != nil {
		return nil, err
	}
	return m, nil
}

// readClasses reads the class labels: all numbers (predict's label is
// the class itself) or all strings (the label is the class's index).
func (m *Model) readClasses(raw []json.RawMessage) error {
	if len(raw) < 2 || len(raw) > MaxClasses {
		return fmt.Errorf("classes: a classifier needs 2 to %d classes, got %d", MaxClasses, len(raw))
	}
	m.classes = make([]string, len(raw))
	m.labels = make([]float32, len(raw))
	numeric := 0
	for i, r := range raw {
		var x float64
		var s string
		switch {
		case json.Unmarshal(r, &x) == nil:
			numeric++
			m.classes[i] = string(r)
			m.labels[i] = float32(x)
		case json.Unmarshal(r, &s) == nil:
			m.classes[i] = s
			m.labels[i] = float32(i)
		default:
			return fmt.Errorf("classes[%d]: expected a number or a string, got %s", i, clip(string(r)))
		}
	}
	if numeric != 0 && numeric != len(raw) {
		return fmt.Errorf("classes: mixes numbers and strings")
	}
	m.labelIsIndex = numeric == 0
	return nil
}

func (m *Model) probCols() int {
	if m.decision {
		return 1 // decision_function's one column
	}
	if m.fam == famLinear && m.estimator == "LinearSVC" && len(m.classes) == 2 {
		return 1 // the one decision value
	}
	return len(m.classes)
}

func (m *Model) buildForest(d *doc, classifier bool) error {
	if d.Loss != "" || d.Link != "" || d.LearningRate != nil || len(d.Init) > 0 {
		return fmt.Errorf("loss, link, learningRate, init: a %s has none", d.Estimator)
	}
	if len(d.Trees) == 0 {
		return fmt.Errorf("trees: a %s needs at least one tree", d.Estimator)
	}
	if strings.HasPrefix(d.Estimator, "DecisionTree") && len(d.Trees) != 1 {
		return fmt.Errorf("trees: a %s has one tree, got %d", d.Estimator, len(d.Trees))
	}
	width := len(m.classes)
	m.label = labelArgmaxProba
	if !classifier {
		width = d.NOutputs
		if width < 1 || width > MaxOutputs {
			return fmt.Errorf("nOutputs: must be between 1 and %d, got %d", MaxOutputs, width)
		}
		m.label = labelNone
	} else if d.NOutputs > 1 {
		return fmt.Errorf("nOutputs: multi-output classifiers are not supported")
	}
	m.rawCols = width
	m.average = len(d.Trees)
	return m.buildTrees(d, width, 1, 1, false)
}

func (m *Model) buildBoost(d *doc, classifier bool) error {
	hist := strings.HasPrefix(d.Estimator, "Hist")
	if d.NOutputs > 1 {
		return fmt.Errorf("nOutputs: a %s has one output", d.Estimator)
	}
	groups := 1
	if classifier && len(m.classes) > 2 {
		groups = len(m.classes)
	}
	if len(d.Init) != groups {
		return fmt.Errorf("init: a %s with %d classes has %d raw init values, got %d", d.Estimator, len(m.classes), groups, len(d.Init))
	}
	for k, x := range d.Init {
		if !finite(x) {
			return fmt.Errorf("init[%d]: must be finite, got %v", k, x)
		}
	}
	m.init = d.Init
	m.rawCols = groups
	scale := 1.0
	if hist {
		if d.LearningRate != nil {
			return fmt.Errorf("learningRate: a %s's leaves hold it already; remove the key", d.Estimator)
		}
		switch {
		case classifier && groups == 1 && d.Link == "logit":
			m.tf, m.label = tfExpit, labelArgmaxProba
		case classifier && groups > 1 && d.Link == "multinomial":
			m.tf, m.label = tfSoftmax, labelArgmaxProba
		case !classifier && d.Link == "identity":
			m.tf = tfIdentity
		case !classifier && d.Link == "log":
			m.tf = tfExp
		default:
			return fmt.Errorf("link: %q is not supported for a %s with %d classes (identity or log for a regressor, logit for a binary classifier, multinomial for more classes)", d.Link, d.Estimator, len(m.classes))
		}
	} else {
		if d.Link != "" {
			return fmt.Errorf("link: a %s has a loss, not a link", d.Estimator)
		}
		if d.LearningRate == nil || !finite(*d.LearningRate) || *d.LearningRate <= 0 {
			return fmt.Errorf("learningRate: a %s needs a finite learning rate > 0", d.Estimator)
		}
		scale = *d.LearningRate
		switch {
		case classifier && groups == 1 && d.Loss == "log_loss":
			m.tf, m.label = tfExpit, labelArgmaxProba
		case classifier && groups == 1 && d.Loss == "exponential":
			m.tf, m.label = tfExpit2, labelNonNegative
		case classifier && groups > 1 && d.Loss == "log_loss":
			m.tf, m.label = tfSoftmax, labelArgmaxProba
		case !classifier && slices.Contains([]string{"squared_error", "absolute_error", "huber", "quantile"}, d.Loss):
			m.tf = tfIdentity
		default:
			return fmt.Errorf("loss: %q is not supported for a %s with %d classes (log_loss or exponential for a classifier; squared_error, absolute_error, huber or quantile for a regressor)", d.Loss, d.Estimator, len(m.classes))
		}
	}
	if len(d.Trees) == 0 || len(d.Trees)%groups != 0 {
		return fmt.Errorf("trees: a %s with %d groups needs a positive multiple of %d trees (one per group and stage), got %d", d.Estimator, groups, groups, len(d.Trees))
	}
	return m.buildTrees(d, 1, groups, scale, hist)
}

func (m *Model) buildLinear(d *doc, classifier bool) error {
	if d.Loss != "" || d.Link != "" || d.LearningRate != nil || len(d.Init) > 0 {
		return fmt.Errorf("loss, link, learningRate, init: a %s has none", d.Estimator)
	}
	rows := d.NOutputs
	switch {
	case classifier && len(m.classes) == 2:
		rows = 1
	case classifier:
		rows = len(m.classes)
	case rows < 1 || rows > MaxOutputs:
		return fmt.Errorf("nOutputs: must be between 1 and %d, got %d", MaxOutputs, rows)
	}
	if classifier && d.NOutputs > 1 {
		return fmt.Errorf("nOutputs: multi-output classifiers are not supported")
	}
	if len(d.Coef) != rows {
		return fmt.Errorf("coef: a %s with %d outputs has %d rows, got %d", d.Estimator, rows, rows, len(d.Coef))
	}
	if rows*d.NFeatures > MaxCoef {
		return fmt.Errorf("coef: %d x %d coefficients, at most %d are allowed", rows, d.NFeatures, MaxCoef)
	}
	if len(d.Intercept) != rows {
		return fmt.Errorf("intercept: needs %d values (one per coef row), got %d", rows, len(d.Intercept))
	}
	m.coef = make([]float64, 0, rows*d.NFeatures)
	for k, row := range d.Coef {
		if len(row) != d.NFeatures {
			return fmt.Errorf("coef[%d]: has %d values, nFeatures is %d", k, len(row), d.NFeatures)
		}
		for j, x := range row {
			if !finite(x) {
				return fmt.Errorf("coef[%d][%d]: must be finite, got %v", k, j, x)
			}
		}
		m.coef = append(m.coef, row...)
	}
	for k, x := range d.Intercept {
		if !finite(x) {
			return fmt.Errorf("intercept[%d]: must be finite, got %v", k, x)
		}
	}
	m.intercept = d.Intercept
	m.rawCols = rows
	switch d.Estimator {
	case "LogisticRegression":
		switch {
		case d.MultiClass == "ovr" && rows == 1:
			m.tf, m.label = tfExpit, labelPositive
		case d.MultiClass == "multinomial" && rows == 1:
			m.tf, m.label = tfSoftmax2, labelPositive
		case d.MultiClass == "ovr":
			m.tf, m.label = tfOVR, labelArgmaxRaw
		case d.MultiClass == "multinomial":
			m.tf, m.label = tfSoftmax, labelArgmaxRaw
		default:
			return fmt.Errorf("multiClass: %q is not ovr or multinomial", d.MultiClass)
		}
	case "LinearSVC":
		m.tf, m.label = tfIdentity, labelArgmaxRaw
		if rows == 1 {
			m.label = labelPositive
		}
	}
	if d.Estimator != "LogisticRegression" && d.MultiClass != "" {
		return fmt.Errorf("multiClass: only a LogisticRegression has it")
	}
	return nil
}

// checkNames checks the feature and output names against the model.
func (m *Model) checkNames(d *doc) error {
	if d.FeatureNames != nil {
		if len(d.FeatureNames) != d.NFeatures {
			return fmt.Errorf("featureNames: has %d names, nFeatures is %d", len(d.FeatureNames), d.NFeatures)
		}
		for i, n := range d.FeatureNames {
			if n == "" || len(n) > MaxNameBytes {
				return fmt.Errorf("featureNames[%d]: must be 1 to %d bytes", i, MaxNameBytes)
			}
		}
		m.featureNames = d.FeatureNames
	}
	if len(d.Outputs) != m.outCols {
		return fmt.Errorf("outputs: the model gives %d columns, the artifact names %d", m.outCols, len(d.Outputs))
	}
	for i, n := range d.Outputs {
		if n == "" || len(n) > MaxNameBytes {
			return fmt.Errorf("outputs[%d]: must be 1 to %d bytes", i, MaxNameBytes)
		}
	}
	m.outputs = d.Outputs
	if len(d.Examples) > MaxExamples {
		return fmt.Errorf("examples: %d, at most %d are allowed", len(d.Examples), MaxExamples)
	}
	for i, ex := range d.Examples {
		if len(ex.Outputs) != m.outCols {
			return fmt.Errorf("examples[%d].outputs: has %d values, the model gives %d", i, len(ex.Outputs), m.outCols)
		}
		for k, x := range ex.Outputs {
			if !finite(x) {
				return fmt.Errorf("examples[%d].outputs[%d]: must be finite, got %v", i, k, x)
			}
		}
		if !finite(ex.Tolerance) || ex.Tolerance < 0 {
			return fmt.Errorf("examples[%d].tolerance: must be a finite number >= 0, got %v", i, ex.Tolerance)
		}
		if len(ex.Instance) > MaxFields {
			return fmt.Errorf("examples[%d].instance: %d values, at most %d are allowed", i, len(ex.Instance), MaxFields)
		}
	}
	if in := d.Input; in != nil {
		if len(in.Fields) == 0 || len(in.Fields) > MaxFields {
			return fmt.Errorf("input.fields: must hold 1 to %d fields, got %d", MaxFields, len(in.Fields))
		}
		if len(in.Preprocess) > 4*MaxFields {
			return fmt.Errorf("input.preprocess: %d steps, at most %d are allowed", len(in.Preprocess), 4*MaxFields)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// nextDown32 is the largest float32 not above t: for every float32 x,
// float64(x) <= t exactly when x <= nextDown32(t), which is how
// scikit-learn compares a float32 (or float64-of-float32) value with its
// float64 threshold.
func nextDown32(t float64) float32 {
	f := float32(t)
	if float64(f) > t {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	return f
}
