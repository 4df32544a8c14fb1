// Package vstats keeps live, in-memory outcome statistics per model
// version: request and 5xx counts, a latency histogram, and shadow
// comparison figures, and the last 24 h of them per minute (rollup.Series:
// GET /v1/models/{name}/stats). The gateway records into it on the hot
// path (atomic counters, and one short lock of the version's minutes);
// the control plane reads windows of it to judge rollout gates. It knows
// nothing of HTTP, routing or the store.
package vstats

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluiceml/sluice/internal/rollup"
)

// Latency buckets: upper bounds growing by 10 % from 50 µs to ~60 s.
var bounds = func() []time.Duration {
	var b []time.Duration
	for d := 50e3; d < 60e9; d *= 1.1 {
		b = append(b, time.Duration(d))
	}
	return b
}()

// Histogram is a fixed-bucket latency histogram with atomic counts.
type Histogram struct {
	counts []atomic.Int64 // len(bounds)+1; last is overflow
}

func newHistogram() *Histogram { return &Histogram{counts: make([]atomic.Int64, len(bounds)+1)} }

// Observe records one latency.
func (h *Histogram) Observe(d time.Duration) {
	i := sort.Search(len(bounds), func(i int) bool { return bounds[i] >= d })
	h.counts[i].Add(1)
}

// Snapshot copies the counts.
func (h *Histogram) Snapshot() Counts {
	c := make(Counts, len(h.counts))
	for i := range h.counts {
		c[i] = h.counts[i].Load()
	}
	return c
}

// Counts is a histogram snapshot.
type Counts []int64

// Sub returns c − old (a window's histogram).
func (c Counts) Sub(old Counts) Counts {
	out := make(Counts, len(c))
	for i := range c {
		out[i] = c[i]
		if i < len(old) {
			out[i] -= old[i]
		}
	}
	return out
}

// Quantile estimates the q-quantile (the bucket's upper bound), 0 if empty.
func (c Counts) Quantile(q float64) time.Duration {
	var n int64
	for _, x := range c {
		n += x
	}
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var acc int64
	for i, x := range c {
		acc += x
		if acc >= rank {
			if i < len(bounds) {
				return bounds[i]
			}
			return bounds[len(bounds)-1]
		}
	}
	return bounds[len(bounds)-1]
}

// Version holds one version's live figures.
type Version struct {
	Requests atomic.Int64 // answered requests
	Errors   atomic.Int64 // 5xx answers
	Latency  *Histogram   // successful requests' server latency
	// Minutes is the last 24 h of the same figures, per minute.
	Minutes rollup.Series

	Shadow Shadow // figures of this version running as a shadow
}

// Shadow holds comparison figures of a shadow version against the primary
// that answered the same requests.
type Shadow struct {
	Requests      atomic.Int64  // copies that ran
	Rows          atomic.Int64  // rows compared
	Values        atomic.Int64  // output values compared (rows × columns)
	Disagreements atomic.Int64  // rows whose label differs
	Errors        atomic.Int64  // copies that failed
	Dropped       atomic.Int64  // copies not run: shadow queue full
	Incompatible  atomic.Int64  // outputs of another shape
	absDiffSum    atomic.Uint64 // float64 bits, updated with CAS
	absDiffMax    atomic.Uint64
	Latency       *Histogram
}

// Snapshot is a point-in-time copy of a Version.
type Snapshot struct {
	Requests, Errors int64
	Latency          Counts
	Shadow           ShadowSnapshot
}

// ShadowSnapshot is a copy of Shadow.
type ShadowSnapshot struct {
	Requests, Rows, Values, Disagreements, Errors, Dropped, Incompatible int64
	AbsDiffSum, AbsDiffMax                                               float64
	Latency                                                              Counts
}

// Sub returns the window s − old. AbsDiffMax is the current maximum.
func (s Snapshot) Sub(old Snapshot) Snapshot {
	return Snapshot{
		Requests: s.Requests - old.Requests, Errors: s.Errors - old.Errors, Latency: s.Latency.Sub(old.Latency),
		Shadow: ShadowSnapshot{
			Requests: s.Shadow.Requests - old.Shadow.Requests, Rows: s.Shadow.Rows - old.Shadow.Rows, Values: s.Shadow.Values - old.Shadow.Values,
			Disagreements: s.Shadow.Disagreements - old.Shadow.Disagreements, Errors: s.Shadow.Errors - old.Shadow.Errors,
			Dropped: s.Shadow.Dropped - old.Shadow.Dropped, Incompatible: s.Shadow.Incompatible - old.Shadow.Incompatible,
			AbsDiffSum: s.Shadow.AbsDiffSum - old.Shadow.AbsDiffSum, AbsDiffMax: s.Shadow.AbsDiffMax,
			Latency: s.Shadow.Latency.Sub(old.Shadow.Latency),
		},
	}
}

// Snapshot copies v.
func (v *Version) Snapshot() Snapshot {
	return Snapshot{
		Requests: v.Requests.Load(), Errors: v.Errors.Load(), Latency: v.Latency.Snapshot(),
		Shadow: ShadowSnapshot{
			Requests: v.Shadow.Requests.Load(), Rows: v.Shadow.Rows.Load(), Values: v.Shadow.Values.Load(), Disagreements: v.Shadow.Disagreements.Load(),
			Errors: v.Shadow.Errors.Load(), Dropped: v.Shadow.Dropped.Load(), Incompatible: v.Shadow.Incompatible.Load(),
			AbsDiffSum: math.Float64frombits(v.Shadow.absDiffSum.Load()), AbsDiffMax: math.Float64frombits(v.Shadow.absDiffMax.Load()),
			Latency: v.Shadow.Latency.Snapshot(),
		},
	}
}

// Record counts one answered request: 5xx when serverError, latency when ok.
func (v *Version) Record(latency time.Duration, ok, serverError bool) {
	v.Requests.Add(1)
	if serverError {
		v.Errors.Add(1)
	}
	if ok {
		v.Latency.Observe(latency)
	}
	v.Minutes.Observe(time.Now(), latency, ok, serverError)
}

// Compare records a shadow's outputs against the primary's for the same
// rows (row-major, cols columns each). A row disagrees when its label
// differs: threshold 0.5 for one column, argmax for several.
func (v *Version) Compare(primary, shadow []float32, cols int, latency time.Duration) {
	s := &v.Shadow
	s.Requests.Add(1)
	s.Latency.Observe(latency)
	if cols <= 0 || len(primary) != len(shadow) || len(primary)%cols != 0 {
		s.Incompatible.Add(1)
		return
	}
	rows := len(primary) / cols
	var flips int64
	var sum, mx float64
	for r := 0; r < rows; r++ {
		p, q := primary[r*cols:(r+1)*cols], shadow[r*cols:(r+1)*cols]
		if Label(p) != Label(q) {
			flips++
		}
		for j := range p {
			d := math.Abs(float64(p[j]) - float64(q[j]))
			sum += d
			mx = math.Max(mx, d)
		}
	}
	s.Rows.Add(int64(rows))
	s.Values.Add(int64(len(primary)))
	s.Disagreements.Add(flips)
	addFloat(&s.absDiffSum, sum)
	maxFloat(&s.absDiffMax, mx)
}

// Label is a row's predicted label: p >= 0.5 for one column, else argmax.
func Label(row []float32) int {
	if len(row) == 1 {
		if row[0] >= 0.5 {
			return 1
		}
		return 0
	}
	best := 0
	for j, x := range row {
		if x > row[best] {
			best = j
		}
	}
	return best
}

func addFloat(a *atomic.Uint64, d float64) {
	for {
		old := a.Load()
		if a.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

func maxFloat(a *atomic.Uint64, d float64) {
	for {
		old := a.Load()
		if math.Float64frombits(old) >= d || a.CompareAndSwap(old, math.Float64bits(d)) {
			return
		}
	}
}

// Set holds the figures of every version, created on first use.
type Set struct {
	m sync.Map // "model@N" -> *Version
}

// Lookup returns the figures of id if it has any (it makes none).
func (s *Set) Lookup(id string) (*Version, bool) {
	v, ok := s.m.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*Version), true
}

// Get returns the figures of id ("model@N").
func (s *Set) Get(id string) *Version {
	if v, ok := s.m.Load(id); ok {
		return v.(*Version)
	}
	v, _ := s.m.LoadOrStore(id, &Version{Latency: newHistogram(), Shadow: Shadow{Latency: newHistogram()}})
	return v.(*Version)
}
