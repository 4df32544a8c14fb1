//go:build !unix

package server

// fdLimit is unknown here: the flags' limits stand.
func fdLimit() int { return 0 }
