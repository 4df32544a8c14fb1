package vstats

import (
	"math"
	"testing"
	"time"
)

func TestCompareHandCount(t *testing.T) {
	var s Set
	v := s.Get("m@2")
	// One-output probabilities: rows 0 and 2 flip (0.4→0.6, 0.7→0.2).
	v.Compare([]float32{0.4, 0.9, 0.7, 0.1}, []float32{0.6, 0.8, 0.2, 0.1}, 1, time.Millisecond)
	// Three classes: row 0 argmax 0→0, row 1 argmax 2→1.
	v.Compare([]float32{0.8, 0.1, 0.1, 0.1, 0.2, 0.7}, []float32{0.7, 0.2, 0.1, 0.1, 0.5, 0.4}, 3, 2*time.Millisecond)
	sn := v.Snapshot().Shadow
	if sn.Requests != 2 || sn.Rows != 6 || sn.Disagreements != 3 {
		t.Fatalf("requests %d rows %d disagreements %d, want 2 6 3", sn.Requests, sn.Rows, sn.Disagreements)
	}
	wantSum := 0.2 + 0.1 + 0.5 + 0 + (0.1 + 0.1 + 0) + (0 + 0.3 + 0.3)
	if math.Abs(sn.AbsDiffSum-wantSum) > 1e-6 || math.Abs(sn.AbsDiffMax-0.5) > 1e-6 {
		t.Fatalf("abs diff sum %v max %v, want %v 0.5", sn.AbsDiffSum, sn.AbsDiffMax, wantSum)
	}
	v.Compare([]float32{1, 2}, []float32{1}, 1, 0)
	if v.Snapshot().Shadow.Incompatible != 1 {
		t.Error("shape mismatch not counted")
	}
}

func TestQuantileAndWindows(t *testing.T) {
	var s Set
	v := s.Get("m@1")
	for i := 0; i < 99; i++ {
		v.Record(time.Millisecond, true, false)
	}
	v.Record(100*time.Millisecond, true, false)
	before := v.Snapshot()
	p99 := before.Latency.Quantile(0.99)
	if p99 < time.Millisecond || p99 > 1100*time.Microsecond {
		t.Errorf("p99 of 99×1ms + 1×100ms = %v, want ≈1ms (bucket bound)", p99)
	}
	if q := before.Latency.Quantile(1); q < 100*time.Millisecond || q > 111*time.Millisecond {
		t.Errorf("max ≈ %v, want ≈100ms", q)
	}
	for i := 0; i < 10; i++ {
		v.Record(0, false, true)
	}
	w := v.Snapshot().Sub(before)
	if w.Requests != 10 || w.Errors != 10 || w.Latency.Quantile(0.5) != 0 {
		t.Errorf("window %+v", w)
	}
}
