package sklearn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// Format and FormatVersion are what the exporter writes in "format" and
// "formatVersion" (docs/sklearn.md).
const (
	Format        = "sluice-sklearn"
	FormatVersion = 1
)

// Bounds of an artifact: anything larger is refused before it is built.
const (
	MaxArtifactBytes = 1 << 30
	MaxTrees         = 1 << 20
	MaxNodes         = 1 << 27 // over all trees
	MaxDepth         = 1024
	MaxFeatures      = 1 << 24
	MaxClasses       = 1 << 16
	MaxOutputs       = 1 << 16
	MaxCoef          = 1 << 24
	MaxExamples      = 64
	MaxFields        = 4096
	MaxNameBytes     = 1024
	bitsetWords      = 8 // HistGradientBoosting's category bitsets: 256 bits
)

// doc is the artifact as the exporter writes it.
type doc struct {
	Format          string            `json:"format"`
	FormatVersion   int               `json:"formatVersion"`
	SklearnVersion  string            `json:"sklearnVersion"`
	Estimator       string            `json:"estimator"`
	NFeatures       int               `json:"nFeatures"`
	NOutputs        int               `json:"nOutputs"`
	Classes         []json.RawMessage `json:"classes"`
	Loss            string            `json:"loss"`
	Link            string            `json:"link"`
	LearningRate    *float64          `json:"learningRate"`
	Init            []float64         `json:"init"`
	Trees           []treeDoc         `json:"trees"`
	KnownCategories [][]uint32        `json:"knownCategories"`
	Coef            [][]float64       `json:"coef"`
	Intercept       []float64         `json:"intercept"`
	MultiClass      string            `json:"multiClass"`
	// Decision: a binary classifier's output after the label is its
	// decision_function (the raw score before the sigmoid), not
	// predict_proba: what a CalibratedClassifierCV's calibrator reads.
	Decision bool `json:"decision"`
	// Postprocess is model.yaml's postprocess: steps the exporter made
	// of a CalibratedClassifierCV, for sluice init (the runtime does not
	// run them: the gateway does, from model.yaml).
	Postprocess  []map[string]any `json:"postprocess"`
	FeatureNames []string         `json:"featureNames"`
	Outputs      []string         `json:"outputs"`
	Input        *Input           `json:"input"`
	Examples     []Example        `json:"examples"`
}

type treeDoc struct {
	Left        []int32    `json:"left"`
	Right       []int32    `json:"right"`
	Feature     []int32    `json:"feature"`
	Threshold   []float64  `json:"threshold"`
	Value       []float64  `json:"value"`
	MissingLeft []int8     `json:"missingLeft"`
	CatIndex    []int32    `json:"catIndex"`
	Categories  [][]uint32 `json:"categories"`
}

// Input is what the exporter made of the pipeline in front of the
// estimator: Sluice input fields and preprocessing steps (model.yaml's
// input.fields and preprocess), for sluice init and sluice export-sklearn.
// The runtime does not use it to predict.
type Input struct {
	Fields     []Field  `json:"fields"`
	Preprocess []Step   `json:"preprocess"`
	Dropped    []string `json:"dropped,omitempty"` // training columns the pipeline drops
}

// Field is one input field (model.yaml input.fields[i]).
type Field struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Values   []string `json:"values,omitempty"`
	Default  any      `json:"default,omitempty"`
	Optional bool     `json:"optional,omitempty"`
	Source   string   `json:"source,omitempty"` // the training frame's name of the column, when it is not a valid field name
}

// Step is one preprocessing step (model.yaml preprocess[i]).
type Step struct {
	Op    string   `json:"op"`
	Field string   `json:"field"`
	Mean  *float64 `json:"mean,omitempty"`
	Std   *float64 `json:"std,omitempty"`
	Min   *float64 `json:"min,omitempty"`
	Max   *float64 `json:"max,omitempty"`
}

// Example is one row with scikit-learn's own outputs for it, in the
// artifact's output order.
type Example struct {
	Instance map[string]any `json:"instance"`
	Outputs  []float64      `json:"outputs"`
	// Tolerance is how far the outputs may move when the estimator reads
	// the row's values as float32, as Sluice hands them (absent: 1e-6).
	Tolerance float64 `json:"tolerance,omitempty"`
	// Post are the outputs of the postprocess steps scikit-learn's own
	// calibrated model gave for the row (output name → a number, or a
	// label), with PostTolerance for the numbers.
	Post          map[string]any `json:"post,omitempty"`
	PostTolerance float64        `json:"postTolerance,omitempty"`
}

// decode reads the artifact strictly: unknown keys, trailing data, a
// wrong format or version are errors naming the key.
func decode(data []byte) (*doc, error) {
	if len(data) > MaxArtifactBytes {
		return nil, fmt.Errorf("artifact is %d bytes, at most %d are allowed", len(data), MaxArtifactBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 || bytes.TrimSpace(data)[0] != '{' {
		return nil, errors.New("not a JSON object (export a fitted model with scripts/sluice_export_sklearn.py)")
	}
	// The format is read first, so that a JSON of another kind is told
	// as such rather than by its first unknown key.
	var head struct {
		Format        string `json:"format"`
		FormatVersion int    `json:"formatVersion"`
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&head); err != nil {
		return nil, jsonErr(err)
	}
	if head.Format != Format {
		return nil, fmt.Errorf("format: %q is not %q (export a fitted model with scripts/sluice_export_sklearn.py)", head.Format, Format)
	}
	if head.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("formatVersion: %d is not supported (this Sluice reads version %d; export with the script of this Sluice)", head.FormatVersion, FormatVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d doc
	if err := dec.Decode(&d); err != nil {
		return nil, jsonErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	return &d, nil
}

func jsonErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: expected %s, got a JSON %s", te.Field, te.Type, te.Value)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return errors.New(msg)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func errorf(err error) error { return fmt.Errorf("sklearn: %w", err) }
