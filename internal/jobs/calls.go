package jobs

import (
	"strconv"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// What both Predictors (jobgw in process, jobhttp over HTTP) do with a
// call the gateway refused.

// CallRetryWait is the wait before a Predictor sends a call again: a full
// batch queue briefly (10 ms doubling to 250 ms: the queue drains by
// batches), an empty quota for what its Retry-After says.
func CallRetryWait(attempt int, e *errs.Error) time.Duration {
	if e.Code == errs.QuotaExceeded && e.RetryAfter > 0 {
		return min(e.RetryAfter, BackoffMax)
	}
	d := 10 * time.Millisecond
	for i := 1; i < attempt && d < 250*time.Millisecond; i++ {
		d *= 2
	}
	return min(d, 250*time.Millisecond)
}

// InstanceOf reads k from a field path "instances[k]…".
func InstanceOf(field string) (int, bool) {
	rest, ok := strings.CutPrefix(field, "instances[")
	if !ok {
		return 0, false
	}
	i := strings.IndexByte(rest, ']')
	if i < 0 {
		return 0, false
	}
	k, err := strconv.Atoi(rest[:i])
	return k, err == nil && k >= 0
}

// RowErr is a refused row's error: the field (without the instance's
// path) and the message.
func RowErr(err error) *jobio.OutError {
	e := errs.As(err)
	field := e.Field
	if _, ok := InstanceOf(field); ok {
		field = field[strings.IndexByte(field, ']')+1:]
	}
	field = strings.TrimPrefix(field, ".")
	msg := e.Message
	if e.Field != "" {
		msg = strings.TrimPrefix(msg, e.Field+": ")
	}
	return &jobio.OutError{Field: field, Message: msg}
}
