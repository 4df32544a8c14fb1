package errs

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"12345", "12345"},
		{strings.Repeat("9", 64), strings.Repeat("9", 64)},
		{strings.Repeat("9", 65), strings.Repeat("9", 64) + "…"},
		{strings.Repeat("é", 100), strings.Repeat("é", 64) + "…"},
	} {
		if got := Clip(tc.in); got != tc.want {
			t.Errorf("Clip(%d bytes) = %q, want %q", len(tc.in), got, tc.want)
		}
	}
}

// TestMessagesAreBounded: whatever a message or field quotes, an error
// stays small: the constructors and Bounded cut at MaxMessage and
// MaxField bytes, on a rune boundary.
func TestMessagesAreBounded(t *testing.T) {
	huge := strings.Repeat("é", 1<<20)
	for name, e := range map[string]*Error{
		"New":     New(InvalidArgument, "got %s", huge),
		"Field":   Field(InvalidArgument, "instances[0]."+huge, "bad %s", huge),
		"Wrap":    Wrap(InvalidArgument, errors.New(huge), "decode"),
		"As":      As(errors.New(huge)),
		"Bounded": Bounded(&Error{Code: NotReady, Message: huge, Field: huge}),
	} {
		if len(e.Message) > MaxMessage+len("…") || len(e.Field) > MaxField+len("…") {
			t.Errorf("%s: message %d bytes, field %d bytes", name, len(e.Message), len(e.Field))
		}
		if !utf8.ValidString(e.Message) || !utf8.ValidString(e.Field) || !strings.HasSuffix(e.Message, "…") {
			t.Errorf("%s: cut badly: …%q", name, e.Message[len(e.Message)-8:])
		}
	}
	small := &Error{Code: NotFound, Message: "model \"x\" not found"}
	if Bounded(small) != small {
		t.Error("Bounded copied an error that fits")
	}
}
