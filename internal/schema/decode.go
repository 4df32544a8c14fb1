package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

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
		return nil, LocateJSON(raw, err)
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
	var p *jsonPos
	if errors.As(err, &se) {
		// After a failed Token, InputOffset is where the offending value
		// or delimiter starts (se.Offset is relative to an inner buffer).
		p = syntaxPos(se, dec.InputOffset())
	} else if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		p = &jsonPos{off: dec.InputOffset(), msg: "unexpected end of input"}
	} else {
		e := errs.New(errs.InvalidArgument, "malformed JSON: %v", err)
		e.Field = path
		return e
	}
	p.off = max(p.off, 0)
	e := errs.New(errs.InvalidArgument, "malformed JSON at byte %d: %s", p.off, p.msg)
	e.Field, e.Err = path, p
	return e
}

func syntaxPos(se *json.SyntaxError, off int64) *jsonPos {
	p := &jsonPos{off: off, msg: se.Error(), literal: strings.Contains(se.Error(), " in literal ")}
	if p.literal {
		p.msg = literalMsg
	}
	return p
}

const literalMsg = "not a JSON value (expected an object, array, string, number, true, false or null)"

// jsonPos is the cause of a malformed-JSON error: the byte offset of the
// offending character and what is wrong there.
type jsonPos struct {
	off     int64
	msg     string
	literal bool // a bare word (like notjson) where a value was expected
}

func (p *jsonPos) Error() string { return p.msg }

// LocateJSON rewrites a malformed-JSON error of a decoder reading body so
// that it quotes the position as line and column ("malformed JSON at line 3,
// column 14: …") and names a bare word where a value was expected. Other
// errors are returned as they are.
func LocateJSON(body []byte, err error) error {
	var e *errs.Error
	var p *jsonPos
	if !errors.As(err, &e) || !errors.As(e.Err, &p) {
		return err
	}
	off, msg := int(min(p.off, int64(len(body)))), p.msg
	if p.literal {
		start, end := off, off
		for start > 0 && isWordByte(body[start-1]) {
			start--
		}
		for end < len(body) && end-start < 40 && isWordByte(body[end]) {
			end++
		}
		off, msg = start, fmt.Sprintf("%q is %s", body[start:end], p.msg)
	}
	line, col := LineColumn(body, off)
	cp := *e
	cp.Message = fmt.Sprintf("malformed JSON at line %d, column %d: %s", line, col, msg)
	return &cp
}

// DescribeJSON renders an error of json.Unmarshal or json.Decoder.Decode
// over body with its position as line:column; it never blames a literal
// ("in literal null") for a bare word.
func DescribeJSON(body []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Unmarshal and a first Decode count se.Offset from the body's start:
		// the offending character is the one before it.
		e := &errs.Error{Code: errs.InvalidArgument, Err: syntaxPos(se, max(se.Offset-1, 0))}
		return strings.TrimPrefix(errs.As(LocateJSON(body, e)).Message, "malformed JSON ")
	case errors.As(err, &te):
		line, col := LineColumn(body, int(te.Offset))
		where := te.Field
		if where == "" {
			where = "the body"
		}
		return fmt.Sprintf("at line %d, column %d: %s: expected %s, got a JSON %s", line, col, where, te.Type, te.Value)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of input"
	}
	return err.Error()
}

// LineColumn turns a byte offset of body into a 1-based line and column
// (the column counted in characters).
func LineColumn(body []byte, off int) (line, col int) {
	off = min(max(off, 0), len(body))
	before := body[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return line, utf8.RuneCount(before) + 1
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '+'
}
