package server

import (
	"strings"
	"testing"
	"time"
)

// A predict body that is not JSON is named as such, with line:column, and
// never blamed on a literal ("in literal null").
func TestDecodePredictSyntaxErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"notjson", `malformed JSON at line 1, column 1: "notjson" is not a JSON value`},
		{"{\"instances\": [\n  {\"amount\": NaN}]}", "malformed JSON at line 2, column 14: invalid character 'N'"},
	} {
		_, err := decodePredict([]byte(c.body), time.Minute)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "in literal") {
			t.Errorf("%q: got %v, want %q", c.body, err, c.want)
		}
	}
}
