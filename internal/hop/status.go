package hop

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/internal/errs"
)

// ErrorDomain marks the ErrorInfo detail of a status Sluice wrote.
const ErrorDomain = "sluiceml.dev"

// Status turns err into a gRPC status error: the code from the one error
// table, the message, and an ErrorInfo detail carrying the Sluice code, the
// field and the retry delay, so that a Sluice peer gets the same error back.
func Status(err error) error {
	if err == nil {
		return nil
	}
	e := errs.Bounded(errs.As(err))
	st := status.New(errs.GRPCCode(e.Code), e.Error())
	md := map[string]string{}
	if e.Field != "" {
		md["field"] = e.Field
	}
	if e.RetryAfter > 0 {
		md["retry_after_ms"] = strconv.FormatInt(e.RetryAfter.Milliseconds(), 10)
	}
	if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: string(e.Code), Domain: ErrorDomain, Metadata: md}); derr == nil {
		st = d
	}
	return st.Err()
}

// FromStatus turns an error returned by a gRPC call to a Sluice peer back
// into an *errs.Error. fromPeer is false when the status did not come from
// Sluice code (the connection failed, the peer died, the call was
// cancelled): the caller decides whether to try elsewhere.
func FromStatus(err error) (e *errs.Error, fromPeer bool) {
	if err == nil {
		return nil, false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errs.New(errs.DeadlineExceeded, "deadline passed waiting for the worker"), false
	}
	st, ok := status.FromError(err)
	if !ok {
		return errs.Wrap(errs.Unavailable, err, "worker call failed"), false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == ErrorDomain {
			e := &errs.Error{Code: errs.Code(info.Reason), Message: st.Message(), Field: info.Metadata["field"]}
			if f := e.Field; f != "" && len(e.Message) > len(f)+2 && e.Message[:len(f)+2] == f+": " {
				e.Message = e.Message[len(f)+2:]
			}
			if ms, err := strconv.ParseInt(info.Metadata["retry_after_ms"], 10, 64); err == nil && ms > 0 {
				e.RetryAfter = time.Duration(ms) * time.Millisecond
			}
			return e, true
		}
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		return errs.New(errs.DeadlineExceeded, "deadline passed waiting for the worker: %s", st.Message()), false
	case codes.Canceled:
		return errs.New(errs.DeadlineExceeded, "call cancelled: %s", st.Message()), false
	}
	return &errs.Error{Code: errs.Unavailable, Message: "worker unreachable: " + st.Message(), RetryAfter: time.Second}, false
}
