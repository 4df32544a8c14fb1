package errs

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"google.golang.org/grpc/codes"
)

// The table is a contract with clients: a code's HTTP status and gRPC
// code never change once published.
func TestTable(t *testing.T) {
	want := map[Code]struct {
		http int
		grpc codes.Code
	}{
		InvalidArgument: {400, codes.InvalidArgument}, UnsupportedMedia: {415, codes.InvalidArgument},
		PayloadTooLarge: {413, codes.ResourceExhausted}, TooManyInstances: {413, codes.InvalidArgument},
		NotFound: {404, codes.NotFound}, AlreadyExists: {409, codes.AlreadyExists},
		MethodNotAllowed: {405, codes.Unimplemented}, Unauthenticated: {401, codes.Unauthenticated},
		PermissionDenied: {403, codes.PermissionDenied}, NotReady: {503, codes.Unavailable}, ColdStart: {503, codes.Unavailable},
		QuotaExceeded: {429, codes.ResourceExhausted}, QueueFull: {503, codes.ResourceExhausted},
		DeadlineInfeasible: {503, codes.ResourceExhausted}, DeadlineExceeded: {504, codes.DeadlineExceeded},
		ExpiredInQueue: {504, codes.DeadlineExceeded}, Unavailable: {503, codes.Unavailable},
		ShuttingDown: {503, codes.Unavailable}, InvalidPackage: {422, codes.FailedPrecondition},
		IdempotencyConflict: {409, codes.AlreadyExists}, WorkerIDInUse: {409, codes.AlreadyExists}, Internal: {500, codes.Internal},
		WorkerAddressRefused: {403, codes.PermissionDenied}, TooManyWorkers: {503, codes.ResourceExhausted},
		JobInvalid: {400, codes.InvalidArgument}, JobNotFound: {404, codes.NotFound}, JobConflict: {409, codes.AlreadyExists},
		JobsOff:        {503, codes.Unavailable},
		OutcomesOff:    {503, codes.Unavailable},
		TooManyStreams: {503, codes.ResourceExhausted},
	}
	if len(Codes()) != len(want) {
		t.Errorf("%d codes, the test knows %d: add the new one here (published statuses never change)", len(Codes()), len(want))
	}
	for _, c := range Codes() {
		w, ok := want[c]
		if !ok {
			t.Errorf("code %s is not in the test's table", c)
			continue
		}
		if got := HTTPStatus(c); got != w.http {
			t.Errorf("HTTPStatus(%s) = %d, want %d", c, got, w.http)
		}
		if got := GRPCCode(c); got != w.grpc {
			t.Errorf("GRPCCode(%s) = %s, want %s", c, got, w.grpc)
		}
	}
	if HTTPStatus("no_such_code") != 500 || GRPCCode("no_such_code") != codes.Internal {
		t.Error("an unknown code must map to 500 / Internal")
	}
}

func TestErrorMessages(t *testing.T) {
	cause := fs.ErrNotExist
	cases := []struct {
		err  *Error
		want string
	}{
		{New(NotFound, "model %q not found", "fraud"), `model "fraud" not found`},
		{Field(InvalidArgument, "instances[0].amount", "NaN is not allowed"), "instances[0].amount: NaN is not allowed"},
		{Field(InvalidArgument, "wait", "wait: must be a duration"), "wait: must be a duration"}, // no doubled field
		{Wrap(Unavailable, cause, "metadata store unavailable"), "metadata store unavailable: file does not exist"},
		{Wrap(Internal, nil, "no cause"), "no cause"},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
	if w := Wrap(Unavailable, cause, "x"); !errors.Is(w, fs.ErrNotExist) {
		t.Error("Wrap must keep the cause for errors.Is")
	}
}

func TestAsAndCodeOf(t *testing.T) {
	if As(nil) != nil || CodeOf(nil) != "" {
		t.Error("nil error must stay nil, code \"\"")
	}
	e := New(QueueFull, "queue full")
	wrapped := fmt.Errorf("submit fraud@1: %w", e)
	if As(wrapped) != e || CodeOf(wrapped) != QueueFull {
		t.Errorf("As through %%w = %v", As(wrapped))
	}
	plain := errors.New("boom")
	got := As(plain)
	if got.Code != Internal || got.Message != "boom" || !errors.Is(got, plain) {
		t.Errorf("a plain error becomes %+v, want internal keeping the cause", got)
	}
}
