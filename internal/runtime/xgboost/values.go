package xgboost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// This file turns artifact bytes into generic values (decodeArtifact) and
// reads typed fields out of them, with errors that name the field.

// decodeArtifact decodes a JSON or UBJSON model into generic values.
func decodeArtifact(b []byte) (any, error) {
	if len(b) == 0 {
		return nil, errors.New("empty artifact")
	}
	if !looksLikeJSON(b) {
		return decodeUBJSON(b)
	}
	b, nonFinite := quoteNonFinite(b)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("json: trailing data after the top-level value")
	}
	// encoding/json bounds nesting itself (at 10000 levels, without
	// recursing on the goroutine stack unboundedly), and the loader only
	// walks fixed paths, so deep JSON needs no extra limit here.
	if nonFinite {
		v = restoreNonFinite(v)
	}
	return v, nil
}

// XGBoost's JSON writer prints a NaN or infinite float as the bare tokens
// NaN, Infinity and -Infinity, which JSON does not have: a categorical
// split's split_condition is NaN in every model with categorical splits.
// quoteNonFinite turns each such token outside a string into a string
// holding a marker (a NUL byte and the token, which XGBoost never writes as
// a string), and restoreNonFinite turns the markers back into float64 NaN
// and infinities after encoding/json decoded the rest. b is returned as it
// is when it holds no such token.
const nonFiniteMark = `\u0000xgboost:`

var nonFiniteTokens = []struct {
	token string
	value float64
}{{"NaN", math.NaN()}, {"Infinity", math.Inf(1)}, {"-Infinity", math.Inf(-1)}}

func quoteNonFinite(b []byte) ([]byte, bool) {
	var out []byte // nil until the first token: most models have none
	last := 0      // b[:last] is in out
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			continue
		case 'N', 'I', '-':
		default:
			continue
		}
		for _, t := range nonFiniteTokens {
			if bytes.HasPrefix(b[i:], []byte(t.token)) {
				out = append(out, b[last:i]...)
				out = append(out, '"')
				out = append(out, nonFiniteMark...)
				out = append(out, t.token...)
				out = append(out, '"')
				i += len(t.token) - 1
				last = i + 1
				break
			}
		}
	}
	if out == nil {
		return b, false
	}
	return append(out, b[last:]...), true
}

// restoreNonFinite replaces the marker strings of quoteNonFinite in v (the
// decoded JSON) by their float64 values.
func restoreNonFinite(v any) any {
	switch x := v.(type) {
	case string:
		if rest, ok := strings.CutPrefix(x, "\x00xgboost:"); ok {
			for _, t := range nonFiniteTokens {
				if rest == t.token {
					return t.value
				}
			}
		}
	case []any:
		for i, e := range x {
			x[i] = restoreNonFinite(e)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = restoreNonFinite(e)
		}
	}
	return v
}

// looksLikeJSON tells the two formats apart. Both start an object with '{',
// so the byte after it decides: JSON continues with whitespace, '"' or '}',
// UBJSON with a key-length marker ('i', 'U', 'I', 'l', 'L'), a container
// header ('$', '#') or a no-op 'N'. Leading whitespace also means JSON.
func looksLikeJSON(b []byte) bool {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i > 0 {
		return true
	}
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	if len(b) == 1 {
		return true
	}
	c := b[1]
	return isSpace(c) || c == '"' || c == '}'
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any, []float32, []float64, []int64, []int32, []int8, []uint8:
		return "array"
	case string:
		return "string"
	case bool:
		return "bool"
	default:
		return "number"
	}
}

func object(v any, what string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want an object, got %s", what, typeName(v))
	}
	return m, nil
}

func field(m map[string]any, key, what string) (any, error) {
	v, ok := m[key]
	if !ok {
		return nil, fmt.Errorf("%s: missing field %q", what, key)
	}
	return v, nil
}

func objectField(m map[string]any, key, what string) (map[string]any, error) {
	v, err := field(m, key, what)
	if err != nil {
		return nil, err
	}
	return object(v, what+"."+key)
}

func stringField(m map[string]any, key, what string) (string, error) {
	v, err := field(m, key, what)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s.%s: want a string, got %s", what, key, typeName(v))
	}
	return s, nil
}

// intValue accepts an integer number or a decimal string ("3"), the way
// XGBoost stores parameters.
func intValue(v any, what string) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not an integer", what, string(x))
		}
		return n, nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not an integer", what, x)
		}
		return n, nil
	case float32:
		if float32(int64(x)) == x && !math.IsInf(float64(x), 0) {
			return int64(x), nil
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), nil
		}
	}
	return 0, fmt.Errorf("%s: want an integer, got %s", what, typeName(v))
}

// intField reads an integer parameter and checks it lies in [lo, hi].
func intField(m map[string]any, key, what string, lo, hi int64) (int, error) {
	v, err := field(m, key, what)
	if err != nil {
		return 0, err
	}
	n, err := intValue(v, what+"."+key)
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s.%s: %d out of range [%d, %d]", what, key, n, lo, hi)
	}
	return int(n), nil
}

// float32Value parses a number or numeric string as float32, rounding the
// decimal directly to float32 as XGBoost's reader does.
func float32Value(v any, what string) (float32, error) {
	var s string
	switch x := v.(type) {
	case float32:
		return x, nil
	case float64:
		return float32(x), nil
	case int64:
		return float32(x), nil
	case json.Number:
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
	default:
		return 0, fmt.Errorf("%s: want a number, got %s", what, typeName(v))
	}
	f, err := strconv.ParseFloat(s, 32)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", what, s)
	}
	return float32(f), nil
}

// float32s reads a numeric array as float32.
func float32s(v any, what string) ([]float32, error) {
	switch x := v.(type) {
	case []float32:
		return x, nil
	case []any:
		out := make([]float32, len(x))
		for i, e := range x {
			if _, ok := e.(string); ok {
				return nil, fmt.Errorf("%s[%d]: want a number, got string", what, i)
			}
			f, err := float32Value(e, fmt.Sprintf("%s[%d]", what, i))
			if err != nil {
				return nil, err
			}
			out[i] = f
		}
		return out, nil
	case []float64:
		out := make([]float32, len(x))
		for i, e := range x {
			out[i] = float32(e)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want an array of numbers, got %s", what, typeName(v))
}

// int64s reads an integer array. Booleans count as 0/1 (old XGBoost versions
// wrote default_left as booleans).
func int64s(v any, what string) ([]int64, error) {
	switch x := v.(type) {
	case []int64:
		return x, nil
	case []int32:
		out := make([]int64, len(x))
		for i, e := range x {
			out[i] = int64(e)
		}
		return out, nil
	case []int8:
		out := make([]int64, len(x))
		for i, e := range x {
			out[i] = int64(e)
		}
		return out, nil
	case []uint8:
		out := make([]int64, len(x))
		for i, e := range x {
			out[i] = int64(e)
		}
		return out, nil
	case []any:
		out := make([]int64, len(x))
		for i, e := range x {
			switch b := e.(type) {
			case bool:
				if b {
					out[i] = 1
				}
				continue
			case string:
				return nil, fmt.Errorf("%s[%d]: want an integer, got string", what, i)
			}
			n, err := intValue(e, fmt.Sprintf("%s[%d]", what, i))
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want an array of integers, got %s", what, typeName(v))
}

// arrayLen is the length of any array value, or -1 if v is not an array.
func arrayLen(v any) int {
	switch x := v.(type) {
	case []any:
		return len(x)
	case []float32:
		return len(x)
	case []float64:
		return len(x)
	case []int64:
		return len(x)
	case []int32:
		return len(x)
	case []int8:
		return len(x)
	case []uint8:
		return len(x)
	}
	return -1
}
