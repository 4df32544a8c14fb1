package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/schema"
)

// predictBody is a decoded predict request body.
type predictBody struct {
	Instances  []schema.Instance
	Deadline   time.Duration // 0 when absent
	RoutingKey string        // "" when absent
}

// Bounds of a predict body's options.
const (
	maxRoutingKey = 256   // characters of a routing key (body or X-Routing-Key)
	minDeadlineMs = 0.001 // 1µs: a smaller deadlineMs would round to no deadline at all
)

// maxInstancesDecoded bounds how many instances the decoder accepts before
// any version limit is known.
const maxInstancesDecoded = 1_000_000

// decodePredict decodes a predict body strictly: one JSON object with
// "instances" (an array of flat objects) and optional "deadlineMs";
// duplicate keys, unknown keys, nested values and trailing data are errors
// naming the field. encoding/json's struct decoding cannot see duplicate
// keys or keep number literals per field, so this walks the token stream.
func decodePredict(body []byte, maxDeadline time.Duration) (*predictBody, error) {
	p, err := decodePredictScan(body, maxDeadline)
	return p, schema.LocateJSON(body, err) // syntax errors quote line:column
}

// decodePredictScan is decodePredictTokens on schema.Scanner: one pass over
// the body without allocation per token, the same results and the same
// errors (FuzzDecodeSame holds the two together; decodePredictTokens stays
// as the reference).
func decodePredictScan(body []byte, maxDeadline time.Duration) (*predictBody, error) {
	sc := schema.NewScanner(body)
	out := &predictBody{}
	tok, err := sc.Token("")
	if err != nil {
		return nil, err
	}
	if tok.Kind != schema.TokDelim || tok.Delim != '{' {
		return nil, errs.New(errs.InvalidArgument, "the request body must be a JSON object")
	}
	var seenInstances, seenDeadline, seenRouting bool
	for sc.More() {
		tok, err := sc.Token("")
		if err != nil {
			return nil, err
		}
		if tok.Kind != schema.TokString {
			return nil, errs.Field(errs.InvalidArgument, "", "malformed JSON: expected an object key")
		}
		key := tok.Text
		var seen *bool
		switch key {
		case "instances":
			seen = &seenInstances
		case "deadlineMs":
			seen = &seenDeadline
		case "routingKey":
			seen = &seenRouting
		default:
			return nil, errs.Field(errs.InvalidArgument, errs.Clip(key), "unknown key (expected instances, deadlineMs, routingKey)")
		}
		if *seen {
			return nil, errs.Field(errs.InvalidArgument, errs.Clip(key), "duplicate key")
		}
		*seen = true
		switch key {
		case "instances":
			if out.Instances, err = scanInstances(sc); err != nil {
				return nil, err
			}
		case "deadlineMs":
			tok, err := sc.Token(key)
			if err != nil {
				return nil, err
			}
			if tok.Kind != schema.TokNumber {
				return nil, errs.Field(errs.InvalidArgument, key, "expected a number of milliseconds")
			}
			if out.Deadline, err = parseDeadline(tok.Text, maxDeadline); err != nil {
				return nil, err
			}
		case "routingKey":
			tok, err := sc.Token(key)
			if err != nil {
				return nil, err
			}
			rk := tok.Text
			if tok.Kind != schema.TokString || rk == "" || utf8.RuneCountInString(rk) > maxRoutingKey {
				return nil, errs.Field(errs.InvalidArgument, key, "must be a string of 1 to %d characters", maxRoutingKey)
			}
			out.RoutingKey = rk
		}
	}
	if _, err := sc.Token(""); err != nil { // the closing '}'
		return nil, err
	}
	if sc.Rest() {
		return nil, errs.New(errs.InvalidArgument, "malformed JSON: data after the top-level object")
	}
	if !seenInstances {
		return nil, errs.Field(errs.InvalidArgument, "instances", "is required")
	}
	return out, nil
}

func scanInstances(sc *schema.Scanner) ([]schema.Instance, error) {
	tok, err := sc.Token("instances")
	if err != nil {
		return nil, err
	}
	if tok.Kind != schema.TokDelim || tok.Delim != '[' {
		return nil, errs.Field(errs.InvalidArgument, "instances", "expected an array")
	}
	var out []schema.Instance
	for i := 0; sc.More(); i++ {
		if i >= maxInstancesDecoded {
			return nil, errs.Field(errs.TooManyInstances, "instances", "more than %d instances", maxInstancesDecoded)
		}
		inst, err := sc.ReadInstance(schema.Path{Prefix: "instances", Index: i})
		if err != nil {
			return nil, err
		}
		out = append(out, inst)
	}
	if _, err := sc.Token("instances"); err != nil { // ']'
		return nil, err
	}
	return out, nil
}

// parseDeadline checks a deadlineMs literal.
func parseDeadline(num string, maxDeadline time.Duration) (time.Duration, error) {
	const key = "deadlineMs"
	ms, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(ms, 0) || math.IsNaN(ms) {
		return 0, errs.Field(errs.InvalidArgument, key, "invalid number %s", errs.Clip(num))
	}
	if ms <= 0 {
		return 0, errs.Field(errs.InvalidArgument, key, "must be > 0, got %s", errs.Clip(num))
	}
	if ms < minDeadlineMs {
		return 0, errs.Field(errs.InvalidArgument, key, "must be at least 0.001 (1µs), got %s", errs.Clip(num))
	}
	if ms > float64(maxDeadline)/float64(time.Millisecond) {
		return 0, errs.Field(errs.InvalidArgument, key, "must be at most %d (the server's maximum deadline), got %s", maxDeadline.Milliseconds(), errs.Clip(num))
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

func decodePredictTokens(body []byte, maxDeadline time.Duration) (*predictBody, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	out := &predictBody{}
	if err := schema.ExpectDelim(dec, '{', ""); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for dec.More() {
		key, err := schema.ObjectKey(dec, "")
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, errs.Field(errs.InvalidArgument, errs.Clip(key), "duplicate key")
		}
		seen[key] = true
		switch key {
		case "instances":
			if out.Instances, err = decodeInstances(dec); err != nil {
				return nil, err
			}
		case "deadlineMs":
			tok, err := schema.JSONToken(dec, key)
			if err != nil {
				return nil, err
			}
			num, ok := tok.(json.Number)
			if !ok {
				return nil, errs.Field(errs.InvalidArgument, key, "expected a number of milliseconds")
			}
			if out.Deadline, err = parseDeadline(string(num), maxDeadline); err != nil {
				return nil, err
			}
		case "routingKey":
			tok, err := schema.JSONToken(dec, key)
			if err != nil {
				return nil, err
			}
			rk, ok := tok.(string)
			if !ok || rk == "" || utf8.RuneCountInString(rk) > maxRoutingKey {
				return nil, errs.Field(errs.InvalidArgument, key, "must be a string of 1 to %d characters", maxRoutingKey)
			}
			out.RoutingKey = rk
		default:
			return nil, errs.Field(errs.InvalidArgument, errs.Clip(key), "unknown key (expected instances, deadlineMs, routingKey)")
		}
	}
	if _, err := schema.JSONToken(dec, ""); err != nil { // the closing '}'
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
	if err := schema.ExpectDelim(dec, '[', "instances"); err != nil {
		return nil, err
	}
	var out []schema.Instance
	for i := 0; dec.More(); i++ {
		if i >= maxInstancesDecoded {
			return nil, errs.Field(errs.TooManyInstances, "instances", "more than %d instances", maxInstancesDecoded)
		}
		inst, err := schema.ReadInstance(dec, fmt.Sprintf("instances[%d]", i))
		if err != nil {
			return nil, err
		}
		out = append(out, inst)
	}
	if _, err := schema.JSONToken(dec, "instances"); err != nil { // ']'
		return nil, err
	}
	return out, nil
}
