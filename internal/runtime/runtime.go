// Package runtime defines the seam between Sluice and the code that runs a
// model: a Runtime turns artifact bytes into a Model, a Model turns a batch of
// numeric rows into a batch of output rows. Runtimes know tensors only: no
// HTTP, no queues, no tenants, no schema names. Each runtime lives in its own
// subpackage and registers itself here by name.
package runtime

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Batch is n rows of d features, row-major. NaN marks a missing value.
//
// A sequence model's batch instead holds one variable-length row of token
// ids per instance in Tokens (len(Tokens) == Rows, Cols 0, Data nil); the
// runtime pads the rows to the batch's longest. A model with several
// sequence inputs (Spec.SeqInputs: input_ids and attention_mask) gets each
// instance's inputs end to end in its one row, each of the same length
// (so a row of k inputs is k × that length; SeqLen).
type Batch struct {
	Rows   int
	Cols   int
	Data   []float32 // len == Rows*Cols
	Tokens [][]int64 // sequence models only: one row of token ids per instance
}

// SeqLen is the length of each input of a token row that packs inputs
// sequence inputs end to end (inputs <= 1: one input, the row's length).
func SeqLen(row []int64, inputs int) int {
	if inputs <= 1 {
		return len(row)
	}
	return len(row) / inputs
}

// Row returns row i of the batch.
func (b Batch) Row(i int) []float32 { return b.Data[i*b.Cols : (i+1)*b.Cols] }

// Output is n rows of k output columns, row-major.
type Output struct {
	Rows int
	Cols int
	Data []float32 // len == Rows*Cols
}

// Row returns row i of the output.
func (o Output) Row(i int) []float32 { return o.Data[i*o.Cols : (i+1)*o.Cols] }

// Info describes the shape a loaded model expects and produces.
type Info struct {
	// Inputs is the number of features per row the model reads
	// (0 if the model accepts any width, as the synthetic runtime does).
	Inputs int
	// Outputs is the number of output columns per row.
	Outputs int
	// Detail is a short human description ("gbtree, 500 trees, binary:logistic").
	Detail string
	// Sequence is true when the model reads rows of token ids (Batch.Tokens)
	// rather than float rows; Inputs is then 0.
	Sequence bool
	// SeqInputs is how many sequence inputs a sequence model's token row
	// packs (1 for one input; 2 for input_ids and attention_mask).
	SeqInputs int
	// FeatureNames are the names the artifact itself declares for its
	// input columns, in the order it reads them (XGBoost's feature_names,
	// scikit-learn's feature_names_in_, an ONNX model's feature_names
	// metadata); nil when it declares none. Len is Inputs when set.
	// hosting.CheckFieldOrder refuses a package whose schema's columns
	// (after preprocessing) are not these, in this order.
	FeatureNames []string
}

// FeatureNamer is implemented by runtimes whose artifacts can declare the
// names of their input columns (a loaded model's Info.FeatureNames). When
// an artifact of such a runtime declares none, the order of the package's
// fields cannot be checked against it: `sluice check` and `sluice push`
// warn with this help instead.
type FeatureNamer interface {
	FeatureNamesHelp() FeatureNamesHelp
}

// FeatureNamesHelp says where a runtime's artifacts keep their feature
// names and how a user adds them, for messages.
type FeatureNamesHelp struct {
	// Where names them in the artifact, e.g. "XGBoost feature_names".
	Where string
	// Add says how to add them, e.g. "train on a pandas DataFrame, or set
	// booster.feature_names = [...] before save_model".
	Add string
}

// Model is one loaded instance of a model version. Predict must be safe to
// call from one goroutine at a time; the serving layer gives each replica its
// own Model.
type Model interface {
	Info() Info
	Predict(ctx context.Context, in Batch) (Output, error)
	Close() error
}

// MemoryReporter is implemented by models that know the memory they hold
// (the synthetic runtime's "memory"). Placement then counts that figure
// instead of the RSS growth of the load, which traffic served meanwhile
// (its garbage) can inflate several times over.
type MemoryReporter interface {
	MemoryBytes() int64
}

// MemoryDeclarer is implemented by runtimes whose artifact says how much
// memory each loaded model will hold (the synthetic runtime's "memory"):
// a worker reserves that figure before the load instead of an estimate
// from the artifact's size. 0: the artifact declares nothing.
type MemoryDeclarer interface {
	DeclaredMemory(artifact []byte) int64
}

// Spec is what a runtime may know about the version it loads besides the
// artifact bytes.
type Spec struct {
	// Name is "model@N" (or the package name before publishing), for messages.
	Name string
	// Artifact is the artifact's file name in the package (model.yaml
	// artifact:), for messages that name the file; "" when unknown.
	Artifact string
	// Features is the number of features the package's schema produces after
	// preprocessing; runtimes that need it to size things may use it.
	Features int
	// Outputs is the number of output fields the package declares.
	Outputs int
	// Session holds session options from model.yaml (the onnx: section);
	// runtimes without sessions ignore it.
	Session SessionOptions
	// Sequence is true when the package's schema is a sequence field: the
	// model must read token ids. PadValue is the token id rows are padded
	// with (model.yaml serving.padValue, default 0).
	Sequence bool
	PadValue int64
	// SeqInputs are a sequence schema's fields, one model input each, in
	// the order a token row packs them (Batch). Set with Sequence.
	SeqInputs []SeqInput
}

// SeqInput is one sequence input of a model: an integer tensor [batch,
// seq] named as its field.
type SeqInput struct {
	Name  string
	DType string // "int64" or "int32"
	// Pad is what a padded position holds: PadValue for token ids, 0 for
	// a mask (model.yaml mask: true), so a padded row reads as the row.
	Pad  int64
	Mask bool
}

// SessionOptions tune a runtime's own thread pools (model.yaml onnx:).
type SessionOptions struct {
	IntraOpThreads int `yaml:"intraOpThreads,omitempty"` // 0: the runtime's default (1 for onnx)
	InterOpThreads int `yaml:"interOpThreads,omitempty"` // 0: the runtime's default (1 for onnx)
}

// Runtime loads artifacts of one kind.
type Runtime interface {
	// Load decodes and validates the artifact. A malformed artifact is an
	// error, never a panic.
	Load(ctx context.Context, spec Spec, artifact []byte) (Model, error)
}

var (
	mu       sync.RWMutex // guards runtimes
	runtimes = map[string]Runtime{}
)

// Register makes a runtime available under name. It panics on a duplicate
// name: registration happens in init functions, so that is a programming error.
func Register(name string, r Runtime) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := runtimes[name]; dup {
		panic("runtime: duplicate registration of " + name)
	}
	runtimes[name] = r
}

// Lookup returns the runtime registered under name.
func Lookup(name string) (Runtime, error) {
	mu.RLock()
	defer mu.RUnlock()
	r, ok := runtimes[name]
	if !ok {
		return nil, fmt.Errorf("unknown runtime %q (known: %v)", name, namesLocked())
	}
	return r, nil
}

// Names lists the registered runtimes, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return namesLocked()
}

func namesLocked() []string {
	out := make([]string, 0, len(runtimes))
	for n := range runtimes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
