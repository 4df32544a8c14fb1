package records

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

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
	h := sha256.Sum256(CanonicalJSON(insts))
	return hex.EncodeToString(h[:])
}

// CanonicalJSON is the canonical JSON InputHash hashes.
func CanonicalJSON(insts []schema.Instance) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i, inst := range insts {
		if i > 0 {
			b.WriteByte(',')
		}
		ms := make([]schema.Member, len(inst))
		copy(ms, inst)
		sort.SliceStable(ms, func(a, c int) bool { return ms[a].Name < ms[c].Name })
		b.WriteByte('{')
		for j, m := range ms {
			if j > 0 {
				b.WriteByte(',')
			}
			writeString(&b, m.Name)
			b.WriteByte(':')
			switch m.Value.Kind {
			case schema.Null:
				b.WriteString("null")
			case schema.Number:
				b.WriteString(canonicalNumber(m.Value.Text))
			case schema.String:
				writeString(&b, m.Value.Text)
			case schema.Bool:
				b.WriteString(strconv.FormatBool(m.Value.Bool))
			case schema.Array:
				b.WriteByte('[')
				for k, it := range m.Value.Items {
					if k > 0 {
						b.WriteByte(',')
					}
					b.WriteString(canonicalNumber(it))
				}
				b.WriteByte(']')
			default:
				b.WriteString("{}")
			}
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return []byte(b.String())
}

func writeString(b *strings.Builder, s string) {
	q, _ := json.Marshal(s) // marshaling a string cannot fail
	b.Write(q)
}

// canonicalNumber normalizes a JSON number literal exactly: the result is
// "0" or [-]d[.ddd][eN] with no redundant zeros. A literal that is not a
// JSON number is returned as a JSON string, so it cannot collide with one.
func canonicalNumber(lit string) string {
	s := lit
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64)
		if err != nil || e > 1<<40 || e < -(1<<40) {
			return quoted(lit)
		}
		mant, exp = s[:i], e
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) || strings.Contains(mant, ".") && frac == "" {
		return quoted(lit)
	}
	// value = 0.digits × 10^(exp+len(intPart)) with digits = intPart+frac.
	digits := intPart + frac
	exp += int64(len(intPart))
	trimmed := strings.TrimLeft(digits, "0")
	exp -= int64(len(digits) - len(trimmed))
	digits = strings.TrimRight(trimmed, "0")
	if digits == "" {
		return "0"
	}
	// value = d.ddd × 10^(exp-1)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	b.WriteByte(digits[0])
	if len(digits) > 1 {
		b.WriteByte('.')
		b.WriteString(digits[1:])
	}
	if e := exp - 1; e != 0 {
		b.WriteByte('e')
		b.WriteString(strconv.FormatInt(e, 10))
	}
	return b.String()
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
