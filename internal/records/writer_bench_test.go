package records

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"
)

// benchRecords are n records shaped like the gateway's for the churn
// example: a 24-hex-digit request id the server chose, the default
// tenant, a sha256 input hash, created microseconds apart.
func benchRecords(n int) []Record {
	t := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rs := make([]Record, n)
	var b [12]byte
	var h [32]byte
	for i := range rs {
		_, _ = rand.Read(b[:])
		_, _ = rand.Read(h[:])
		rs[i] = Record{RequestID: hex.EncodeToString(b[:]), Tenant: "default", Model: "churn", Version: 1,
			LatencyMs: 0.4 + float64(i%100)/1000, Outcome: "ok", InputHash: hex.EncodeToString(h[:]),
			CreatedAt: t.Add(time.Duration(i) * 50 * time.Microsecond), Attempts: 1}
	}
	return rs
}

// BenchmarkWriterAdd is the request path's share: Add alone, the buffer
// emptied without a store.
func BenchmarkWriterAdd(b *testing.B) {
	w := NewWriter(nil, Config{Buffer: 1 << 30})
	recs := benchRecords(4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		w.Add(recs[i%len(recs)])
		if i%500 == 499 {
			w.mu.Lock()
			w.buf = w.buf[:0]
			w.mu.Unlock()
		}
	}
}
