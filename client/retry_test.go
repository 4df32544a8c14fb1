package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	p := RetryPolicy{Attempts: 3, Backoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}
	refused := func(status int, after string) error { return &Error{Status: status, RetryAfter: after} }
	noAnswer := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, tc := range []struct {
		name       string
		err        error
		n          int
		idempotent bool
		deadline   time.Duration // from now; 0: none
		jitter     float64
		retry      bool
		wait       time.Duration
		reason     string
	}{
		{"success", nil, 1, true, 0, 0, false, 0, ""},
		{"Retry-After seconds, any method", refused(429, "1"), 1, false, 5 * time.Second, 0.5, true, time.Second, ""},
		{"Retry-After is waited exactly (no jitter, no backoff)", refused(503, "2"), 2, false, 0, 0.9, true, 2 * time.Second, ""},
		{"Retry-After an HTTP date", refused(503, now.Add(3*time.Second).Format(http.TimeFormat)), 1, false, 0, 0, true, 3 * time.Second, ""},
		{"Retry-After 0", refused(429, "0"), 1, false, 0, 0, true, 0, ""},
		{"attempts spent", refused(429, "1"), 3, false, 0, 0, false, 0, GaveUpAttempts},
		{"wait past the deadline", refused(429, "6"), 1, false, 5 * time.Second, 0, false, 0, GaveUpDeadline},
		{"Retry-After too long", refused(503, "3600"), 1, false, 0, 0, false, 0, GaveUpTooLong},
		{"Retry-After garbage", refused(503, "soon"), 1, false, 0, 0, false, 0, GaveUpBadAfter},
		{"400 is final", refused(400, ""), 1, true, 0, 0, false, 0, ""},
		{"404 is final", refused(404, ""), 1, true, 0, 0, false, 0, ""},
		{"500 is final", refused(500, ""), 1, true, 0, 0, false, 0, ""},
		{"503 without Retry-After, a GET: backoff", refused(503, ""), 1, true, 0, 0.5, true, 50 * time.Millisecond, ""},
		{"504 of a predict with a key: backoff doubles", refused(504, ""), 2, true, 0, 0.5, true, 100 * time.Millisecond, ""},
		{"backoff is capped", refused(502, ""), 2, true, 0, 0.99, true, 198 * time.Millisecond, ""},
		{"503 without Retry-After, a POST without a key: final", refused(503, ""), 1, false, 0, 0, false, 0, ""},
		{"no answer, a GET: backoff", noAnswer, 1, true, 0, 0.25, true, 25 * time.Millisecond, ""},
		{"no answer, a predict without a key: final (it may have run)", noAnswer, 1, false, 0, 0, false, 0, ""},
		{"no answer, attempts spent", noAnswer, 3, true, 0, 0, false, 0, GaveUpAttempts},
		{"the context ended", fmt.Errorf("POST x: %w", context.DeadlineExceeded), 1, true, 0, 0, false, 0, ""},
		{"the context was cancelled", context.Canceled, 1, true, 0, 0, false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Attempt{N: tc.n, Idempotent: tc.idempotent, Err: tc.err, Now: now, Jitter: tc.jitter}
			if tc.deadline > 0 {
				a.Deadline = now.Add(tc.deadline)
			}
			d := p.Decide(a)
			if d.Retry != tc.retry || d.Wait != tc.wait || d.Reason != tc.reason || (d.Reason != "") != (d.Why != "") {
				t.Fatalf("Decide = %+v, want retry %v wait %v reason %q", d, tc.retry, tc.wait, tc.reason)
			}
		})
	}
}

// fakeServer answers each call with the next of its answers and notes
// what it was sent, at the (fake) time it was sent.
type fakeServer struct {
	mu      sync.Mutex // guards the fields below
	answers []func() (*http.Response, error)
	calls   []call
}

type call struct {
	at        time.Time
	requestID string
	body      string
}

func (f *fakeServer) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		b, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{at: time.Now(), requestID: req.Header.Get("X-Request-Id"), body: string(b)})
	if len(f.answers) == 0 {
		return answer(200, "", `{}`)()
	}
	a := f.answers[0]
	f.answers = f.answers[1:]
	return a()
}

func answer(status int, retryAfter, body string) func() (*http.Response, error) {
	return func() (*http.Response, error) {
		h := http.Header{"Content-Type": {"application/json"}}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}, nil
	}
}

func refusal(code string, after string) func() (*http.Response, error) {
	return answer(429, after, `{"error":{"code":"`+code+`","message":"refused"}}`)
}

func noAnswerYet() (*http.Response, error) { return nil, errors.New("connection reset by peer") }

// TestRetryLoop drives Client.Do's loop under synctest's fake clock:
// each retry waits what the server asked for, resends the same body and
// the same X-Request-Id, and stops at the context's deadline.
func TestRetryLoop(t *testing.T) {
	const ok = `{"predictions":[{"y":1}],"modelVersion":"m@1","schemaVersion":"s","requestId":"r-1"}`
	for _, tc := range []struct {
		name      string
		answers   []func() (*http.Response, error)
		requestID string
		timeout   time.Duration
		calls     int
		gaps      []time.Duration // between calls
		reason    string          // "" success
		status    int             // the last answer's, when an *Error
	}{
		{"two refusals then an answer", []func() (*http.Response, error){refusal("queue_full", "1"), refusal("queue_full", "2"), answer(200, "", ok)},
			"", 10 * time.Second, 3, []time.Duration{time.Second, 2 * time.Second}, "", 0},
		{"attempts spent", []func() (*http.Response, error){refusal("quota_exceeded", "1"), refusal("quota_exceeded", "1"), refusal("quota_exceeded", "1")},
			"", 10 * time.Second, 3, []time.Duration{time.Second, time.Second}, GaveUpAttempts, 429},
		{"a wait past the deadline is not started", []func() (*http.Response, error){refusal("cold_start", "5")},
			"", 3 * time.Second, 1, nil, GaveUpDeadline, 429},
		{"no answer to a predict with a key: resent, same key", []func() (*http.Response, error){noAnswerYet, answer(200, "", ok)},
			"r-1", 10 * time.Second, 2, nil, "", 0},
		{"no answer to a predict without a key: not resent", []func() (*http.Response, error){noAnswerYet},
			"", 10 * time.Second, 1, nil, "", 0},
		{"a 400 is final", []func() (*http.Response, error){answer(400, "", `{"error":{"code":"invalid_argument","message":"x"}}`)},
			"r-1", 10 * time.Second, 1, nil, "", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeServer{answers: tc.answers}
				c := New("http://sluice.test")
				c.HTTP = &http.Client{Transport: f}
				ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
				defer cancel()
				r, err := c.PredictRaw(ctx, "m", 0, []byte(`{"instances":[{"x":1}]}`), tc.requestID)
				var re *RetryError
				var e *Error
				switch {
				case tc.reason == "" && tc.status == 0 && tc.calls > 1 && (err != nil || r.Status != 200):
					t.Fatalf("Do: %v", err)
				case tc.reason != "" && (!errors.As(err, &re) || re.Reason != tc.reason || re.Attempts != tc.calls):
					t.Fatalf("Do: %v, want a RetryError %s after %d calls", err, tc.reason, tc.calls)
				case tc.status != 0 && (!errors.As(err, &e) || e.Status != tc.status):
					t.Fatalf("Do: %v, want a %d", err, tc.status)
				}
				if len(f.calls) != tc.calls {
					t.Fatalf("%d calls, want %d", len(f.calls), tc.calls)
				}
				for i, cl := range f.calls {
					if cl.body != `{"instances":[{"x":1}]}` || cl.requestID != tc.requestID {
						t.Errorf("call %d sent %q with X-Request-Id %q", i+1, cl.body, cl.requestID)
					}
					if i > 0 && i-1 < len(tc.gaps) {
						if gap := cl.at.Sub(f.calls[i-1].at); gap != tc.gaps[i-1] {
							t.Errorf("call %d came %s after the one before, want %s", i+1, gap, tc.gaps[i-1])
						}
					}
				}
			})
		})
	}
}

// TestRetryStopsWithTheContext: a context cancelled during the wait ends
// the call at once with the last error.
func TestRetryStopsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeServer{answers: []func() (*http.Response, error){refusal("queue_full", "30")}}
		c := New("http://sluice.test")
		c.HTTP = &http.Client{Transport: f}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		start := time.Now()
		_, err := c.Models(ctx)
		var re *RetryError
		if !errors.As(err, &re) || !strings.Contains(re.Why, "waiting to retry") || time.Since(start) != time.Second {
			t.Fatalf("Models: %v after %s", err, time.Since(start))
		}
	})
}
