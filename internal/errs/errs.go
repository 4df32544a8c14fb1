// Package errs holds Sluice's one error type, its stable codes and the single
// table that maps a code to an HTTP status and to a gRPC code. Every
// layer returns *Error for failures a caller should see; transports render
// them and never invent statuses of their own.
package errs

import (
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
)

// Code is a stable, machine-readable error code. Codes never change meaning
// once published; clients switch on them.
type Code string

// The codes. Keep this list, the status table below and docs/api.md in step.
const (
	InvalidArgument     Code = "invalid_argument"
	UnsupportedMedia    Code = "unsupported_media_type"
	PayloadTooLarge     Code = "payload_too_large"
	TooManyInstances    Code = "too_many_instances"
	NotFound            Code = "not_found"
	AlreadyExists       Code = "already_exists"
	MethodNotAllowed    Code = "method_not_allowed"
	Unauthenticated     Code = "unauthenticated"
	PermissionDenied    Code = "permission_denied"
	NotReady            Code = "not_ready"
	ColdStart           Code = "cold_start"
	QuotaExceeded       Code = "quota_exceeded"
	QueueFull           Code = "queue_full"
	DeadlineInfeasible  Code = "deadline_infeasible"
	DeadlineExceeded    Code = "deadline_exceeded"
	ExpiredInQueue      Code = "expired_in_queue"
	Unavailable         Code = "unavailable"
	ShuttingDown        Code = "shutting_down"
	InvalidPackage      Code = "invalid_package"
	IdempotencyConflict Code = "idempotency_conflict"
	Internal            Code = "internal"
)

// grpcOf is the gRPC column of the table: the code a gRPC transport
// (the gateway's OIP service, a worker) answers with.
var grpcOf = map[Code]codes.Code{
	InvalidArgument:     codes.InvalidArgument,
	UnsupportedMedia:    codes.InvalidArgument,
	PayloadTooLarge:     codes.ResourceExhausted,
	TooManyInstances:    codes.InvalidArgument,
	NotFound:            codes.NotFound,
	AlreadyExists:       codes.AlreadyExists,
	MethodNotAllowed:    codes.Unimplemented,
	Unauthenticated:     codes.Unauthenticated,
	PermissionDenied:    codes.PermissionDenied,
	NotReady:            codes.Unavailable,
	ColdStart:           codes.Unavailable,
	QuotaExceeded:       codes.ResourceExhausted,
	QueueFull:           codes.ResourceExhausted,
	DeadlineInfeasible:  codes.ResourceExhausted,
	DeadlineExceeded:    codes.DeadlineExceeded,
	ExpiredInQueue:      codes.DeadlineExceeded,
	Unavailable:         codes.Unavailable,
	ShuttingDown:        codes.Unavailable,
	InvalidPackage:      codes.FailedPrecondition,
	IdempotencyConflict: codes.AlreadyExists,
	Internal:            codes.Internal,
}

// GRPCCode maps a code to its gRPC status code; unknown codes are Internal.
func GRPCCode(c Code) codes.Code {
	if g, ok := grpcOf[c]; ok {
		return g
	}
	return codes.Internal
}

var statusOf = map[Code]int{
	InvalidArgument:     http.StatusBadRequest,
	UnsupportedMedia:    http.StatusUnsupportedMediaType,
	PayloadTooLarge:     http.StatusRequestEntityTooLarge,
	TooManyInstances:    http.StatusRequestEntityTooLarge,
	NotFound:            http.StatusNotFound,
	AlreadyExists:       http.StatusConflict,
	MethodNotAllowed:    http.StatusMethodNotAllowed,
	Unauthenticated:     http.StatusUnauthorized,
	PermissionDenied:    http.StatusForbidden,
	NotReady:            http.StatusServiceUnavailable,
	ColdStart:           http.StatusServiceUnavailable,
	QuotaExceeded:       http.StatusTooManyRequests,
	QueueFull:           http.StatusServiceUnavailable,
	DeadlineInfeasible:  http.StatusServiceUnavailable,
	DeadlineExceeded:    http.StatusGatewayTimeout,
	ExpiredInQueue:      http.StatusGatewayTimeout,
	Unavailable:         http.StatusServiceUnavailable,
	ShuttingDown:        http.StatusServiceUnavailable,
	InvalidPackage:      http.StatusUnprocessableEntity,
	IdempotencyConflict: http.StatusConflict,
	Internal:            http.StatusInternalServerError,
}

// HTTPStatus maps a code to its HTTP status; unknown codes are 500.
func HTTPStatus(c Code) int {
	if s, ok := statusOf[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Codes lists every code (for docs and tests).
func Codes() []Code {
	out := make([]Code, 0, len(statusOf))
	for c := range statusOf {
		out = append(out, c)
	}
	return out
}

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
