package recordsdb

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/records"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// reportCPU reports the CPU time per op since start (every goroutine of
// the process: the writer's too), which a busy machine does not inflate
// as it does ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// benchRecords are n records shaped like the gateway's for the churn
// example: a 24-hex-digit request id the server chose, the default
// tenant, a sha256 input hash, created microseconds apart.
func benchRecords(n int) []records.Record {
	t := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rs := make([]records.Record, n)
	var b [12]byte
	var h [32]byte
	for i := range rs {
		_, _ = rand.Read(b[:])
		_, _ = rand.Read(h[:])
		rs[i] = records.Record{RequestID: hex.EncodeToString(b[:]), Tenant: "default", Model: "churn", Version: 1,
			LatencyMs: 0.4 + float64(i%100)/1000, Outcome: "ok", InputHash: hex.EncodeToString(h[:]),
			CreatedAt: t.Add(time.Duration(i) * 50 * time.Microsecond), Attempts: 1}
	}
	return rs
}

// BenchmarkStoreWrite is the cost per record of SQLite.Write in batches
// of the writer's sizes (ns/op and allocs/op are per record): the work
// the writer's goroutine does on the server's core.
func BenchmarkStoreWrite(b *testing.B) {
	for _, size := range []int{16, 64, 500, 2000} {
		b.Run(fmt.Sprint("batch=", size), func(b *testing.B) {
			s, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			recs := benchRecords(size)
			ops := make([]records.Op, size)
			ctx := context.Background()
			row := int64(0)
			t0 := recs[0].CreatedAt
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime(b)
			defer func() { reportCPU(b, cpu) }()
			for done := 0; done < b.N; done += size {
				n := min(size, b.N-done)
				for i := range n {
					row++
					r := recs[i]
					r.CreatedAt = t0.Add(time.Duration(row) * 50 * time.Microsecond) // the time goes on, as the rows
					ops[i] = records.Op{Row: row, Record: r}
				}
				if err := s.Write(ctx, ops[:n]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWriter is a record's whole way in async mode: Add on the
// request path, the batch, Store.Write on the writer's goroutine; ns/op
// is per record, until every record is written.
func BenchmarkWriter(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w := records.NewWriter(s, records.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	recs := benchRecords(4096)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	for i := range b.N {
		r := recs[i%len(recs)]
		r.CreatedAt = time.Time{} // the writer's clock: now
		for !w.Add(r) {
			// The buffer is full: the writer is the bottleneck, which is
			// what is measured; wait for it.
			time.Sleep(100 * time.Microsecond)
		}
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	reportCPU(b, cpu)
	if w.Written() != int64(b.N) {
		b.Fatalf("%d written, want %d", w.Written(), b.N)
	}
}

// BenchmarkAppendFloor is not a store: it is the floor of the design
// docs/benchmarks.md weighs against SQLite, an append-only segment file.
// Each record is encoded (varint-length strings, fixed-width numbers) into
// the batch's buffer and the batch goes to the file in one write, without
// an index or fsync: what a record would cost the writer's core at least.
func BenchmarkAppendFloor(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "segment"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const size = 500
	recs := benchRecords(size)
	buf := make([]byte, 0, 256*size)
	str := func(buf []byte, s string) []byte { return append(binary.AppendUvarint(buf, uint64(len(s))), s...) }
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	row := int64(0)
	for done := 0; done < b.N; done += size {
		buf = buf[:0]
		for i := range min(size, b.N-done) {
			row++
			r := &recs[i]
			buf = binary.AppendUvarint(buf, uint64(row))
			buf = str(buf, r.RequestID)
			buf = str(buf, r.Tenant)
			buf = str(buf, r.Model)
			buf = binary.AppendUvarint(buf, uint64(r.Version))
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(r.LatencyMs))
			buf = str(buf, r.Outcome)
			buf = str(buf, r.InputHash)
			buf = binary.AppendVarint(buf, r.CreatedAt.UnixMicro())
			buf = binary.AppendUvarint(buf, uint64(r.Attempts))
			buf = append(binary.AppendUvarint(buf, uint64(len(r.Input))), r.Input...)
		}
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu)
}

// BenchmarkBatchRowFloor is the floor of the other design
// docs/benchmarks.md weighs: SQLite kept, but one row per batch (the
// records encoded as in BenchmarkAppendFloor into one blob, beside the
// batch's time and row ranges), so SQLite's per-row cost is paid once per
// batch. Not a store either.
func BenchmarkBatchRowFloor(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.db.Exec(`CREATE TABLE batches (id INTEGER PRIMARY KEY, last_row INTEGER NOT NULL, min_created INTEGER NOT NULL, max_created INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX batches_created ON batches (max_created)`); err != nil {
		b.Fatal(err)
	}
	ins, err := s.db.Prepare(`INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	defer ins.Close()
	const size = 500
	recs := benchRecords(size)
	buf := make([]byte, 0, 256*size)
	str := func(buf []byte, s string) []byte { return append(binary.AppendUvarint(buf, uint64(len(s))), s...) }
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	row := int64(0)
	for done := 0; done < b.N; done += size {
		buf = buf[:0]
		n := min(size, b.N-done)
		first := row + 1
		for i := range n {
			row++
			r := &recs[i]
			buf = binary.AppendUvarint(buf, uint64(row))
			buf = str(buf, r.RequestID)
			buf = str(buf, r.Tenant)
			buf = str(buf, r.Model)
			buf = binary.AppendUvarint(buf, uint64(r.Version))
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(r.LatencyMs))
			buf = str(buf, r.Outcome)
			buf = str(buf, r.InputHash)
			buf = binary.AppendVarint(buf, r.CreatedAt.UnixMicro())
			buf = binary.AppendUvarint(buf, uint64(r.Attempts))
			buf = append(binary.AppendUvarint(buf, uint64(len(r.Input))), r.Input...)
		}
		if _, err := ins.Exec(first, row, recs[0].CreatedAt.UnixMicro(), recs[n-1].CreatedAt.UnixMicro(), n, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu)
}
