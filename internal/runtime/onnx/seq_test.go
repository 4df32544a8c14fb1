//go:build cgo

package onnx

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/serving"
)

type seqRef struct {
	Rows []struct {
		Tokens []int64
		Score  float64
	}
}

func readSeqRef(t testing.TB) seqRef {
	t.Helper()
	var ref seqRef
	if err := json.Unmarshal(readFixture(t, "seq_ref.json"), &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Rows) < 5 {
		t.Fatalf("seq_ref.json has %d rows", len(ref.Rows))
	}
	return ref
}

func loadSeq(t testing.TB, pad int64) runtime.Model {
	t.Helper()
	m, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "seq@1", Outputs: 1, Sequence: true, PadValue: pad}, readFixture(t, "seq.onnx"))
	if err != nil {
		t.Fatalf("load seq.onnx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestSequenceModel runs seq.onnx on every reference row alone and on all
// rows in one padded batch: both match torch's unpadded outputs.
func TestSequenceModel(t *testing.T) {
	ref := readSeqRef(t)
	m := loadSeq(t, 0)
	info := m.Info()
	if !info.Sequence || info.Inputs != 0 || info.Outputs != 1 || !strings.Contains(info.Detail, `input "tokens" int64 [batch, seq]`) {
		t.Fatalf("info %+v", info)
	}
	ctx := context.Background()
	all := runtime.Batch{Rows: len(ref.Rows)}
	for i, r := range ref.Rows {
		out, err := m.Predict(ctx, runtime.Batch{Rows: 1, Tokens: [][]int64{r.Tokens}})
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(float64(out.Data[0]) - r.Score); d > 1e-5 {
			t.Errorf("row %d (length %d) alone: %v, torch %v", i, len(r.Tokens), out.Data[0], r.Score)
		}
		all.Tokens = append(all.Tokens, r.Tokens)
	}
	out, err := m.Predict(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if out.Rows != len(ref.Rows) || out.Cols != 1 {
		t.Fatalf("out %d×%d", out.Rows, out.Cols)
	}
	for i, r := range ref.Rows {
		if d := math.Abs(float64(out.Data[i]) - r.Score); d > 1e-5 {
			t.Errorf("row %d (length %d) padded in a batch: %v, torch %v", i, len(r.Tokens), out.Data[i], r.Score)
		}
	}
	// The pad value is what the rows are padded with: a non-zero pad id is
	// not masked by this model, so a padded row's output changes.
	m7 := loadSeq(t, 7)
	short := ref.Rows[0].Tokens
	out7, err := m7.Predict(ctx, runtime.Batch{Rows: 2, Tokens: [][]int64{short, ref.Rows[len(ref.Rows)-1].Tokens}})
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(float64(out7.Data[0]) - ref.Rows[0].Score); d < 1e-4 {
		t.Errorf("pad value 7 did not change the padded row's output (%v vs %v)", out7.Data[0], ref.Rows[0].Score)
	}
	// Bad batches.
	if _, err := m.Predict(ctx, runtime.Batch{Rows: 2, Tokens: [][]int64{{1}}}); err == nil || !strings.Contains(err.Error(), `input "tokens" reads token ids`) {
		t.Error(err)
	}
	if _, err := m.Predict(ctx, runtime.Batch{Rows: 1, Tokens: [][]int64{{}}}); err == nil || !strings.Contains(err.Error(), "row 0 has no token ids") {
		t.Error(err)
	}
}

func TestSequenceLoadMismatch(t *testing.T) {
	_, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "x@1", Outputs: 1, Sequence: true}, readFixture(t, "mlp"))
	if err == nil || !strings.Contains(err.Error(), `model.yaml declares a sequence field but input "features" is float32 [batch, 30]`) {
		t.Fatal(err)
	}
	_, err = Runtime{}.Load(context.Background(), runtime.Spec{Name: "x@1", Features: 30, Outputs: 1}, readFixture(t, "seq.onnx"))
	if err == nil || !strings.Contains(err.Error(), "declare one input field of type sequence") {
		t.Fatal(err)
	}
}

// TestSequenceBucketsServing runs seq.onnx behind a serving.Server with
// length buckets: rows of many lengths submitted at once batch only within
// their bucket and every answer equals torch's unpadded output.
func TestSequenceBucketsServing(t *testing.T) {
	ref := readSeqRef(t)
	m := loadSeq(t, 0)
	srv := serving.New(serving.Config{Name: "seq@1", MaxBatchSize: 8, MaxBatchDelay: 5 * time.Millisecond, MaxQueueInstances: 1000,
		LengthBuckets: []int{4, 16, 64, 128}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, []runtime.Model{m})
	defer srv.Close(context.Background())
	var wg sync.WaitGroup
	for k := 0; k < 3; k++ {
		for i, r := range ref.Rows {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := srv.Submit(context.Background(), serving.Work{Rows: runtime.Batch{Rows: 1, Tokens: [][]int64{r.Tokens}}})
				if err != nil {
					t.Errorf("row %d: %v", i, err)
					return
				}
				if d := math.Abs(float64(res.Out.Data[0]) - r.Score); d > 1e-5 {
					t.Errorf("row %d (length %d) batched: %v, torch %v", i, len(r.Tokens), res.Out.Data[0], r.Score)
				}
			}()
		}
	}
	wg.Wait()
	st := srv.Stats()
	if st.Rows != int64(3*len(ref.Rows)) || st.PaddedBatches != st.Batches {
		t.Fatalf("stats %+v", st)
	}
	if mean := st.PaddingRatioSum / float64(st.PaddedBatches); mean < 0 || mean >= 1 {
		t.Fatalf("mean padding ratio %v", mean)
	}
}
