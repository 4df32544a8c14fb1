package schema

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
)

func TestLocateJSON(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"notjson", `malformed JSON at line 1, column 1: "notjson" is not a JSON value (expected an object, array, string, number, true, false or null)`},
		{"  nul", `malformed JSON at line 1, column 3: unexpected end of input`},
		{"{\n  \"a\": NaN}", "malformed JSON at line 2, column 8: invalid character 'N' looking for beginning of value"},
		{"{\n  \"é\": trve}", `malformed JSON at line 2, column 8: "trve" is not a JSON value`},
		{"{\"a\":\n", "malformed JSON at line 1, column 6: unexpected end of input"},
		{"{\"a\":1,\n\"b\" 2}", "malformed JSON at line 2, column 5: invalid character '2' after object key"},
	} {
		t.Run(c.body, func(t *testing.T) {
			dec := json.NewDecoder(bytes.NewReader([]byte(c.body)))
			dec.UseNumber()
			_, err := ReadInstance(dec, "instance")
			err = LocateJSON([]byte(c.body), err)
			if errs.CodeOf(err) != errs.InvalidArgument || !strings.HasPrefix(errs.As(err).Message, c.want) {
				t.Fatalf("got %v\nwant %s", err, c.want)
			}
			if strings.Contains(err.Error(), "in literal") {
				t.Fatalf("%v blames a literal", err)
			}
		})
	}
}

func TestDescribeJSON(t *testing.T) {
	var v struct{ Version int }
	for _, c := range []struct{ body, want string }{
		{"notjson", `at line 1, column 1: "notjson" is not a JSON value`},
		{"{\n \"Version\": \"x\"}", "at line 2, column 16: Version: expected int, got a JSON string"},
	} {
		err := json.Unmarshal([]byte(c.body), &v)
		if got := DescribeJSON([]byte(c.body), err); !strings.HasPrefix(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.body, got, c.want)
		}
	}
}
