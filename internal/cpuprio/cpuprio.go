// Package cpuprio lowers this process's CPU priority, every thread of it.
//
// On Linux a nice value and a scheduling policy belong to a thread, not to
// a process: setpriority(PRIO_PROCESS, pid) changes only the thread whose
// id is pid, and a new thread inherits from the thread that created it. A
// Go program has several threads before main runs, so a worker lowers its
// own priority by walking /proc/self/task until every thread has it; the
// threads created afterwards are clones of lowered ones. Setting it from
// the parent after fork, as the supervisor once did, raced the child's
// runtime creating its threads.
//
// Two knobs, both for workers that share cores with a gateway (sluice serve
// --worker-nice, --worker-sched; sluice worker --nice, --sched):
//   - nice 1–19: the kernel's fair scheduler gives the worker a smaller
//     share when the gateway also wants the CPU (nice 19 weighs 15 against
//     1024 for nice 0), but still time-slices the two.
//   - SCHED_IDLE: the worker runs only when nothing else on that CPU wants
//     to; a waking gateway thread preempts it at once.
//
// Lowering a whole worker leaves its own admission and refusals behind its
// replicas. IdleThread lowers one thread instead: sluice serve and sluice
// worker --model-sched idle give it to each replica loop's thread, so
// that every handler in the process preempts a computing model; that is
// what brought refusal p99 under 2x overload from 12.4–13.0 ms to
// 0.91–1.26 ms (docs/benchmarks.md, "The fast path, session 4").
package cpuprio

import "fmt"

// Sched is a scheduling policy a worker may ask for.
type Sched string

const (
	Normal Sched = "normal" // SCHED_OTHER, the default
	Idle   Sched = "idle"   // SCHED_IDLE
)

// ParseSched checks a --sched / --worker-sched value.
func ParseSched(flag, s string) (Sched, error) {
	switch Sched(s) {
	case "", Normal:
		return Normal, nil
	case Idle:
		return Idle, nil
	}
	return "", fmt.Errorf("%s %q: use normal or idle", flag, s)
}

// CheckNice checks a --nice / --worker-nice value.
func CheckNice(flag string, n int) error {
	if n < 0 || n > 19 {
		return fmt.Errorf("%s %d: use 0 (off) to 19", flag, n)
	}
	return nil
}
