// Package testwait is the tests' one poll: it calls a condition until it
// holds or a deadline passes, and then fails the test at the caller's line.
// Every wait in a test has a deadline; none sleeps a fixed time and hopes.
// The pause between calls starts at 1 ms and doubles up to 50 ms, so a
// condition that holds soon is seen soon and a slow one is not called in a
// tight loop. Inside a testing/synctest bubble the pauses and the deadline
// are the bubble's fake time.
package testwait

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

const (
	firstPause = time.Millisecond
	maxPause   = 50 * time.Millisecond
)

var errNotYet = errors.New("condition not met")

// Until calls cond until it returns true. When within passes first, the
// test fails.
func Until(t testing.TB, within time.Duration, cond func() bool) {
	t.Helper()
	UntilNil(t, within, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// UntilNil calls cond until it returns nil. When within passes first, the
// test fails with cond's last error (say there what is still missing).
func UntilNil(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(within, cond); err != nil {
		t.Fatal(err)
	}
}

// Poll is the loop itself, for a caller that reports a failure its own way:
// nil once cond returns nil, else, when within has passed, cond's last
// error saying how long it waited. cond is called at least once.
func Poll(within time.Duration, cond func() error) error {
	deadline := time.Now().Add(within)
	pause := firstPause
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("not within %s: %w", within, err)
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, maxPause)
	}
}
