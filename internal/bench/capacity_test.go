package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSustained(t *testing.T) {
	slo := 50 * time.Millisecond
	ok := Result{Scheduled: 1000, Good: 995, Latency: Percentiles{P99: 40 * time.Millisecond}}
	cases := []struct {
		name string
		f    func(*Result)
		want bool
	}{
		{"within", func(*Result) {}, true},
		{"too few good", func(r *Result) { r.Good = 980 }, false},
		{"p99 over the SLO", func(r *Result) { r.Latency.P99 = 60 * time.Millisecond }, false},
		{"generator fell behind", func(r *Result) { r.FellBehind = true }, false},
		{"interrupted", func(r *Result) { r.Interrupted = true }, false},
		{"nothing scheduled", func(r *Result) { *r = Result{} }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ok
			c.f(&r)
			if got := Sustained(r, slo); got != c.want {
				t.Fatalf("Sustained = %v, want %v", got, c.want)
			}
			if why := NotSustained(r, slo); (why == "") != c.want {
				t.Fatalf("NotSustained = %q with Sustained %v", why, c.want)
			}
		})
	}
}

func TestFindCapacity(t *testing.T) {
	// A fake server that sustains up to capacity requests/s.
	probeAt := func(capacity float64, rates *[]float64) func(context.Context, float64) (Result, error) {
		return func(_ context.Context, rate float64) (Result, error) {
			*rates = append(*rates, rate)
			return Result{OfferedRate: rate, Goodput: min(rate, capacity)}, nil
		}
	}
	pass := func(r Result) bool { return r.Goodput >= r.OfferedRate }
	cases := []struct {
		name     string
		capacity float64
		s        CapacitySearch
		lo, hi   float64 // the answer's bounds
		probes   int
	}{
		{"doubles then bisects", 730, CapacitySearch{Start: 100, Steps: 5}, 730 - 800.0/32, 730, 4 + 5}, // 100 200 400 800✗, then 5
		{"start fails: 0 after bisecting below it", 30, CapacitySearch{Start: 100, Steps: 3}, 0, 30, 1 + 3},
		{"sustains the max: stops there", 1e9, CapacitySearch{Start: 100, Max: 1000, Steps: 5}, 1000, 1000, 5}, // 100 200 400 800 1000
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rates []float64
			got, tried, err := FindCapacity(t.Context(), c.s, probeAt(c.capacity, &rates), pass)
			if err != nil {
				t.Fatal(err)
			}
			if got < c.lo || got > c.hi {
				t.Fatalf("capacity %g, want in [%g, %g] (rates %v)", got, c.lo, c.hi, rates)
			}
			if len(tried) != c.probes || len(rates) != c.probes {
				t.Fatalf("%d probes (%v), want %d", len(tried), rates, c.probes)
			}
		})
	}
}

func TestFindCapacityStopsOnError(t *testing.T) {
	n := 0
	probe := func(_ context.Context, rate float64) (Result, error) {
		n++
		if rate > 300 {
			return Result{}, errors.New("server went away")
		}
		return Result{OfferedRate: rate, Goodput: rate}, nil
	}
	got, tried, err := FindCapacity(t.Context(), CapacitySearch{Start: 100}, probe, func(r Result) bool { return true })
	if err == nil || got != 200 || len(tried) != 2 || n != 3 {
		t.Fatalf("got %g, %d results, %d probes, err %v; want 200, 2, 3 and the error", got, len(tried), n, err)
	}
	if _, _, err := FindCapacity(t.Context(), CapacitySearch{}, probe, nil); err == nil {
		t.Fatal("no start rate: want an error")
	}
}
