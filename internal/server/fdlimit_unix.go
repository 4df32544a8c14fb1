//go:build unix

package server

import "syscall"

// fdLimit is the process's soft RLIMIT_NOFILE (Go raises it to the hard
// limit at start), or 0 when unknown.
func fdLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}
