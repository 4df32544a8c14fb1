package apispec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// GoTypeKey is the extension that names the Go type a component schema
// documents ("api.Version").
const GoTypeKey = "x-go-type"

// GoTypes maps each component schema that carries x-go-type to the Go
// type's name.
func (s *Spec) GoTypes() map[string]string {
	out := map[string]string{}
	for name, ref := range s.Doc.Components.Schemas {
		if v, ok := ref.Value.Extensions[GoTypeKey].(string); ok {
			out[name] = v
		}
	}
	return out
}

// CheckGoType compares component schema name with Go type t as
// encoding/json writes it: the same property names (embedded structs
// inlined), required exactly the fields without omitempty or omitzero,
// each property's JSON type that of the field, null allowed where the
// field can be nil and is always written, and a property that refers to
// another component naming the field's Go type there. Each problem is
// one line naming the schema, the property and the fix.
func (s *Spec) CheckGoType(name string, t reflect.Type, goName func(reflect.Type) string) []string {
	ref := s.Doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return []string{fmt.Sprintf("docs/openapi.yaml has no schema components.schemas.%s", name)}
	}
	request, _ := ref.Value.Extensions[RequestKey].(bool)
	c := checker{goName: goName, request: request}
	c.object("components.schemas."+name, ref.Value, t)
	return c.problems
}

// RequestKey marks a schema of a request body (x-go-request: true): the
// server decodes it strictly, so its properties are the Go fields', but
// which are required is the handler's rule, not omitempty's, and a
// client sends no nulls.
const RequestKey = "x-go-request"

type checker struct {
	goName   func(reflect.Type) string
	request  bool
	problems []string
}

func (c *checker) add(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

type jsonField struct {
	name     string
	t        reflect.Type
	optional bool
}

// fields are t's JSON fields as encoding/json writes them.
func fields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, fields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		optional := false
		for _, o := range strings.Split(opts, ",") {
			if o == "omitempty" || o == "omitzero" {
				optional = true
			}
		}
		out = append(out, jsonField{name: name, t: f.Type, optional: optional})
	}
	return out
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// jsonTypes is what a value of t can be in JSON ("" for anything) and
// whether it can be null.
func jsonTypes(t reflect.Type) (string, bool) {
	switch {
	case t == timeType:
		return "string", false
	case t == rawType:
		return "", true
	}
	switch t.Kind() {
	case reflect.Pointer:
		s, _ := jsonTypes(t.Elem())
		return s, true
	case reflect.Interface:
		return "", true
	case reflect.String:
		return "string", false
	case reflect.Bool:
		return "boolean", false
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer", false
	case reflect.Float32, reflect.Float64:
		return "number", false
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string", true
		}
		return "array", true
	case reflect.Array:
		return "array", false
	case reflect.Map:
		return "object", true
	case reflect.Struct:
		return "object", false
	}
	return "", true
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// object compares an object schema with struct type t.
func (c *checker) object(path string, s *openapi3.Schema, t reflect.Type) {
	t = deref(t)
	if t.Kind() != reflect.Struct {
		c.add("%s: documents Go %s, which is no struct", path, t)
		return
	}
	props := map[string]bool{}
	for p := range s.Properties {
		props[p] = true
	}
	var required []string
	for _, f := range fields(t) {
		fp := path + ".properties." + f.name
		ps := s.Properties[f.name]
		if ps == nil || ps.Value == nil {
			c.add("%s: missing (Go %s.%s): add it to docs/openapi.yaml", fp, t.Name(), f.name)
			continue
		}
		delete(props, f.name)
		if !f.optional {
			required = append(required, f.name)
		}
		c.value(fp, ps, f.t, !f.optional)
	}
	for p := range props {
		c.add("%s.properties.%s: Go %s has no json field %q: remove it from docs/openapi.yaml or add the field", path, p, t.Name(), p)
	}
	if c.request {
		return
	}
	sort.Strings(required)
	got := slices.Clone(s.Required)
	sort.Strings(got)
	if !slices.Equal(got, required) {
		c.add("%s.required: is %v, want %v (the fields of Go %s without omitempty)", path, got, required, t.Name())
	}
}

// value compares a property's schema with Go type t; written says the
// field is always written (so a nil value is a JSON null).
func (c *checker) value(path string, ref *openapi3.SchemaRef, t reflect.Type, written bool) {
	s := ref.Value
	want, nilable := jsonTypes(t)
	types := []string{}
	if s.Type != nil {
		types = *s.Type
	}
	if ref.Ref != "" {
		name := ref.Ref[strings.LastIndex(ref.Ref, "/")+1:]
		if g, _ := s.Extensions[GoTypeKey].(string); g != c.goName(deref(t)) {
			c.add("%s: refers to %s (Go %s) but the field is Go %s", path, name, g, c.goName(deref(t)))
		}
		if written && nilable && !c.request && !slices.Contains(types, "null") {
			c.add("%s: Go %s can be null here: write it as oneOf: [{$ref: ...}, {type: \"null\"}]", path, t)
		}
		return
	}
	if len(s.OneOf) > 0 { // a nullable reference: oneOf [$ref, {type: null}]
		for _, o := range s.OneOf {
			if o.Ref != "" {
				c.value(path, o, t, false)
			}
		}
		return
	}
	if want == "" {
		return // any JSON value
	}
	if len(types) == 0 {
		c.add("%s: has no type; Go %s is %s", path, t, want)
		return
	}
	if !slices.Contains(types, want) {
		c.add("%s: type %v, but Go %s is %s", path, types, t, want)
	}
	if written && nilable && !c.request && !slices.Contains(types, "null") {
		c.add("%s: Go %s can be null (a nil value is written): make its type [%s, \"null\"]", path, t, want)
	}
	if !nilable && slices.Contains(types, "null") {
		c.add("%s: allows null but Go %s is never null", path, t)
	}
	et := deref(t)
	switch want {
	case "array":
		if s.Items != nil {
			c.value(path+".items", s.Items, et.Elem(), true)
		}
	case "object":
		if et.Kind() == reflect.Struct && et != timeType {
			c.object(path, s, et)
		} else if et.Kind() == reflect.Map && s.AdditionalProperties.Schema != nil {
			c.value(path+".additionalProperties", s.AdditionalProperties.Schema, et.Elem(), true)
		}
	}
}
