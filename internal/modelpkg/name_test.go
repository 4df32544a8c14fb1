package modelpkg

import (
	"strings"
	"testing"
)

// ValidName (a loop) agrees with nameRE (the rule as a regexp) plus the
// 63-character bound, on names built from every kind of byte.
func TestValidName(t *testing.T) {
	cases := []string{"", "a", "fraud", "fraud-2", "-a", "a-", "A", "fraud_x", "a.b", "0", "9lives", "é", "a b", "a\x00",
		strings.Repeat("a", 63), strings.Repeat("a", 64), "a--b", "x/y"}
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "a"+string([]byte{byte(c)}))
	}
	for _, n := range cases {
		want := len(n) <= 63 && nameRE.MatchString(n)
		if got := ValidName(n); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", n, got, want)
		}
	}
}
