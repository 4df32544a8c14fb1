package xgboost

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// This file is a hand-written decoder for the Universal Binary JSON subset
// (https://ubjson.org, draft 12) that XGBoost writes: objects and arrays,
// optimised containers ('$' type, '#' count), the integer, float, string,
// bool and null markers. It decodes into the same generic values the JSON
// path produces (map[string]any, []any, string, bool, nil, numbers), plus
// typed slices for optimised numeric arrays so that large float arrays are
// not boxed one element at a time.
//
// Every length and count is checked against the bytes that remain before
// anything is allocated, and nesting is bounded, so hostile input cannot make
// it allocate absurd amounts of memory or overflow the stack.

// maxNesting bounds container nesting in both decoders. XGBoost models nest
// about six levels deep.
const maxNesting = 64

type ubjDecoder struct {
	b     []byte
	p     int
	depth int
}

var errTruncated = errors.New("unexpected end of data")

func decodeUBJSON(b []byte) (any, error) {
	d := &ubjDecoder{b: b}
	m, err := d.marker()
	if err != nil {
		return nil, d.wrap(err)
	}
	v, err := d.value(m)
	if err != nil {
		return nil, d.wrap(err)
	}
	// Trailing no-ops are allowed; anything else is not.
	for d.p < len(d.b) {
		if d.b[d.p] != 'N' {
			return nil, fmt.Errorf("ubjson: offset %d: trailing data after the top-level value", d.p)
		}
		d.p++
	}
	return v, nil
}

func (d *ubjDecoder) wrap(err error) error {
	return fmt.Errorf("ubjson: offset %d: %w", d.p, err)
}

func (d *ubjDecoder) take(n int) ([]byte, error) {
	if n < 0 || n > len(d.b)-d.p {
		return nil, errTruncated
	}
	s := d.b[d.p : d.p+n]
	d.p += n
	return s, nil
}

// marker reads the next type marker, skipping no-ops.
func (d *ubjDecoder) marker() (byte, error) {
	for d.p < len(d.b) {
		c := d.b[d.p]
		d.p++
		if c != 'N' {
			return c, nil
		}
	}
	return 0, errTruncated
}

// fixedSize is the payload size of a fixed-size scalar marker, or 0.
func fixedSize(m byte) int {
	switch m {
	case 'i', 'U', 'C':
		return 1
	case 'I':
		return 2
	case 'l', 'd':
		return 4
	case 'L', 'D':
		return 8
	}
	return 0
}

// intPayload reads the payload of an integer marker.
func (d *ubjDecoder) intPayload(m byte) (int64, error) {
	n := fixedSize(m)
	if n == 0 || m == 'd' || m == 'D' || m == 'C' {
		return 0, fmt.Errorf("marker %q is not an integer type", m)
	}
	s, err := d.take(n)
	if err != nil {
		return 0, err
	}
	switch m {
	case 'i':
		return int64(int8(s[0])), nil
	case 'U':
		return int64(s[0]), nil
	case 'I':
		return int64(int16(binary.BigEndian.Uint16(s))), nil
	case 'l':
		return int64(int32(binary.BigEndian.Uint32(s))), nil
	default: // 'L'
		return int64(binary.BigEndian.Uint64(s)), nil
	}
}

// length reads a length or count: an integer marker then its payload. It
// must be non-negative.
func (d *ubjDecoder) length() (int, error) {
	m, err := d.marker()
	if err != nil {
		return 0, err
	}
	n, err := d.intPayload(m)
	if err != nil {
		return 0, fmt.Errorf("length: %w", err)
	}
	if n < 0 || n > math.MaxInt32*16 {
		return 0, fmt.Errorf("invalid length %d", n)
	}
	return int(n), nil
}

func (d *ubjDecoder) str() (string, error) {
	n, err := d.length()
	if err != nil {
		return "", err
	}
	s, err := d.take(n)
	if err != nil {
		return "", err
	}
	return string(s), nil
}

func (d *ubjDecoder) value(m byte) (any, error) {
	switch m {
	case 'Z':
		return nil, nil
	case 'T':
		return true, nil
	case 'F':
		return false, nil
	case 'i', 'U', 'I', 'l', 'L':
		return d.intPayload(m)
	case 'd':
		s, err := d.take(4)
		if err != nil {
			return nil, err
		}
		return math.Float32frombits(binary.BigEndian.Uint32(s)), nil
	case 'D':
		s, err := d.take(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(s)), nil
	case 'C':
		s, err := d.take(1)
		if err != nil {
			return nil, err
		}
		return string(s), nil
	case 'S':
		return d.str()
	case 'H':
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return nil, fmt.Errorf("invalid high-precision number %q", s)
		}
		return json.Number(s), nil
	case '[':
		return d.array()
	case '{':
		return d.object()
	}
	return nil, fmt.Errorf("unknown type marker %q", m)
}

// header reads the optional '$' type and '#' count of a container. count is
// -1 when the container is terminated by ']' or '}'.
func (d *ubjDecoder) header() (typ byte, count int, err error) {
	count = -1
	if d.p < len(d.b) && d.b[d.p] == '$' {
		d.p++
		if typ, err = d.take1(); err != nil {
			return 0, 0, err
		}
		switch typ {
		case 'i', 'U', 'I', 'l', 'L', 'd', 'D', 'C', 'S', 'H', '[', '{':
		default:
			// Zero-width element types would let a tiny input claim
			// billions of elements; XGBoost never writes them.
			return 0, 0, fmt.Errorf("unsupported container element type %q", typ)
		}
		if d.p >= len(d.b) || d.b[d.p] != '#' {
			return 0, 0, errors.New("container type given without a count")
		}
	}
	if d.p < len(d.b) && d.b[d.p] == '#' {
		d.p++
		if count, err = d.length(); err != nil {
			return 0, 0, err
		}
		// Every element needs at least one byte (a scalar payload, a
		// marker, or a key length), so the count cannot exceed what is left.
		min := 1
		if sz := fixedSize(typ); sz > 0 {
			min = sz
		}
		if count > (len(d.b)-d.p)/min {
			return 0, 0, fmt.Errorf("container claims %d elements but only %d bytes remain", count, len(d.b)-d.p)
		}
	}
	return typ, count, nil
}

func (d *ubjDecoder) take1() (byte, error) {
	s, err := d.take(1)
	if err != nil {
		return 0, err
	}
	return s[0], nil
}

func (d *ubjDecoder) enter() error {
	d.depth++
	if d.depth > maxNesting {
		return fmt.Errorf("containers nested deeper than %d", maxNesting)
	}
	return nil
}

func (d *ubjDecoder) array() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer func() { d.depth-- }()
	typ, count, err := d.header()
	if err != nil {
		return nil, err
	}
	if typ != 0 {
		if v, ok, err := d.typedArray(typ, count); ok || err != nil {
			return v, err
		}
	}
	var out []any
	if count >= 0 {
		out = make([]any, 0, count)
	}
	for i := 0; count < 0 || i < count; i++ {
		m := typ
		if m == 0 {
			if m, err = d.marker(); err != nil {
				return nil, err
			}
			if count < 0 && m == ']' {
				break
			}
		}
		v, err := d.value(m)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

// typedArray decodes an optimised array of a fixed-size numeric type into a
// typed slice. ok is false for other element types.
func (d *ubjDecoder) typedArray(typ byte, count int) (v any, ok bool, err error) {
	sz := fixedSize(typ)
	if sz == 0 || typ == 'C' {
		return nil, false, nil
	}
	s, err := d.take(count * sz) // header checked count*sz fits
	if err != nil {
		return nil, true, err
	}
	switch typ {
	case 'd':
		out := make([]float32, count)
		for i := range out {
			out[i] = math.Float32frombits(binary.BigEndian.Uint32(s[4*i:]))
		}
		return out, true, nil
	case 'D':
		out := make([]float64, count)
		for i := range out {
			out[i] = math.Float64frombits(binary.BigEndian.Uint64(s[8*i:]))
		}
		return out, true, nil
	case 'U':
		out := make([]uint8, count)
		copy(out, s)
		return out, true, nil
	case 'i':
		out := make([]int8, count)
		for i := range out {
			out[i] = int8(s[i])
		}
		return out, true, nil
	case 'I':
		out := make([]int32, count)
		for i := range out {
			out[i] = int32(int16(binary.BigEndian.Uint16(s[2*i:])))
		}
		return out, true, nil
	case 'l':
		out := make([]int32, count)
		for i := range out {
			out[i] = int32(binary.BigEndian.Uint32(s[4*i:]))
		}
		return out, true, nil
	default: // 'L'
		out := make([]int64, count)
		for i := range out {
			out[i] = int64(binary.BigEndian.Uint64(s[8*i:]))
		}
		return out, true, nil
	}
}

func (d *ubjDecoder) object() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer func() { d.depth-- }()
	typ, count, err := d.header()
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for i := 0; count < 0 || i < count; i++ {
		if count < 0 {
			// Keys carry no 'S' marker; a '}' ends the object. A key
			// length marker is always an integer type, never '}'.
			for d.p < len(d.b) && d.b[d.p] == 'N' {
				d.p++
			}
			if d.p < len(d.b) && d.b[d.p] == '}' {
				d.p++
				break
			}
		}
		key, err := d.str()
		if err != nil {
			return nil, fmt.Errorf("object key: %w", err)
		}
		m := typ
		if m == 0 {
			if m, err = d.marker(); err != nil {
				return nil, err
			}
		}
		v, err := d.value(m)
		if err != nil {
			return nil, fmt.Errorf("object key %q: %w", key, err)
		}
		out[key] = v
	}
	return out, nil
}
