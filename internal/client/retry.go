package client

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Retry decides whether a refused call is tried again: only an answer
// whose Retry-After says when (the codes the server marks retryable: a
// full queue, a quota, a version loading, …), at most Attempts calls in
// all, and only when the wait ends before the deadline.
type Retry struct {
	Attempts int       // calls in all, the first included (1: never retry)
	Deadline time.Time // no retry whose wait would end after it
}

// Wait returns how long to wait before call attempt+1 after err ended call
// attempt (1-based), or ok false and why not, in words for the user.
// It is pure: now is the time of the answer.
func (r Retry) Wait(err error, attempt int, now time.Time) (wait time.Duration, ok bool, why string) {
	var e *Error
	if !errors.As(err, &e) || e.RetryAfter == "" {
		return 0, false, ""
	}
	secs, perr := strconv.Atoi(e.RetryAfter)
	if perr != nil || secs < 0 {
		if t, terr := http.ParseTime(e.RetryAfter); terr == nil {
			wait = max(t.Sub(now), 0)
		} else {
			return 0, false, fmt.Sprintf("the server's Retry-After %q is not a number of seconds", e.RetryAfter)
		}
	} else {
		wait = time.Duration(secs) * time.Second
	}
	switch {
	case attempt >= r.Attempts:
		return 0, false, fmt.Sprintf("gave up after %d attempt(s) (--attempts %d)", attempt, r.Attempts)
	case now.Add(wait).After(r.Deadline):
		return 0, false, fmt.Sprintf("gave up after %d attempt(s): the server asks to retry in %s, past the deadline in %s (--timeout)",
			attempt, wait, max(r.Deadline.Sub(now), 0).Round(time.Millisecond))
	}
	return wait, true, ""
}
