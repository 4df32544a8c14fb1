package errs

import (
	"math"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"
)

// Code is a stable, machine-readable error code. Codes never change meaning
// once published; clients switch on them. The codes are generated from
// catalogue.tsv (catalogue_gen.go).
type Code string

// Refusal is the kind of a refusal: why a request was turned away before
// anything was computed. "" is not a refusal.
type Refusal string

// The refusal kinds.
const (
	RefusalCapacity  Refusal = "capacity"  // the version has no room for the request in time
	RefusalReadiness Refusal = "readiness" // the version cannot run it now (not ready, or not loaded)
	RefusalClosing   Refusal = "closing"   // the server or worker is draining
	RefusalQuota     Refusal = "quota"     // the tenant is over its quota
)

// Entry is one row of the catalogue: what a code means to every layer.
type Entry struct {
	Code Code
	HTTP int        // the HTTP status (/v1 and OIP REST)
	GRPC codes.Code // the gRPC code (OIP gRPC, the worker hop)
	// Refusal, when set, makes the code a refusal: counted in
	// sluice_refusals_total with the code as its reason.
	Refusal Refusal
	// Refund: nothing was computed, so the gateway gives the tenant back
	// the quota the request took.
	Refund bool
	// RetryWorker: with workers, the request is tried once on another
	// worker holding the version before this answer stands.
	RetryWorker bool
	// RetryClient: the same request may succeed when sent again later.
	RetryClient bool
	// RetryAfter says how an error's Retry-After is set; "" means the
	// header is never sent for this code.
	RetryAfter string
	Doc        string // when the code is returned (docs/errors.md)
}

// Lookup returns c's row. An unknown code (a newer peer's) is treated as
// Internal: 500, gRPC Internal, no refusal, no retry.
func Lookup(c Code) Entry {
	if i := index(c); i >= 0 {
		return catalogue[i]
	}
	return Entry{Code: c, HTTP: http.StatusInternalServerError, GRPC: codes.Internal}
}

// Of is Lookup of err's code; the zero Entry for a nil err.
func Of(err error) Entry {
	if err == nil {
		return Entry{}
	}
	return Lookup(CodeOf(err))
}

// HTTPStatus maps a code to its HTTP status; unknown codes are 500.
func HTTPStatus(c Code) int { return Lookup(c).HTTP }

// GRPCCode maps a code to its gRPC status code; unknown codes are Internal.
func GRPCCode(c Code) codes.Code { return Lookup(c).GRPC }

// Codes lists every code, in the catalogue's order.
func Codes() []Code {
	out := make([]Code, len(catalogue))
	for i, e := range catalogue {
		out[i] = e.Code
	}
	return out
}

// Refusals lists the codes that are refusals (the reasons of
// sluice_refusals_total), in the catalogue's order.
func Refusals() []Code {
	var out []Code
	for _, e := range catalogue {
		if e.Refusal != "" {
			out = append(out, e.Code)
		}
	}
	return out
}

// RetryAfterHeader is the value of e's Retry-After header (whole seconds,
// rounded up), or "" when none is sent: e sets no delay, or its code's row
// says the header is never sent. Every transport renders it the same way.
func RetryAfterHeader(e *Error) string {
	if e == nil || e.RetryAfter <= 0 || Lookup(e.Code).RetryAfter == "" {
		return ""
	}
	return strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds())))
}
