package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
)

// Limits of the control API's free text and names.
const (
	maxControlBody  = 1 << 20 // bytes of a control body
	maxReason       = 1024    // characters of a reason
	maxControlDepth = 32      // nesting of a control body
)

// decodeJSON reads a control-plane body (application/json, at most 1 MiB)
// and decodes it strictly into v (decodeControl).
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if !isJSON(r.Header.Get("Content-Type")) {
		return errs.New(errs.UnsupportedMedia, "Content-Type must be application/json, got %q", errs.Clip(r.Header.Get("Content-Type")))
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxControlBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errs.New(errs.PayloadTooLarge, "body exceeds 1 MiB")
		}
		return errs.Wrap(errs.InvalidArgument, err, "read request body")
	}
	return decodeControl(b, "", v)
}

// decodeControl decodes a control-plane JSON document strictly into v:
// one JSON object, no duplicate key at any depth, no unknown key (keys
// match v's json names exactly), nothing after it. Errors are
// invalid_argument naming the field (under prefix, e.g. "plan"), quoting
// at most errs.MaxQuote characters of the input. encoding/json keeps the
// last of duplicate keys silently and names no path for an unknown key,
// so a first pass walks the token stream beside v's type, as the predict
// decoder does.
func decodeControl(b []byte, prefix string, v any) error {
	if err := checkKeys(b, prefix, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return controlErr(err, prefix)
	}
	return nil // checkKeys saw one value and nothing after it
}

// checkKeys walks b beside type t: one object, well-formed, no duplicate
// keys, no keys t does not know, bounded nesting, no trailing data.
func checkKeys(b []byte, prefix string, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return syntaxErr(err, prefix, dec)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		if prefix != "" {
			return errs.Field(errs.InvalidArgument, prefix, "expected an object")
		}
		return errs.New(errs.InvalidArgument, "the request body must be a JSON object")
	}
	if err := walkObject(dec, prefix, 1, t); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errs.Field(errs.InvalidArgument, prefix, "malformed JSON: data after the object")
	}
	return nil
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// shape is what a JSON value decodes into, for the key check: nil when
// anything goes (interface, map, json.RawMessage, a type with its own
// UnmarshalJSON).
func shape(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Array:
		return t
	}
	return nil
}

// fieldsOf maps a struct's json keys to their types.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// walkObject reads an object's members after its '{'; t is the struct it
// decodes into (nil: any keys).
func walkObject(dec *json.Decoder, path string, depth int, t reflect.Type) error {
	var known map[string]reflect.Type
	if t = shape(t); t != nil && t.Kind() == reflect.Struct {
		known = fieldsOf(t)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntaxErr(err, path, dec)
		}
		k, ok := tok.(string)
		if !ok {
			return errs.Field(errs.InvalidArgument, path, "malformed JSON: expected an object key")
		}
		field := join(path, errs.Clip(k))
		if seen[k] {
			return errs.Field(errs.InvalidArgument, field, "duplicate key")
		}
		seen[k] = true
		var ft reflect.Type
		if known != nil {
			var ok bool
			if ft, ok = known[k]; !ok {
				return errs.Field(errs.InvalidArgument, field, "unknown key")
			}
		}
		if err := walkValue(dec, field, depth, ft); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return syntaxErr(err, path, dec)
	}
	return nil
}

func walkValue(dec *json.Decoder, path string, depth int, t reflect.Type) error {
	tok, err := dec.Token()
	if err != nil {
		return syntaxErr(err, path, dec)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxControlDepth {
		return errs.Field(errs.InvalidArgument, path, "nests deeper than %d", maxControlDepth)
	}
	t = shape(t)
	if d == '{' {
		if t != nil && t.Kind() != reflect.Struct {
			t = nil // a type mismatch: encoding/json names it
		}
		return walkObject(dec, path, depth+1, t)
	}
	var et reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		et = t.Elem()
	}
	for i := 0; dec.More(); i++ { // '['
		if err := walkValue(dec, fmt.Sprintf("%s[%d]", path, i), depth+1, et); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return syntaxErr(err, path, dec)
	}
	return nil
}

func syntaxErr(err error, path string, dec *json.Decoder) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return errs.Field(errs.InvalidArgument, path, "malformed JSON at byte %d: %s", se.Offset, errs.Clip(se.Error()))
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return errs.Field(errs.InvalidArgument, path, "malformed JSON: unexpected end of input at byte %d", dec.InputOffset())
	}
	return errs.Field(errs.InvalidArgument, path, "malformed JSON: %s", errs.Clip(err.Error()))
}

// controlErr turns encoding/json's decoding error into one naming the field.
func controlErr(err error, prefix string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		got := te.Value
		if n, ok := strings.CutPrefix(got, "number "); ok {
			got = "the number " + errs.Clip(n)
		} else {
			got = "a " + got
		}
		return errs.Field(errs.InvalidArgument, join(prefix, te.Field), "expected %s, got %s", jsonKind(te.Type), got)
	}
	if k, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return errs.Field(errs.InvalidArgument, join(prefix, errs.Clip(strings.Trim(k, `"`))), "unknown key")
	}
	// A field's own decoder (a duration, a release plan step) refused it.
	return errs.Field(errs.InvalidArgument, prefix, "%s", err.Error())
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// checkReason bounds a control call's reason.
func checkReason(reason string) error {
	if n := utf8.RuneCountInString(reason); n > maxReason {
		return errs.Field(errs.InvalidArgument, "reason", "must be at most %d characters, got %d", maxReason, n)
	}
	return nil
}

// checkModelName refuses a model name from the URL that no model can have
// (model.yaml's rule: lowercase letters, digits and '-', at most 63
// characters), before it is looked up or quoted.
func checkModelName(name string) error { return gateway.CheckModelName("model", name) }
