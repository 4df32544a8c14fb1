package drift

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Reference sample limits.
const (
	SampleFile      = "reference.jsonl"
	MaxLineBytes    = 1 << 20 // one instance's line
	DefaultMaxLines = 100_000 // rows ReadSample accepts when asked for <= 0
)

var bom = []byte("\xef\xbb\xbf")

const jsonSpace = " \t\r\n"

// ReadSample splits a reference sample, one JSON instance per line, and
// calls row with each non-blank line's number (from 1) and its bytes,
// trimmed of surrounding JSON white space (and a leading byte order
// mark); raw is valid only during the call.
// Decoding is the caller's: it holds the strict decoder and the schema.
// A line longer than MaxLineBytes, more than maxLines rows (<= 0 means
// DefaultMaxLines), no rows at all, and row's errors end the read with a
// "reference.jsonl:LINE: …" error.
func ReadSample(r io.Reader, maxLines int, row func(line int, raw []byte) error) error {
	if maxLines <= 0 {
		maxLines = DefaultMaxLines
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes+2) // room for "\r\n"; longer lines are caught below
	line, rows := 0, 0
	for sc.Scan() {
		line++
		raw := sc.Bytes()
		if len(raw) > MaxLineBytes {
			return fmt.Errorf("%s:%d: line is longer than %d bytes", SampleFile, line, MaxLineBytes)
		}
		if line == 1 {
			raw = bytes.TrimPrefix(raw, bom)
		}
		raw = bytes.Trim(raw, jsonSpace) // JSON white space only; the decoder judges the rest
		if len(raw) == 0 {
			continue
		}
		if rows++; rows > maxLines {
			return fmt.Errorf("%s:%d: more than %d rows", SampleFile, line, maxLines)
		}
		if err := row(line, raw); err != nil {
			return fmt.Errorf("%s:%d: %w", SampleFile, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s:%d: line is longer than %d bytes", SampleFile, line+1, MaxLineBytes)
		}
		return fmt.Errorf("%s: read after line %d: %w", SampleFile, line, err)
	}
	if rows == 0 {
		return fmt.Errorf("%s: no rows", SampleFile)
	}
	return nil
}
