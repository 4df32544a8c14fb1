//go:build cgo

package onnx

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

// TestTensorReuse runs the MLP over batch sizes in an order that grows the
// shared buffers, revisits cached shapes and goes past the bound: every
// answer equals torch's, every Output is the caller's (a later Predict does
// not change it), and the cache never holds more than maxShapes pairs.
func TestTensorReuse(t *testing.T) {
	ref := readReference(t)
	c := ref.Cases[len(ref.Cases)-1] // the 64-row case; rows are independent
	m := load(t, "mlp", 30, 1, runtime.SessionOptions{}).(*Model)
	ctx := context.Background()
	// rows i of a batch of n is reference row (start+i) mod 64.
	batch := func(n, start int) (runtime.Batch, []float64) {
		b := runtime.Batch{Rows: n, Cols: 30, Data: make([]float32, 0, n*30)}
		want := make([]float64, n)
		for i := range n {
			r := (start + i) % c.Rows
			for _, v := range c.Input[r*30 : (r+1)*30] {
				b.Data = append(b.Data, float32(v))
			}
			want[i] = c.Output[r]
		}
		return b, want
	}
	check := func(what string, out runtime.Output, want []float64) {
		t.Helper()
		if out.Rows != len(want) || out.Cols != 1 || len(out.Data) != len(want) {
			t.Fatalf("%s: output %d×%d (%d values), want %d×1", what, out.Rows, out.Cols, len(out.Data), len(want))
		}
		for i, w := range want {
			if d := math.Abs(float64(out.Data[i]) - w); !(d <= 1e-5) {
				t.Fatalf("%s, row %d: onnx %v, torch %v", what, i, out.Data[i], w)
			}
		}
	}
	sizes := []int{1, 3, 1, 64, 2, 100, 3, 1, 128, 7, 64}
	for i := 1; i <= maxShapes+10; i++ { // past the bound
		sizes = append(sizes, i)
	}
	sizes = append(sizes, 1, 128, 5)
	var kept []runtime.Output
	var keptWant [][]float64
	for i, n := range sizes {
		b, want := batch(n, i*5)
		out, err := m.Predict(ctx, b)
		if err != nil {
			t.Fatalf("call %d, batch of %d: %v", i, n, err)
		}
		check(fmt.Sprintf("batch of %d", n), out, want)
		if got := m.floats.shapes(); got > maxShapes {
			t.Fatalf("after call %d: %d cached shapes, bound %d", i, got, maxShapes)
		}
		kept = append(kept, runtime.Output{Rows: out.Rows, Cols: out.Cols, Data: slices.Clone(out.Data)})
		keptWant = append(keptWant, want)
		if i%7 == 0 {
			kept[len(kept)-1] = out // the returned slice itself, checked after later calls
		}
	}
	for i := range kept {
		check(fmt.Sprintf("kept output of call %d", i), kept[i], keptWant[i])
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := m.floats.shapes(); got != 0 {
		t.Errorf("after Close: %d cached shapes", got)
	}
}

// TestTensorReuseSequence: the token cache keys on [n, L]; a shape revisited
// with shorter rows is padded afresh (no token of an earlier batch remains).
func TestTensorReuseSequence(t *testing.T) {
	ref := readSeqRef(t)
	m := loadSeq(t, 0).(*Model)
	ctx := context.Background()
	long, short := ref.Rows[len(ref.Rows)-1], ref.Rows[0]
	if len(short.Tokens) >= len(long.Tokens) {
		t.Fatalf("reference rows of %d and %d tokens; want a short first and a long last", len(short.Tokens), len(long.Tokens))
	}
	for _, rows := range [][]int{{1}, {0, 1}, {0}, {1, 0}, {0, 1}} {
		b := runtime.Batch{Rows: len(rows)}
		pick := []struct {
			Tokens []int64
			Score  float64
		}{short, long}
		for _, r := range rows {
			b.Tokens = append(b.Tokens, pick[r].Tokens)
		}
		out, err := m.Predict(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if d := math.Abs(float64(out.Data[i]) - pick[r].Score); d > 1e-5 {
				t.Errorf("rows %v, row %d: %v, torch %v", rows, i, out.Data[i], pick[r].Score)
			}
		}
	}
	if got := m.tokens.shapes(); got == 0 || got > maxShapes {
		t.Errorf("%d cached token shapes", got)
	}
}
