package oip

// This file is the one table of the protocol's datatypes: what each
// element is (a signed or unsigned integer of a width, a float of a
// width, a boolean, a string), its size as bytes, its range, and how one
// element of its little-endian bytes reads as the number the schema
// judges. Every path that reads a tensor (REST JSON data, REST binary
// data, gRPC typed and raw contents, the fast path into rows) asks it,
// so a datatype is taken the same way everywhere.

import (
	"encoding/binary"
	"math"
	"strconv"
)

// The datatypes of the protocol beyond the six above: narrower integers,
// unsigned integers and half-precision floats (FP16, and Triton's BF16).
const (
	INT8   = "INT8"
	INT16  = "INT16"
	UINT8  = "UINT8"
	UINT16 = "UINT16"
	UINT32 = "UINT32"
	UINT64 = "UINT64"
	FP16   = "FP16"
	BF16   = "BF16"
)

// dtKind is what a datatype's elements are.
type dtKind uint8

const (
	kindUnknown dtKind = iota
	kindBool
	kindInt   // signed integer
	kindUint  // unsigned integer
	kindFloat // IEEE 754 (FP16, BF16, FP32, FP64)
	kindBytes
)

// dtInfo describes a datatype.
type dtInfo struct {
	kind dtKind
	size int64 // bytes per element (0: BYTES)
	// min and max bound an integer datatype's values (signed: min..max;
	// unsigned: 0..umax).
	min, max int64
	umax     uint64
}

// datatypeInfo is the datatype's row (kind 0: unknown).
func datatypeInfo(dt string) dtInfo {
	switch dt {
	case BOOL:
		return dtInfo{kind: kindBool, size: 1}
	case INT8:
		return dtInfo{kind: kindInt, size: 1, min: math.MinInt8, max: math.MaxInt8}
	case INT16:
		return dtInfo{kind: kindInt, size: 2, min: math.MinInt16, max: math.MaxInt16}
	case INT32:
		return dtInfo{kind: kindInt, size: 4, min: math.MinInt32, max: math.MaxInt32}
	case INT64:
		return dtInfo{kind: kindInt, size: 8, min: math.MinInt64, max: math.MaxInt64}
	case UINT8:
		return dtInfo{kind: kindUint, size: 1, umax: math.MaxUint8}
	case UINT16:
		return dtInfo{kind: kindUint, size: 2, umax: math.MaxUint16}
	case UINT32:
		return dtInfo{kind: kindUint, size: 4, umax: math.MaxUint32}
	case UINT64:
		return dtInfo{kind: kindUint, size: 8, umax: math.MaxUint64}
	case FP16, BF16:
		return dtInfo{kind: kindFloat, size: 2}
	case FP32:
		return dtInfo{kind: kindFloat, size: 4}
	case FP64:
		return dtInfo{kind: kindFloat, size: 8}
	case BYTES:
		return dtInfo{kind: kindBytes}
	}
	return dtInfo{}
}

// datatypeList names the datatypes taken, for messages.
const datatypeList = "BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FP16, BF16, FP32, FP64 or BYTES"

// isInteger reports a signed or unsigned integer datatype.
func isInteger(dt string) bool {
	k := datatypeInfo(dt).kind
	return k == kindInt || k == kindUint
}

// isNumeric reports an integer or float datatype.
func isNumeric(dt string) bool {
	k := datatypeInfo(dt).kind
	return k == kindInt || k == kindUint || k == kindFloat
}

// halfFloat reads an IEEE 754 half-precision value (FP16) as the float32
// it is exactly.
func halfFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: frac × 2^-24
		v := float32(frac) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}

// bfloat reads a bfloat16 value (BF16): the upper half of a float32.
func bfloat(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// rawNumber is element i of little-endian bytes b of a numeric datatype:
// the float64 the schema compares and the literal the instance path holds
// (its shortest decimal: an integer's digits; a float's shortest text that
// reads back as it, FP16 and BF16 values being float32 values exactly).
// f32 reports a literal of a float32 (FP16, BF16, FP32), whose float64
// the fast path reads back from the literal where that can matter.
func rawNumber(dt string, b []byte, i int64, scratch []byte) (x float64, lit []byte, f32 bool) {
	switch dt {
	case INT8:
		v := int64(int8(b[i]))
		return float64(v), strconv.AppendInt(scratch, v, 10), false
	case INT16:
		v := int64(int16(binary.LittleEndian.Uint16(b[2*i:])))
		return float64(v), strconv.AppendInt(scratch, v, 10), false
	case INT32:
		v := int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		return float64(v), strconv.AppendInt(scratch, v, 10), false
	case INT64:
		v := int64(binary.LittleEndian.Uint64(b[8*i:]))
		// float64(v) rounds to nearest even, as ParseFloat does.
		return float64(v), strconv.AppendInt(scratch, v, 10), false
	case UINT8:
		v := uint64(b[i])
		return float64(v), strconv.AppendUint(scratch, v, 10), false
	case UINT16:
		v := uint64(binary.LittleEndian.Uint16(b[2*i:]))
		return float64(v), strconv.AppendUint(scratch, v, 10), false
	case UINT32:
		v := uint64(binary.LittleEndian.Uint32(b[4*i:]))
		return float64(v), strconv.AppendUint(scratch, v, 10), false
	case UINT64:
		v := binary.LittleEndian.Uint64(b[8*i:])
		return float64(v), strconv.AppendUint(scratch, v, 10), false
	case FP16:
		v := halfFloat(binary.LittleEndian.Uint16(b[2*i:]))
		return float64(v), strconv.AppendFloat(scratch, float64(v), 'g', -1, 32), true
	case BF16:
		v := bfloat(binary.LittleEndian.Uint16(b[2*i:]))
		return float64(v), strconv.AppendFloat(scratch, float64(v), 'g', -1, 32), true
	case FP32:
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		return float64(v), strconv.AppendFloat(scratch, float64(v), 'g', -1, 32), true
	case FP64:
		v := math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		return v, strconv.AppendFloat(scratch, v, 'g', -1, 64), false // reads back as v exactly
	}
	return math.NaN(), nil, false
}

// checkInteger checks an integer literal (a JSON number, a typed
// content's text) against an integer datatype's range.
func checkInteger(name string, i int, dt, text string) error {
	info := datatypeInfo(dt)
	if info.kind == kindUint {
		u, err := strconv.ParseUint(text, 10, 64)
		if isRangeErr(err) {
			return tensorErr(name, "element %d: %s overflows %s", i, text, dt)
		}
		if err != nil {
			if _, ierr := strconv.ParseInt(text, 10, 64); ierr == nil {
				return tensorErr(name, "element %d: %s is negative (datatype %s holds 0 to %d)", i, text, dt, info.umax)
			}
			return tensorErr(name, "element %d: %s is not an integer (datatype %s)", i, text, dt)
		}
		if u > info.umax {
			return tensorErr(name, "element %d: %s overflows %s", i, text, dt)
		}
		return nil
	}
	x, err := strconv.ParseInt(text, 10, 64)
	if isRangeErr(err) {
		return tensorErr(name, "element %d: %s overflows %s", i, text, dt)
	}
	if err != nil {
		return tensorErr(name, "element %d: %s is not an integer (datatype %s)", i, text, dt)
	}
	if x < info.min || x > info.max {
		return tensorErr(name, "element %d: %s overflows %s", i, text, dt)
	}
	return nil
}

// halfMax is the largest finite FP16 value.
const halfMax = 65504

// checkHalf checks a JSON number sent as FP16 against FP16's range
// (65504); the literal itself is what the schema judges, as for every
// float datatype.
func checkHalf(name string, i int, text string) error {
	f, err := strconv.ParseFloat(text, 64)
	if err == nil && math.Abs(f) <= halfMax {
		return nil
	}
	return tensorErr(name, "element %d: %s overflows FP16 (at most 65504)", i, text)
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
