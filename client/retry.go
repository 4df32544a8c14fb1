package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy says which failed calls a Client sends again and when. A
// call is tried again only when doing so cannot do the work twice and
// the wait ends before the context's deadline:
//
//   - a refusal with Retry-After (the codes the server marks retryable:
//     queue_full, quota_exceeded, cold_start, shutting_down, …; docs/errors.md)
//     computed nothing, so any call is sent again, after the wait the
//     server asked for (never sooner);
//   - no answer (a connection refused or reset) or 502, 503 or 504
//     without Retry-After may have done the work: only a call that is
//     safe to repeat is sent again, with exponential backoff and full
//     jitter: GET and HEAD, and a predict or OIP infer call that carries
//     an idempotency key (X-Request-Id), whose first answer the server
//     replays to the same id instead of computing it again;
//   - every other answer (400, 401, 404, 409, 500, …) is final.
//
// The zero RetryPolicy (Attempts 0) never retries and returns errors as
// they are; DefaultRetry is New's.
type RetryPolicy struct {
	// Attempts is the calls in all, the first included (0 or 1: never
	// retry; with 1 a retryable failure comes back as a *RetryError that
	// says so).
	Attempts int
	// Backoff is the first wait after a failure without Retry-After
	// (default 100ms); each further one doubles, up to MaxBackoff
	// (default 5s); the wait is drawn uniformly below that (full jitter).
	Backoff, MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After honoured (default 1m): a
	// server asking for more is not retried.
	MaxRetryAfter time.Duration
	// OnRetry, when set, is called before each wait (the CLI prints it).
	OnRetry func(attempt int, err error, wait time.Duration)
}

// DefaultRetry is the policy of New: three calls in all.
var DefaultRetry = RetryPolicy{Attempts: 3}

// NoRetry sends every call once and returns its error as it is (a
// policy of Attempts 1 sends it once too, but says so in a RetryError
// when the failure was retryable).
var NoRetry = RetryPolicy{}

// Attempt is what a retry decision looks at: one call's outcome.
type Attempt struct {
	N          int       // this call's number, 1-based
	Idempotent bool      // repeating it cannot do the work twice (GET, HEAD, or a predict call with X-Request-Id)
	Err        error     // the call's error: *Error for an answer, another error for no answer; nil: success
	Now        time.Time // when it ended
	Deadline   time.Time // the context's deadline (zero: none)
	Jitter     float64   // a uniform draw in [0, 1) for the backoff
}

// Reasons a retryable call was not tried again (RetryError.Reason).
const (
	GaveUpAttempts = "attempts" // RetryPolicy.Attempts were made
	GaveUpDeadline = "deadline" // the wait would end past the context's deadline
	GaveUpTooLong  = "too_long" // Retry-After exceeds MaxRetryAfter
	GaveUpBadAfter = "bad_retry_after"
)

// Decision is whether to send a call again, after how long, and, when a
// retryable failure is not retried, why (Reason and words for a user).
type Decision struct {
	Retry  bool
	Wait   time.Duration
	Reason string
	Why    string
}

// Decide is the pure retry decision for one call's outcome.
func (p RetryPolicy) Decide(a Attempt) Decision {
	if a.Err == nil || errors.Is(a.Err, context.Canceled) || errors.Is(a.Err, context.DeadlineExceeded) {
		return Decision{}
	}
	var wait time.Duration
	var e *Error
	answered := errors.As(a.Err, &e)
	switch {
	case answered && e.RetryAfter != "":
		w, ok := parseRetryAfter(e.RetryAfter, a.Now)
		if !ok {
			return Decision{Reason: GaveUpBadAfter, Why: fmt.Sprintf("the server's Retry-After %q is not a number of seconds", e.RetryAfter)}
		}
		if max := p.maxRetryAfter(); w > max {
			return Decision{Reason: GaveUpTooLong, Why: fmt.Sprintf("the server asks to retry in %s, longer than the %s the client waits", w, max)}
		}
		wait = w
	case answered && !(a.Idempotent && (e.Status == http.StatusBadGateway || e.Status == http.StatusServiceUnavailable || e.Status == http.StatusGatewayTimeout)):
		return Decision{} // a final answer
	case !answered && !a.Idempotent:
		return Decision{} // no answer to a call that may have done its work
	default:
		wait = p.backoff(a.N, a.Jitter)
	}
	switch {
	case a.N >= p.Attempts:
		return Decision{Reason: GaveUpAttempts, Why: fmt.Sprintf("gave up after %d attempt(s)", a.N)}
	case !a.Deadline.IsZero() && a.Now.Add(wait).After(a.Deadline):
		return Decision{Reason: GaveUpDeadline, Why: fmt.Sprintf("gave up after %d attempt(s): the server asks to retry in %s, past the deadline in %s",
			a.N, wait, max(a.Deadline.Sub(a.Now), 0).Round(time.Millisecond))}
	}
	return Decision{Retry: true, Wait: wait}
}

// backoff is the wait before call n+1 after n failed without Retry-After.
func (p RetryPolicy) backoff(n int, jitter float64) time.Duration {
	base, top := p.Backoff, p.MaxBackoff
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	if top <= 0 {
		top = 5 * time.Second
	}
	d := base
	for i := 1; i < n && d < top; i++ {
		d *= 2
	}
	d = min(d, top)
	return time.Duration(jitter * float64(d))
}

func (p RetryPolicy) maxRetryAfter() time.Duration {
	if p.MaxRetryAfter > 0 {
		return p.MaxRetryAfter
	}
	return time.Minute
}

// parseRetryAfter reads a Retry-After: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if secs, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(secs, 0)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// idempotent says whether sending req again cannot do its work twice.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		return true
	}
	p := req.URL.Path
	predict := strings.HasSuffix(p, ":predict") || (strings.HasPrefix(p, "/v2/") && strings.HasSuffix(p, "/infer"))
	return predict && req.Header.Get("X-Request-Id") != ""
}

// RetryError is the error of a call whose failure was retryable but was
// not tried again: the last call's error, how many calls were made and
// why no further one was (Reason, Why). errors.As finds the *Error in it.
type RetryError struct {
	Err      error
	Attempts int
	Reason   string // GaveUpAttempts, GaveUpDeadline, …
	Why      string
}

func (e *RetryError) Error() string { return e.Err.Error() + " (" + e.Why + ")" }
func (e *RetryError) Unwrap() error { return e.Err }
