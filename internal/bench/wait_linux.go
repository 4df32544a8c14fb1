package bench

import (
	"syscall"
	"time"
)

// fineSleep sleeps for a short d with the kernel's precision (tens of
// microseconds). Go timers are served by the runtime's poller, which on
// Linux can oversleep by up to a millisecond; that would show up as
// generator lag in every corrected latency. The calling goroutine's thread
// blocks in nanosleep; the runtime gives its P to other goroutines.
func fineSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // EINTR only shortens the sleep; the caller loops
}
