package records

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// FuzzCanonicalNumber checks that the canonical form of a JSON number is a
// JSON number of the same value, and a fixed point.
func FuzzCanonicalNumber(f *testing.F) {
	for _, s := range []string{"1", "1.0", "-0", "0.015", "1500", "1e400", "9007199254740993", "1.00E+0", "abc", "1."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		c := canonicalNumber(lit)
		var n json.Number
		if json.Unmarshal([]byte(lit), &n) != nil || string(n) != lit {
			return // not a JSON number literal: quoted, checked by the unit tests
		}
		if canonicalNumber(c) != c {
			t.Fatalf("canonicalNumber(%q) = %q, not a fixed point (%q)", lit, c, canonicalNumber(c))
		}
		if !json.Valid([]byte(c)) {
			t.Fatalf("canonicalNumber(%q) = %q is not valid JSON", lit, c)
		}
		a, errA := strconv.ParseFloat(lit, 64)
		b, errB := strconv.ParseFloat(c, 64)
		if errA == nil && errB == nil && a != b && !(math.IsInf(a, 0) && math.IsInf(b, 0)) {
			t.Fatalf("canonicalNumber(%q) = %q: %v != %v", lit, c, a, b)
		}
	})
}
