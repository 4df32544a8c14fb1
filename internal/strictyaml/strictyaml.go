// Package strictyaml decodes configuration files strictly: unknown keys,
// wrong types and aliases are errors, and every problem names the file, the
// line and the key path ("serving.maxBatchDelay (line 14)"). yaml.v3 reports
// unknown fields and type errors by line only; this package walks the node
// tree against the Go type to add key paths and the allowed keys.
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluiceml/sluice/internal/bytesize"
)

// Duration is a time.Duration written as a string ("50ms") in YAML.
type Duration struct{ time.Duration }

// UnmarshalYAML accepts only duration strings.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf("expected a duration string like \"50ms\", got %s", n.Value)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("invalid duration %q (use forms like \"50ms\", \"2s\")", n.Value)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// IsZero lets omitempty drop unset durations.
func (d Duration) IsZero() bool { return d.Duration == 0 }

// Problem is one thing wrong with a package.
type Problem struct {
	Line    int    // 0 when unknown
	Path    string // key path, e.g. "serving.maxBatchDelay"
	Message string
}

// Error collects every problem found in one file.
type Error struct {
	File     string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
		if p.Path != "" {
			b.WriteString(p.Path + ": ")
		}
		b.WriteString(p.Message)
	}
	return b.String()
}

// Index maps key paths to the line they are on.
type Index map[string]int

// Line finds the line of path, or of its nearest ancestor (0 if unknown).
func (ix Index) Line(path string) int { return lineOf(ix, path) }

// Decode decodes data into v (a pointer to a struct with yaml tags). On
// error it returns an *Error listing every problem found.
func Decode(file string, data []byte, v any) (Index, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &Error{File: file, Problems: []Problem{yamlSyntaxProblem(err)}}
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, &Error{File: file, Problems: []Problem{{Message: "is empty"}}}
	}
	idx := Index{}
	vals := map[int][]pathValue{}
	var probs []Problem
	checkKeys(root.Content[0], reflect.TypeOf(v), "", idx, vals, &probs)
	if len(probs) > 0 {
		return nil, &Error{File: file, Problems: probs}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return nil, &Error{File: file, Problems: typeProblems(err, idx, vals)}
	}
	return idx, nil
}

var lineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

func yamlSyntaxProblem(err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return Problem{Line: n, Message: m[2]}
	}
	return Problem{Message: msg}
}

var backtick = regexp.MustCompile("`([^`]*)`")

func typeProblems(err error, idx Index, vals map[int][]pathValue) []Problem {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return []Problem{yamlSyntaxProblem(err)}
	}
	byLine := map[int]string{}
	for p, l := range idx {
		if old, ok := byLine[l]; !ok || len(p) > len(old) {
			byLine[l] = p
		}
	}
	var out []Problem
	for _, s := range te.Errors {
		if m := lineRE.FindStringSubmatch(s); m != nil {
			n, _ := strconv.Atoi(m[1])
			msg := strings.ReplaceAll(m[2], "!!", "")
			p := byLine[n]
			if bt := backtick.FindStringSubmatch(msg); bt != nil {
				// Several keys can share a line (flow style): pick the one
				// holding the offending value.
				for _, pv := range vals[n] {
					if pv.value == bt[1] {
						p = pv.path
						break
					}
				}
			}
			out = append(out, Problem{Line: n, Path: p, Message: msg})
			continue
		}
		out = append(out, Problem{Message: s})
	}
	return out
}

// checkKeys walks the YAML tree against the Go type, reporting unknown keys
// with their path and the keys that are allowed, and records the line of
// every key path in idx.
type pathValue struct{ path, value string }

func checkKeys(n *yaml.Node, t reflect.Type, path string, idx Index, vals map[int][]pathValue, probs *[]Problem) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		*probs = append(*probs, Problem{Line: n.Line, Path: path, Message: "YAML aliases are not supported in model.yaml"})
		return
	}
	if path != "" {
		if _, ok := idx[path]; !ok {
			idx[path] = n.Line
		}
	}
	if t == reflect.TypeOf(yaml.Node{}) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				idx[join(path, n.Content[i].Value)] = n.Content[i].Line
			}
		}
		return
	}
	if n.Kind == yaml.ScalarNode {
		vals[n.Line] = append(vals[n.Line], pathValue{path, n.Value})
	}
	if u, ok := reflect.New(t).Interface().(yaml.Unmarshaler); ok {
		if err := u.UnmarshalYAML(n); err != nil {
			*probs = append(*probs, Problem{Line: n.Line, Path: path, Message: err.Error()})
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the type error
		}
		allowed := map[string]reflect.Type{}
		var names []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			allowed[tag] = f.Type
			names = append(names, tag)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			ft, ok := allowed[k.Value]
			if !ok {
				*probs = append(*probs, Problem{Line: k.Line, Path: p, Message: fmt.Sprintf("unknown key %q (allowed here: %s)", k.Value, strings.Join(names, ", "))})
				continue
			}
			idx[p] = k.Line
			checkKeys(v, ft, p, idx, vals, probs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), idx, vals, probs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := join(path, n.Content[i].Value)
			idx[p] = n.Content[i].Line
			checkKeys(n.Content[i+1], t.Elem(), p, idx, vals, probs)
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// lineOf finds the line of path, or of its nearest ancestor.
func lineOf(idx Index, path string) int {
	for path != "" {
		if l, ok := idx[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// MarshalJSON writes the duration as a string ("50ms").
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// UnmarshalJSON accepts only duration strings.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return fmt.Errorf("expected a duration string like \"50ms\", got %s", s)
	}
	v, err := time.ParseDuration(s[1 : len(s)-1])
	if err != nil {
		return fmt.Errorf("invalid duration %s (use forms like \"50ms\", \"2s\")", s)
	}
	d.Duration = v
	return nil
}

// Size is a number of bytes written as a size string ("64MiB", "512KB";
// see bytesize.Parse) in YAML and JSON.
type Size struct{ Bytes int64 }

// UnmarshalYAML accepts only size strings.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf("expected a size string like \"64MiB\", got %s", n.Value)
	}
	v, err := bytesize.Parse(n.Value)
	if err != nil {
		return err
	}
	s.Bytes = v
	return nil
}

// MarshalYAML writes the size as a string.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// String is the size as bytesize.Format writes it.
func (s Size) String() string { return bytesize.Format(s.Bytes) }

// IsZero lets omitempty drop unset sizes.
func (s Size) IsZero() bool { return s.Bytes == 0 }

// MarshalJSON writes the size as a string ("64MiB").
func (s Size) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.String())), nil }

// UnmarshalJSON accepts only size strings.
func (s *Size) UnmarshalJSON(b []byte) error {
	str, err := strconv.Unquote(string(b))
	if err != nil || len(b) == 0 || b[0] != '"' {
		return fmt.Errorf("expected a size string like \"64MiB\", got %s", b)
	}
	v, err := bytesize.Parse(str)
	if err != nil {
		return err
	}
	s.Bytes = v
	return nil
}
