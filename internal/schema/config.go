// Package schema owns a model version's input contract: strict validation of
// instances against typed fields, and the preprocessing steps that turn a
// valid instance into the numeric feature row the model sees. It knows
// nothing of HTTP, files or runtimes; callers hand it decoded values and
// get back float32 rows or errors that name the offending field. Scanner
// decodes predict bodies in one pass with the token decoder's errors; scan.go
// says why it is hand-written rather than a library.
package schema

// Field declares one input field (model.yaml input.fields[i]).
type Field struct {
	Name     string   `yaml:"name"`
	Type     string   `yaml:"type"`
	Min      *float64 `yaml:"min,omitempty"`
	Max      *float64 `yaml:"max,omitempty"`
	Optional bool     `yaml:"optional,omitempty"`
	Default  any      `yaml:"default,omitempty"`
	Values   []string `yaml:"values,omitempty"`
	// MaxLength bounds a sequence field's length (type sequence only).
	MaxLength int `yaml:"maxLength,omitempty"`
	// DType is a sequence field's element type in the model's input
	// tensor: "int64" (the default when empty) or "int32".
	DType string `yaml:"dtype,omitempty"`
	// Mask marks a sequence field as an attention mask (type sequence
	// only): its values are 0 or 1, and a padded position gets 0.
	Mask bool `yaml:"mask,omitempty"`
}

// Step is one preprocessing step (model.yaml preprocess[i]).
type Step struct {
	Op         string    `yaml:"op"`
	Field      string    `yaml:"field"`
	Mean       *float64  `yaml:"mean,omitempty"`
	Std        *float64  `yaml:"std,omitempty"`
	Min        *float64  `yaml:"min,omitempty"`
	Max        *float64  `yaml:"max,omitempty"`
	Boundaries []float64 `yaml:"boundaries,omitempty"`
}

// Field types.
const (
	TypeFloat    = "float"
	TypeInt      = "int"
	TypeBool     = "bool"
	TypeCategory = "category"
	// TypeSequence is a variable-length list of token ids (integers in
	// [0, 2^31)), one model input tensor [batch, seq]. A schema with a
	// sequence field has sequence fields only (several for a model with
	// several inputs, e.g. input_ids and attention_mask, all of one length
	// per instance) and no preprocessing; its instances become token rows,
	// not float rows.
	TypeSequence = "sequence"
)

// Sequence element types (Field.DType).
const (
	DTypeInt64 = "int64"
	DTypeInt32 = "int32"
)

// MaxSequenceLength bounds a sequence field's maxLength.
const MaxSequenceLength = 1 << 16

// Preprocessing ops.
const (
	OpStandardize = "standardize"
	OpLog1p       = "log1p"
	OpClip        = "clip"
	OpBucketize   = "bucketize"
	OpOnehot      = "onehot"
	OpOrdinal     = "ordinal"
)

// Problem is one thing wrong with a schema definition, located by its key
// path in model.yaml ("input.fields[2].min").
type Problem struct {
	Path    string
	Message string
}

func (p Problem) Error() string { return p.Path + ": " + p.Message }
