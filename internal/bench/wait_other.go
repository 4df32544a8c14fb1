//go:build !linux

package bench

import "time"

// fineSleep sleeps for a short d.
func fineSleep(d time.Duration) { time.Sleep(d) }
