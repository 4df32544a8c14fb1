package drift

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

type line struct {
	n   int
	raw string
}

func readAll(in string, max int, fail func(line int) error) ([]line, error) {
	var got []line
	err := ReadSample(strings.NewReader(in), max, func(n int, raw []byte) error {
		got = append(got, line{n, string(raw)})
		if fail != nil {
			return fail(n)
		}
		return nil
	})
	return got, err
}

func TestReadSample(t *testing.T) {
	long := `{"x":"` + strings.Repeat("a", MaxLineBytes) + `"}`
	tests := []struct {
		name string
		in   string
		max  int
		fail func(int) error
		want []line
		err  string
	}{
		{name: "lines", in: "{\"a\":1}\n{\"a\":2}\n", want: []line{{1, `{"a":1}`}, {2, `{"a":2}`}}},
		{name: "no final newline", in: "{\"a\":1}\n{\"a\":2}", want: []line{{1, `{"a":1}`}, {2, `{"a":2}`}}},
		{name: "blank lines keep numbers", in: "\n  \n{\"a\":1}\r\n\t\n{\"a\":2}\r\n\n", want: []line{{3, `{"a":1}`}, {5, `{"a":2}`}}},
		{name: "byte order mark", in: "\xef\xbb\xbf{\"a\":1}\n", want: []line{{1, `{"a":1}`}}},
		{name: "row error", in: "{}\n\n{bad\n", fail: func(n int) error {
			if n == 3 {
				return errors.New("invalid JSON")
			}
			return nil
		}, want: []line{{1, "{}"}, {3, "{bad"}}, err: "reference.jsonl:3: invalid JSON"},
		{name: "too many rows", in: "{}\n{}\n\n{}\n", max: 2, want: []line{{1, "{}"}, {2, "{}"}}, err: "reference.jsonl:4: more than 2 rows"},
		{name: "long line", in: "{}\n" + long + "\n{}\n", want: []line{{1, "{}"}}, err: "reference.jsonl:2: line is longer than 1048576 bytes"},
		{name: "long last line", in: "{}\n" + long, want: []line{{1, "{}"}}, err: "reference.jsonl:2: line is longer than 1048576 bytes"},
		{name: "longest line", in: strings.Repeat(" ", MaxLineBytes-2) + "{}\r\n", want: []line{{1, "{}"}}},
		{name: "one byte too long", in: strings.Repeat(" ", MaxLineBytes-1) + "{}\n", err: "reference.jsonl:1: line is longer"},
		{name: "empty", in: "", err: "reference.jsonl: no rows"},
		{name: "blank", in: "\n \r\n", err: "reference.jsonl: no rows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(tt.in, tt.max, tt.fail)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.err)) {
				t.Fatalf("error %v, want %q", err, tt.err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d rows %v, want %v", len(got), got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("row %d: got %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestReadSampleWrapsErrors(t *testing.T) {
	sentinel := errors.New("boom")
	err := ReadSample(strings.NewReader("{}\n"), 0, func(int, []byte) error { return sentinel })
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v does not wrap the row's error", err)
	}
	err = ReadSample(iotest.TimeoutReader(strings.NewReader("{}\n{}\n")), 0, func(int, []byte) error { return nil })
	if !errors.Is(err, iotest.ErrTimeout) || !strings.HasPrefix(err.Error(), "reference.jsonl: read after line") {
		t.Fatalf("read error: %v", err)
	}
}

// FuzzReadSample checks ReadSample against a plain split on '\n': the same
// non-blank lines with the same numbers, and a located error otherwise.
func FuzzReadSample(f *testing.F) {
	for _, s := range []string{"", "{}\n", "\xef\xbb\xbf{\"a\":1}\r\n\n{\"a\":2}", " \n\t\n", "{}\n{}\n{}\n{}\n", "\r\r\n\r"} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max > 100 {
			max = 100
		}
		var got []line
		err := ReadSample(bytes.NewReader(in), max, func(n int, raw []byte) error {
			if len(raw) == 0 || bytes.ContainsAny(raw, "\n") || len(raw) > MaxLineBytes {
				t.Fatalf("line %d: bad raw %q", n, raw)
			}
			if len(got) > 0 && n <= got[len(got)-1].n {
				t.Fatalf("line numbers not increasing: %d after %d", n, got[len(got)-1].n)
			}
			got = append(got, line{n, string(raw)})
			return nil
		})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "reference.jsonl:") {
				t.Fatalf("error without location: %v", err)
			}
			return
		}
		var want []line
		for i, l := range strings.Split(string(in), "\n") {
			if i == 0 {
				l = strings.TrimPrefix(l, "\xef\xbb\xbf")
			}
			if l = strings.Trim(l, " \t\r"); l != "" {
				want = append(want, line{i + 1, l})
			}
		}
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("row %d: got %v, want %v", i, got[i], want[i])
			}
		}
		lim := max
		if lim <= 0 {
			lim = DefaultMaxLines
		}
		if len(got) == 0 || len(got) > lim {
			t.Fatalf("%d rows accepted with limit %d", len(got), lim)
		}
	})
}
