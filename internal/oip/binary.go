package oip

// This file is the REST binary tensor data extension (Triton's, which
// KServe and MLServer follow): a body of a JSON inference header of
// Inference-Header-Content-Length bytes, then the inputs' bytes in input
// order, each input naming its size in "parameters": {"binary_data_size":
// K}. Elements are little-endian, row-major, without padding; BOOL is one
// byte 0 or 1; BYTES is a 4-byte little-endian length then the bytes.
// Every size is checked exactly against its shape and datatype, and the
// sizes against the body, before any element is read.

import (
	"encoding/binary"
	"math"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/records"
)

// HeaderLength is the header that says a body is binary: the length of its
// JSON inference header.
const HeaderLength = "Inference-Header-Content-Length"

// binaryWhere names the bytes of a REST binary input in messages.
const binaryWhere = "binary data"

// DecodeBinary decodes a body of the binary tensor data extension: header
// is the Inference-Header-Content-Length value. The JSON header is decoded
// as strictly as DecodeJSON; inputs with binary_data_size take their bytes
// from the rest of the body, in input order, which they must cover exactly.
func DecodeBinary(body []byte, header string, maxDeadline time.Duration) (*Request, error) {
	n, err := headerLength(header, len(body))
	if err != nil {
		return nil, err
	}
	req, err := decodeJSON(body[:n], maxDeadline, true)
	if err != nil {
		return nil, err
	}
	rest := body[n:]
	off := int64(0)
	for i := range req.Inputs {
		t := &req.Inputs[i]
		if t.binarySize < 0 {
			continue
		}
		if err := checkDatatype(t.Name, t.Datatype); err != nil {
			return nil, err
		}
		elems, err := elements(t.Name, t.Shape)
		if err != nil {
			return nil, err
		}
		k := t.binarySize
		if size := elemSize(t.Datatype); size > 0 && k != elems*size {
			return nil, tensorErr(t.Name, "binary_data_size is %d, but shape %s of %s needs %d bytes (%d elements × %d): send exactly that many",
				k, ShapeString(t.Shape), t.Datatype, elems*size, elems, size)
		}
		if left := int64(len(rest)) - off; k > left {
			return nil, tensorErr(t.Name, "binary_data_size %d runs past the end of the body: %d bytes of binary data remain after the inputs before it (truncated body, or a wrong %s)",
				k, left, HeaderLength)
		}
		if err := fromRaw(t, elems, rest[off:off+k:off+k], binaryWhere); err != nil {
			return nil, err
		}
		off += k
	}
	if extra := int64(len(rest)) - off; extra != 0 {
		return nil, errs.New(errs.InvalidArgument, "the body has %d bytes after the inputs' binary data (%d bytes follow the %d-byte JSON header, binary_data_size adds up to %d): send each input's binary_data_size and nothing after its bytes",
			extra, len(rest), n, off)
	}
	for i := range req.Inputs {
		if req.Inputs[i].binarySize >= 0 {
			if err := CheckTensor(&req.Inputs[i]); err != nil {
				return nil, err
			}
		}
	}
	return req, nil
}

// headerLength reads Inference-Header-Content-Length: a decimal byte count
// from 1 up to the body's length.
func headerLength(h string, body int) (int, error) {
	if h == "" || len(h) > 19 {
		return 0, errs.Field(errs.InvalidArgument, HeaderLength, "%q is not a byte count (the length of the JSON header, a decimal integer)", errs.Clip(h))
	}
	for i := 0; i < len(h); i++ {
		if h[i] < '0' || h[i] > '9' {
			return 0, errs.Field(errs.InvalidArgument, HeaderLength, "%q is not a byte count (the length of the JSON header, a decimal integer)", errs.Clip(h))
		}
	}
	n, err := strconv.ParseInt(h, 10, 64)
	switch {
	case err != nil || n > int64(body):
		return 0, errs.Field(errs.InvalidArgument, HeaderLength, "%s is longer than the body (%d bytes): it is the length of the JSON header alone", errs.Clip(h), body)
	case n == 0:
		return 0, errs.Field(errs.InvalidArgument, HeaderLength, "must be at least 1: the body starts with a JSON header of that many bytes")
	}
	return int(n), nil
}

// BinaryOutputs says, for each selected output column, whether it is
// answered as binary data: its binary_data if it was requested with one,
// else binary_data_output.
func BinaryOutputs(req *Request, names []string, cols []int) []bool {
	out := make([]bool, len(cols))
	for i, j := range cols {
		out[i] = req.BinaryOutput
		for k, r := range req.Outputs {
			if r == names[j] && k < len(req.OutputBinary) && req.OutputBinary[k] != nil {
				out[i] = *req.OutputBinary[k]
			}
		}
	}
	return out
}

// EncodeBinary renders a prediction as EncodeJSON does, except that the
// outputs marked in bin carry "parameters": {"binary_data_size": 4n} and
// no data, their FP32 elements (little-endian) following the JSON header
// in output order. It returns the body and the header's length (the
// Inference-Header-Content-Length answer); deterministic, as EncodeJSON.
func EncodeBinary(p *gateway.Prediction, id string, cols []int, bin []bool) ([]byte, int) {
	return AppendBinary(make([]byte, 0, 192+len(cols)*(p.Out.Rows*4+96)), p, id, cols, bin)
}

// AppendBinary appends EncodeBinary's body to b (a reused buffer) and
// returns it with its JSON header's length.
func AppendBinary(b []byte, p *gateway.Prediction, id string, cols []int, bin []bool) ([]byte, int) {
	n := p.Out.Rows
	start := len(b)
	b = appendHead(b, p, id)
	nbin := 0
	for k, j := range cols {
		if k > 0 {
			b = append(b, ',')
		}
		b = appendOutputHead(b, p, j, n)
		if bin[k] {
			nbin++
			b = append(b, `],"parameters":{"binary_data_size":`...)
			b = strconv.AppendInt(b, int64(binarySize(p, j)), 10)
			b = append(b, "}}"...)
			continue
		}
		b = append(b, `],"data":[`...)
		b = appendData(b, p, j)
		b = append(b, "]}"...)
	}
	b = append(b, "]}"...)
	h := len(b) - start
	for k, j := range cols {
		if !bin[k] {
			continue
		}
		if labelled(p, j) {
			for i := 0; i < n; i++ {
				l, _ := p.Label(i, j)
				b = binary.LittleEndian.AppendUint32(b, uint32(len(l)))
				b = append(b, l...)
			}
			continue
		}
		for i := 0; i < n; i++ {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(p.Out.Data[i*p.Out.Cols+j]))
		}
	}
	return b, h
}

// binarySize is the bytes of output column j's binary data: 4 per FP32
// element, or a BYTES tensor's 4-byte lengths and labels.
func binarySize(p *gateway.Prediction, j int) int {
	if !labelled(p, j) {
		return 4 * p.Out.Rows
	}
	n := 0
	for i := 0; i < p.Out.Rows; i++ {
		l, _ := p.Label(i, j)
		n += 4 + len(l)
	}
	return n
}

// appendHead writes the response's members before its outputs' elements.
func appendHead(b []byte, p *gateway.Prediction, id string) []byte {
	b = append(b, `{"model_name":`...)
	b = strconv.AppendQuote(b, p.Model)
	b = append(b, `,"model_version":`...)
	b = strconv.AppendQuote(b, strconv.Itoa(p.Version))
	b = append(b, `,"id":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"parameters":{"schema_version":`...)
	b = strconv.AppendQuote(b, p.InputSchema)
	if p.Features != nil {
		// OIP parameters hold strings, numbers or booleans: the sources
		// are their JSON in a string.
		b = append(b, `,"feature_sources":`...)
		b = records.AppendCanonicalString(b, string(p.Features.AppendSources(nil)))
	}
	return append(b, `},"outputs":[`...)
}

// appendOutputHead writes an output tensor's name, datatype and shape
// (up to the shape's closing bracket).
func appendOutputHead(b []byte, p *gateway.Prediction, j, n int) []byte {
	b = append(b, `{"name":`...)
	b = records.AppendCanonicalString(b, p.Outputs[j]) // as encoding/json escapes it
	if labelled(p, j) {
		b = append(b, `,"datatype":"BYTES","shape":[`...)
	} else {
		b = append(b, `,"datatype":"FP32","shape":[`...)
	}
	return strconv.AppendInt(b, int64(n), 10)
}

// labelled says output column j holds labels (postprocess: threshold,
// topk, map): a BYTES tensor of the labels, "" for none.
func labelled(p *gateway.Prediction, j int) bool { return p.Labels != nil && p.Labels[j] != nil }

// appendData writes column j's elements as JSON numbers (NaN and
// infinities as null), or a labelled column's as strings ("" for none).
func appendData(b []byte, p *gateway.Prediction, j int) []byte {
	for i := 0; i < p.Out.Rows; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		if labelled(p, j) {
			l, _ := p.Label(i, j)
			b = records.AppendCanonicalString(b, l)
			continue
		}
		v := p.Out.Data[i*p.Out.Cols+j]
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
		}
	}
	return b
}
