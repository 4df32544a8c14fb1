//go:build cgo

package onnx

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/serving"
)

// seqLengths draws token rows from a short-heavy length distribution:
// 60 % of lengths uniform in 1..16, 30 % in 17..64, 10 % in 65..128.
func seqLengths(n int) [][]int64 {
	rng := rand.New(rand.NewPCG(11, 13))
	rows := make([][]int64, n)
	for i := range rows {
		var l int
		switch p := rng.Float64(); {
		case p < 0.6:
			l = 1 + rng.IntN(16)
		case p < 0.9:
			l = 17 + rng.IntN(48)
		default:
			l = 65 + rng.IntN(64)
		}
		rows[i] = make([]int64, l)
		for j := range rows[i] {
			rows[i][j] = 1 + rng.Int64N(99)
		}
	}
	return rows
}

// BenchmarkSeqBuckets serves single-row requests of seq.onnx through a
// serving.Server (maxBatchSize 32, maxBatchDelay 2ms, 256 requests in
// flight) with and without length buckets; it reports rows/s and the mean
// padding ratio (padded cells / all cells) of the batches.
//
//	taskset -c 1 go test -run '^$' -bench SeqBuckets -benchtime 20000x ./internal/runtime/onnx/
func BenchmarkSeqBuckets(b *testing.B) {
	for _, c := range []struct {
		name    string
		buckets []int
	}{{"no-buckets", nil}, {"buckets-16-32-64-128", []int{16, 32, 64, 128}}} {
		b.Run(c.name, func(b *testing.B) {
			m := loadSeq(b, 0)
			srv := serving.New(serving.Config{Name: "seq@1", MaxBatchSize: 32, MaxBatchDelay: 2 * time.Millisecond, MaxQueueInstances: 100000,
				LengthBuckets: c.buckets, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []runtime.Model{m})
			defer srv.Close(context.Background())
			rows := seqLengths(4096)
			sem := make(chan struct{}, 256)
			var wg sync.WaitGroup
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() { <-sem; wg.Done() }()
					if _, err := srv.Submit(context.Background(), serving.Work{Rows: runtime.Batch{Rows: 1, Tokens: [][]int64{rows[i%len(rows)]}}}); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			st := srv.Stats()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			if st.PaddedBatches > 0 {
				b.ReportMetric(st.PaddingRatioSum/float64(st.PaddedBatches), "padding-ratio")
				b.ReportMetric(float64(st.Rows)/float64(st.Batches), "rows/batch")
			}
		})
	}
}
