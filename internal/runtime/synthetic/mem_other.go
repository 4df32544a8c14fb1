//go:build !unix

package synthetic

// allocate takes n bytes from the Go heap and touches every page; release
// drops them (the garbage collector and scavenger give them back later).
func allocate(n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	b := make([]byte, n)
	touch(b)
	return b, nil
}

func release([]byte) error { return nil }
