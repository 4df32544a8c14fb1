// Package oip is the Open Inference Protocol v2 model shared by both OIP
// transports (REST on the HTTP server, gRPC): tensors (JSON, read in one
// pass by schema.Scanner with encoding/json's messages, rest.go; typed
// contents, raw contents and the REST binary tensor extension, binary.go),
// their conversion into the instances the /v1 path validates or, for any
// schema but a sequence one, straight into rows under the same rules
// (direct.go), output tensors appended into reused buffers, model
// metadata and the messages errors are rendered with. It knows no
// transport and runs no prediction: the gateway does. The hop between the
// gateway and its workers is internal/hop, which a worker links without
// this package (and so without the gateway and its stores). The generated
// protocol code is in inferencepb.
//
// Tensor layout per model kind:
//   - tabular: one tensor per model.yaml input field, named as the field,
//     shape [n] or [n,1]; any numeric datatype (INT8..INT64, UINT8..UINT64,
//     FP16, BF16, FP32, FP64: datatype.go) for float and int fields (floats
//     holding integers are taken for an int field, as /v1 takes 3.0), BOOL
//     for bool fields, BYTES (strings) for category fields. An optional
//     field's tensor may be left out.
//   - sequence: one integer tensor named as the sequence field, shape
//     [n,L]: row i is instance i's token ids, right-padded with -1 to the
//     longest row (-1 is never a token id). A -1 before a token id is an
//     error.
//   - outputs: one FP32 tensor per model.yaml output field, shape [n].
package oip

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/schema"
)

// Datatypes Sluice takes and gives.
const (
	BOOL  = "BOOL"
	INT32 = "INT32"
	INT64 = "INT64"
	FP32  = "FP32"
	FP64  = "FP64"
	BYTES = "BYTES"
)

// Pad is the padding value of a sequence tensor's rows.
const Pad = -1

// MaxTensors bounds how many input tensors a request may carry.
const MaxTensors = 4096

// MaxElements bounds a tensor's element count before any model limit is
// known (transports also bound bytes).
const MaxElements = 1 << 26

// Tensor is one decoded input tensor. Data is row-major; numbers keep the
// text they were sent as (REST) or their shortest exact form (gRPC), so
// that the schema judges them as /v1 does. A tensor of numbers or booleans
// sent as bytes (gRPC raw_input_contents, REST binary data) keeps them in
// Raw instead (little-endian, sized exactly, BOOL bytes 0 or 1) and Data
// is nil until a conversion needs values.
type Tensor struct {
	Name     string
	Datatype string
	Shape    []int64
	Data     []schema.Value
	Raw      []byte
	RawField string // where Raw came from, for messages ("raw_input_contents", "binary data")

	binarySize int64 // REST: its binary_data_size (-1: none; JSON data)
}

// Request is a decoded infer request.
type Request struct {
	ID string // the request's "id" ("" when absent): echoed, never an idempotency key
	// ModelName and ModelVersion are REST's top-level model_name and
	// model_version (KServe's client sends them): "" when absent; the
	// transport checks them against the path.
	ModelName, ModelVersion string
	Inputs                  []Tensor
	Outputs                 []string // requested outputs by name; empty: all
	DeadlineMs              float64  // the "deadline_ms" parameter (0: absent)
	RoutingKey              string   // the "routing_key" parameter
	TimeoutUs               uint64   // the "timeout" parameter (Triton's, microseconds; 0: absent), capped by the maximum deadline
	Priority                uint64   // the "priority" parameter (Triton's level; served as online)
	Batch                   bool     // the "sluice_priority": "batch" parameter: the batch serving class
	// IdempotencyKey is the "idempotency_key" parameter: the request id
	// that makes a retry replay, for a client that cannot set
	// X-Request-Id (the header wins).
	IdempotencyKey string
	// REST binary tensor extension: binary_data_output, and each requested
	// output's binary_data (nil: not given), parallel to Outputs.
	BinaryOutput bool
	OutputBinary []*bool
}

func tensorErr(name, format string, args ...any) *errs.Error {
	return errs.New(errs.InvalidArgument, "input %q: %s", errs.Clip(name), fmt.Sprintf(format, args...))
}

// elements checks a shape and returns its element count.
func elements(name string, shape []int64) (int64, error) {
	if len(shape) == 0 {
		return 0, tensorErr(name, "shape is required")
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, tensorErr(name, "shape %s has a negative dimension", ShapeString(shape))
		}
		if d > 0 && n > MaxElements/d {
			return 0, tensorErr(name, "shape %s has more than %d elements", ShapeString(shape), MaxElements)
		}
		n *= d
	}
	return n, nil
}

// ShapeString formats a shape as [2,3].
func ShapeString(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// CheckTensor checks what needs no schema: a known datatype, data length
// equal to the shape's element count, and values of the datatype's kind.
func CheckTensor(t *Tensor) error {
	if err := checkDatatype(t.Name, t.Datatype); err != nil {
		return err
	}
	n, err := elements(t.Name, t.Shape)
	if err != nil {
		return err
	}
	if t.Raw != nil {
		return checkRaw(t.Name, t.Datatype, n, t.Raw, t.RawField)
	}
	if int64(len(t.Data)) != n {
		return tensorErr(t.Name, "shape %s holds %d elements but %d were sent", ShapeString(t.Shape), n, len(t.Data))
	}
	for i, v := range t.Data {
		if err := checkValue(t, i, v); err != nil {
			return err
		}
	}
	return nil
}

func checkDatatype(name, dt string) error {
	if datatypeInfo(dt).kind != kindUnknown {
		return nil
	}
	if dt == "" {
		return tensorErr(name, "datatype is required")
	}
	return tensorErr(name, "datatype %q is not supported (use %s)", dt, datatypeList)
}

func checkValue(t *Tensor, i int, v schema.Value) error {
	switch k := datatypeInfo(t.Datatype).kind; k {
	case kindBool:
		if v.Kind != schema.Bool {
			return tensorErr(t.Name, "element %d: expected a boolean (datatype BOOL)", i)
		}
	case kindBytes:
		if v.Kind != schema.String {
			return tensorErr(t.Name, "element %d: expected a string (datatype BYTES)", i)
		}
	case kindInt, kindUint:
		if v.Kind != schema.Number {
			return tensorErr(t.Name, "element %d: expected an integer (datatype %s)", i, t.Datatype)
		}
		return checkInteger(t.Name, i, t.Datatype, v.Text)
	case kindFloat:
		if v.Kind != schema.Number {
			return tensorErr(t.Name, "element %d: expected a number (datatype %s)", i, t.Datatype)
		}
		if t.Datatype == FP16 {
			return checkHalf(t.Name, i, v.Text)
		}
	}
	return nil
}

// Instances converts the input tensors into instances, one per row, the
// way /v1 would have received them, so that the schema's strictness and
// messages apply per instance. sch interprets the tensors (which field,
// tabular or sequence, datatype per field); nil (the model's version is not
// known yet) reads [n] and [n,1] as one value per row and [n,L] as a
// sequence, and leaves every check by field to the gateway. Raw tensors
// are read into values first.
func Instances(ts []Tensor, sch *schema.Schema) ([]schema.Instance, error) {
	for i := range ts {
		if err := materialize(&ts[i]); err != nil {
			return nil, err
		}
	}
	rows, err := checkInputs(ts, sch)
	if err != nil {
		return nil, err
	}
	insts := make([]schema.Instance, rows)
	for i := range ts {
		t := &ts[i]
		seq := len(t.Shape) == 2 && t.Shape[1] != 1
		if sch != nil {
			seq = isSequence(sch, t.Name)
		}
		if !seq {
			for r := int64(0); r < rows; r++ {
				insts[r] = append(insts[r], schema.Member{Name: t.Name, Value: t.Data[r]})
			}
			continue
		}
		l := t.Shape[1]
		for r := int64(0); r < rows; r++ {
			row := t.Data[r*l : (r+1)*l]
			end := len(row)
			for end > 0 && isPad(row[end-1]) {
				end--
			}
			v := schema.Value{Kind: schema.Array, Items: make([]string, end)}
			for k := 0; k < end; k++ {
				if row[k].Kind != schema.Number {
					return nil, tensorErr(t.Name, "row %d: expected token ids", r)
				}
				v.Items[k] = row[k].Text
			}
			insts[r] = append(insts[r], schema.Member{Name: t.Name, Value: v})
		}
	}
	return insts, nil
}

// isSequence: the field name is one of sch's sequence fields.
func isSequence(sch *schema.Schema, name string) bool {
	i, ok := sch.FieldIndex(name)
	return ok && sch.Field(i).Type == schema.TypeSequence
}

// checkInputs checks the tensors as a request (names, each tensor, their
// fit to sch's fields and shapes, one row count) and returns the row
// count.
func checkInputs(ts []Tensor, sch *schema.Schema) (rows int64, err error) {
	if len(ts) == 0 {
		return 0, errs.Field(errs.InvalidArgument, "inputs", "at least one input tensor is required")
	}
	if len(ts) > MaxTensors {
		return 0, errs.Field(errs.InvalidArgument, "inputs", "%d input tensors, at most %d", len(ts), MaxTensors)
	}
	// Which names were sent: a map for many tensors, a scan for a few.
	var seenMap map[string]bool
	if len(ts) > 16 {
		seenMap = make(map[string]bool, len(ts))
	}
	seen := func(name string, upTo int) bool {
		if seenMap != nil {
			return seenMap[name]
		}
		for j := 0; j < upTo; j++ {
			if ts[j].Name == name {
				return true
			}
		}
		return false
	}
	for i := range ts {
		t := &ts[i]
		if t.Name == "" {
			return 0, errs.New(errs.InvalidArgument, "inputs[%d]: name is required", i)
		}
		if seen(t.Name, i) {
			return 0, tensorErr(t.Name, "duplicate input tensor")
		}
		if seenMap != nil {
			seenMap[t.Name] = true
		}
		if err := CheckTensor(t); err != nil {
			return 0, err
		}
	}
	if sch != nil {
		for i := range ts {
			if _, ok := sch.FieldIndex(ts[i].Name); !ok {
				return 0, tensorErr(ts[i].Name, "unknown input tensor (expected: %s)", expected(sch))
			}
		}
		for fi := range sch.NumFields() {
			f := sch.Field(fi)
			if !seen(f.Name, len(ts)) && !f.Optional && f.Default == nil {
				return 0, tensorErr(f.Name, "required input tensor is missing (datatype %s, shape %s)", Datatype(f), ShapeString(shapeOf(f)))
			}
		}
	}
	rows = -1
	first := ""
	for i := range ts {
		t := &ts[i]
		seq := len(t.Shape) == 2 && t.Shape[1] != 1
		if sch != nil {
			fi, _ := sch.FieldIndex(t.Name)
			f := sch.Field(fi)
			seq = f.Type == schema.TypeSequence
			if err := checkKind(t, f); err != nil {
				return 0, err
			}
			switch {
			case seq && len(t.Shape) != 2:
				return 0, tensorErr(t.Name, "shape %s: a sequence tensor is [n,L] (rows right-padded with %d)", ShapeString(t.Shape), Pad)
			case !seq && !(len(t.Shape) == 1 || len(t.Shape) == 2 && t.Shape[1] == 1):
				return 0, tensorErr(t.Name, "shape %s: a field's tensor is [n] or [n,1]", ShapeString(t.Shape))
			}
		} else if len(t.Shape) > 2 {
			return 0, tensorErr(t.Name, "shape %s: tensors are [n], [n,1] or [n,L]", ShapeString(t.Shape))
		}
		switch {
		case rows < 0:
			rows, first = t.Shape[0], t.Name
		case t.Shape[0] != rows:
			return 0, tensorErr(t.Name, "has %d rows but input %q has %d: every input tensor has one row per instance", t.Shape[0], first, rows)
		}
	}
	return rows, nil
}

func isPad(v schema.Value) bool {
	x, err := strconv.ParseInt(v.Text, 10, 64)
	return v.Kind == schema.Number && err == nil && x == Pad
}

// checkKind checks a tensor's datatype against its field's type.
func checkKind(t *Tensor, f schema.Field) error {
	ok := false
	switch f.Type {
	case schema.TypeFloat, schema.TypeInt:
		// Any number: an int field takes floats holding integers, as /v1
		// takes 3.0, and the schema judges each value.
		ok = isNumeric(t.Datatype)
	case schema.TypeBool:
		ok = t.Datatype == BOOL
	case schema.TypeCategory:
		ok = t.Datatype == BYTES
	case schema.TypeSequence:
		ok = isInteger(t.Datatype)
	}
	if !ok {
		return tensorErr(t.Name, "datatype %s does not fit field type %s (use %s)", t.Datatype, f.Type, Datatype(f))
	}
	return nil
}

func expected(sch *schema.Schema) string {
	var names []string
	for _, f := range sch.Fields() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// Datatype is the datatype a field's tensor is declared with in metadata.
func Datatype(f schema.Field) string {
	switch f.Type {
	case schema.TypeFloat:
		return FP32
	case schema.TypeSequence:
		if f.DType == schema.DTypeInt32 {
			return INT32
		}
		return INT64
	case schema.TypeInt:
		return INT64
	case schema.TypeBool:
		return BOOL
	}
	return BYTES
}

func shapeOf(f schema.Field) []int64 {
	if f.Type == schema.TypeSequence {
		return []int64{-1, -1}
	}
	return []int64{-1}
}

// SelectOutputs returns the output columns a request asked for (every
// output, in model.yaml order, when it named none).
func SelectOutputs(names, requested []string) ([]int, error) {
	if len(requested) == 0 {
		cols := make([]int, len(names))
		for i := range cols {
			cols[i] = i
		}
		return cols, nil
	}
	var cols []int
	seen := map[string]bool{}
	for _, r := range requested {
		if seen[r] {
			return nil, errs.New(errs.InvalidArgument, "output %q: requested twice", errs.Clip(r))
		}
		seen[r] = true
		j := -1
		for k, n := range names {
			if n == r {
				j = k
			}
		}
		if j < 0 {
			return nil, errs.New(errs.InvalidArgument, "output %q: unknown output (the model has: %s)", errs.Clip(r), strings.Join(names, ", "))
		}
		cols = append(cols, j)
	}
	return cols, nil
}

// TensorMeta describes one tensor in model metadata.
type TensorMeta struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// Metadata is a model's (or one version's) metadata.
type Metadata struct {
	Name     string       `json:"name"`
	Versions []string     `json:"versions"`
	Platform string       `json:"platform"`
	Inputs   []TensorMeta `json:"inputs"`
	Outputs  []TensorMeta `json:"outputs"`
}

// MetadataOf describes spec's tensors; versions lists the version numbers.
func MetadataOf(name string, versions []int, spec *modelpkg.Spec) Metadata {
	md := Metadata{Name: name, Versions: []string{}, Inputs: []TensorMeta{}, Outputs: []TensorMeta{}}
	for _, v := range versions {
		md.Versions = append(md.Versions, strconv.Itoa(v))
	}
	if spec == nil {
		return md
	}
	md.Platform = spec.Manifest.Runtime
	for _, f := range spec.Schema.Fields() {
		md.Inputs = append(md.Inputs, TensorMeta{Name: f.Name, Datatype: Datatype(f), Shape: shapeOf(f)})
	}
	if ff := spec.Manifest.Features; ff != nil && !ff.EntityInSchema(spec.Manifest.Input.Fields) {
		// The entity is an input the model does not read: the gateway
		// fills the features from it (the filled fields may be left out).
		dt := BYTES
		if ff.EntityType == modelpkg.EntityInt {
			dt = INT64
		}
		md.Inputs = append(md.Inputs, TensorMeta{Name: ff.Entity, Datatype: dt, Shape: []int64{-1}})
	}
	labels := gateway.Labels(spec)
	for j, o := range spec.OutputNames {
		dt := FP32
		if labels != nil && labels[j] != nil {
			dt = BYTES // a postprocess: label
		}
		md.Outputs = append(md.Outputs, TensorMeta{Name: o, Datatype: dt, Shape: []int64{-1}})
	}
	return md
}

// ParseVersion reads a version in a path or a request ("" is 0: the
// deployment picks).
func ParseVersion(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, errs.Field(errs.InvalidArgument, "version", "%q is not a version number (1, 2, …)", errs.Clip(s))
	}
	return n, nil
}

// Message renders an error for an OIP client. A field path of the /v1 form
// names the input tensor and its row: "instances[3].amount" becomes
// `input "amount" row 3`, "instances[3].tokens[5]" `input "tokens" row 3
// element 5`.
func Message(e *errs.Error) string {
	f := e.Field
	msg := e.Message
	if f != "" && strings.HasPrefix(msg, f+": ") {
		msg = strings.TrimPrefix(msg, f+": ")
	}
	if rest, ok := strings.CutPrefix(f, "instances["); ok {
		if i := strings.Index(rest, "]."); i > 0 {
			row, name := rest[:i], rest[i+2:]
			elem := ""
			if j := strings.IndexByte(name, '['); j > 0 && strings.HasSuffix(name, "]") {
				name, elem = name[:j], name[j+1:len(name)-1]
			}
			where := fmt.Sprintf("input %q row %s", name, row)
			if elem != "" {
				where += " element " + elem
			}
			return where + ": " + msg
		}
	}
	switch f {
	case "":
		return msg
	case "instances":
		return "inputs: " + msg
	}
	return f + ": " + msg
}

// FormatFloat32 is the shortest text that reads back as v.
func FormatFloat32(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }
