package oip

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/schema"
)

// tokParam is a parameter's token as requestParam takes it.
func tokParam(tok json.Token) param {
	switch x := tok.(type) {
	case string:
		return param{Kind: paramString, Text: x}
	case json.Number:
		return param{Kind: paramNumber, Text: string(x)}
	case bool:
		return param{Kind: paramBool, Bool: x}
	}
	return param{}
}

// decodeJSONTokens is the OIP REST decoder on encoding/json's Decoder.Token
// as it was before the one-pass scanner (decodeJSON), kept as the reference
// FuzzOIPDecodeSame holds the scanner to; binary as for decodeJSON.
func decodeJSONTokens(body []byte, maxDeadline time.Duration, binary bool) (*Request, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := schema.ExpectDelim(dec, '{', ""); err != nil {
		return nil, err
	}
	out := &Request{}
	seen := map[string]bool{}
	for dec.More() {
		key, err := schema.ObjectKey(dec, "")
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, errs.Field(errs.InvalidArgument, key, "duplicate key")
		}
		seen[key] = true
		switch key {
		case "id":
			if out.ID, err = readStringTok(dec, key); err != nil {
				return nil, err
			}
			if !ValidID(out.ID) {
				return nil, errs.Field(errs.InvalidArgument, "id", "must be 1 to 128 printable ASCII characters without spaces")
			}
		case "parameters":
			if err := readParamsTok(dec, key, func(name string, tok json.Token) error {
				return requestParam(out, name, tokParam(tok), maxDeadline)
			}); err != nil {
				return nil, err
			}
		case "model_name":
			if out.ModelName, err = readStringTok(dec, key); err != nil {
				return nil, err
			}
		case "model_version":
			if out.ModelVersion, err = readStringTok(dec, key); err != nil {
				return nil, err
			}
		case "inputs":
			if err := readArrayTok(dec, key, func(i int) error {
				if i >= MaxTensors {
					return errs.Field(errs.InvalidArgument, "inputs", "more than %d input tensors", MaxTensors)
				}
				t, err := readTensorTok(dec, fmt.Sprintf("inputs[%d]", i), binary)
				if err != nil {
					return err
				}
				out.Inputs = append(out.Inputs, t)
				return nil
			}); err != nil {
				return nil, err
			}
		case "outputs":
			if err := readArrayTok(dec, key, func(i int) error {
				if i >= MaxTensors {
					return errs.Field(errs.InvalidArgument, "outputs", "more than %d output tensors", MaxTensors)
				}
				name, bin, err := readOutputTok(dec, fmt.Sprintf("outputs[%d]", i))
				if err != nil {
					return err
				}
				out.Outputs = append(out.Outputs, name)
				out.OutputBinary = append(out.OutputBinary, bin)
				return nil
			}); err != nil {
				return nil, err
			}
		default:
			return nil, errs.Field(errs.InvalidArgument, key, "unknown key (expected id, model_name, model_version, parameters, inputs, outputs)")
		}
	}
	if _, err := schema.JSONToken(dec, ""); err != nil { // '}'
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errs.New(errs.InvalidArgument, "malformed JSON: data after the top-level object")
	}
	if !seen["inputs"] {
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

func readStringTok(dec *json.Decoder, path string) (string, error) {
	tok, err := schema.JSONToken(dec, path)
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", errs.Field(errs.InvalidArgument, path, "expected a string")
	}
	return s, nil
}

// readArray reads an array, calling elem for each element (which reads it).
func readArrayTok(dec *json.Decoder, path string, elem func(i int) error) error {
	if err := schema.ExpectDelim(dec, '[', path); err != nil {
		return err
	}
	for i := 0; dec.More(); i++ {
		if err := elem(i); err != nil {
			return err
		}
	}
	_, err := schema.JSONToken(dec, path) // ']'
	return err
}

// readParams reads a parameters object of scalar values.
func readParamsTok(dec *json.Decoder, path string, set func(name string, tok json.Token) error) error {
	if err := schema.ExpectDelim(dec, '{', path); err != nil {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		k, err := schema.ObjectKey(dec, path)
		if err != nil {
			return err
		}
		fp := path + "." + k
		if seen[k] {
			return errs.Field(errs.InvalidArgument, fp, "duplicate key")
		}
		if len(seen) == maxParams {
			return errs.Field(errs.InvalidArgument, path, "more than %d parameters", maxParams)
		}
		seen[k] = true
		tok, err := schema.JSONToken(dec, fp)
		if err != nil {
			return err
		}
		if _, ok := tok.(json.Delim); ok {
			return errs.Field(errs.InvalidArgument, fp, "a parameter is a string, number or boolean")
		}
		if err := set(k, tok); err != nil {
			return err
		}
	}
	_, err := schema.JSONToken(dec, path) // '}'
	return err
}

func readTensorTok(dec *json.Decoder, path string, binary bool) (Tensor, error) {
	t := Tensor{binarySize: -1}
	if err := schema.ExpectDelim(dec, '{', path); err != nil {
		return t, err
	}
	seen := map[string]bool{}
	for dec.More() {
		k, err := schema.ObjectKey(dec, path)
		if err != nil {
			return t, err
		}
		where := path
		if t.Name != "" {
			where = fmt.Sprintf("input %q", errs.Clip(t.Name))
		}
		if seen[k] {
			return t, errs.New(errs.InvalidArgument, "%s: duplicate key %q", where, errs.Clip(k))
		}
		seen[k] = true
		switch k {
		case "name":
			if t.Name, err = readStringTok(dec, path+".name"); err != nil {
				return t, err
			}
			if t.Name == "" {
				return t, errs.New(errs.InvalidArgument, "%s: name must not be empty", path)
			}
		case "datatype":
			if t.Datatype, err = readStringTok(dec, where+".datatype"); err != nil {
				return t, err
			}
		case "shape":
			if err := readArrayTok(dec, where+".shape", func(i int) error {
				tok, err := schema.JSONToken(dec, where+".shape")
				if err != nil {
					return err
				}
				num, ok := tok.(json.Number)
				d, perr := strconv.ParseInt(string(num), 10, 64)
				if !ok || perr != nil || d < 0 {
					return errs.New(errs.InvalidArgument, "%s: shape holds non-negative integers", where)
				}
				if i >= 8 {
					return errs.New(errs.InvalidArgument, "%s: shape has more than 8 dimensions", where)
				}
				t.Shape = append(t.Shape, d)
				return nil
			}); err != nil {
				return t, err
			}
			if t.Shape == nil {
				t.Shape = []int64{}
			}
		case "parameters":
			if err := readParamsTok(dec, where+".parameters", func(name string, tok json.Token) error {
				return inputParam(&t, func() string { return where }, name, tokParam(tok), binary)
			}); err != nil {
				return t, err
			}
		case "data":
			if err := schema.ExpectDelim(dec, '[', where+".data"); err != nil {
				return t, err
			}
			if t.Data, err = readDataTok(dec, where, t.Data[:0:0], 1); err != nil {
				return t, err
			}
			if t.Data == nil {
				t.Data = []schema.Value{}
			}
		default:
			return t, errs.New(errs.InvalidArgument, "%s: unknown key %q (expected name, shape, datatype, parameters, data)", where, errs.Clip(k))
		}
	}
	if _, err := schema.JSONToken(dec, path); err != nil { // '}'
		return t, err
	}
	where := fmt.Sprintf("input %q", errs.Clip(t.Name))
	switch {
	case t.Name == "":
		return t, errs.New(errs.InvalidArgument, "%s: name is required", path)
	case !seen["datatype"]:
		return t, errs.New(errs.InvalidArgument, "%s: datatype is required", where)
	case !seen["shape"]:
		return t, errs.New(errs.InvalidArgument, "%s: shape is required", where)
	case t.binarySize >= 0 && seen["data"]:
		return t, errs.New(errs.InvalidArgument, "%s: has both data and binary_data_size: send its elements in one of them", where)
	case t.binarySize < 0 && !seen["data"] && binary:
		return t, errs.New(errs.InvalidArgument, "%s: data is required (or parameters.binary_data_size, with its bytes after the JSON header)", where)
	case t.binarySize < 0 && !seen["data"]:
		return t, errs.New(errs.InvalidArgument, "%s: data is required", where)
	}
	return t, nil
}

// readData reads the rest of an array whose '[' was read, flattening
// nested arrays.
func readDataTok(dec *json.Decoder, where string, out []schema.Value, depth int) ([]schema.Value, error) {
	if depth > maxDepth {
		return nil, errs.New(errs.InvalidArgument, "%s: data nests deeper than %d", where, maxDepth)
	}
	for {
		tok, err := schema.JSONToken(dec, where+".data")
		if err != nil {
			return nil, err
		}
		if len(out) >= MaxElements {
			return nil, errs.New(errs.InvalidArgument, "%s: more than %d elements", where, MaxElements)
		}
		switch x := tok.(type) {
		case json.Delim:
			switch x {
			case ']':
				return out, nil
			case '[':
				if out, err = readDataTok(dec, where, out, depth+1); err != nil {
					return nil, err
				}
			default:
				return nil, errs.New(errs.InvalidArgument, "%s: element %d: objects are not tensor elements", where, len(out))
			}
		case json.Number:
			out = append(out, schema.Value{Kind: schema.Number, Text: string(x)})
		case string:
			out = append(out, schema.Value{Kind: schema.String, Text: x})
		case bool:
			out = append(out, schema.Value{Kind: schema.Bool, Bool: x})
		default:
			return nil, errs.New(errs.InvalidArgument, "%s: element %d: null is not a tensor element", where, len(out))
		}
	}
}

// readOutput reads a requested output: its name and its binary_data
// parameter (nil: not given).
func readOutputTok(dec *json.Decoder, path string) (string, *bool, error) {
	if err := schema.ExpectDelim(dec, '{', path); err != nil {
		return "", nil, err
	}
	name := ""
	var bin *bool
	seen := map[string]bool{}
	for dec.More() {
		k, err := schema.ObjectKey(dec, path)
		if err != nil {
			return "", nil, err
		}
		if seen[k] {
			return "", nil, errs.New(errs.InvalidArgument, "%s: duplicate key %q", path, errs.Clip(k))
		}
		seen[k] = true
		switch k {
		case "name":
			if name, err = readStringTok(dec, path+".name"); err != nil {
				return "", nil, err
			}
		case "parameters":
			if err := readParamsTok(dec, path+".parameters", func(p string, tok json.Token) error {
				return outputParam(func() string { return path }, p, tokParam(tok), &bin)
			}); err != nil {
				return "", nil, err
			}
		default:
			return "", nil, errs.New(errs.InvalidArgument, "%s: unknown key %q (expected name, parameters)", path, errs.Clip(k))
		}
	}
	if _, err := schema.JSONToken(dec, path); err != nil {
		return "", nil, err
	}
	if name == "" {
		return "", nil, errs.New(errs.InvalidArgument, "%s: name is required", path)
	}
	return name, bin, nil
}
