package records

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluiceml/sluice/internal/schema"
)

// InputHash is the SHA-256 (hex) of the canonical JSON of insts, so that two
// requests carrying the same instances hash the same however they were
// written. The canonical form is a JSON array of objects where:
//
//   - members are sorted by name (bytewise; a duplicated name keeps its
//     values in the order sent);
//   - numbers are normalized exactly from their literal, with no rounding
//     through float64: sign, leading and trailing zeros and the exponent are
//     normalized, so 1, 1.0, 1e0, 10e-1 and 1.00E+0 are all "1"; 1500 is
//     "1.5e3"; -0 and 0.0 are "0". Distinct values never collide, even
//     integers past 2^53;
//   - strings are JSON-escaped as encoding/json does;
//   - true, false and null are themselves;
//   - a composite value (an object or array, which no schema accepts) is {}.
func InputHash(insts []schema.Instance) string {
	bp := hashBufs.Get().(*[]byte)
	b := AppendCanonical((*bp)[:0], insts)
	sum := hexSum(b)
	if cap(b) <= 4<<20 {
		*bp = b
		hashBufs.Put(bp)
	}
	return sum
}

// hashBufs reuses canonical-JSON buffers: a 1,000-row request would
// otherwise allocate and grow one per call.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// CanonicalJSON is the canonical JSON InputHash hashes.
func CanonicalJSON(insts []schema.Instance) []byte {
	return AppendCanonical(nil, insts)
}

// AppendCanonical appends the canonical JSON of insts to b.
func AppendCanonical(b []byte, insts []schema.Instance) []byte {
	b = append(b, '[')
	// Instances decoded from one request (and every instance built from
	// tensors) list their members in the same order: the sorting
	// permutation is computed once and reused while the names repeat.
	// The sorted names' canonical text (`"name":`, a ',' before all but
	// the first) is written once and copied for every instance after.
	var permBuf [32]int
	var endBuf [32]int
	var keyBuf [512]byte
	perm, ends, keys := permBuf[:0], endBuf[:0], keyBuf[:0]
	var prev schema.Instance
	for i, inst := range insts {
		if i > 0 {
			b = append(b, ',')
		}
		if !sameNames(inst, prev) {
			perm = perm[:0]
			for j := range inst {
				perm = append(perm, j)
			}
			slices.SortStableFunc(perm, func(x, y int) int { return strings.Compare(inst[x].Name, inst[y].Name) })
			prev = inst
			keys, ends = keys[:0], ends[:0]
			for j, k := range perm {
				if j > 0 {
					keys = append(keys, ',')
				}
				keys = append(appendString(keys, inst[k].Name), ':')
				ends = append(ends, len(keys))
			}
		}
		b = append(b, '{')
		from := 0
		for j, k := range perm {
			m := inst[k]
			b = append(b, keys[from:ends[j]]...)
			from = ends[j]
			switch m.Value.Kind {
			case schema.Null:
				b = append(b, "null"...)
			case schema.Number:
				b = appendNumber(b, m.Value.Text)
			case schema.String:
				b = appendString(b, m.Value.Text)
			case schema.Bool:
				b = strconv.AppendBool(b, m.Value.Bool)
			case schema.Array:
				b = append(b, '[')
				for k, it := range m.Value.Items {
					if k > 0 {
						b = append(b, ',')
					}
					b = appendNumber(b, it)
				}
				b = append(b, ']')
			default:
				b = append(b, "{}"...)
			}
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// sameNames reports whether a and b have the same member names in the same order.
func sameNames(a, b schema.Instance) bool {
	if len(a) != len(b) || b == nil {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}

// appendString appends s JSON-escaped exactly as encoding/json does
// (including \u003c, \u003e, \u0026 and invalid UTF-8): the common case of
// plain printable ASCII is copied as is, anything else goes to json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if escaped[s[i]] {
			q, _ := json.Marshal(s) // marshaling a string cannot fail
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// escaped marks the bytes appendString does not copy as they are: control
// characters, non-ASCII, '"', '\\', '<', '>', '&' and DEL.
var escaped = func() (t [256]bool) {
	for c := range t {
		t[c] = c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&'
	}
	return t
}()

// canonicalNumber normalizes a JSON number literal exactly: the result is
// "0" or [-]d[.ddd][eN] with no redundant zeros. A literal that is not a
// JSON number is returned as a JSON string, so it cannot collide with one.
func canonicalNumber(lit string) string { return string(appendNumber(nil, lit)) }

// appendNumber appends canonicalNumber(lit) to b without allocating.
func appendNumber(b []byte, lit string) []byte {
	s := lit
	neg := false
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	// One pass over the mantissa: digits and at most one '.', up to the
	// first 'e' or 'E'.
	mant, exp := s, int64(0)
	dot := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			continue
		}
		if c == '.' && dot < 0 {
			dot = i
			continue
		}
		if c == 'e' || c == 'E' {
			e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64)
			if err != nil || e > 1<<40 || e < -(1<<40) {
				return append(b, quoted(lit)...)
			}
			mant, exp = s[:i], e
			break
		}
		return append(b, quoted(lit)...)
	}
	// mant is digits with at most one '.': it needs a digit before the
	// '.' and one after it.
	if mant == "" || dot == 0 || dot == len(mant)-1 {
		return append(b, quoted(lit)...)
	}
	intLen := len(mant)
	if dot > 0 {
		intLen = dot
	}
	// value = 0.digits × 10^(exp+intLen) with digits = mant without its
	// '.', read through digit(k).
	n := len(mant)
	if dot > 0 {
		n--
	}
	digit := func(k int) byte {
		if dot > 0 && k >= dot {
			return mant[k+1]
		}
		return mant[k]
	}
	exp += int64(intLen)
	lo := 0
	for lo < n && digit(lo) == '0' {
		lo++
	}
	exp -= int64(lo)
	hi := n
	for hi > lo && digit(hi-1) == '0' {
		hi--
	}
	if lo == hi {
		return append(b, '0')
	}
	// value = d.ddd × 10^(exp-1)
	if neg {
		b = append(b, '-')
	}
	b = append(b, digit(lo))
	if hi-lo > 1 {
		b = append(b, '.')
		for k := lo + 1; k < hi; k++ {
			b = append(b, digit(k))
		}
	}
	if e := exp - 1; e != 0 {
		b = append(b, 'e')
		b = strconv.AppendInt(b, e, 10)
	}
	return b
}

func quoted(s string) string { q, _ := json.Marshal("number:" + s); return string(q) }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// AppendCanonicalNumber appends a number literal's canonical form, as
// AppendCanonical writes a number member: for transports that build the
// canonical JSON of their rows themselves (OIP tensors read straight into
// rows), so that their input hash is the one of the instances they stand
// for. lit is not retained.
func AppendCanonicalNumber(b []byte, lit string) []byte { return appendNumber(b, lit) }

// AppendCanonicalString appends s as AppendCanonical writes a string (a
// member name or a string value).
func AppendCanonicalString(b []byte, s string) []byte { return appendString(b, s) }

// HashCanonical is the input hash of canonical JSON built with
// AppendCanonicalNumber and AppendCanonicalString: InputHash of the
// instances it is the canonical JSON of.
func HashCanonical(canonical []byte) string {
	return hexSum(canonical)
}

// hexSum is the SHA-256 of b in hex, in one allocation.
func hexSum(b []byte) string {
	h := sha256.Sum256(b)
	var x [2 * sha256.Size]byte
	hex.Encode(x[:], h[:])
	return string(x[:])
}
