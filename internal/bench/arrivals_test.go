package bench

import (
	"math"
	"testing"
	"time"
)

func TestConstantSchedule(t *testing.T) {
	s, err := NewSchedule(Constant, 400, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if got, want := s.Next(), time.Duration(i)*2500*time.Microsecond; got != want {
			t.Fatalf("arrival %d at %v, want %v", i, got, want)
		}
	}
}

func TestPoissonSchedule(t *testing.T) {
	const rate, n = 1000.0, 20000
	s, err := NewSchedule(Poisson, rate, 99)
	if err != nil {
		t.Fatal(err)
	}
	var prev time.Duration
	gaps := make([]float64, n)
	for i := range gaps {
		at := s.Next()
		if at < prev {
			t.Fatalf("arrival %d at %v before the previous one at %v", i, at, prev)
		}
		gaps[i] = (at - prev).Seconds()
		prev = at
	}
	var sum, sq float64
	for _, g := range gaps {
		sum += g
	}
	mean := sum / n
	for _, g := range gaps {
		sq += (g - mean) * (g - mean)
	}
	sd := math.Sqrt(sq / (n - 1))
	// Exponential gaps: mean 1/rate, standard deviation 1/rate. The mean of
	// n gaps has standard error (1/rate)/sqrt(n) ≈ 0.7%; allow 5 standard
	// errors, so a correct generator fails about never.
	if tol := 5 / rate / math.Sqrt(n); math.Abs(mean-1/rate) > tol {
		t.Errorf("mean gap %.6fs, want %.6fs ± %.6fs", mean, 1/rate, tol)
	}
	if math.Abs(sd-1/rate) > 0.1/rate {
		t.Errorf("gap standard deviation %.6fs, want about %.6fs (exponential)", sd, 1/rate)
	}

	// Same seed, same schedule; another seed, another.
	a, _ := NewSchedule(Poisson, rate, 5)
	b, _ := NewSchedule(Poisson, rate, 5)
	c, _ := NewSchedule(Poisson, rate, 6)
	differ := false
	for i := 0; i < 100; i++ {
		x, y, z := a.Next(), b.Next(), c.Next()
		if x != y {
			t.Fatalf("same seed diverged at arrival %d: %v vs %v", i, x, y)
		}
		differ = differ || x != z
	}
	if !differ {
		t.Fatal("seeds 5 and 6 gave the same schedule")
	}
}

func TestScheduleErrors(t *testing.T) {
	for _, tt := range []struct {
		kind string
		rate float64
	}{{"bursty", 10}, {Constant, 0}, {Poisson, -1}, {Constant, math.NaN()}, {Constant, 2e6}} {
		if _, err := NewSchedule(tt.kind, tt.rate, 1); err == nil {
			t.Errorf("NewSchedule(%q, %v) accepted", tt.kind, tt.rate)
		}
	}
}
