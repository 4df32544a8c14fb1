package routing

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
)

func table(ws ...Weighted) *Table {
	e := &Entry{Policy: 1, Versions: map[int]*Target{}, NotReady: map[int]string{}}
	for _, r := range Assign(ws) {
		tg := &Target{Model: "m", N: r.Version, ID: fmt.Sprintf("m@%d", r.Version)}
		e.Versions[r.Version] = tg
		e.Routes = append(e.Routes, Route{Range: r, Target: tg})
	}
	return &Table{Models: map[string]*Entry{"m": e}}
}

func TestAssign(t *testing.T) {
	cases := []struct {
		in   []Weighted
		want []Range
	}{
		{[]Weighted{{1, 100}}, []Range{{1, 0, 10000}}},
		{[]Weighted{{18, 10}, {17, 90}}, []Range{{17, 0, 9000}, {18, 9000, 10000}}},
		{[]Weighted{{1, 33}, {2, 33}, {3, 34}}, []Range{{1, 0, 3300}, {2, 3300, 6600}, {3, 6600, 10000}}},
		{[]Weighted{{1, 100}, {2, 0}}, []Range{{1, 0, 10000}}},
	}
	for _, c := range cases {
		got := Assign(c.in)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Assign(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestWeightsWithinStatisticalBounds(t *testing.T) {
	const n = 100_000
	for _, w := range []int{1, 5, 10, 25, 50} {
		tb := table(Weighted{1, 100 - w}, Weighted{2, w})
		hits := 0
		for i := 0; i < n; i++ {
			tg, _, err := tb.Pick("m", fmt.Sprintf("user-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if tg.N == 2 {
				hits++
			}
		}
		p := float64(w) / 100
		sd := math.Sqrt(n * p * (1 - p))
		if d := math.Abs(float64(hits) - n*p); d > 5*sd {
			t.Errorf("weight %d%%: %d of %d keys (expected %.0f ± %.0f)", w, hits, n, n*p, 5*sd)
		}
	}
}

func TestStickyAndMonotonic(t *testing.T) {
	const n = 100_000
	steps := []int{1, 5, 25, 50, 100}
	prev := map[int]int{}
	for si, w := range steps {
		tb := table(Weighted{17, 100 - w}, Weighted{18, w})
		for i := 0; i < n; i++ {
			key := fmt.Sprintf("k%d", i)
			tg, _, _ := tb.Pick("m", key)
			again, _, _ := tb.Pick("m", key)
			if tg != again {
				t.Fatalf("key %s changed version without a weight change", key)
			}
			if si > 0 && prev[i] == 18 && tg.N == 17 {
				t.Fatalf("raising the canary from %d%% to %d%% moved key %s back to the baseline", steps[si-1], w, key)
			}
			prev[i] = tg.N
		}
	}
}

func TestUnreadyTargetHandsOverItsBuckets(t *testing.T) {
	tb := table(Weighted{1, 70}, Weighted{2, 30})
	e := tb.Models["m"]
	e.Routes[1].Target = nil // version 2 failed
	e.NotReady[2] = "failed: artifact sha256 mismatch"
	for i := 0; i < 1000; i++ {
		tg, _, err := tb.Pick("m", fmt.Sprint(i))
		if err != nil || tg.N != 1 {
			t.Fatalf("key %d: %v %v", i, tg, err)
		}
	}
	e.Routes[0].Target = nil
	if _, _, err := tb.Pick("m", "x"); errs.CodeOf(err) != errs.NotReady {
		t.Fatalf("no ready target: %v", err)
	}
	if _, _, err := tb.Pick("nope", "x"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("unknown model: %v", err)
	}
}
