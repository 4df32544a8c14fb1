package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/schema"
)

// predictBody is a decoded predict request body.
type predictBody struct {
	Instances  []schema.Instance
	Deadline   time.Duration // 0 when absent
	RoutingKey string        // "" when absent
}

// maxInstancesDecoded bounds how many instances the decoder accepts before
// any version limit is known.
const maxInstancesDecoded = 1_000_000

// decodePredict decodes a predict body strictly: one JSON object with
// "instances" (an array of flat objects) and optional "deadlineMs";
// duplicate keys, unknown keys, nested values and trailing data are errors
// naming the field. encoding/json's struct decoding cannot see duplicate
// keys or keep number literals per field, so this walks the token stream.
func decodePredict(body []byte, maxDeadline time.Duration) (*predictBody, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	out := &predictBody{}
	if err := expectDelim(dec, '{', ""); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for dec.More() {
		key, err := objectKey(dec, "")
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, errs.Field(errs.InvalidArgument, key, "duplicate key")
		}
		seen[key] = true
		switch key {
		case "instances":
			if out.Instances, err = decodeInstances(dec); err != nil {
				return nil, err
			}
		case "deadlineMs":
			tok, err := token(dec, key)
			if err != nil {
				return nil, err
			}
			num, ok := tok.(json.Number)
			if !ok {
				return nil, errs.Field(errs.InvalidArgument, key, "expected a number of milliseconds")
			}
			ms, err := strconv.ParseFloat(string(num), 64)
			if err != nil || math.IsInf(ms, 0) || math.IsNaN(ms) {
				return nil, errs.Field(errs.InvalidArgument, key, "invalid number %s", num)
			}
			if ms <= 0 {
				return nil, errs.Field(errs.InvalidArgument, key, "must be > 0, got %s", num)
			}
			if ms > float64(maxDeadline)/float64(time.Millisecond) {
				return nil, errs.Field(errs.InvalidArgument, key, "must be at most %d (the server's maximum deadline), got %s", maxDeadline.Milliseconds(), num)
			}
			out.Deadline = time.Duration(ms * float64(time.Millisecond))
		case "routingKey":
			tok, err := token(dec, key)
			if err != nil {
				return nil, err
			}
			rk, ok := tok.(string)
			if !ok || rk == "" || len(rk) > 256 {
				return nil, errs.Field(errs.InvalidArgument, key, "must be a string of 1 to 256 characters")
			}
			out.RoutingKey = rk
		default:
			return nil, errs.Field(errs.InvalidArgument, key, "unknown key (expected instances, deadlineMs, routingKey)")
		}
	}
	if _, err := token(dec, ""); err != nil { // the closing '}'
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errs.New(errs.InvalidArgument, "malformed JSON: data after the top-level object")
	}
	if !seen["instances"] {
		return nil, errs.Field(errs.InvalidArgument, "instances", "is required")
	}
	return out, nil
}

func decodeInstances(dec *json.Decoder) ([]schema.Instance, error) {
	if err := expectDelim(dec, '[', "instances"); err != nil {
		return nil, err
	}
	var out []schema.Instance
	for i := 0; dec.More(); i++ {
		if i >= maxInstancesDecoded {
			return nil, errs.Field(errs.TooManyInstances, "instances", "more than %d instances", maxInstancesDecoded)
		}
		path := fmt.Sprintf("instances[%d]", i)
		if err := expectDelim(dec, '{', path); err != nil {
			return nil, err
		}
		var inst schema.Instance
		for dec.More() {
			key, err := objectKey(dec, path)
			if err != nil {
				return nil, err
			}
			fp := path + "." + key
			for _, m := range inst {
				if m.Name == key {
					return nil, errs.Field(errs.InvalidArgument, fp, "duplicate key")
				}
			}
			tok, err := token(dec, fp)
			if err != nil {
				return nil, err
			}
			var v schema.Value
			switch x := tok.(type) {
			case nil:
				v.Kind = schema.Null
			case bool:
				v = schema.Value{Kind: schema.Bool, Bool: x}
			case string:
				v = schema.Value{Kind: schema.String, Text: x}
			case json.Number:
				v = schema.Value{Kind: schema.Number, Text: string(x)}
			default:
				return nil, errs.Field(errs.InvalidArgument, fp, "nested objects and arrays are not allowed; instance values are numbers, strings, booleans or null")
			}
			inst = append(inst, schema.Member{Name: key, Value: v})
		}
		if _, err := token(dec, path); err != nil { // '}'
			return nil, err
		}
		out = append(out, inst)
	}
	if _, err := token(dec, "instances"); err != nil { // ']'
		return nil, err
	}
	return out, nil
}

func token(dec *json.Decoder, path string) (json.Token, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(dec, err, path)
	}
	return tok, nil
}

func objectKey(dec *json.Decoder, path string) (string, error) {
	tok, err := token(dec, path)
	if err != nil {
		return "", err
	}
	k, ok := tok.(string)
	if !ok {
		return "", errs.Field(errs.InvalidArgument, path, "malformed JSON: expected an object key")
	}
	return k, nil
}

func expectDelim(dec *json.Decoder, want json.Delim, path string) error {
	tok, err := token(dec, path)
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		what := "an object"
		if want == '[' {
			what = "an array"
		}
		if path == "" {
			return errs.New(errs.InvalidArgument, "the request body must be a JSON object")
		}
		return errs.Field(errs.InvalidArgument, path, "expected %s", what)
	}
	return nil
}

func syntaxErr(dec *json.Decoder, err error, path string) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		e := errs.New(errs.InvalidArgument, "malformed JSON at byte %d: %v", se.Offset, se)
		e.Field = path
		return e
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		e := errs.New(errs.InvalidArgument, "malformed JSON: unexpected end of input at byte %d", dec.InputOffset())
		e.Field = path
		return e
	}
	e := errs.New(errs.InvalidArgument, "malformed JSON: %v", err)
	e.Field = path
	return e
}
