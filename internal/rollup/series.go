package rollup

import (
	"sync"
	"time"
)

// Keep is how long a series keeps its minutes.
const Keep = 24 * time.Hour

// MaxMinutes is the most minutes a series holds: one per minute of Keep,
// and only minutes with requests take room. A series is therefore at most
// 2,048 slots × 64 B (the slice of minutes, grown by doubling) plus
// MaxMinutes × MaxBins × 8 B (their buckets): under 0.9 MB whatever the
// traffic; a minute whose latencies stay within a ratio of 3.6 holds at
// most 64 buckets at 1 % and one within 1.5 about 20 (≈ 160 B).
const MaxMinutes = int(Keep / time.Minute)

// Point is one minute of a series: the requests that ended in it, the
// errors among them, and the latency quantiles of those that succeeded
// (milliseconds, within Alpha).
type Point struct {
	T      time.Time // the minute's start, UTC
	Count  int64
	Errors int64
	P50Ms  float64
	P99Ms  float64
	Alpha  float64
}

type minute struct {
	t      int64 // Unix minute
	count  int64
	errors int64
	lat    Sketch
}

// Series is one version's minutes. Its zero value is empty and ready;
// it is safe for concurrent use.
type Series struct {
	mu      sync.Mutex // guards minutes
	minutes []minute   // oldest first, at most MaxMinutes, none older than Keep before the newest
}

// Observe counts one request that ended at now: an error when failed,
// its latency in the sketch when ok (a refusal for a bad request is
// neither).
func (s *Series) Observe(now time.Time, latency time.Duration, ok, failed bool) {
	t := now.Unix() / 60
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.minuteLocked(t)
	if m == nil {
		return // older than what is kept
	}
	m.count++
	if failed {
		m.errors++
	}
	if ok {
		m.lat.Add(float64(latency) / float64(time.Millisecond))
	}
}

// minuteLocked returns the minute t, opened if it is new (nil if it is
// older than the newest minute by Keep or more).
func (s *Series) minuteLocked(t int64) *minute {
	n := len(s.minutes)
	if n > 0 {
		last := &s.minutes[n-1]
		switch {
		case last.t == t:
			return last
		case t < last.t:
			// A request that ended before the newest one's minute
			// (clocks of concurrent callers): its minute, if kept.
			for i := n - 1; i >= 0 && s.minutes[i].t >= t; i-- {
				if s.minutes[i].t == t {
					return &s.minutes[i]
				}
			}
			if t <= last.t-int64(MaxMinutes) {
				return nil
			}
			i := 0
			for i < n && s.minutes[i].t < t {
				i++
			}
			s.minutes = append(s.minutes, minute{})
			copy(s.minutes[i+1:], s.minutes[i:])
			s.minutes[i] = minute{t: t}
			return &s.minutes[i]
		}
		last.lat = last.lat.compact() // the newest minute ended
	}
	// Drop what the new minute puts out of Keep.
	drop := 0
	for drop < n && s.minutes[drop].t <= t-int64(MaxMinutes) {
		drop++
	}
	if drop > 0 {
		s.minutes = append(s.minutes[:0], s.minutes[drop:]...)
	}
	s.minutes = append(s.minutes, minute{t: t})
	return &s.minutes[len(s.minutes)-1]
}

// Points returns the minutes that start in [from, to), oldest first.
func (s *Series) Points(from, to time.Time) []Point {
	lo, hi := from.Unix(), to.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Point
	for i := range s.minutes {
		m := &s.minutes[i]
		if ts := m.t * 60; ts >= lo && ts < hi {
			out = append(out, Point{T: time.Unix(ts, 0).UTC(), Count: m.count, Errors: m.errors,
				P50Ms: m.lat.Quantile(0.5), P99Ms: m.lat.Quantile(0.99), Alpha: m.lat.Alpha()})
		}
	}
	return out
}

// Len is how many minutes the series holds.
func (s *Series) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.minutes)
}
