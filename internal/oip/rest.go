package oip

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/schema"
)

// maxDepth bounds how deeply a tensor's "data" may nest.
const maxDepth = 32

// DecodeJSON decodes an OIP v2 REST infer body strictly:
//
//	{"id": "...", "parameters": {"deadline_ms": 50, "routing_key": "..."},
//	 "inputs": [{"name": "...", "shape": [n], "datatype": "FP32", "data": [...]}],
//	 "outputs": [{"name": "..."}]}
//
// Unknown and duplicate keys, unknown parameters, nested objects and
// trailing data are errors; "data" may be flat or nested (row-major). The
// tensors' shapes and datatypes are checked here; their fit to the model's
// fields is checked by Instances.
func DecodeJSON(body []byte, maxDeadline time.Duration) (*Request, error) {
	return decodeJSON(body, maxDeadline, false)
}

// decodeJSON is DecodeJSON; binary (the JSON header of a binary request)
// lets inputs name their binary_data_size instead of carrying data.
//
// It reads the body in one pass with schema.Scanner (the /v1 decoder's
// scanner: encoding/json's token semantics, messages and offsets without an
// allocation per token): names, datatypes and number literals are
// substrings of the scanner's one copy of the body, a tensor's elements go
// into one slice sized from its shape, and paths for messages are built
// only when an error needs them. Every rule and message is the one
// decodeJSONTokens (the encoding/json reference, in the tests) gives, in
// the same order; FuzzOIPDecodeSame holds the two together.
func decodeJSON(body []byte, maxDeadline time.Duration, binary bool) (*Request, error) {
	d := restDecoder{sc: schema.NewScanner(body), binary: binary, left: len(body)}
	tok, err := d.sc.Token("")
	if err != nil {
		return nil, err
	}
	if tok.Kind != schema.TokDelim || tok.Delim != '{' {
		return nil, errs.New(errs.InvalidArgument, "the request body must be a JSON object")
	}
	out := &Request{}
	var seen uint8
	for d.sc.More() {
		key, err := d.key("")
		if err != nil {
			return nil, err
		}
		bit := uint8(0)
		switch key {
		case "id":
			bit = 1
		case "parameters":
			bit = 2
		case "inputs":
			bit = 4
		case "outputs":
			bit = 8
		case "model_name":
			bit = 16
		case "model_version":
			bit = 32
		}
		if bit != 0 && seen&bit != 0 {
			return nil, errs.Field(errs.InvalidArgument, key, "duplicate key")
		}
		seen |= bit
		switch key {
		case "id":
			if out.ID, err = d.str("id"); err != nil {
				return nil, err
			}
			if !ValidID(out.ID) {
				return nil, errs.Field(errs.InvalidArgument, "id", "must be 1 to 128 printable ASCII characters without spaces")
			}
		case "model_name":
			if out.ModelName, err = d.str("model_name"); err != nil {
				return nil, err
			}
		case "model_version":
			if out.ModelVersion, err = d.str("model_version"); err != nil {
				return nil, err
			}
		case "parameters":
			if err := d.params(func() string { return key }, func(name string, p param) error {
				return requestParam(out, name, p, maxDeadline)
			}); err != nil {
				return nil, err
			}
		case "inputs":
			if err := d.open('[', "inputs"); err != nil {
				return nil, err
			}
			for i := 0; d.sc.More(); i++ {
				if i >= MaxTensors {
					return nil, errs.Field(errs.InvalidArgument, "inputs", "more than %d input tensors", MaxTensors)
				}
				if out.Inputs == nil {
					out.Inputs = make([]Tensor, 0, 4)
				}
				out.Inputs = append(out.Inputs, Tensor{binarySize: -1})
				if err := d.tensor(&out.Inputs[i], i); err != nil {
					return nil, err
				}
			}
			if _, err := d.sc.Token("inputs"); err != nil { // ']'
				return nil, err
			}
		case "outputs":
			if err := d.open('[', "outputs"); err != nil {
				return nil, err
			}
			for i := 0; d.sc.More(); i++ {
				if i >= MaxTensors {
					return nil, errs.Field(errs.InvalidArgument, "outputs", "more than %d output tensors", MaxTensors)
				}
				name, bin, err := d.output(i)
				if err != nil {
					return nil, err
				}
				out.Outputs = append(out.Outputs, name)
				out.OutputBinary = append(out.OutputBinary, bin)
			}
			if _, err := d.sc.Token("outputs"); err != nil { // ']'
				return nil, err
			}
		default:
			return nil, errs.Field(errs.InvalidArgument, key, "unknown key (expected id, model_name, model_version, parameters, inputs, outputs)")
		}
	}
	if _, err := d.sc.Token(""); err != nil { // '}'
		return nil, err
	}
	if d.sc.Rest() {
		return nil, errs.New(errs.InvalidArgument, "malformed JSON: data after the top-level object")
	}
	if seen&4 == 0 {
		return nil, errs.Field(errs.InvalidArgument, "inputs", "is required")
	}
	for i := range out.Inputs {
		if out.Inputs[i].binarySize >= 0 {
			continue // checked with its bytes (DecodeBinary)
		}
		if err := CheckTensor(&out.Inputs[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ValidID is the rule for a request id (as X-Request-Id's).
func ValidID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// paramKind says what a parameter's value is.
type paramKind uint8

const (
	paramOther  paramKind = iota // null, or a gRPC choice Sluice does not read
	paramString                  // Text
	paramNumber                  // Text: a JSON number literal
	paramInt                     // Int: a gRPC int64_param
	paramUint                    // Uint: a gRPC uint64_param
	paramBool                    // Bool
)

// param is one parameter's value, from JSON or from gRPC.
type param struct {
	Kind paramKind
	Text string
	Int  int64
	Uint uint64
	Bool bool
}

// requestParam applies one request-level parameter. The protocol's
// parameters are an open set: the ones that mean something to Sluice are
// checked as strictly as data, the rest (Triton's sequence_id,
// sequence_start, sequence_end, any a client adds) are ignored.
func requestParam(out *Request, name string, p param, maxDeadline time.Duration) error {
	field := paramField(name)
	switch name {
	case "deadline_ms":
		var ms float64
		switch p.Kind {
		case paramNumber:
			f, err := strconv.ParseFloat(p.Text, 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return errs.Field(errs.InvalidArgument, field, "invalid number %s", errs.Clip(p.Text))
			}
			ms = f
		case paramInt:
			ms = float64(p.Int)
		case paramUint:
			ms = float64(p.Uint)
		default:
			return errs.Field(errs.InvalidArgument, field, "expected a number of milliseconds")
		}
		if ms <= 0 {
			return errs.Field(errs.InvalidArgument, field, "must be > 0, got %v", ms)
		}
		if ms < 0.001 {
			return errs.Field(errs.InvalidArgument, field, "must be at least 0.001 (1µs), got %v", ms)
		}
		if ms > float64(maxDeadline)/float64(time.Millisecond) {
			return errs.Field(errs.InvalidArgument, field, "must be at most %d (the server's maximum deadline), got %v", maxDeadline.Milliseconds(), ms)
		}
		out.DeadlineMs = ms
	case "routing_key":
		rk := p.Text
		if p.Kind != paramString || rk == "" || utf8.RuneCountInString(rk) > 256 {
			return errs.Field(errs.InvalidArgument, field, "must be a string of 1 to 256 characters")
		}
		out.RoutingKey = rk
	case "binary_data_output":
		if p.Kind != paramBool {
			return errs.Field(errs.InvalidArgument, field, "must be true or false")
		}
		out.BinaryOutput = p.Bool
	case "timeout":
		// Triton's: microseconds, 0 for the model's default. The deadline
		// then, capped by the server's maximum as grpc-timeout is.
		us, ok := paramUint64(p)
		if !ok {
			return errs.Field(errs.InvalidArgument, field, "must be a non-negative integer (microseconds)")
		}
		out.TimeoutUs = us
		if max := uint64(maxDeadline / time.Microsecond); us > max {
			out.TimeoutUs = max
		}
	case "priority":
		// Triton's levels (0 the default, 1 the highest) are a model's
		// configuration; Sluice has one online class, so every level is
		// served as online. sluice_priority lowers a call.
		pr, ok := paramUint64(p)
		if !ok {
			return errs.Field(errs.InvalidArgument, field, "must be a non-negative integer (0 is the default level)")
		}
		out.Priority = pr
	case "sluice_priority":
		if p.Kind != paramString || p.Text != "batch" {
			return errs.Field(errs.InvalidArgument, field, "must be \"batch\" (or absent for online priority)")
		}
		out.Batch = true
	case "idempotency_key":
		if p.Kind != paramString || !ValidID(p.Text) {
			return errs.Field(errs.InvalidArgument, field, "must be 1 to 128 printable ASCII characters without spaces")
		}
		out.IdempotencyKey = p.Text
	}
	return nil
}

// paramUint64 reads a non-negative integer parameter, however it came.
func paramUint64(p param) (uint64, bool) {
	switch p.Kind {
	case paramNumber:
		u, err := strconv.ParseUint(p.Text, 10, 64)
		return u, err == nil
	case paramInt:
		return uint64(p.Int), p.Int >= 0
	case paramUint:
		return p.Uint, true
	}
	return 0, false
}

// inputParam applies one parameter of an input tensor: binary_data_size
// (the REST binary extension, binary: the body has a binary part) sizes
// its bytes; shared memory is refused (the data is not in the request);
// any other (a client's binary_data flag, its own) is ignored. where
// names the tensor.
func inputParam(t *Tensor, where func() string, name string, p param, binary bool) error {
	switch name {
	case "binary_data_size":
		if !binary {
			return errs.New(errs.InvalidArgument, "%s: parameter binary_data_size needs the Inference-Header-Content-Length header (the length of the JSON header the binary data follows)", where())
		}
		k, err := strconv.ParseInt(p.Text, 10, 64)
		if p.Kind != paramNumber || err != nil || k < 0 {
			return errs.New(errs.InvalidArgument, "%s: binary_data_size must be a non-negative integer (bytes)", where())
		}
		t.binarySize = k
	case "shared_memory_region", "shared_memory_byte_size", "shared_memory_offset":
		return errs.New(errs.InvalidArgument, "%s: parameter %s: shared memory is not supported; send the tensor's elements in the request", where(), name)
	}
	return nil
}

// outputParam applies one parameter of a requested output: binary_data
// (REST binary extension; on gRPC it asks for raw_output_contents) is a
// boolean; classification and shared memory, which would change what the
// answer holds or where, are refused; any other is ignored.
func outputParam(where func() string, name string, p param, bin **bool) error {
	switch name {
	case "binary_data":
		if p.Kind != paramBool {
			return errs.New(errs.InvalidArgument, "%s: binary_data must be true or false", where())
		}
		b := p.Bool
		*bin = &b
	case "classification":
		return errs.New(errs.InvalidArgument, "%s: parameter classification is not supported; ask for the output's values (a model.yaml postprocess: topk answers classes)", where())
	case "shared_memory_region", "shared_memory_byte_size", "shared_memory_offset":
		return errs.New(errs.InvalidArgument, "%s: parameter %s: shared memory is not supported; the output is answered in the response", where(), name)
	}
	return nil
}

// paramField is "parameters."+name, without a concatenation for the
// parameters taken.
func paramField(name string) string {
	switch name {
	case "deadline_ms":
		return "parameters.deadline_ms"
	case "routing_key":
		return "parameters.routing_key"
	}
	return "parameters." + name
}

// Deadline is the request's deadline: the lesser of deadline_ms and
// timeout (0: neither).
func (r *Request) Deadline() time.Duration {
	d := time.Duration(r.DeadlineMs * float64(time.Millisecond))
	if t := time.Duration(r.TimeoutUs) * time.Microsecond; r.TimeoutUs > 0 && (d == 0 || t < d) {
		d = t
	}
	return d
}

// restDecoder is one decodeJSON run.
type restDecoder struct {
	sc     *schema.Scanner
	binary bool
	left   int     // bytes of the body: bounds the elements presized from a shape
	shapes []int64 // the tensors' shapes are carved from here
}

// at sets the field of a syntax error of the scanner (read with an empty
// path) to path, as JSONToken would have named it.
func at(err error, path string) error {
	e := err.(*errs.Error)
	e.Field = path
	return e
}

// key reads an object key (schema.ObjectKey).
func (d *restDecoder) key(path string) (string, error) {
	tok, err := d.sc.Token(path)
	if err != nil {
		return "", err
	}
	if tok.Kind != schema.TokString {
		return "", errs.Field(errs.InvalidArgument, path, "malformed JSON: expected an object key")
	}
	return tok.Text, nil
}

// open reads the delimiter want or fails naming path (schema.ExpectDelim
// below the top level).
func (d *restDecoder) open(want byte, path string) error {
	tok, err := d.sc.Token(path)
	if err != nil {
		return err
	}
	if tok.Kind != schema.TokDelim || tok.Delim != want {
		what := "an object"
		if want == '[' {
			what = "an array"
		}
		return errs.Field(errs.InvalidArgument, path, "expected %s", what)
	}
	return nil
}

// str reads a string value.
func (d *restDecoder) str(path string) (string, error) {
	tok, err := d.sc.Token(path)
	if err != nil {
		return "", err
	}
	if tok.Kind != schema.TokString {
		return "", errs.Field(errs.InvalidArgument, path, "expected a string")
	}
	return tok.Text, nil
}

// maxParams bounds the entries of one parameters object (each is checked
// against the others for a duplicate).
const maxParams = 64

// params reads a parameters object of scalar values; path is built only
// for an error.
func (d *restDecoder) params(path func() string, set func(name string, p param) error) error {
	tok, err := d.sc.Token("")
	if err != nil {
		return at(err, path())
	}
	if tok.Kind != schema.TokDelim || tok.Delim != '{' {
		return errs.Field(errs.InvalidArgument, path(), "expected an object")
	}
	var seenBuf [8]string
	seen := seenBuf[:0]
	for d.sc.More() {
		tok, err := d.sc.Token("")
		if err != nil {
			return at(err, path())
		}
		if tok.Kind != schema.TokString {
			return errs.Field(errs.InvalidArgument, path(), "malformed JSON: expected an object key")
		}
		k := tok.Text
		for _, s := range seen {
			if s == k {
				return errs.Field(errs.InvalidArgument, path()+"."+k, "duplicate key")
			}
		}
		if len(seen) == maxParams {
			return errs.Field(errs.InvalidArgument, path(), "more than %d parameters", maxParams)
		}
		seen = append(seen, k)
		v, err := d.sc.Token("")
		if err != nil {
			return at(err, path()+"."+k)
		}
		var p param
		switch v.Kind {
		case schema.TokDelim:
			return errs.Field(errs.InvalidArgument, path()+"."+k, "a parameter is a string, number or boolean")
		case schema.TokString:
			p = param{Kind: paramString, Text: v.Text}
		case schema.TokNumber:
			p = param{Kind: paramNumber, Text: v.Text}
		case schema.TokBool:
			p = param{Kind: paramBool, Bool: v.Bool}
		}
		if err := set(k, p); err != nil {
			return err
		}
	}
	if _, err := d.sc.Token(""); err != nil { // '}'
		return at(err, path())
	}
	return nil
}

// tensorPath is "inputs[i]".
func tensorPath(i int) string { return "inputs[" + strconv.Itoa(i) + "]" }

// tensorWhere names a tensor in messages: by its name once known.
func tensorWhere(i int, name string) string {
	if name != "" {
		return fmt.Sprintf("input %q", errs.Clip(name))
	}
	return tensorPath(i)
}

// Bits of a tensor's keys seen.
const (
	keyName = 1 << iota
	keyDatatype
	keyShape
	keyParameters
	keyData
)

// tensor reads input tensor i into t (binarySize set to -1).
func (d *restDecoder) tensor(t *Tensor, i int) error {
	tok, err := d.sc.Token("")
	if err != nil {
		return at(err, tensorPath(i))
	}
	if tok.Kind != schema.TokDelim || tok.Delim != '{' {
		return errs.Field(errs.InvalidArgument, tensorPath(i), "expected an object")
	}
	var seen uint8
	for d.sc.More() {
		tok, err := d.sc.Token("")
		if err != nil {
			return at(err, tensorPath(i))
		}
		if tok.Kind != schema.TokString {
			return errs.Field(errs.InvalidArgument, tensorPath(i), "malformed JSON: expected an object key")
		}
		k := tok.Text
		var bit uint8
		switch k {
		case "name":
			bit = keyName
		case "datatype":
			bit = keyDatatype
		case "shape":
			bit = keyShape
		case "parameters":
			bit = keyParameters
		case "data":
			bit = keyData
		}
		if bit != 0 && seen&bit != 0 {
			return errs.New(errs.InvalidArgument, "%s: duplicate key %q", tensorWhere(i, t.Name), errs.Clip(k))
		}
		seen |= bit
		switch k {
		case "name":
			v, err := d.sc.Token("")
			if err != nil {
				return at(err, tensorPath(i)+".name")
			}
			if v.Kind != schema.TokString {
				return errs.Field(errs.InvalidArgument, tensorPath(i)+".name", "expected a string")
			}
			if t.Name = v.Text; t.Name == "" {
				return errs.New(errs.InvalidArgument, "%s: name must not be empty", tensorPath(i))
			}
		case "datatype":
			v, err := d.sc.Token("")
			if err != nil {
				return at(err, tensorWhere(i, t.Name)+".datatype")
			}
			if v.Kind != schema.TokString {
				return errs.Field(errs.InvalidArgument, tensorWhere(i, t.Name)+".datatype", "expected a string")
			}
			t.Datatype = v.Text
		case "shape":
			if err := d.shape(t, i); err != nil {
				return err
			}
		case "parameters":
			name := t.Name
			if err := d.params(func() string { return tensorWhere(i, name) + ".parameters" }, func(p string, v param) error {
				return inputParam(t, func() string { return tensorWhere(i, name) }, p, v, d.binary)
			}); err != nil {
				return err
			}
		case "data":
			v, err := d.sc.Token("")
			if err != nil {
				return at(err, tensorWhere(i, t.Name)+".data")
			}
			if v.Kind != schema.TokDelim || v.Delim != '[' {
				return errs.Field(errs.InvalidArgument, tensorWhere(i, t.Name)+".data", "expected an array")
			}
			t.Data = make([]schema.Value, 0, d.presize(t))
			if t.Data, err = d.data(i, t.Name, t.Data, 1); err != nil {
				return err
			}
		default:
			return errs.New(errs.InvalidArgument, "%s: unknown key %q (expected name, shape, datatype, parameters, data)", tensorWhere(i, t.Name), errs.Clip(k))
		}
	}
	if _, err := d.sc.Token(""); err != nil { // '}'
		return at(err, tensorPath(i))
	}
	switch {
	case t.Name == "":
		return errs.New(errs.InvalidArgument, "%s: name is required", tensorPath(i))
	case seen&keyDatatype == 0:
		return errs.New(errs.InvalidArgument, "%s: datatype is required", tensorWhere(i, t.Name))
	case seen&keyShape == 0:
		return errs.New(errs.InvalidArgument, "%s: shape is required", tensorWhere(i, t.Name))
	case t.binarySize >= 0 && seen&keyData != 0:
		return errs.New(errs.InvalidArgument, "%s: has both data and binary_data_size: send its elements in one of them", tensorWhere(i, t.Name))
	case t.binarySize < 0 && seen&keyData == 0 && d.binary:
		return errs.New(errs.InvalidArgument, "%s: data is required (or parameters.binary_data_size, with its bytes after the JSON header)", tensorWhere(i, t.Name))
	case t.binarySize < 0 && seen&keyData == 0:
		return errs.New(errs.InvalidArgument, "%s: data is required", tensorWhere(i, t.Name))
	}
	return nil
}

// shape reads a tensor's shape into t.Shape, carved from d.shapes.
func (d *restDecoder) shape(t *Tensor, i int) error {
	where := func() string { return tensorWhere(i, t.Name) }
	tok, err := d.sc.Token("")
	if err != nil {
		return at(err, where()+".shape")
	}
	if tok.Kind != schema.TokDelim || tok.Delim != '[' {
		return errs.Field(errs.InvalidArgument, where()+".shape", "expected an array")
	}
	if cap(d.shapes)-len(d.shapes) < 8 {
		d.shapes = make([]int64, 0, 32)
	}
	start := len(d.shapes)
	for k := 0; d.sc.More(); k++ {
		tok, err := d.sc.Token("")
		if err != nil {
			return at(err, where()+".shape")
		}
		x, perr := strconv.ParseInt(tok.Text, 10, 64)
		if tok.Kind != schema.TokNumber || perr != nil || x < 0 {
			return errs.New(errs.InvalidArgument, "%s: shape holds non-negative integers", where())
		}
		if k >= 8 {
			return errs.New(errs.InvalidArgument, "%s: shape has more than 8 dimensions", where())
		}
		d.shapes = append(d.shapes, x)
	}
	if _, err := d.sc.Token(""); err != nil { // ']'
		return at(err, where()+".shape")
	}
	t.Shape = d.shapes[start:len(d.shapes):len(d.shapes)]
	return nil
}

// presize is the capacity of a tensor's data: its shape's element count
// when the shape came first, bounded by the elements the body can hold
// (two bytes each but the last) and by maxPresize, so that a shape that
// lies costs little; a larger tensor grows as it is read.
func (d *restDecoder) presize(t *Tensor) int {
	if t.Shape == nil {
		return 0
	}
	limit := min(d.left/2+1, maxPresize)
	n := 1
	for _, x := range t.Shape {
		if x > int64(limit) {
			return limit
		}
		if n *= int(x); n > limit {
			return limit
		}
	}
	return n
}

// maxPresize bounds the elements presize reserves (3 MiB of values).
const maxPresize = 1 << 16

// data reads the rest of an array whose '[' was read, flattening nested
// arrays (readData).
func (d *restDecoder) data(i int, name string, out []schema.Value, depth int) ([]schema.Value, error) {
	where := func() string { return tensorWhere(i, name) }
	if depth > maxDepth {
		return nil, errs.New(errs.InvalidArgument, "%s: data nests deeper than %d", where(), maxDepth)
	}
	for {
		tok, err := d.sc.Token("")
		if err != nil {
			return nil, at(err, where()+".data")
		}
		if len(out) >= MaxElements {
			return nil, errs.New(errs.InvalidArgument, "%s: more than %d elements", where(), MaxElements)
		}
		switch tok.Kind {
		case schema.TokNumber:
			out = append(out, schema.Value{Kind: schema.Number, Text: tok.Text})
		case schema.TokString:
			out = append(out, schema.Value{Kind: schema.String, Text: tok.Text})
		case schema.TokBool:
			out = append(out, schema.Value{Kind: schema.Bool, Bool: tok.Bool})
		case schema.TokNull:
			return nil, errs.New(errs.InvalidArgument, "%s: element %d: null is not a tensor element", where(), len(out))
		case schema.TokDelim:
			switch tok.Delim {
			case ']':
				return out, nil
			case '[':
				if out, err = d.data(i, name, out, depth+1); err != nil {
					return nil, err
				}
			default:
				return nil, errs.New(errs.InvalidArgument, "%s: element %d: objects are not tensor elements", where(), len(out))
			}
		}
	}
}

// outputPath is "outputs[i]".
func outputPath(i int) string { return "outputs[" + strconv.Itoa(i) + "]" }

// output reads requested output i: its name and its binary_data
// parameter (nil: not given).
func (d *restDecoder) output(i int) (string, *bool, error) {
	tok, err := d.sc.Token("")
	if err != nil {
		return "", nil, at(err, outputPath(i))
	}
	if tok.Kind != schema.TokDelim || tok.Delim != '{' {
		return "", nil, errs.Field(errs.InvalidArgument, outputPath(i), "expected an object")
	}
	name := ""
	var bin *bool
	var seen uint8
	for d.sc.More() {
		tok, err := d.sc.Token("")
		if err != nil {
			return "", nil, at(err, outputPath(i))
		}
		if tok.Kind != schema.TokString {
			return "", nil, errs.Field(errs.InvalidArgument, outputPath(i), "malformed JSON: expected an object key")
		}
		k := tok.Text
		var bit uint8
		switch k {
		case "name":
			bit = keyName
		case "parameters":
			bit = keyParameters
		}
		if bit != 0 && seen&bit != 0 {
			return "", nil, errs.New(errs.InvalidArgument, "%s: duplicate key %q", outputPath(i), errs.Clip(k))
		}
		seen |= bit
		switch k {
		case "name":
			v, err := d.sc.Token("")
			if err != nil {
				return "", nil, at(err, outputPath(i)+".name")
			}
			if v.Kind != schema.TokString {
				return "", nil, errs.Field(errs.InvalidArgument, outputPath(i)+".name", "expected a string")
			}
			name = v.Text
		case "parameters":
			if err := d.params(func() string { return outputPath(i) + ".parameters" }, func(p string, v param) error {
				return outputParam(func() string { return outputPath(i) }, p, v, &bin)
			}); err != nil {
				return "", nil, err
			}
		default:
			return "", nil, errs.New(errs.InvalidArgument, "%s: unknown key %q (expected name, parameters)", outputPath(i), errs.Clip(k))
		}
	}
	if _, err := d.sc.Token(""); err != nil {
		return "", nil, at(err, outputPath(i))
	}
	if name == "" {
		return "", nil, errs.New(errs.InvalidArgument, "%s: name is required", outputPath(i))
	}
	return name, bin, nil
}

// EncodeJSON renders a prediction as an OIP v2 REST infer response, by
// hand and deterministically (a replay is byte for byte): the columns cols
// of the outputs as FP32 tensors of shape [n], NaN and infinities as null.
func EncodeJSON(p *gateway.Prediction, id string, cols []int) []byte {
	return AppendJSON(make([]byte, 0, 128+len(cols)*(p.Out.Rows*16+64)), p, id, cols)
}

// AppendJSON appends EncodeJSON's body to b (a reused buffer: nothing is
// allocated per row or per output).
func AppendJSON(b []byte, p *gateway.Prediction, id string, cols []int) []byte {
	n := p.Out.Rows
	b = appendHead(b, p, id)
	for k, j := range cols {
		if k > 0 {
			b = append(b, ',')
		}
		b = appendOutputHead(b, p, j, n)
		b = append(b, `],"data":[`...)
		b = appendData(b, p, j)
		b = append(b, "]}"...)
	}
	b = append(b, "]}\n"...)
	return b
}

// EncodeError renders an error as the OIP v2 REST error body
// {"error": "..."}.
func EncodeError(e *errs.Error) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Error string `json:"error"`
	}{Message(e)})
	return b.Bytes()
}

// Input is the one conversion of a decoded request (REST or gRPC) into the
// gateway's input: the tensors are read with the schema of the version the
// call would reach now (g.Spec), and the requested outputs are checked
// against its outputs. routingHeader (X-Routing-Key; "" when absent)
// overrides the routing_key parameter; id is the request id.
func Input(g *gateway.Gateway, req *Request, model string, version int, id, routingHeader string) (gateway.Input, error) {
	rk := req.RoutingKey
	if routingHeader != "" {
		if n := utf8.RuneCountInString(routingHeader); n > 256 {
			return gateway.Input{}, errs.Field(errs.InvalidArgument, "X-Routing-Key", "must be at most 256 characters, got %d", n)
		}
		rk = routingHeader
	}
	key := rk
	if key == "" {
		key = id
	}
	var sch *schema.Schema
	if spec := g.Spec(model, version, key); spec != nil {
		sch = spec.Schema
		if _, err := SelectOutputs(spec.OutputNames, req.Outputs); err != nil {
			return gateway.Input{}, err
		}
		if spec.Manifest.Features != nil {
			// The entity is no schema field and filled fields may be
			// absent: the tensors become instances by their names and
			// the gateway validates them after enrichment.
			sch = nil
		}
	}
	if direct(sch) {
		n, err := checkInputs(req.Inputs, sch)
		if err != nil {
			return gateway.Input{}, err
		}
		return gateway.Input{Rows: newTensorRows(req.Inputs, int(n)), Deadline: req.Deadline(), RoutingKey: rk}, nil
	}
	insts, err := Instances(req.Inputs, sch)
	if err != nil {
		return gateway.Input{}, err
	}
	return gateway.Input{Instances: insts, Deadline: req.Deadline(), RoutingKey: rk}, nil
}
