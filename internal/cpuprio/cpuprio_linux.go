package cpuprio

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Lower gives every thread of this process the nice value (when > 0) and
// the policy (when Idle). It returns when a pass over /proc/self/task finds
// no thread left to change; a thread that exits meanwhile is skipped.
func Lower(nice int, sched Sched) error {
	if nice <= 0 && sched != Idle {
		return nil
	}
	done := map[int]bool{}
	for pass := 0; pass < 100; pass++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("listing this process's threads: %w", err)
		}
		changed := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := lowerThread(tid, nice, sched); err != nil {
				if err == unix.ESRCH { // the thread exited
					continue
				}
				return err
			}
			done[tid] = true
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("threads kept appearing while lowering their priority")
}

func lowerThread(tid, nice int, sched Sched) error {
	if sched == Idle {
		// sched_setattr rather than sched_setscheduler: x/sys wraps the
		// former. SCHED_IDLE ignores the nice value, so it comes first
		// and the nice still holds if the policy is later reset.
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
			if err == unix.ESRCH {
				return err
			}
			return fmt.Errorf("SCHED_IDLE for thread %d: %w", tid, err)
		}
	}
	if nice > 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil {
			if err == unix.ESRCH {
				return err
			}
			return fmt.Errorf("nice %d for thread %d: %w", nice, tid, err)
		}
	}
	return nil
}

// IdleThread gives the calling OS thread SCHED_IDLE. The caller locks its
// goroutine to the thread first (runtime.LockOSThread) and never unlocks.
func IdleThread() error {
	return lowerThread(0, 0, Idle) // pid 0: the calling thread
}
