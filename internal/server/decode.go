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
	p, err := decodePredictTokens(body, maxDeadline)
	return p, schema.LocateJSON(body, err) // syntax errors quote line:column
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
			ms, err := strconv.ParseFloat(string(num), 64)
			if err != nil || math.IsInf(ms, 0) || math.IsNaN(ms) {
				return nil, errs.Field(errs.InvalidArgument, key, "invalid number %s", errs.Clip(string(num)))
			}
			if ms <= 0 {
				return nil, errs.Field(errs.InvalidArgument, key, "must be > 0, got %s", errs.Clip(string(num)))
			}
			if ms < minDeadlineMs {
				return nil, errs.Field(errs.InvalidArgument, key, "must be at least 0.001 (1µs), got %s", errs.Clip(string(num)))
			}
			if ms > float64(maxDeadline)/float64(time.Millisecond) {
				return nil, errs.Field(errs.InvalidArgument, key, "must be at most %d (the server's maximum deadline), got %s", maxDeadline.Milliseconds(), errs.Clip(string(num)))
			}
			out.Deadline = time.Duration(ms * float64(time.Millisecond))
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
