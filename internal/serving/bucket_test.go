package serving

import (
	"context"
	"math"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/runtime"
)

// seqModel scores a row of token ids as its sum plus 1000 × its length, so
// a row padded or mixed up with another gives a different answer. It
// records the token rows of every batch.
type seqModel struct {
	mu      sync.Mutex
	batches [][][]int64
}

func (m *seqModel) Info() runtime.Info { return runtime.Info{Outputs: 1, Sequence: true} }
func (m *seqModel) Close() error       { return nil }
func (m *seqModel) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	m.mu.Lock()
	m.batches = append(m.batches, in.Tokens)
	m.mu.Unlock()
	time.Sleep(time.Millisecond)
	out := runtime.Output{Rows: in.Rows, Cols: 1, Data: make([]float32, in.Rows)}
	for i, r := range in.Tokens {
		out.Data[i] = seqScore(r)
	}
	return out, nil
}

func seqScore(r []int64) float32 {
	s := float32(1000 * len(r))
	for _, t := range r {
		s += float32(t)
	}
	return s
}

func TestBucketOf(t *testing.T) {
	b := []int{16, 32, 64, 128}
	for _, c := range []struct{ n, want int }{{1, 0}, {16, 0}, {17, 1}, {32, 1}, {33, 2}, {128, 3}, {129, 4}} {
		if got := BucketOf(b, c.n); got != c.want {
			t.Errorf("BucketOf(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	if BucketOf(nil, 500) != 0 {
		t.Error("no buckets: one bucket")
	}
}

// TestLengthBuckets queues requests of token rows of many lengths at once:
// every batch holds rows of one bucket only (each row's own, also when a
// request has rows of two buckets: it is split), no batch is longer than
// its bucket's boundary, every answer equals the row's own unbatched
// score, in the request's order, and the padding ratio is recorded per
// batch.
func TestLengthBuckets(t *testing.T) {
	bounds := []int{4, 8, 16}
	type req struct{ rows [][]int64 }
	var reqs []req
	tok := int64(1)
	for i := 0; i < 60; i++ {
		// Mostly one row; every fifth request has rows of two lengths.
		lens := []int{1 + (i*7)%16}
		if i%5 == 0 {
			lens = append(lens, 1+(i*3)%16)
		}
		r := req{}
		for _, n := range lens {
			row := make([]int64, n)
			for j := range row {
				row[j] = tok + int64(j)
			}
			tok += 100
			r.rows = append(r.rows, row)
		}
		reqs = append(reqs, r)
	}
	synctest.Test(t, func(t *testing.T) {
		m := &seqModel{}
		s := newServer(t, Config{MaxBatchSize: 8, MaxBatchDelay: 2 * time.Millisecond, LengthBuckets: bounds}, m)
		var wg sync.WaitGroup
		for i, r := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.Submit(context.Background(), Work{Rows: runtime.Batch{Rows: len(r.rows), Tokens: r.rows}})
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				for j, row := range r.rows {
					if got, want := res.Out.Data[j], seqScore(row); got != want {
						t.Errorf("request %d row %d: %v, want %v (unbatched)", i, j, got, want)
					}
				}
			}()
		}
		wg.Wait()
		m.mu.Lock()
		defer m.mu.Unlock()
		total := 0
		sum := 0.0
		for bi, b := range m.batches {
			if len(b) > 8 {
				t.Errorf("batch %d has %d rows", bi, len(b))
			}
			bucket := BucketOf(bounds, len(b[0]))
			longest, cells := 0, 0
			for _, row := range b {
				if got := BucketOf(bounds, len(row)); got != bucket {
					t.Errorf("batch %d mixes buckets %d and %d", bi, bucket, got)
				}
				longest = max(longest, len(row))
				cells += len(row)
			}
			if longest > bounds[bucket] {
				t.Errorf("batch %d of bucket <= %d is padded to %d", bi, bounds[bucket], longest)
			}
			sum += float64(len(b)*longest-cells) / float64(len(b)*longest)
			total += len(b)
		}
		want := 0
		for _, r := range reqs {
			want += len(r.rows)
		}
		if total != want {
			t.Errorf("%d rows computed, want %d", total, want)
		}
		if len(m.batches) > 30 {
			t.Errorf("%d batches for %d rows queued at once: not batching", len(m.batches), want)
		}
		st := s.Stats()
		if st.PaddedBatches != int64(len(m.batches)) || math.Abs(st.PaddingRatioSum-sum) > 1e-9 {
			t.Errorf("stats: %d padded batches, ratio sum %v; want %d, %v", st.PaddedBatches, st.PaddingRatioSum, len(m.batches), sum)
		}
	})
}

// TestBucketOrder: with the replica busy, requests of buckets A, B, A
// queue; the next batch is the oldest's bucket (both A requests), then B.
func TestBucketOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &seqModel{}
		s := newServer(t, Config{MaxBatchSize: 8, LengthBuckets: []int{2, 8}}, m)
		submit := func(row []int64) {
			if _, err := s.Submit(context.Background(), Work{Rows: runtime.Batch{Rows: 1, Tokens: [][]int64{row}}}); err != nil {
				t.Error(err)
			}
		}
		var wg sync.WaitGroup
		for _, row := range [][]int64{{1}, {2}, {3, 3, 3, 3}, {4, 4}} {
			wg.Add(1)
			go func() { defer wg.Done(); submit(row) }()
			synctest.Wait() // queued in this order
		}
		wg.Wait()
		m.mu.Lock()
		defer m.mu.Unlock()
		var got [][]int64
		for _, b := range m.batches {
			var firsts []int64
			for _, r := range b {
				firsts = append(firsts, r[0])
			}
			got = append(got, firsts)
		}
		// {1} runs alone at once. While it runs, the oldest queued is {2}
		// (bucket <= 2), so the next batch is that bucket: {2} and {4,4},
		// passing over the older {3,3,3,3} (bucket <= 8), which runs last.
		want := [][]int64{{1}, {2, 4}, {3}}
		if len(got) != len(want) {
			t.Fatalf("batches %v, want %v", got, want)
		}
		for i := range want {
			if len(got[i]) != len(want[i]) {
				t.Fatalf("batches %v, want %v", got, want)
			}
			for j := range want[i] {
				if got[i][j] != want[i][j] {
					t.Fatalf("batches %v, want %v", got, want)
				}
			}
		}
	})
}

type padObserver struct {
	nopObserver
	mu     sync.Mutex
	ratios []float64
}

func (o *padObserver) Padding(r float64) {
	o.mu.Lock()
	o.ratios = append(o.ratios, r)
	o.mu.Unlock()
}

// TestPaddingObserver: a batch of rows of lengths 1 and 3 is 1/3 padding,
// and an Observer that implements PaddingObserver is told so.
func TestPaddingObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &padObserver{}
		s := newServer(t, Config{MaxBatchSize: 8, Observer: o}, &seqModel{})
		_, err := s.Submit(context.Background(), Work{Rows: runtime.Batch{Rows: 2, Tokens: [][]int64{{1}, {1, 2, 3}}}})
		if err != nil {
			t.Fatal(err)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if len(o.ratios) != 1 || math.Abs(o.ratios[0]-1.0/3) > 1e-12 {
			t.Fatalf("ratios %v, want [1/3]", o.ratios)
		}
		if st := s.Stats(); st.PaddedBatches != 1 || math.Abs(st.PaddingRatioSum-1.0/3) > 1e-12 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestSplitTokenRequest: a request of 20 token rows with maxBatchSize 8 is
// split over batches; every row's answer is its own.
func TestSplitTokenRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &seqModel{}
		s := newServer(t, Config{MaxBatchSize: 8, LengthBuckets: []int{4, 32}}, m)
		var toks [][]int64
		for i := 0; i < 20; i++ {
			row := make([]int64, 1+i)
			for j := range row {
				row[j] = int64(i*10 + j)
			}
			toks = append(toks, row)
		}
		res, err := s.Submit(context.Background(), Work{Rows: runtime.Batch{Rows: 20, Tokens: toks}})
		if err != nil {
			t.Fatal(err)
		}
		for i, row := range toks {
			if got, want := res.Out.Data[i], seqScore(row); got != want {
				t.Errorf("row %d: %v, want %v", i, got, want)
			}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.batches) != 3 {
			t.Errorf("%d batches, want 3", len(m.batches))
		}
	})
}

func TestSplitBuckets(t *testing.T) {
	bounds := []int{16, 32, 64, 128}
	cases := []struct {
		name    string
		bounds  []int
		lengths []int
		want    []Part
	}{
		{"one row", bounds, []int{9}, []Part{{0, []int{0}}}},
		{"one bucket", bounds, []int{17, 32, 20}, []Part{{1, []int{0, 1, 2}}}},
		{"two buckets in order of first row", bounds, []int{100, 3, 120, 16, 17}, []Part{{3, []int{0, 2}}, {0, []int{1, 3}}, {1, []int{4}}}},
		{"past the last bound", bounds, []int{129, 5}, []Part{{4, []int{0}}, {0, []int{1}}}},
		{"no buckets", nil, []int{100, 3, 120}, []Part{{0, []int{0, 1, 2}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := SplitBuckets(c.bounds, c.lengths); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("SplitBuckets(%v, %v) = %v, want %v", c.bounds, c.lengths, got, c.want)
			}
		})
	}
}

// TestSplitRequestRefused: a request split over two buckets whose second
// part does not fit the queue is refused whole, and its first part leaves
// the queue: nothing stays queued, and the next request is served.
func TestSplitRequestRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &seqModel{}
		s := newServer(t, Config{MaxBatchSize: 8, MaxBatchDelay: 2 * time.Millisecond, LengthBuckets: []int{4, 16}, MaxQueueInstances: 3}, m)
		rows := [][]int64{{1}, {2}, {3, 3, 3, 3, 3, 3}, {4, 4, 4, 4, 4, 4}}
		_, err := s.Submit(context.Background(), Work{Rows: runtime.Batch{Rows: 4, Tokens: rows}})
		if errs.CodeOf(err) != errs.QueueFull {
			t.Fatalf("got %v, want queue_full", err)
		}
		synctest.Wait()
		if q := s.Stats().Classes[Online].Queued; q != 0 {
			t.Fatalf("%d instances left queued", q)
		}
		res, err := s.Submit(context.Background(), Work{Rows: runtime.Batch{Rows: 2, Tokens: rows[1:3]}})
		if err != nil || res.Out.Data[0] != seqScore(rows[1]) || res.Out.Data[1] != seqScore(rows[2]) {
			t.Fatalf("%v %v", res.Out.Data, err)
		}
	})
}
