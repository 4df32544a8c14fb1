//go:build unix

package synthetic

import "syscall"

// allocate maps n bytes of anonymous memory outside the Go heap and touches
// every page, so the process's RSS grows by n at once; release unmaps them,
// so it shrinks by n at once, with no garbage collector in between.
func allocate(n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	touch(b)
	return b, nil
}

func release(b []byte) error {
	if b == nil {
		return nil
	}
	return syscall.Munmap(b)
}
