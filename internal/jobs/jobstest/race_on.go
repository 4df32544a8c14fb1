//go:build race

package jobstest

// millionChunks is the large scan's size: under the race detector the
// SQLite driver (C translated to Go, every access checked) inserts a
// million chunks in two minutes, so the suite scans a tenth of that.
const millionChunks = 100_000
