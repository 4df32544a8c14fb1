// Package apispec checks HTTP answers against the API's OpenAPI 3.1
// description, docs/openapi.yaml, so the description cannot drift from
// the server: it finds the operation a request names, validates an
// answer's status, headers and body against it (kin-openapi's
// openapi3filter, JSON Schema 2020-12), and compares a schema's
// properties with the json fields of the Go type it documents
// (x-go-type). Only tests import it (the server's route coverage, the
// end-to-end suite's validating transport), so the binary does not link
// kin-openapi, which the field uses for exactly this (FACTS.md).
package apispec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/sluiceml/sluice/docs"
)

// Fix is what a route missing from the description needs.
const Fix = "add it to docs/openapi.yaml (docs/api.md describes it for people)"

// Spec is a loaded, validated OpenAPI document.
type Spec struct {
	Doc *openapi3.T
	ops []Operation
}

// Operation is one method on one path template of the description.
type Operation struct {
	Method string // "GET"
	Path   string // "/v1/models/{name}/versions/{n}:load"
	segs   []segment
	Op     *openapi3.Operation
	Item   *openapi3.PathItem
}

// segment is one path segment of a template: a literal, or a parameter
// with an optional literal suffix ("{name}:predict").
type segment struct {
	lit, param, suffix string
}

// The lab's report (GET /v1/lab/report) is text/html, which kin-openapi
// has no decoder of: it is checked as the text it is.
// The console's files (GET /ui/{path}) are text/javascript and text/css
// as well: text too.
func init() {
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
}

// Load reads docs/openapi.yaml (embedded) and validates it.
func Load() (*Spec, error) { return Parse(docs.OpenAPI) }

// Parse loads and validates an OpenAPI document.
func Parse(b []byte) (*Spec, error) {
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml is not valid OpenAPI: %w", err)
	}
	s := &Spec{Doc: doc}
	for path, item := range doc.Paths.Map() {
		segs, err := parseTemplate(path)
		if err != nil {
			return nil, err
		}
		for method, op := range item.Operations() {
			s.ops = append(s.ops, Operation{Method: method, Path: path, segs: segs, Op: op, Item: item})
		}
	}
	sort.Slice(s.ops, func(i, j int) bool {
		if s.ops[i].Path != s.ops[j].Path {
			return s.ops[i].Path < s.ops[j].Path
		}
		return s.ops[i].Method < s.ops[j].Method
	})
	return s, nil
}

func parseTemplate(path string) ([]segment, error) {
	var segs []segment
	for _, p := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if !strings.HasPrefix(p, "{") {
			if strings.ContainsAny(p, "{}") {
				return nil, fmt.Errorf("docs/openapi.yaml: path %q: a parameter must start its segment", path)
			}
			segs = append(segs, segment{lit: p})
			continue
		}
		name, suffix, ok := strings.Cut(p[1:], "}")
		if !ok || name == "" || strings.ContainsAny(suffix, "{}") {
			return nil, fmt.Errorf("docs/openapi.yaml: path %q: bad parameter in %q", path, p)
		}
		segs = append(segs, segment{param: name, suffix: suffix})
	}
	return segs, nil
}

// Operations lists the description's operations, by path then method.
func (s *Spec) Operations() []Operation { return append([]Operation(nil), s.ops...) }

// match tells whether path fits the template and its parameters. A
// parameter matches one segment without ':' (model names, versions and
// ids have none), then the template's literal suffix.
func (o *Operation) match(path string) (map[string]string, bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) != len(o.segs) {
		return nil, false
	}
	var params map[string]string
	for i, sg := range o.segs {
		p := parts[i]
		if sg.param == "" {
			if p != sg.lit {
				return nil, false
			}
			continue
		}
		v, ok := strings.CutSuffix(p, sg.suffix)
		if !ok || v == "" || strings.Contains(v, ":") {
			return nil, false
		}
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
		if params == nil {
			params = map[string]string{}
		}
		params[sg.param] = v
	}
	return params, true
}

// Find returns the operation of method and path, or ErrNoPath (no
// template matches) or ErrNoMethod (one does, without that method).
func (s *Spec) Find(method, path string) (*Operation, map[string]string, error) {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	found := false
	for i := range s.ops {
		o := &s.ops[i]
		params, ok := o.match(path)
		if !ok {
			continue
		}
		found = true
		if o.Method == method {
			return o, params, nil
		}
	}
	if found {
		return nil, nil, ErrNoMethod
	}
	return nil, nil, ErrNoPath
}

// The answers of Find when the description has no such operation.
var (
	ErrNoPath   = errors.New("no path of docs/openapi.yaml matches")
	ErrNoMethod = errors.New("the path of docs/openapi.yaml has no such method")
)

// NoRoute tells whether an answer is the server's own "no such route"
// (404 "no route for …", or 405): a request the server does not serve,
// which the description need not list.
func NoRoute(status int, body []byte) bool {
	return status == http.StatusMethodNotAllowed || (status == http.StatusNotFound && bytes.Contains(body, []byte("no route for ")))
}

// Check validates one answer to req against the description: its
// operation must be described unless the server answered that it has no
// such route, its status must be one the operation lists (or its
// default), and its headers and body must match that response. body nil
// skips the body (a stream).
func (s *Spec) Check(req *http.Request, status int, header http.Header, body []byte) error {
	op, params, err := s.Find(req.Method, req.URL.Path)
	if err != nil {
		if NoRoute(status, body) {
			return nil
		}
		return fmt.Errorf("%s %s answered %d but %v: %s", req.Method, req.URL.Path, status, err, Fix)
	}
	route := &routers.Route{Spec: s.Doc, Path: op.Path, PathItem: op.Item, Method: op.Method, Operation: op.Op}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: body == nil},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s (operation %s %s) answered %d, which docs/openapi.yaml does not describe: %v\nbody: %s",
			req.Method, req.URL.Path, op.Method, op.Path, status, oneLine(err), clip(body))
	}
	return nil
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// readAll reads at most limit bytes of r; all false when more remain.
func readAll(r io.Reader, limit int64) (b []byte, all bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(b)) > limit {
		return b, false, err
	}
	return b, true, err
}
