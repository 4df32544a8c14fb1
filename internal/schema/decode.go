package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sluiceml/sluice/internal/errs"
)

// ReadInstance reads one instance object from dec, strictly: duplicate
// keys and nested values (other than an array of numbers) are errors naming path.field. encoding/json's
// struct decoding cannot see duplicate keys or keep number literals, so
// this walks the token stream (dec must have UseNumber set).
func ReadInstance(dec *json.Decoder, path string) (Instance, error) {
	if err := ExpectDelim(dec, '{', path); err != nil {
		return nil, err
	}
	var inst Instance
	for dec.More() {
		key, err := ObjectKey(dec, path)
		if err != nil {
			return nil, err
		}
		fp := path + "." + key
		for _, m := range inst {
			if m.Name == key {
				return nil, errs.Field(errs.InvalidArgument, fp, "duplicate key")
			}
		}
		tok, err := JSONToken(dec, fp)
		if err != nil {
			return nil, err
		}
		var v Value
		switch x := tok.(type) {
		case nil:
			v.Kind = Null
		case bool:
			v = Value{Kind: Bool, Bool: x}
		case string:
			v = Value{Kind: String, Text: x}
		case json.Number:
			v = Value{Kind: Number, Text: string(x)}
		case json.Delim:
			if x != '[' {
				return nil, errs.Field(errs.InvalidArgument, fp, "nested objects are not allowed; instance values are numbers, strings, booleans, null or arrays of numbers")
			}
			if v, err = readNumberArray(dec, fp); err != nil {
				return nil, err
			}
		default:
			return nil, errs.Field(errs.InvalidArgument, fp, "nested objects and arrays are not allowed; instance values are numbers, strings, booleans or null")
		}
		inst = append(inst, Member{Name: key, Value: v})
	}
	if _, err := JSONToken(dec, path); err != nil { // '}'
		return nil, err
	}
	return inst, nil
}

// readNumberArray reads the rest of an array whose '[' was read: numbers
// only (a sequence field's token ids); anything else is an error naming the
// element ("instances[0].tokens[3]").
func readNumberArray(dec *json.Decoder, fp string) (Value, error) {
	v := Value{Kind: Array, Items: []string{}}
	for i := 0; ; i++ {
		ep := fmt.Sprintf("%s[%d]", fp, i)
		tok, err := JSONToken(dec, ep)
		if err != nil {
			return Value{}, err
		}
		switch x := tok.(type) {
		case json.Number:
			v.Items = append(v.Items, string(x))
			continue
		case json.Delim:
			if x == ']' {
				return v, nil
			}
			return Value{}, errs.Field(errs.InvalidArgument, ep, "nested arrays and objects are not allowed; arrays hold numbers only")
		case nil:
			return Value{}, errs.Field(errs.InvalidArgument, ep, "expected a number, got null (arrays hold numbers only)")
		case bool:
			return Value{}, errs.Field(errs.InvalidArgument, ep, "expected a number, got a boolean (arrays hold numbers only)")
		case string:
			return Value{}, errs.Field(errs.InvalidArgument, ep, "expected a number, got a string (arrays hold numbers only)")
		}
		return Value{}, errs.Field(errs.InvalidArgument, ep, "expected a number")
	}
}

// DecodeInstance decodes one JSON object (a line of a reference sample).
func DecodeInstance(raw []byte, path string) (Instance, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	inst, err := ReadInstance(dec, path)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errs.New(errs.InvalidArgument, "%s: data after the instance object", path)
	}
	return inst, nil
}

// JSONToken reads the next token; syntax errors name path.
func JSONToken(dec *json.Decoder, path string) (json.Token, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(dec, err, path)
	}
	return tok, nil
}

// ObjectKey reads an object key.
func ObjectKey(dec *json.Decoder, path string) (string, error) {
	tok, err := JSONToken(dec, path)
	if err != nil {
		return "", err
	}
	k, ok := tok.(string)
	if !ok {
		return "", errs.Field(errs.InvalidArgument, path, "malformed JSON: expected an object key")
	}
	return k, nil
}

// ExpectDelim reads the delimiter want ({ or [) or fails naming path.
func ExpectDelim(dec *json.Decoder, want json.Delim, path string) error {
	tok, err := JSONToken(dec, path)
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
