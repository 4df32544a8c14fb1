package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
)

// Field is one input field as GET /v1/models/{name} describes it.
type Field struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"` // float, int, bool or category
	Min      *float64 `json:"min,omitempty"`
	Max      *float64 `json:"max,omitempty"`
	Optional bool     `json:"optional,omitempty"`
	Values   []string `json:"values,omitempty"`
}

// ModelInfo is the part of GET /v1/models/{name} the generator reads.
type ModelInfo struct {
	Name           string `json:"name"`
	ServingVersion int    `json:"servingVersion"`
	Input          struct {
		Schema string  `json:"schema"`
		Fields []Field `json:"fields"`
	} `json:"input"`
}

// defaultSpan is the range used for a numeric field with no declared bound
// on one or both sides.
const defaultSpan = 100.0

// FetchModel reads the model's description, including its input schema.
func FetchModel(ctx context.Context, client *http.Client, server, model, apiKey string) (*ModelInfo, error) {
	u := strings.TrimRight(server, "/") + "/v1/models/" + url.PathEscape(model)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: model URL: %v", err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: fetch model %q: %v", model, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("bench: fetch model %q: %v", model, err)
	}
	if resp.StatusCode/100 != 2 {
		code, msg := parseError(body)
		return nil, fmt.Errorf("bench: GET %s: %s (%s: %s)", u, resp.Status, code, msg)
	}
	var mi ModelInfo
	if err := json.Unmarshal(body, &mi); err != nil {
		return nil, fmt.Errorf("bench: GET %s: decode model description: %v", u, err)
	}
	if len(mi.Input.Fields) == 0 {
		return nil, fmt.Errorf("bench: model %q describes no input fields; pass a request body with --payload", model)
	}
	return &mi, nil
}

// Generator makes random instances that satisfy a schema.
type Generator struct {
	fields []Field
	rng    *rand.Rand
}

// NewGenerator checks that every field can be generated.
func NewGenerator(fields []Field, seed int64) (*Generator, error) {
	for _, f := range fields {
		switch f.Type {
		case "float", "int", "bool":
		case "category":
			if len(f.Values) == 0 {
				return nil, fmt.Errorf("bench: category field %q lists no values", f.Name)
			}
		default:
			return nil, fmt.Errorf("bench: field %q has type %q, which the generator does not know; pass a request body with --payload", f.Name, f.Type)
		}
		if f.Min != nil && f.Max != nil && *f.Min > *f.Max {
			return nil, fmt.Errorf("bench: field %q has min %v > max %v", f.Name, *f.Min, *f.Max)
		}
	}
	return &Generator{fields: fields, rng: rand.New(rand.NewPCG(uint64(seed), 0xfeed))}, nil
}

// Instance returns one random valid instance. Optional fields are left out
// one time in ten.
func (g *Generator) Instance() map[string]any {
	inst := make(map[string]any, len(g.fields))
	for _, f := range g.fields {
		if f.Optional && g.rng.IntN(10) == 0 {
			continue
		}
		switch f.Type {
		case "float":
			lo, hi := bounds(f)
			inst[f.Name] = lo + g.rng.Float64()*(hi-lo)
		case "int":
			lo, hi := bounds(f)
			a, b := math.Ceil(lo), math.Floor(hi)
			if a > b { // no integer in range; the schema is odd, send the bound
				inst[f.Name] = int64(a)
				continue
			}
			inst[f.Name] = int64(a) + g.rng.Int64N(int64(b-a)+1)
		case "bool":
			inst[f.Name] = g.rng.IntN(2) == 1
		case "category":
			inst[f.Name] = f.Values[g.rng.IntN(len(f.Values))]
		}
	}
	return inst
}

func bounds(f Field) (lo, hi float64) {
	switch {
	case f.Min != nil && f.Max != nil:
		return *f.Min, *f.Max
	case f.Min != nil:
		return *f.Min, *f.Min + defaultSpan
	case f.Max != nil:
		return *f.Max - defaultSpan, *f.Max
	default:
		return 0, defaultSpan
	}
}

// Body returns a request body with n generated instances.
func (g *Generator) Body(n, deadlineMs int) []byte {
	req := struct {
		Instances  []map[string]any `json:"instances"`
		DeadlineMs int              `json:"deadlineMs,omitempty"`
	}{DeadlineMs: deadlineMs}
	for range n {
		req.Instances = append(req.Instances, g.Instance())
	}
	b, _ := json.Marshal(req) // maps of plain values always encode
	return b
}

// preparePayload checks a user-supplied body. It returns the body to send
// (with deadlineMs set when deadlineMs > 0) and the deadline in force (the
// body's own deadlineMs when deadlineMs is 0).
func preparePayload(body []byte, deadlineMs int) ([]byte, int, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, 0, fmt.Errorf("bench: payload must be a JSON object like {\"instances\":[{...}]}: %v", err)
	}
	if _, ok := obj["instances"]; !ok {
		return nil, 0, fmt.Errorf("bench: payload has no \"instances\" key")
	}
	if deadlineMs > 0 {
		obj["deadlineMs"], _ = json.Marshal(deadlineMs)
		b, err := json.Marshal(obj)
		return b, deadlineMs, err
	}
	if raw, ok := obj["deadlineMs"]; ok {
		var d float64
		if err := json.Unmarshal(raw, &d); err == nil && d > 0 {
			deadlineMs = int(d)
		}
	}
	return bytes.Clone(body), deadlineMs, nil
}

// parseError extracts code and message from an error body
// {"error":{"code":...,"message":...}}. Bodies that are not in that shape
// get the code "unparseable".
func parseError(body []byte) (code, msg string) {
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || e.Error.Code == "" {
		s := strings.TrimSpace(string(body))
		if len(s) > 120 {
			s = s[:120] + "…"
		}
		return "unparseable", s
	}
	return e.Error.Code, e.Error.Message
}
