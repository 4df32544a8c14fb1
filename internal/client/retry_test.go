package client

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRetryWait(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	r := Retry{Attempts: 3, Deadline: now.Add(5 * time.Second)}
	refused := func(after string) error { return &Error{Status: 429, RetryAfter: after} }
	for _, tc := range []struct {
		name    string
		err     error
		attempt int
		wait    time.Duration
		ok      bool
		why     string
	}{
		{"retry after 1s", refused("1"), 1, time.Second, true, ""},
		{"second retry", refused("2"), 2, 2 * time.Second, true, ""},
		{"attempts spent", refused("1"), 3, 0, false, "gave up after 3 attempt(s) (--attempts 3)"},
		{"past the deadline", refused("6"), 1, 0, false, "retry in 6s, past the deadline in 5s"},
		{"an HTTP date", refused(now.Add(2 * time.Second).Format(http.TimeFormat)), 1, 2 * time.Second, true, ""},
		{"garbage", refused("soon"), 1, 0, false, `Retry-After "soon" is not a number`},
		{"no Retry-After: not retryable", &Error{Status: 400}, 1, 0, false, ""},
		{"not an API error", errors.New("connection refused"), 1, 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait, ok, why := r.Wait(tc.err, tc.attempt, now)
			if wait != tc.wait || ok != tc.ok || (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
				t.Fatalf("Wait = %v %v %q, want %v %v %q", wait, ok, why, tc.wait, tc.ok, tc.why)
			}
		})
	}
}
