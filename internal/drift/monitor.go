package drift

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Monitor defaults and drift thresholds.
const (
	DefaultWindow     = 10 * time.Minute
	DefaultBuckets    = 10
	MaxBuckets        = 1000
	maxShards         = 8
	shardBudget       = 1 << 16 // counters per slot beyond which shards stop multiplying
	DefaultMinSamples = 100     // fewer samples in the window: PSI not judged
	FlagPSI           = 0.2     // PSI above this is flagged as drift
	Epsilon           = 1e-4
)

// Config tunes a Monitor. Zero fields take the defaults.
type Config struct {
	// Window is how far back a Report looks. It is split into Buckets
	// sub-windows; the oldest is forgotten as a new one starts, so a
	// Report covers between Window−Window/Buckets and Window.
	Window     time.Duration
	Buckets    int
	MinSamples int64            // samples a histogram needs for its PSI to count
	Now        func() time.Time // the clock; time.Now when nil
}

// Monitor keeps one model version's live histograms over a sliding window
// and compares them with its Reference. Observe counts into one of a few
// shards of the current sub-window, each with its own mutex, taking the
// first free one (TryLock), so concurrent Observes rarely wait; one lock
// per row costs less than an atomic add per value. Report may run
// concurrently. Memory: (Buckets+1) × shards × Σ(bins+1) counters.
type Monitor struct {
	cols       []column // features, then outputs
	nf         int      // number of feature columns
	counters   int      // counters per shard
	shards     int      // shards per slot
	sub        int64    // sub-window length, ns
	buckets    int
	minSamples int64
	now        func() time.Time
	created    int64

	cur atomic.Pointer[slot] // the sub-window Observe counts into

	mu   sync.Mutex // guards ring and the replacement of cur
	ring []*slot    // live sub-windows, oldest first; the last is cur
}

// column is one histogram's reference and its counters' place in a slot.
type column struct {
	ref   Hist
	share []float64 // reference shares: bins, then missing
	off   int       // first counter; off+len(ref.Counts) counts missing values
}

// slot is one sub-window's counters. A slot is never reset: a new
// sub-window gets a new slot, so an Observe that loaded cur just before a
// rotation counts into the sub-window that just ended.
type slot struct {
	start, end int64 // unix ns, [start, end)
	shards     []shard
}

// shard is one share of a slot's counters.
type shard struct {
	mu     sync.Mutex // guards rows and counts
	rows   int64
	counts []int64
	_      [64]byte // keeps neighbouring shards' mutexes off one cache line
}

// NewMonitor starts a Monitor for ref, whose histograms must pass Check.
func NewMonitor(ref Reference, cfg Config) (*Monitor, error) {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Buckets <= 0 {
		cfg.Buckets = DefaultBuckets
	}
	if cfg.Buckets > MaxBuckets {
		return nil, fmt.Errorf("drift monitor: %d buckets, at most %d are allowed", cfg.Buckets, MaxBuckets)
	}
	if cfg.Window < time.Duration(cfg.Buckets) {
		return nil, fmt.Errorf("drift monitor: window %v is too short for %d buckets", cfg.Window, cfg.Buckets)
	}
	if cfg.MinSamples <= 0 {
		cfg.MinSamples = DefaultMinSamples
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Monitor{
		nf:         len(ref.Features),
		sub:        int64(cfg.Window) / int64(cfg.Buckets),
		buckets:    cfg.Buckets,
		minSamples: cfg.MinSamples,
		now:        cfg.Now,
	}
	for _, g := range [][]Hist{ref.Features, ref.Outputs} {
		for i := range g {
			h := g[i]
			if err := h.Check(); err != nil {
				return nil, fmt.Errorf("drift monitor: %w", err)
			}
			h.Edges = append([]float64(nil), h.Edges...)
			h.Counts = append([]float64(nil), h.Counts...)
			m.cols = append(m.cols, column{ref: h, share: shares(h), off: m.counters})
			m.counters += len(h.Counts) + 1
		}
	}
	m.shards = max(1, min(runtime.GOMAXPROCS(0), maxShards, shardBudget/max(m.counters, 1)))
	m.created = m.now().UnixNano()
	s := m.newSlot(m.created)
	m.ring = make([]*slot, 0, m.buckets+1)
	m.ring = append(m.ring, s)
	m.cur.Store(s)
	return m, nil
}

func shares(h Hist) []float64 {
	t := h.Total()
	s := make([]float64, len(h.Counts)+1)
	for i, c := range h.Counts {
		s[i] = c / t
	}
	s[len(h.Counts)] = h.Missing / t
	return s
}

func (m *Monitor) newSlot(start int64) *slot {
	s := &slot{start: start, end: start + m.sub, shards: make([]shard, m.shards)}
	for i := range s.shards {
		s.shards[i].counts = make([]int64, m.counters)
	}
	return s
}

// Observe counts one row: its feature values and the model's outputs for
// it, in Reference order; NaN is missing. Values past the reference's
// columns are ignored; a short or nil slice counts nothing for the columns
// it lacks (e.g. outputs of a failed prediction). It does not allocate.
func (m *Monitor) Observe(features, outputs []float32) {
	sh := m.slotAt(m.now().UnixNano()).lock()
	sh.rows++
	m.countLocked(sh, m.cols[:m.nf], features)
	m.countLocked(sh, m.cols[m.nf:], outputs)
	sh.mu.Unlock()
}

// lock locks and returns a free shard, or waits for one if all are busy.
func (s *slot) lock() *shard {
	n := len(s.shards)
	first := 0
	if n > 1 {
		first = int(rand.Uint32() % uint32(n))
	}
	for i := range n {
		sh := &s.shards[(first+i)%n]
		if sh.mu.TryLock() {
			return sh
		}
	}
	sh := &s.shards[first]
	sh.mu.Lock()
	return sh
}

func (m *Monitor) countLocked(sh *shard, cols []column, vals []float32) {
	if len(vals) > len(cols) {
		vals = vals[:len(cols)]
	}
	for i, v := range vals {
		c := &cols[i]
		if v != v {
			sh.counts[c.off+len(c.ref.Counts)]++
			continue
		}
		sh.counts[c.off+c.ref.bin(float64(v))]++
	}
}

// slotAt returns the slot for time t, starting a new sub-window if t has
// passed the current one. A clock that goes back counts into the current.
func (m *Monitor) slotAt(t int64) *slot {
	if s := m.cur.Load(); t < s.end {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.advanceLocked(t)
}

// advanceLocked makes the sub-window holding t current (if t is past the
// current one) and forgets sub-windows that fell out of the window.
func (m *Monitor) advanceLocked(t int64) *slot {
	s := m.cur.Load()
	if t < s.end {
		return s
	}
	start := s.start + (t-s.start)/m.sub*m.sub
	oldest := start - int64(m.buckets-1)*m.sub
	drop := 0
	for drop < len(m.ring) && m.ring[drop].start < oldest {
		drop++
	}
	m.ring = append(m.ring[:0], m.ring[drop:]...)
	ns := m.newSlot(start)
	m.ring = append(m.ring, ns)
	m.cur.Store(ns)
	return ns
}

// Drift is one feature's or output's drift over the window.
type Drift struct {
	Name string  `json:"name"`
	PSI  float64 `json:"psi"`
	// Flagged is PSI > FlagPSI with enough samples.
	Flagged bool `json:"flagged"`
	// Enough says whether Samples reached Config.MinSamples; without it
	// PSI is 0 and the caller should say "not enough data".
	Enough          bool    `json:"enough"`
	Samples         int64   `json:"samples"` // values seen, missing ones included
	MissingShare    float64 `json:"missingShare"`
	RefMissingShare float64 `json:"refMissingShare"`
}

// Report is the drift of every feature and output over the window.
type Report struct {
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Samples  int64     `json:"samples"` // rows observed
	Features []Drift   `json:"features"`
	Outputs  []Drift   `json:"outputs"`
}

// Report computes the drift over the window ending now.
func (m *Monitor) Report() Report {
	t := m.now().UnixNano()
	m.mu.Lock()
	cur := m.advanceLocked(t)
	slots := append([]*slot(nil), m.ring...)
	m.mu.Unlock()

	r := Report{
		Start: time.Unix(0, max(m.created, cur.start-int64(m.buckets-1)*m.sub)).UTC(),
		End:   time.Unix(0, max(t, cur.start)).UTC(),
	}
	sum := make([]int64, m.counters)
	for _, s := range slots {
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			r.Samples += sh.rows
			for j, n := range sh.counts {
				sum[j] += n
			}
			sh.mu.Unlock()
		}
	}
	act := make([]float64, 0, MaxBins+1)
	for i := range m.cols {
		c := &m.cols[i]
		k := len(c.ref.Counts)
		d := Drift{Name: c.ref.Name, RefMissingShare: c.share[k]}
		act = act[:0]
		for _, n := range sum[c.off : c.off+k+1] {
			d.Samples += n
			act = append(act, float64(n))
		}
		if d.Samples > 0 {
			d.MissingShare = act[k] / float64(d.Samples)
		}
		if d.Enough = d.Samples >= m.minSamples; d.Enough {
			d.PSI = PSI(c.share, act)
			d.Flagged = d.PSI > FlagPSI
		}
		if i < m.nf {
			r.Features = append(r.Features, d)
		} else {
			r.Outputs = append(r.Outputs, d)
		}
	}
	return r
}

// PSI is the population stability index of actual against expected, two
// histograms over the same bins given as weights (counts or shares; each
// is normalised): Σ (aᵢ − eᵢ)·ln(aᵢ/eᵢ), each share floored at Epsilon so
// empty bins stay finite. It is 0 if either histogram is empty and NaN if
// their lengths differ.
func PSI(expected, actual []float64) float64 {
	if len(expected) != len(actual) {
		return math.NaN()
	}
	var te, ta float64
	for i := range expected {
		te += expected[i]
		ta += actual[i]
	}
	if !(te > 0) || !(ta > 0) {
		return 0
	}
	var psi float64
	for i := range expected {
		e := math.Max(expected[i]/te, Epsilon)
		a := math.Max(actual[i]/ta, Epsilon)
		psi += (a - e) * math.Log(a/e)
	}
	return psi
}
