// Package errs holds Sluice's one error type and its error catalogue:
// every stable code with its HTTP status, its gRPC code, whether it is a
// refusal (counted in sluice_refusals_total), whether it refunds the
// tenant's quota, whether it is retried on another worker or worth a
// client's retry, and how Retry-After is set. Every layer returns *Error
// for failures a caller should see and asks Lookup what a code means;
// transports render them and never invent statuses of their own, and no
// package lists codes by hand.
//
// The catalogue's source is catalogue.tsv, one row per code. It is a table
// in a data file rather than a Go literal because two outputs come from it
// — the Go table (catalogue_gen.go: the constants, the rows and a switch
// that finds a row) and docs/errors.md — and because a row read as a
// tab-separated line is reviewed as one line: a code's status, refund and
// retry rules and its documentation change together or not at all. Edit
// the TSV, then run `go generate ./internal/errs` (or
// `go test ./internal/errs -update`); TestCatalogueUpToDate, part of
// `make test`, regenerates both files in memory and fails when the checked-in
// ones differ. internal/catgen parses and checks the table (a refund
// without a refusal, a refusal without Retry-After, a retry on another
// worker for a 4xx are errors naming the line).
package errs

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

//go:generate go run gen.go

// Error is a failure a caller should see.
type Error struct {
	Code    Code
	Message string
	// Field is the path of the offending input, e.g. "instances[3].amount".
	Field string
	// Reason is an optional low-cardinality detail of the code (schema
	// violations: "missing", "range", …), for metrics; not shown to clients.
	Reason string
	// RetryAfter, when > 0, tells the client when trying again makes sense.
	RetryAfter time.Duration
	// Err is the underlying cause, kept for logs; not shown to clients.
	Err error
}

func (e *Error) Error() string {
	if e.Field != "" && !startsWith(e.Message, e.Field) {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

func startsWith(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// Bounds of what an error shows. A message quotes an input value through
// Clip (at most MaxQuote characters); New, Field and Wrap cut a whole
// message at MaxMessage bytes and a field path at MaxField bytes, and
// Bounded does the same to an Error built by hand, so that no input makes
// an error body (or an answer kept for replay) large.
const (
	MaxQuote   = 64
	MaxMessage = 4096
	MaxField   = 256
)

// Clip returns s cut to MaxQuote characters, with "…" when it was longer:
// how a message quotes a value from the input (a number literal, a key, a
// category).
func Clip(s string) string { return clipRunes(s, MaxQuote) }

func clipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	if i >= len(s) {
		return s
	}
	return s[:i] + "…"
}

// clipBytes cuts s to at most n bytes (at a rune boundary) plus "…".
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// Bounded returns e with its message and field cut to MaxMessage and
// MaxField bytes (e itself when they fit). Transports render through it.
func Bounded(e *Error) *Error {
	if e == nil || (len(e.Message) <= MaxMessage && len(e.Field) <= MaxField) {
		return e
	}
	c := *e
	c.Message, c.Field = clipBytes(c.Message, MaxMessage), clipBytes(c.Field, MaxField)
	return &c
}

// New returns an error with a code and a formatted message.
func New(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: clipBytes(fmt.Sprintf(format, args...), MaxMessage)}
}

// Field returns an error about one input field.
func Field(c Code, field, format string, args ...any) *Error {
	return &Error{Code: c, Field: clipBytes(field, MaxField), Message: clipBytes(fmt.Sprintf(format, args...), MaxMessage)}
}

// Wrap gives err a code, keeping it as the cause.
func Wrap(c Code, err error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if err != nil {
		msg += ": " + err.Error()
	}
	return &Error{Code: c, Message: clipBytes(msg, MaxMessage), Err: err}
}

// As extracts an *Error from err's chain; a plain error becomes Internal.
func As(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: Internal, Message: clipBytes(err.Error(), MaxMessage), Err: err}
}

// CodeOf returns the code of err ("" for nil).
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	return As(err).Code
}
