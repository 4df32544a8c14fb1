//go:build cgo

package onnx

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/serving"
)

// textRef is text_ref.json: rows of input_ids and attention_mask and
// numpy's probabilities for each row alone (scripts/make_onnx_text_fixture.py).
type textRef struct {
	Rows []struct {
		InputIDs      []int64   `json:"input_ids"`
		AttentionMask []int64   `json:"attention_mask"`
		Probs         []float64 `json:"probs"`
	}
}

func readTextRef(t testing.TB) textRef {
	t.Helper()
	var ref textRef
	if err := json.Unmarshal(readFixture(t, "text_ref.json"), &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Rows) < 10 {
		t.Fatalf("text_ref.json has %d rows", len(ref.Rows))
	}
	return ref
}

// textFields are the package's two sequence fields, ids padded with pad.
func textFields(pad int64) []runtime.SeqInput {
	return []runtime.SeqInput{{Name: "input_ids", DType: "int64", Pad: pad}, {Name: "attention_mask", DType: "int64", Pad: 0, Mask: true}}
}

func loadText(t testing.TB, fields []runtime.SeqInput) runtime.Model {
	t.Helper()
	m, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "text@1", Outputs: 3, Sequence: true, PadValue: fields[0].Pad, SeqInputs: fields}, readFixture(t, "text.onnx"))
	if err != nil {
		t.Fatalf("load text.onnx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// packed is one instance's token row: its inputs end to end (runtime.Batch).
func packed(ids, mask []int64) []int64 { return append(append([]int64(nil), ids...), mask...) }

func closeTo(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	for j := range want {
		if d := math.Abs(float64(got[j]) - want[j]); d > 1e-5 {
			t.Errorf("%s: class %d: %v, numpy %v", what, j, got[j], want[j])
		}
	}
}

// TestMultiInputModel runs text.onnx (input_ids and attention_mask) on
// every reference row alone and on all rows in one batch padded to the
// longest (ids with the pad value, the mask with 0): both equal numpy's
// unpadded outputs, whatever the pad id, since the mask says what counts.
func TestMultiInputModel(t *testing.T) {
	ref := readTextRef(t)
	ctx := context.Background()
	for _, pad := range []int64{0, 7} {
		m := loadText(t, textFields(pad))
		info := m.Info()
		if !info.Sequence || info.SeqInputs != 2 || info.Outputs != 3 ||
			!strings.Contains(info.Detail, `inputs "input_ids" int64 [batch, seq], "attention_mask" int64 [batch, seq]`) ||
			!strings.Contains(info.Detail, "pad values [") {
			t.Fatalf("info %+v", info)
		}
		all := runtime.Batch{Rows: len(ref.Rows)}
		for _, r := range ref.Rows {
			out, err := m.Predict(ctx, runtime.Batch{Rows: 1, Tokens: [][]int64{packed(r.InputIDs, r.AttentionMask)}})
			if err != nil {
				t.Fatal(err)
			}
			closeTo(t, "alone", out.Row(0), r.Probs)
			all.Tokens = append(all.Tokens, packed(r.InputIDs, r.AttentionMask))
		}
		out, err := m.Predict(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		if out.Rows != len(ref.Rows) || out.Cols != 3 {
			t.Fatalf("out %d×%d", out.Rows, out.Cols)
		}
		for i, r := range ref.Rows {
			closeTo(t, "padded in one batch", out.Row(i), r.Probs)
		}
	}
	// A padded row whose mask were padded with 1 would count the pad ids:
	// a mask's own pad is 0 for a reason.
	bad := loadText(t, []runtime.SeqInput{{Name: "input_ids", Pad: 7}, {Name: "attention_mask", Pad: 1}})
	short, long := ref.Rows[0], ref.Rows[len(ref.Rows)-1]
	out, err := bad.Predict(ctx, runtime.Batch{Rows: 2, Tokens: [][]int64{packed(short.InputIDs, short.AttentionMask), packed(long.InputIDs, long.AttentionMask)}})
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(float64(out.Data[0]) - short.Probs[0]); d < 1e-4 {
		t.Errorf("a mask padded with 1 did not change the short row (%v vs %v): the test cannot tell masking from padding", out.Data[0], short.Probs[0])
	}
	m := loadText(t, textFields(0))
	if _, err := m.Predict(ctx, runtime.Batch{Rows: 1, Tokens: [][]int64{{1, 2, 1}}}); err == nil || !strings.Contains(err.Error(), `row 0 has 3 values, not 2 inputs`) {
		t.Error(err)
	}
}

// TestMultiInputBind: the package's sequence fields must name the model's
// inputs, all of them, with their dtype.
func TestMultiInputBind(t *testing.T) {
	cases := []struct {
		fields []runtime.SeqInput
		want   string
	}{
		{[]runtime.SeqInput{{Name: "input_ids"}}, `the model has 2 inputs but model.yaml declares 1 sequence fields: no field for input "attention_mask" int64 [batch, seq]`},
		{[]runtime.SeqInput{{Name: "input_ids"}, {Name: "mask"}}, `sequence field "mask" names no input of the model (its inputs: "input_ids" int64 [batch, seq], "attention_mask" int64 [batch, seq])`},
		{[]runtime.SeqInput{{Name: "input_ids", DType: "int32"}, {Name: "attention_mask"}}, `input "input_ids" is int64 [batch, seq] but its field "input_ids" declares dtype int32; set dtype: int64`},
	}
	for _, tc := range cases {
		_, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "text@1", Outputs: 3, Sequence: true, SeqInputs: tc.fields}, readFixture(t, "text.onnx"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want ...%s...", err, tc.want)
		}
	}
	// Fields in another order than the model's inputs: bound by name.
	m := loadText(t, []runtime.SeqInput{{Name: "attention_mask", Pad: 0, Mask: true}, {Name: "input_ids", Pad: 0}})
	ref := readTextRef(t)
	r := ref.Rows[5]
	out, err := m.Predict(context.Background(), runtime.Batch{Rows: 1, Tokens: [][]int64{packed(r.AttentionMask, r.InputIDs)}})
	if err != nil {
		t.Fatal(err)
	}
	closeTo(t, "fields in reverse order", out.Row(0), r.Probs)
	if _, err := (Runtime{}).Load(context.Background(), runtime.Spec{Name: "text@1", Outputs: 3}, readFixture(t, "text.onnx")); err == nil || !strings.Contains(err.Error(), "declares no sequence field") {
		t.Error(err)
	}
}

// TestMultiInputBatchedEqualsAlone runs text.onnx behind a serving.Server
// with length buckets: rows of lengths 1–128 submitted one per request,
// all at once, are batched (padded inside their bucket), and every answer
// equals the row run alone through the model within 1e-5.
func TestMultiInputBatchedEqualsAlone(t *testing.T) {
	ref := readTextRef(t)
	alone := loadText(t, textFields(0))
	ctx := context.Background()
	want := make([][]float32, len(ref.Rows))
	for i, r := range ref.Rows {
		out, err := alone.Predict(ctx, runtime.Batch{Rows: 1, Tokens: [][]int64{packed(r.InputIDs, r.AttentionMask)}})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = out.Row(0)
	}
	m := loadText(t, textFields(0))
	srv := serving.New(serving.Config{Name: "text@1", MaxBatchSize: 8, MaxBatchDelay: 5 * time.Millisecond, MaxQueueInstances: 1000,
		LengthBuckets: []int{16, 32, 64, 128}, SeqInputs: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []runtime.Model{m})
	defer srv.Close(context.Background())
	var wg sync.WaitGroup
	for k := 0; k < 4; k++ {
		for i, r := range ref.Rows {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := srv.Submit(ctx, serving.Work{Rows: runtime.Batch{Rows: 1, Tokens: [][]int64{packed(r.InputIDs, r.AttentionMask)}}})
				if err != nil {
					t.Errorf("row %d: %v", i, err)
					return
				}
				for j := range want[i] {
					if d := math.Abs(float64(res.Out.Data[j] - want[i][j])); d > 1e-5 {
						t.Errorf("row %d (length %d) batched: class %d %v, alone %v", i, len(r.InputIDs), j, res.Out.Data[j], want[i][j])
					}
				}
			}()
		}
	}
	wg.Wait()
	st := srv.Stats()
	if st.Rows != int64(4*len(ref.Rows)) || st.Batches >= st.Rows {
		t.Fatalf("stats %+v: the rows were not batched", st)
	}
	if mean := st.PaddingRatioSum / float64(st.PaddedBatches); mean < 0 || mean >= 0.75 {
		t.Fatalf("mean padding ratio %v: buckets should keep it low", mean)
	}
}

// BenchmarkTextPredict is text.onnx alone: rows of 8..128 tokens run one
// per call (batching off) or 32 per call padded to their longest (the
// b.N rows either way; ns/op is per row).
func BenchmarkTextPredict(b *testing.B) {
	rng := rand.New(rand.NewPCG(23, 1))
	rows := make([][]int64, 1024)
	for i := range rows {
		l := 8 + rng.IntN(121)
		r := make([]int64, 2*l)
		for j := range l {
			r[j], r[l+j] = 1+rng.Int64N(999), 1
		}
		rows[i] = r
	}
	for _, per := range []int{1, 32} {
		b.Run(fmt.Sprintf("rows-per-call-%d", per), func(b *testing.B) {
			m := loadText(b, textFields(0))
			b.ResetTimer()
			for i := 0; i < b.N; i += per {
				k := (i / per * per) % (len(rows) - per)
				if _, err := m.Predict(context.Background(), runtime.Batch{Rows: per, Tokens: rows[k : k+per]}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTextServing serves single-row requests of text.onnx (rows of
// 8..128 tokens, 32 in flight) through a serving.Server with batching off
// (maxBatchSize 1) and on (maxBatchSize 32, maxBatchDelay 2ms, buckets
// 16/32/64/128): the batcher and the model without HTTP (docs/benchmarks.md,
// issue 23).
//
//	taskset -c 1 go test -run '^$' -bench TextServing -benchtime 20000x ./internal/runtime/onnx/
func BenchmarkTextServing(b *testing.B) {
	rng := rand.New(rand.NewPCG(23, 2))
	rows := make([][]int64, 4096)
	for i := range rows {
		l := 8 + rng.IntN(121)
		r := make([]int64, 2*l)
		for j := range l {
			r[j], r[l+j] = 1+rng.Int64N(999), 1
		}
		rows[i] = r
	}
	for _, c := range []struct {
		name    string
		batch   int
		buckets []int
	}{{"off", 1, nil}, {"on", 32, []int{16, 32, 64, 128}}} {
		b.Run(c.name, func(b *testing.B) {
			m := loadText(b, textFields(0))
			srv := serving.New(serving.Config{Name: "text@1", MaxBatchSize: c.batch, MaxBatchDelay: 2 * time.Millisecond, MaxQueueInstances: 100000,
				LengthBuckets: c.buckets, SeqInputs: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []runtime.Model{m})
			defer srv.Close(context.Background())
			sem := make(chan struct{}, 32)
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
			b.ReportMetric(float64(st.Rows)/float64(st.Batches), "rows/batch")
			if st.PaddedBatches > 0 {
				b.ReportMetric(st.PaddingRatioSum/float64(st.PaddedBatches), "padding-ratio")
			}
		})
	}
}
