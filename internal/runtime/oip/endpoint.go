package oip

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/sluiceml/sluice/internal/strictyaml"
)

// Limits on the endpoint artifact.
const (
	MaxArtifactBytes = 64 << 10
	MaxNameBytes     = 256 // model, version and tensor names
	DefaultTimeout   = 2 * time.Second
	MaxTimeout       = time.Minute
)

// Endpoint is the decoded artifact: where the remote model is and what its
// tensors are called.
type Endpoint struct {
	// Address is host:port of the OIP v2 gRPC server.
	Address string `yaml:"address"`
	// Model is the model_name on that server.
	Model string `yaml:"model"`
	// Version is the model_version ("" lets the server choose).
	Version string `yaml:"version,omitempty"`
	// Input names the input tensor: FP32 [n, d], or INT64 [n, L] of token
	// ids for sequence packages.
	Input string `yaml:"input"`
	// Output names the output tensor: FP32 [n, k] (or [n] when k is 1).
	Output string `yaml:"output"`
	// Timeout bounds each call (the request's own deadline wins when it is
	// shorter). Zero in the artifact means DefaultTimeout.
	Timeout strictyaml.Duration `yaml:"timeout,omitempty"`
}

// Decode parses and checks an endpoint artifact: YAML (or JSON, which is
// YAML) with the keys of Endpoint. Unknown keys, wrong types, a second
// document and impossible values are errors naming the key and its line.
func Decode(data []byte) (Endpoint, error) {
	if len(data) > MaxArtifactBytes {
		return Endpoint{}, fmt.Errorf("oip: endpoint artifact is %d bytes, the limit is %d", len(data), MaxArtifactBytes)
	}
	root, err := singleDocument(data)
	if err != nil {
		return Endpoint{}, err
	}
	var ep Endpoint
	idx, err := strictyaml.Decode("endpoint", data, &ep)
	if err != nil {
		var se *strictyaml.Error
		if errors.As(err, &se) {
			return Endpoint{}, problemsError(se.Problems)
		}
		return Endpoint{}, fmt.Errorf("oip: endpoint artifact: %v", err)
	}
	var probs []strictyaml.Problem
	add := func(path, format string, args ...any) {
		probs = append(probs, strictyaml.Problem{Path: path, Line: idx.Line(path), Message: fmt.Sprintf(format, args...)})
	}
	// yaml.v3 decodes any scalar into a string; names must be strings.
	if len(root.Content) > 0 && root.Content[0].Kind == yaml.MappingNode {
		doc := root.Content[0]
		for i := 0; i+1 < len(doc.Content); i += 2 {
			k, v := doc.Content[i].Value, doc.Content[i+1]
			if k != "timeout" && v.Kind == yaml.ScalarNode && v.Tag != "!!str" && v.Tag != "!!null" {
				add(k, "expected a string, got %s (quote it: %q)", v.Value, v.Value)
			}
		}
	}
	if msg := checkAddress(ep.Address); msg != "" {
		add("address", "%s", msg)
	}
	for _, f := range []struct {
		key, val string
		required bool
	}{{"model", ep.Model, true}, {"version", ep.Version, false}, {"input", ep.Input, true}, {"output", ep.Output, true}} {
		if msg := checkName(f.val, f.required); msg != "" {
			add(f.key, "%s", msg)
		}
	}
	switch t := ep.Timeout.Duration; {
	case t == 0:
		ep.Timeout.Duration = DefaultTimeout
	case t < 0 || t > MaxTimeout:
		add("timeout", "must be between 1ms and %v, got %v", MaxTimeout, t)
	case t < time.Millisecond:
		add("timeout", "must be at least 1ms, got %v", t)
	}
	if len(probs) > 0 {
		return Endpoint{}, problemsError(probs)
	}
	return ep, nil
}

// singleDocument returns the artifact's one YAML document, refusing a
// stream of several (yaml.v3 would silently read the first). A syntax error
// is left to the strict decoder, which reports its line.
func singleDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root, next yaml.Node
	if err := dec.Decode(&root); err != nil {
		return &root, nil
	}
	if err := dec.Decode(&next); err != io.EOF {
		return nil, fmt.Errorf("oip: endpoint artifact: holds more than one YAML document")
	}
	return &root, nil
}

func problemsError(probs []strictyaml.Problem) error {
	parts := make([]string, len(probs))
	for i, p := range probs {
		var b strings.Builder
		if p.Line > 0 {
			fmt.Fprintf(&b, "line %d: ", p.Line)
		}
		if p.Path != "" {
			b.WriteString(p.Path + ": ")
		}
		b.WriteString(p.Message)
		parts[i] = b.String()
	}
	return fmt.Errorf("oip: endpoint artifact: %s", strings.Join(parts, "; "))
}

func checkAddress(a string) string {
	if a == "" {
		return "is required: host:port of the OIP v2 gRPC server (e.g. 127.0.0.1:8001)"
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" || strings.ContainsAny(host, "/ \t") {
		return fmt.Sprintf("%q is not host:port (e.g. 127.0.0.1:8001 or triton.internal:8001)", a)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Sprintf("%q: port must be a number between 1 and 65535", a)
	}
	return ""
}

func checkName(s string, required bool) string {
	switch {
	case s == "" && required:
		return "is required"
	case len(s) > MaxNameBytes:
		return fmt.Sprintf("is %d bytes, at most %d are allowed", len(s), MaxNameBytes)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.ContainsFunc(s, unicode.IsControl):
		return fmt.Sprintf("%q holds control characters", s)
	}
	return ""
}
