package testwait

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// fatalTB records the failure Until reports and ends its goroutine, as a
// real test's Fatal does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// run calls wait with a fatalTB on a goroutine of its own and returns the
// failure ("" when wait returned).
func run(wait func(testing.TB)) string {
	f := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(f)
	}()
	<-done
	return f.msg
}

func TestUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		msg := run(func(tb testing.TB) {
			Until(tb, 10*time.Second, func() bool { calls++; return time.Since(start) >= 3*time.Second })
		})
		if msg != "" {
			t.Fatalf("a condition that holds after 3s failed a 10s wait: %s", msg)
		}
		// The pause doubles from 1 ms to 50 ms: about 60 calls in 3 s, not
		// thousands, and the condition is seen at most 50 ms late.
		if took := time.Since(start); took > 3*time.Second+maxPause {
			t.Errorf("returned %v after the start, want within %v of 3s", took, maxPause)
		}
		if calls < 10 || calls > 100 {
			t.Errorf("%d calls in 3s", calls)
		}
	})
}

func TestUntilDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		msg := run(func(tb testing.TB) { Until(tb, 2*time.Second, func() bool { return false }) })
		if !strings.Contains(msg, "not within 2s: condition not met") {
			t.Errorf("failure %q, want it to say the 2s passed", msg)
		}
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("gave up after %v, want 2s exactly (fake time)", took)
		}
	})
}

func TestUntilNilReportsTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		msg := run(func(tb testing.TB) {
			UntilNil(tb, time.Second, func() error { n++; return fmt.Errorf("%d workers, want 2", n%2) })
		})
		if want := fmt.Sprintf("not within 1s: %d workers, want 2", n%2); msg != want {
			t.Errorf("failure %q, want %q", msg, want)
		}
		if msg := run(func(tb testing.TB) { UntilNil(tb, time.Second, func() error { return nil }) }); msg != "" {
			t.Errorf("a condition that holds at once failed: %s", msg)
		}
	})
}

func TestPollCallsOnceWithNoTime(t *testing.T) {
	calls := 0
	err := Poll(0, func() error { calls++; return errors.New("no") })
	if calls != 1 || err == nil || !strings.Contains(err.Error(), "not within 0s: no") {
		t.Errorf("Poll(0): %d calls, %v", calls, err)
	}
}
