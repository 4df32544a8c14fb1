//go:build !race

package jobstest

// millionChunks is the large scan's size (see race_on.go).
const millionChunks = 1_000_000
