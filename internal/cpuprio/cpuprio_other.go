//go:build !linux

package cpuprio

import "fmt"

// Lower is only implemented on Linux.
func Lower(nice int, sched Sched) error {
	if nice <= 0 && sched != Idle {
		return nil
	}
	return fmt.Errorf("lowering the CPU priority (nice %d, sched %s) is only implemented on Linux", nice, sched)
}

// IdleThread is only implemented on Linux.
func IdleThread() error {
	return fmt.Errorf("SCHED_IDLE threads are only implemented on Linux")
}
