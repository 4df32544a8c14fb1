package bench

import (
	"context"
	"fmt"
	"time"
)

// SustainedShare is the share of scheduled requests that must be answered
// 2xx within the deadline for a run to count as sustained.
const SustainedShare = 0.99

// Sustained reports whether a run carried its offered load within slo: at
// least SustainedShare of the scheduled requests answered 2xx within the
// deadline, the generator kept to its schedule, and the corrected p99 is
// within slo.
func Sustained(r Result, slo time.Duration) bool { return NotSustained(r, slo) == "" }

// NotSustained says why a run was not sustained ("" when it was). A
// generator that fell behind its schedule is a limit of the machine
// sending the load, not a measure of the server.
func NotSustained(r Result, slo time.Duration) string {
	switch {
	case r.Interrupted:
		return "interrupted"
	case r.Scheduled == 0:
		return "nothing scheduled"
	case r.FellBehind:
		return "the load generator fell behind its schedule (a limit of this machine, not of the server)"
	case float64(r.Good) < SustainedShare*float64(r.Scheduled):
		return fmt.Sprintf("%d of %d good within the deadline, under %g%%", r.Good, r.Scheduled, 100*SustainedShare)
	case r.Latency.P99 > slo:
		return fmt.Sprintf("p99 %v over the SLO %v", r.Latency.P99, slo)
	}
	return ""
}

// CapacitySearch bounds FindCapacity.
type CapacitySearch struct {
	Start float64 // first rate tried, requests/s (> 0)
	Max   float64 // highest rate tried (0: MaxRate)
	Steps int     // bisection steps once a failing rate is known (0: 5)
}

// FindCapacity looks for the highest rate that probe sustains: from Start
// it doubles the rate until a probe fails (or Max is reached), then
// bisects between the last sustained and the first failed rate Steps
// times, so the answer is within (failed − sustained) / 2^Steps below the
// true figure. probe runs one load at a rate; pass judges its result. It
// returns the best sustained rate (0 when even Start failed) and every
// probe's result in the order run. An error from probe, or ctx ending,
// stops the search; the best rate so far is returned with the error.
func FindCapacity(ctx context.Context, s CapacitySearch, probe func(ctx context.Context, rate float64) (Result, error), pass func(Result) bool) (float64, []Result, error) {
	if !(s.Start > 0) {
		return 0, nil, fmt.Errorf("capacity search: start rate must be > 0, got %g", s.Start)
	}
	if s.Max <= 0 || s.Max > MaxRate {
		s.Max = MaxRate
	}
	if s.Steps <= 0 {
		s.Steps = 5
	}
	var tried []Result
	try := func(rate float64) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		r, err := probe(ctx, rate)
		if err != nil {
			return false, err
		}
		tried = append(tried, r)
		return pass(r), nil
	}
	good, bad := 0.0, 0.0
	for rate := min(s.Start, s.Max); ; rate = min(rate*2, s.Max) {
		ok, err := try(rate)
		if err != nil {
			return good, tried, err
		}
		if !ok {
			bad = rate
			break
		}
		good = rate
		if rate >= s.Max {
			return good, tried, nil // sustained the most it may try
		}
	}
	for i := 0; i < s.Steps; i++ {
		mid := (good + bad) / 2
		ok, err := try(mid)
		if err != nil {
			return good, tried, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, tried, nil
}
