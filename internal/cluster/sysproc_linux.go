package cluster

import "syscall"

// sysProcAttr ties a worker to this process: the kernel kills it if the
// gateway dies, so no orphan keeps a port or memory.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
