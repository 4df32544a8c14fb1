package onnx

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluiceml/sluice/internal/runtime"
)

// This file reads the little of an ONNX ModelProto that the runtime checks
// before it hands the bytes to ONNX Runtime: the opset, the producer and the
// graph's inputs and outputs (name, element type, shape). It is a plain
// protobuf walker over onnx.proto's field numbers, so it needs no generated
// code and no cgo, and it is what the fuzz target exercises. ONNX Runtime
// still parses and validates the whole model when the session is created.

// Dim is one dimension of a declared tensor shape: Value >= 0 is fixed, -1
// is dynamic (Param names it when the exporter did, e.g. "batch").
type Dim struct {
	Value int64
	Param string
}

func (d Dim) String() string {
	switch {
	case d.Value >= 0:
		return strconv.FormatInt(d.Value, 10)
	case d.Param != "":
		return d.Param
	default:
		return "?"
	}
}

// Tensor describes one graph input or output.
type Tensor struct {
	Name     string
	Kind     string // "tensor", or "sequence", "map", "sparse tensor", "optional", "unknown"
	ElemType int32  // onnx.TensorProto.DataType; 1 is FLOAT
	HasShape bool
	Dims     []Dim
}

// ShapeString renders the shape as "[batch, 30]".
func (t Tensor) ShapeString() string {
	if !t.HasShape {
		return "[unknown shape]"
	}
	parts := make([]string, len(t.Dims))
	for i, d := range t.Dims {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// TypeString names the element type ("float32").
func (t Tensor) TypeString() string {
	if t.Kind != "tensor" {
		return t.Kind
	}
	return elemTypeName(t.ElemType)
}

func elemTypeName(t int32) string {
	names := map[int32]string{
		0: "undefined", 1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16",
		6: "int32", 7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "float64",
		12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128", 16: "bfloat16",
	}
	if n, ok := names[t]; ok {
		return n
	}
	return fmt.Sprintf("element type %d", t)
}

// ModelInfo is what ReadModelInfo finds in a ModelProto.
type ModelInfo struct {
	IRVersion int64
	Opset     int64 // version of the default ("" or "ai.onnx") operator set; 0 if absent
	Producer  string
	Inputs    []Tensor // graph inputs that are not initializers
	Outputs   []Tensor
	// FeatureNames are the input columns' names from the model's metadata
	// property feature_names (a JSON list of strings, or names separated
	// by commas); nil without it.
	FeatureNames []string
}

// MetaFeatureNames is the metadata property that names a model's input
// columns (onnx.helper.set_model_props(model, {"feature_names": ...})).
const MetaFeatureNames = "feature_names"

// ONNX protobuf field numbers (onnx/onnx.proto).
const (
	modelIRVersion   = 1
	modelProducer    = 2
	modelGraph       = 7
	modelOpsetImport = 8
	modelMetadata    = 14

	entryKey   = 1
	entryValue = 2

	opsetDomain  = 1
	opsetVersion = 2

	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12

	tensorProtoName = 8

	valueInfoName = 1
	valueInfoType = 2

	typeTensor       = 1
	typeSequence     = 4
	typeMap          = 5
	typeSparseTensor = 8
	typeOptional     = 9

	tensorTypeElem  = 1
	tensorTypeShape = 2

	shapeDim = 1

	dimValue = 1
	dimParam = 2
)

const (
	wireVarint = 0
	wireI64    = 1
	wireBytes  = 2
	wireStartG = 3
	wireEndG   = 4
	wireI32    = 5
)

var errTruncated = errors.New("truncated protobuf")

// field is one protobuf field: num and wire type; v is the varint (or fixed)
// value, b the bytes of a length-delimited field.
type field struct {
	num  uint64
	wire int
	v    uint64
	b    []byte
}

// fields walks the top-level fields of one protobuf message.
func fields(msg []byte, fn func(f field) error) error {
	for len(msg) > 0 {
		key, n := binary.Uvarint(msg)
		if n <= 0 {
			return errTruncated
		}
		msg = msg[n:]
		f := field{num: key >> 3, wire: int(key & 7)}
		if f.num == 0 {
			return errors.New("protobuf field number 0")
		}
		switch f.wire {
		case wireVarint:
			f.v, n = binary.Uvarint(msg)
			if n <= 0 {
				return errTruncated
			}
			msg = msg[n:]
		case wireI64:
			if len(msg) < 8 {
				return errTruncated
			}
			f.v, msg = binary.LittleEndian.Uint64(msg), msg[8:]
		case wireI32:
			if len(msg) < 4 {
				return errTruncated
			}
			f.v, msg = uint64(binary.LittleEndian.Uint32(msg)), msg[4:]
		case wireBytes:
			l, n := binary.Uvarint(msg)
			if n <= 0 || l > uint64(len(msg)-n) {
				return errTruncated
			}
			f.b, msg = msg[n:n+int(l)], msg[n+int(l):]
		default: // groups are not used by onnx.proto
			return fmt.Errorf("unsupported protobuf wire type %d", f.wire)
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// ReadModelInfo reads the opset and the graph's inputs and outputs. It
// returns an error for bytes that are not a protobuf ModelProto with a graph.
func ReadModelInfo(data []byte) (*ModelInfo, error) {
	mi := &ModelInfo{}
	var graph []byte
	sawGraph := false
	err := fields(data, func(f field) error {
		switch {
		case f.num == modelIRVersion && f.wire == wireVarint:
			mi.IRVersion = int64(f.v)
		case f.num == modelProducer && f.wire == wireBytes:
			mi.Producer = string(f.b)
		case f.num == modelGraph && f.wire == wireBytes:
			graph, sawGraph = f.b, true
		case f.num == modelOpsetImport && f.wire == wireBytes:
			var domain string
			var version int64
			if err := fields(f.b, func(g field) error {
				switch {
				case g.num == opsetDomain && g.wire == wireBytes:
					domain = string(g.b)
				case g.num == opsetVersion && g.wire == wireVarint:
					version = int64(g.v)
				}
				return nil
			}); err != nil {
				return err
			}
			if domain == "" || domain == "ai.onnx" {
				mi.Opset = version
			}
		case f.num == modelMetadata && f.wire == wireBytes:
			var key, value string
			if err := fields(f.b, func(g field) error {
				switch {
				case g.num == entryKey && g.wire == wireBytes:
					key = string(g.b)
				case g.num == entryValue && g.wire == wireBytes:
					value = string(g.b)
				}
				return nil
			}); err != nil {
				return err
			}
			if key == MetaFeatureNames {
				names, err := parseFeatureNames(value)
				if err != nil {
					return err
				}
				mi.FeatureNames = names
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !sawGraph {
		return nil, errors.New("no graph in the model (is this an ONNX file?)")
	}
	if mi.IRVersion <= 0 {
		return nil, errors.New("no ir_version in the model (is this an ONNX file?)")
	}
	inits := map[string]bool{}
	var ins, outs [][]byte
	err = fields(graph, func(f field) error {
		if f.wire != wireBytes {
			return nil
		}
		switch f.num {
		case graphInitializer:
			return fields(f.b, func(g field) error {
				if g.num == tensorProtoName && g.wire == wireBytes {
					inits[string(g.b)] = true
				}
				return nil
			})
		case graphInput:
			ins = append(ins, f.b)
		case graphOutput:
			outs = append(outs, f.b)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	for _, b := range ins {
		t, err := readValueInfo(b)
		if err != nil {
			return nil, fmt.Errorf("graph input: %w", err)
		}
		if !inits[t.Name] { // IR < 4 lists initializers as inputs too
			mi.Inputs = append(mi.Inputs, t)
		}
	}
	for _, b := range outs {
		t, err := readValueInfo(b)
		if err != nil {
			return nil, fmt.Errorf("graph output: %w", err)
		}
		mi.Outputs = append(mi.Outputs, t)
	}
	return mi, nil
}

// parseFeatureNames reads the feature_names metadata property: a JSON list
// of non-empty strings, or names separated by commas.
func parseFeatureNames(v string) ([]string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	var names []string
	if strings.HasPrefix(v, "[") {
		if err := json.Unmarshal([]byte(v), &names); err != nil {
			return nil, fmt.Errorf("metadata property %s: want a JSON list of strings or names separated by commas: %v", MetaFeatureNames, err)
		}
	} else {
		names = strings.Split(v, ",")
	}
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
		if names[i] == "" {
			return nil, fmt.Errorf("metadata property %s: name %d is empty (%q)", MetaFeatureNames, i, v)
		}
	}
	return names, nil
}

func readValueInfo(b []byte) (Tensor, error) {
	t := Tensor{Kind: "unknown"}
	err := fields(b, func(f field) error {
		if f.wire != wireBytes {
			return nil
		}
		switch f.num {
		case valueInfoName:
			t.Name = string(f.b)
		case valueInfoType:
			return fields(f.b, func(g field) error {
				if g.wire != wireBytes {
					return nil
				}
				switch g.num {
				case typeTensor:
					t.Kind = "tensor"
					return readTensorType(g.b, &t)
				case typeSequence:
					t.Kind = "sequence"
				case typeMap:
					t.Kind = "map"
				case typeSparseTensor:
					t.Kind = "sparse tensor"
				case typeOptional:
					t.Kind = "optional"
				}
				return nil
			})
		}
		return nil
	})
	return t, err
}

func readTensorType(b []byte, t *Tensor) error {
	return fields(b, func(f field) error {
		switch {
		case f.num == tensorTypeElem && f.wire == wireVarint:
			t.ElemType = int32(f.v)
		case f.num == tensorTypeShape && f.wire == wireBytes:
			t.HasShape = true
			t.Dims = t.Dims[:0]
			return fields(f.b, func(g field) error {
				if g.num != shapeDim || g.wire != wireBytes {
					return nil
				}
				d := Dim{Value: -1}
				if err := fields(g.b, func(h field) error {
					switch {
					case h.num == dimValue && h.wire == wireVarint:
						d.Value = int64(h.v)
						if d.Value < 0 {
							d.Value = -1
						}
					case h.num == dimParam && h.wire == wireBytes:
						d.Param = string(h.b)
					}
					return nil
				}); err != nil {
					return err
				}
				t.Dims = append(t.Dims, d)
				return nil
			})
		}
		return nil
	})
}

// Contract is how a model's tensors map onto Sluice's rows: one float32
// input [batch, Features], one float32 output [batch, Outputs] (or [batch]
// when Outputs is 1).
type Contract struct {
	Input, Output Tensor
	Features      int
	Outputs       int
	VectorOutput  bool // the output is [batch]
	// Sequence: the input is int64 token ids [batch, seq] with both axes
	// dynamic; Features is then 0.
	Sequence bool
	// Inputs are a sequence model's inputs, every one an integer tensor
	// [batch, seq] (Input is the first): one for a model of token ids,
	// several for e.g. input_ids and attention_mask. In the model's order
	// until Bind puts them in the order of the package's fields.
	Inputs []Tensor
}

// isIntTensor: an int64 or int32 tensor (a sequence input).
func isIntTensor(t Tensor) bool { return t.Kind == "tensor" && (t.ElemType == 7 || t.ElemType == 6) }

// CheckContract validates a model's declared inputs and outputs against the
// package: features is the schema's width after preprocessing (0: any, only
// the model decides) and outputs the number of output fields.
func CheckContract(mi *ModelInfo, features, outputs int) (*Contract, error) {
	list := func(ts []Tensor) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = fmt.Sprintf("%q %s %s", t.Name, t.TypeString(), t.ShapeString())
		}
		return strings.Join(s, ", ")
	}
	if len(mi.Inputs) == 0 || len(mi.Inputs) > 1 && !slices.ContainsFunc(mi.Inputs, isIntTensor) {
		return nil, fmt.Errorf("the model has %d inputs (%s); runtime onnx serves models with one float32 input [batch, features], or integer inputs [batch, seq] (token ids, attention masks) only", len(mi.Inputs), list(mi.Inputs))
	}
	if len(mi.Outputs) != 1 {
		return nil, fmt.Errorf("the model has %d outputs (%s); runtime onnx serves models with exactly one output, a float32 tensor [batch, outputs] or [batch]", len(mi.Outputs), list(mi.Outputs))
	}
	in, out := mi.Inputs[0], mi.Outputs[0]
	c := &Contract{Input: in, Output: out}
	if slices.ContainsFunc(mi.Inputs, isIntTensor) {
		for _, t := range mi.Inputs {
			if !isIntTensor(t) {
				return nil, fmt.Errorf("input %q is %s %s but the model's other inputs are integer token rows (%s); runtime onnx serves models whose inputs are all int64 or int32 [batch, seq]", t.Name, t.TypeString(), t.ShapeString(), list(mi.Inputs))
			}
			if err := checkSequenceInput(t, features); err != nil {
				return nil, err
			}
		}
		c.Sequence, c.Inputs = true, slices.Clone(mi.Inputs)
		if err := checkOutput(c, out, outputs); err != nil {
			return nil, err
		}
		return c, nil
	}
	if in.Kind != "tensor" || in.ElemType != 1 {
		return nil, fmt.Errorf("input %q is %s; want float32 (export the model with float32 inputs)", in.Name, in.TypeString())
	}
	if !in.HasShape || len(in.Dims) != 2 {
		return nil, fmt.Errorf("input %q has shape %s; want [batch, %s]: a rank-2 tensor with one row per instance", in.Name, in.ShapeString(), featuresWord(features))
	}
	if b := in.Dims[0]; b.Value >= 0 {
		return nil, fmt.Errorf("input %q has a fixed batch dimension of %d (shape %s); export the model with a dynamic batch axis (torch.onnx.export(..., dynamic_axes={%q: {0: \"batch\"}, ...}))", in.Name, b.Value, in.ShapeString(), in.Name)
	}
	d := in.Dims[1]
	if d.Value < 0 {
		return nil, fmt.Errorf("input %q has a dynamic feature dimension %q (shape %s); want a fixed [batch, %s]", in.Name, d.String(), in.ShapeString(), featuresWord(features))
	}
	if d.Value == 0 || d.Value > 1<<24 {
		return nil, fmt.Errorf("input %q has %d features (shape %s); want between 1 and %d", in.Name, d.Value, in.ShapeString(), 1<<24)
	}
	if features > 0 && d.Value != int64(features) {
		return nil, fmt.Errorf("input %q has %d features (shape %s) but model.yaml's input schema produces %d after preprocessing", in.Name, d.Value, in.ShapeString(), features)
	}
	c.Features = int(d.Value)
	if n := len(mi.FeatureNames); n > 0 && n != c.Features {
		return nil, fmt.Errorf("metadata property %s names %d features but input %q has %d (shape %s)", MetaFeatureNames, n, in.Name, c.Features, in.ShapeString())
	}
	if err := checkOutput(c, out, outputs); err != nil {
		return nil, err
	}
	return c, nil
}

// Bind puts a sequence contract's inputs in the order of the package's
// sequence fields, each input named as its field, and checks each
// field's dtype against its tensor. A model of one input takes a field of
// any name. Every input must have a field and every field an input.
func (c *Contract) Bind(fields []runtime.SeqInput) error {
	if !c.Sequence {
		return nil
	}
	names := func(ts []Tensor) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = fmt.Sprintf("%q %s %s", t.Name, t.TypeString(), t.ShapeString())
		}
		return strings.Join(s, ", ")
	}
	if len(fields) == 0 {
		return nil // no package (sluice init): the model's order
	}
	var bound []Tensor
	if len(fields) == 1 && len(c.Inputs) == 1 {
		bound = c.Inputs
	} else {
		for _, f := range fields {
			i := slices.IndexFunc(c.Inputs, func(t Tensor) bool { return t.Name == f.Name })
			if i < 0 {
				return fmt.Errorf("sequence field %q names no input of the model (its inputs: %s); name each sequence field as the input it fills", f.Name, names(c.Inputs))
			}
			bound = append(bound, c.Inputs[i])
		}
		if len(fields) != len(c.Inputs) {
			var missing []string
			for _, t := range c.Inputs {
				if !slices.ContainsFunc(fields, func(f runtime.SeqInput) bool { return f.Name == t.Name }) {
					missing = append(missing, fmt.Sprintf("%q %s %s", t.Name, t.TypeString(), t.ShapeString()))
				}
			}
			return fmt.Errorf("the model has %d inputs but model.yaml declares %d sequence fields: no field for input %s; declare one sequence field per input, named as it", len(c.Inputs), len(fields), strings.Join(missing, ", "))
		}
	}
	for i, f := range fields {
		want := f.DType
		if want == "" {
			want = "int64"
		}
		if got := bound[i].TypeString(); got != want {
			return fmt.Errorf("input %q is %s %s but its field %q declares dtype %s; set dtype: %s", bound[i].Name, got, bound[i].ShapeString(), f.Name, want, got)
		}
	}
	for i := 1; i < len(bound); i++ {
		if bound[i].ElemType != bound[0].ElemType {
			return fmt.Errorf("inputs %q (%s) and %q (%s) have two element types; runtime onnx serves the sequence inputs of a model in one type", bound[0].Name, bound[0].TypeString(), bound[i].Name, bound[i].TypeString())
		}
	}
	c.Inputs, c.Input = bound, bound[0]
	return nil
}

// checkSequenceInput checks an integer input: a sequence model's token
// ids or mask, [batch, seq] with both axes dynamic.
func checkSequenceInput(in Tensor, features int) error {
	if !in.HasShape || len(in.Dims) != 2 {
		return fmt.Errorf("input %q is %s with shape %s; a sequence model's input must be token ids [batch, seq], rank 2", in.Name, in.TypeString(), in.ShapeString())
	}
	if b := in.Dims[0]; b.Value >= 0 {
		return fmt.Errorf("input %q has a fixed batch dimension of %d (shape %s); export the model with a dynamic batch axis (dynamic_axes={%q: {0: \"batch\", 1: \"seq\"}})", in.Name, b.Value, in.ShapeString(), in.Name)
	}
	if l := in.Dims[1]; l.Value >= 0 {
		return fmt.Errorf("input %q has a fixed sequence length of %d (shape %s); export the model with a dynamic sequence axis (dynamic_axes={%q: {0: \"batch\", 1: \"seq\"}})", in.Name, l.Value, in.ShapeString(), in.Name)
	}
	if features > 0 {
		return fmt.Errorf("input %q is int64 token ids %s (a sequence model) but model.yaml's schema produces %d float features; declare one input field of type sequence", in.Name, in.ShapeString(), features)
	}
	return nil
}

// checkOutput checks the one output: float32 [batch, k] or [batch].
func checkOutput(c *Contract, out Tensor, outputs int) error {
	if out.Kind != "tensor" || out.ElemType != 1 {
		return fmt.Errorf("output %q is %s; want float32", out.Name, out.TypeString())
	}
	if !out.HasShape || len(out.Dims) < 1 || len(out.Dims) > 2 {
		alt := ""
		if outputs <= 1 {
			alt = " or [batch]"
		}
		return fmt.Errorf("output %q has shape %s; want [batch, %s]%s", out.Name, out.ShapeString(), outputsWord(outputs), alt)
	}
	if b := out.Dims[0]; b.Value >= 0 {
		return fmt.Errorf("output %q has a fixed batch dimension of %d (shape %s); export the model with a dynamic batch axis on its output too", out.Name, b.Value, out.ShapeString())
	}
	if len(out.Dims) == 1 {
		if outputs > 1 {
			return fmt.Errorf("output %q has shape %s (one value per row) but model.yaml declares %d output fields", out.Name, out.ShapeString(), outputs)
		}
		c.Outputs, c.VectorOutput = 1, true
		return nil
	}
	k := out.Dims[1]
	if k.Value < 0 {
		return fmt.Errorf("output %q has a dynamic second dimension %q (shape %s); want a fixed [batch, %s]", out.Name, k.String(), out.ShapeString(), outputsWord(outputs))
	}
	if k.Value == 0 || k.Value > 1<<20 {
		return fmt.Errorf("output %q has %d columns (shape %s); want between 1 and %d", out.Name, k.Value, out.ShapeString(), 1<<20)
	}
	if outputs > 0 && k.Value != int64(outputs) {
		return fmt.Errorf("output %q has %d columns (shape %s) but model.yaml declares %d output fields", out.Name, k.Value, out.ShapeString(), outputs)
	}
	c.Outputs = int(k.Value)
	return nil
}

func featuresWord(features int) string {
	if features > 0 {
		return strconv.Itoa(features)
	}
	return "features"
}

func outputsWord(outputs int) string {
	if outputs > 0 {
		return strconv.Itoa(outputs)
	}
	return "outputs"
}
