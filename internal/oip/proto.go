package oip

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/schema"
)

// FromProto decodes a gRPC infer request: typed contents, or
// raw_input_contents (little-endian; BYTES elements with a 4-byte length
// prefix) for every input, sized exactly. raw reports that the response
// answers raw_output_contents: the inputs were raw, or the request asked
// (binary_data_output, an output's binary_data true).
func FromProto(req *pb.ModelInferRequest, maxDeadline time.Duration) (out *Request, raw bool, err error) {
	out = &Request{ID: req.Id}
	if req.Id != "" && !ValidID(req.Id) {
		return nil, false, errs.Field(errs.InvalidArgument, "id", "must be 1 to 128 printable ASCII characters without spaces")
	}
	for _, k := range sortedKeys(req.Parameters) {
		v := protoParam(req.Parameters[k])
		if err := requestParam(out, k, v, maxDeadline); err != nil {
			return nil, false, err
		}
	}
	if len(req.Inputs) > MaxTensors {
		return nil, false, errs.Field(errs.InvalidArgument, "inputs", "%d input tensors, at most %d", len(req.Inputs), MaxTensors)
	}
	raw = len(req.RawInputContents) > 0
	if raw && len(req.RawInputContents) != len(req.Inputs) {
		return nil, false, errs.New(errs.InvalidArgument, "raw_input_contents has %d entries for %d inputs: send one per input, in order, or none", len(req.RawInputContents), len(req.Inputs))
	}
	for i, in := range req.Inputs {
		name := in.Name
		if name == "" {
			return nil, false, errs.New(errs.InvalidArgument, "inputs[%d]: name is required", i)
		}
		t := Tensor{Name: name, Datatype: in.Datatype, Shape: in.Shape}
		// KServe's client sends binary_data_size (an int64_param) with
		// raw_input_contents: it must be that input's byte count.
		for _, k := range sortedKeys(in.Parameters) {
			p := protoParam(in.Parameters[k])
			where := func() string { return fmt.Sprintf("input %q", errs.Clip(name)) }
			if k == "binary_data_size" {
				size, ok := paramUint64(p)
				switch {
				case !ok:
					return nil, false, tensorErr(name, "binary_data_size must be a non-negative integer (bytes)")
				case !raw:
					return nil, false, tensorErr(name, "parameter binary_data_size goes with raw_input_contents, and this request sends typed contents")
				case size != uint64(len(req.RawInputContents[i])):
					return nil, false, tensorErr(name, "binary_data_size is %d, but its raw_input_contents has %d bytes", size, len(req.RawInputContents[i]))
				}
				continue
			}
			if err := inputParam(&t, where, k, p, false); err != nil {
				return nil, false, err
			}
		}
		if t.Shape == nil {
			t.Shape = []int64{}
		}
		if err := checkDatatype(name, in.Datatype); err != nil {
			return nil, false, err
		}
		n, err := elements(name, t.Shape)
		if err != nil {
			return nil, false, err
		}
		if raw {
			if in.Contents != nil && !emptyContents(in.Contents) {
				return nil, false, tensorErr(name, "has both contents and raw_input_contents")
			}
			err = fromRaw(&t, n, req.RawInputContents[i], "raw_input_contents")
		} else {
			err = fromContents(&t, n, in.Contents)
		}
		if err != nil {
			return nil, false, err
		}
		if err := CheckTensor(&t); err != nil {
			return nil, false, err
		}
		out.Inputs = append(out.Inputs, t)
	}
	for i, o := range req.Outputs {
		if o.Name == "" {
			return nil, false, errs.New(errs.InvalidArgument, "outputs[%d]: name is required", i)
		}
		var bin *bool
		for _, k := range sortedKeys(o.Parameters) {
			if err := outputParam(func() string { return fmt.Sprintf("output %q", errs.Clip(o.Name)) }, k, protoParam(o.Parameters[k]), &bin); err != nil {
				return nil, false, err
			}
		}
		out.Outputs = append(out.Outputs, o.Name)
		out.OutputBinary = append(out.OutputBinary, bin)
	}
	// Outputs answer in kind: raw_output_contents for raw inputs (every
	// tritonclient call: it reads raw outputs only), or when asked
	// (binary_data_output, an output's binary_data), else typed.
	rawOut := raw || out.BinaryOutput
	for _, b := range out.OutputBinary {
		if b != nil && *b {
			rawOut = true
		}
	}
	return out, rawOut, nil
}

// protoParam is a gRPC parameter as the decoders' param.
func protoParam(p *pb.InferParameter) param {
	switch c := p.GetParameterChoice().(type) {
	case *pb.InferParameter_StringParam:
		return param{Kind: paramString, Text: c.StringParam}
	case *pb.InferParameter_Int64Param:
		return param{Kind: paramInt, Int: c.Int64Param}
	case *pb.InferParameter_BoolParam:
		return param{Kind: paramBool, Bool: c.BoolParam}
	case *pb.InferParameter_Uint64Param:
		return param{Kind: paramUint, Uint: c.Uint64Param}
	case *pb.InferParameter_DoubleParam:
		return param{Kind: paramNumber, Text: strconv.FormatFloat(c.DoubleParam, 'g', -1, 64)}
	}
	return param{}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func emptyContents(c *pb.InferTensorContents) bool {
	return len(c.BoolContents) == 0 && len(c.IntContents) == 0 && len(c.Int64Contents) == 0 && len(c.UintContents) == 0 &&
		len(c.Uint64Contents) == 0 && len(c.Fp32Contents) == 0 && len(c.Fp64Contents) == 0 && len(c.BytesContents) == 0
}

func num(s string) schema.Value { return schema.Value{Kind: schema.Number, Text: s} }

// contentsField is the typed contents field that carries a datatype
// ("": none, FP16 and BF16 travel as raw_input_contents only).
func contentsField(dt string) string {
	switch dt {
	case BOOL:
		return "bool_contents"
	case INT8, INT16, INT32:
		return "int_contents"
	case INT64:
		return "int64_contents"
	case UINT8, UINT16, UINT32:
		return "uint_contents"
	case UINT64:
		return "uint64_contents"
	case FP32:
		return "fp32_contents"
	case FP64:
		return "fp64_contents"
	case BYTES:
		return "bytes_contents"
	}
	return ""
}

// fromContents reads typed contents: exactly the field of the datatype,
// one element per shape element, each in the datatype's range. Numbers
// and booleans become raw bytes (t.Raw, little-endian as
// raw_input_contents), which the instance path reads back into exactly
// the values their typed form gives (rawValue: the same shortest
// literals) and the fast path reads without a string per element; BYTES
// become values.
func fromContents(t *Tensor, n int64, c *pb.InferTensorContents) error {
	name, dt := t.Name, t.Datatype
	if c == nil {
		c = &pb.InferTensorContents{}
	}
	want := contentsField(dt)
	var sent int
	for _, f := range []struct {
		field string
		n     int
	}{{"bool_contents", len(c.BoolContents)}, {"int_contents", len(c.IntContents)}, {"int64_contents", len(c.Int64Contents)},
		{"uint_contents", len(c.UintContents)}, {"uint64_contents", len(c.Uint64Contents)}, {"fp32_contents", len(c.Fp32Contents)},
		{"fp64_contents", len(c.Fp64Contents)}, {"bytes_contents", len(c.BytesContents)}} {
		if f.field == want {
			sent = f.n
			continue
		}
		if f.n > 0 {
			if want == "" {
				return tensorErr(name, "datatype %s has no typed contents field: send it in raw_input_contents (little-endian, %d bytes an element)", dt, elemSize(dt))
			}
			return tensorErr(name, "datatype %s is sent in %s, not %s", dt, want, f.field)
		}
	}
	if want == "" && n > 0 {
		return tensorErr(name, "datatype %s has no typed contents field: send it in raw_input_contents (little-endian, %d bytes an element)", dt, elemSize(dt))
	}
	if dt == BYTES {
		out := make([]schema.Value, len(c.BytesContents))
		var in interner
		for i, v := range c.BytesContents {
			out[i] = schema.Value{Kind: schema.String, Text: in.str(v)}
		}
		t.Data = out
		return nil
	}
	if int64(sent) != n {
		// CheckTensor's message for values.
		return tensorErr(name, "shape %s holds %d elements but %d were sent", ShapeString(t.Shape), n, sent)
	}
	info := datatypeInfo(dt)
	b := make([]byte, 0, n*info.size)
	switch dt {
	case BOOL:
		for _, v := range c.BoolContents {
			if v {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	case INT8, INT16, INT32:
		for i, v := range c.IntContents {
			if int64(v) < info.min || int64(v) > info.max {
				return tensorErr(name, "element %d: %d overflows %s", i, v, dt)
			}
			b = appendLE(b, uint64(v), info.size)
		}
	case INT64:
		for _, v := range c.Int64Contents {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	case UINT8, UINT16, UINT32:
		for i, v := range c.UintContents {
			if uint64(v) > info.umax {
				return tensorErr(name, "element %d: %d overflows %s", i, v, dt)
			}
			b = appendLE(b, uint64(v), info.size)
		}
	case UINT64:
		for _, v := range c.Uint64Contents {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	case FP32:
		for _, v := range c.Fp32Contents {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	case FP64:
		for _, v := range c.Fp64Contents {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	t.Raw, t.RawField = b, "contents"
	return nil
}

// appendLE appends the low size bytes of v, little-endian.
func appendLE(b []byte, v uint64, size int64) []byte {
	for k := int64(0); k < size; k++ {
		b = append(b, byte(v>>(8*k)))
	}
	return b
}

// interner gives the strings of a tensor's BYTES elements, sharing one
// string among equal elements while the tensor has few distinct values (a
// category's): no allocation per element for those.
type interner struct {
	seen [8]string
	n    int
}

func (in *interner) str(b []byte) string {
	for i := 0; i < in.n; i++ {
		if in.seen[i] == string(b) {
			return in.seen[i]
		}
	}
	s := string(b)
	if in.n < len(in.seen) {
		in.seen[in.n] = s
		in.n++
	}
	return s
}

// elemSize is the bytes of one element of a fixed-size datatype (0: BYTES
// or unknown).
func elemSize(dt string) int64 { return datatypeInfo(dt).size }

// checkRaw checks n elements of little-endian bytes of a fixed-size
// datatype: sized exactly, BOOL bytes 0 or 1. where names the bytes in
// messages.
func checkRaw(name, dt string, n int64, b []byte, where string) error {
	size := elemSize(dt)
	if size == 0 {
		return tensorErr(name, "datatype %s is not sent as fixed-size %s", dt, where)
	}
	if int64(len(b)) != n*size {
		return tensorErr(name, "%s has %d bytes; %d %s elements need %d", where, len(b), n, dt, n*size)
	}
	if dt == BOOL {
		for i, c := range b {
			if c > 1 {
				return tensorErr(name, "element %d: BOOL byte %d is neither 0 nor 1", i, c)
			}
		}
	}
	return nil
}

// rawValue is element i of a raw tensor as the value its typed contents
// would have given.
func rawValue(dt string, b []byte, i int64) schema.Value {
	if dt == BOOL {
		return schema.Value{Kind: schema.Bool, Bool: b[i] == 1}
	}
	if !isNumeric(dt) {
		return schema.Value{Kind: schema.Composite}
	}
	var scratch [32]byte
	_, lit, _ := rawNumber(dt, b, i, scratch[:0])
	return num(string(lit))
}

// materialize reads a raw tensor's values into Data (a no-op for the rest).
func materialize(t *Tensor) error {
	if t.Raw == nil {
		return nil
	}
	n, err := elements(t.Name, t.Shape)
	if err != nil {
		return err
	}
	if err := checkRaw(t.Name, t.Datatype, n, t.Raw, t.RawField); err != nil {
		return err
	}
	data := make([]schema.Value, n)
	for i := range data {
		data[i] = rawValue(t.Datatype, t.Raw, int64(i))
	}
	t.Data, t.Raw = data, nil
	return nil
}

// fromRaw reads n elements of little-endian raw contents, sized exactly:
// a fixed-size datatype stays raw (t.Raw), BYTES elements (each a 4-byte
// length, then its bytes) become values.
func fromRaw(t *Tensor, n int64, b []byte, where string) error {
	if t.Datatype != BYTES {
		if err := checkRaw(t.Name, t.Datatype, n, b, where); err != nil {
			return err
		}
		t.Raw, t.RawField = b, where
		if t.Raw == nil {
			t.Raw = []byte{}
		}
		return nil
	}
	name := t.Name
	out := make([]schema.Value, 0, min(n, int64(len(b)/4)))
	var in interner
	for i := int64(0); i < n; i++ {
		if len(b) < 4 {
			return tensorErr(name, "%s ends inside element %d's length prefix", where, i)
		}
		l := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if uint64(l) > uint64(len(b)) {
			return tensorErr(name, "%s element %d claims %d bytes, %d remain", where, i, l, len(b))
		}
		out = append(out, schema.Value{Kind: schema.String, Text: in.str(b[:l])})
		b = b[l:]
	}
	if len(b) != 0 {
		return tensorErr(name, "%s has %d bytes after its %d elements", where, len(b), n)
	}
	t.Data = out
	return nil
}

// ToProto renders a prediction as a gRPC infer response: the columns cols
// as FP32 tensors of shape [n], in raw_output_contents (little-endian) when
// raw, else in fp32_contents.
func ToProto(p *gateway.Prediction, id string, cols []int, raw bool) *pb.ModelInferResponse {
	n := p.Out.Rows
	resp := &pb.ModelInferResponse{ModelName: p.Model, ModelVersion: strconv.Itoa(p.Version), Id: id,
		Parameters: map[string]*pb.InferParameter{"schema_version": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: p.InputSchema}}}}
	if p.Features != nil {
		resp.Parameters["feature_sources"] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: string(p.Features.AppendSources(nil))}}
	}
	// One allocation for every output's elements, each output a slice of it.
	var all []byte
	var vals []float32
	if raw {
		all = make([]byte, 4*n*len(cols))
		resp.RawOutputContents = make([][]byte, 0, len(cols))
	} else {
		vals = make([]float32, n*len(cols))
	}
	resp.Outputs = make([]*pb.ModelInferResponse_InferOutputTensor, 0, len(cols))
	for k, j := range cols {
		o := &pb.ModelInferResponse_InferOutputTensor{Name: p.Outputs[j], Datatype: FP32, Shape: []int64{int64(n)}}
		if labelled(p, j) {
			// A labelled column is a BYTES tensor of its labels ("" for
			// none): each a 4-byte little-endian length then the bytes
			// when raw, else bytes_contents.
			o.Datatype = BYTES
			if raw {
				var b []byte
				for i := 0; i < n; i++ {
					l, _ := p.Label(i, j)
					b = binary.LittleEndian.AppendUint32(b, uint32(len(l)))
					b = append(b, l...)
				}
				resp.RawOutputContents = append(resp.RawOutputContents, b)
			} else {
				bs := make([][]byte, n)
				for i := range bs {
					l, _ := p.Label(i, j)
					bs[i] = []byte(l)
				}
				o.Contents = &pb.InferTensorContents{BytesContents: bs}
			}
			resp.Outputs = append(resp.Outputs, o)
			continue
		}
		if raw {
			b := all[4*n*k : 4*n*(k+1) : 4*n*(k+1)]
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(p.Out.Data[i*p.Out.Cols+j]))
			}
			resp.RawOutputContents = append(resp.RawOutputContents, b)
		} else {
			v := vals[n*k : n*(k+1) : n*(k+1)]
			for i := range v {
				v[i] = p.Out.Data[i*p.Out.Cols+j]
			}
			o.Contents = &pb.InferTensorContents{Fp32Contents: v}
		}
		resp.Outputs = append(resp.Outputs, o)
	}
	return resp
}

// MetadataProto is md as a gRPC ModelMetadataResponse.
func MetadataProto(md Metadata) *pb.ModelMetadataResponse {
	out := &pb.ModelMetadataResponse{Name: md.Name, Versions: md.Versions, Platform: md.Platform}
	conv := func(ts []TensorMeta) []*pb.ModelMetadataResponse_TensorMetadata {
		var o []*pb.ModelMetadataResponse_TensorMetadata
		for _, t := range ts {
			o = append(o, &pb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
		}
		return o
	}
	out.Inputs, out.Outputs = conv(md.Inputs), conv(md.Outputs)
	return out
}
