package features

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Store is one feature store in the chain: its tier (Redis or Database)
// and its Source (a Filler is filled read-through, a Pinger probed by
// the breaker).
type Store struct {
	Tier   Origin
	Source Source
}

// Metrics receives enrichment's figures (telemetry.Metrics implements it).
type Metrics interface {
	// FeatureLookup: one tier was asked for entities of view: how many it
	// had, how many not, how long it took; failed: it did not answer.
	FeatureLookup(view, tier string, hits, misses int, took time.Duration, failed bool)
	// FeatureBreaker: a store's breaker opened (true) or closed.
	FeatureBreaker(store string, open bool)
}

// Config is a Set's stores and bounds.
type Config struct {
	Stores  []Store // in order: Redis, then Database
	Breaker BreakerConfig
	Metrics Metrics          // nil: none
	Now     func() time.Time // nil: time.Now
	// FillQueue bounds the read-through writes waiting (default 1024; a
	// full queue drops the write: the next miss reads the database again).
	FillQueue int
}

// ViewConfig is one view as a model version reads it.
type ViewConfig struct {
	View     View
	Defaults []float64 // one per View.Fields
	MaxAge   time.Duration
	Timeout  time.Duration
	// MemoryBytes and MemoryTTL bound the memory tier.
	MemoryBytes int64
	MemoryTTL   time.Duration
}

func (c ViewConfig) key() string {
	var b strings.Builder
	b.WriteString(c.View.Name)
	b.WriteByte('|')
	b.WriteString(c.View.Entity)
	b.WriteByte('|')
	b.WriteString(strings.Join(c.View.Fields, ","))
	b.WriteByte('|')
	for _, d := range c.Defaults {
		b.WriteString(FormatValue(d))
		b.WriteByte(',')
	}
	b.WriteString("|" + strconv.FormatBool(c.View.EntityInt) + "|" + c.MaxAge.String() + "|" + c.Timeout.String() + "|" + strconv.FormatInt(c.MemoryBytes, 10) + "|" + c.MemoryTTL.String())
	return b.String()
}

// Set is the process's feature stores and the enrichers of the views
// loaded versions read. Run owns its goroutines (the breakers' probes and
// the read-through writes).
type Set struct {
	stores  []chainStore
	metrics Metrics
	now     func() time.Time
	fills   chan fillJob

	mu    sync.Mutex // guards views
	views map[string]*Enricher
}

type chainStore struct {
	Store
	name    string
	breaker *Breaker
}

type fillJob struct {
	to       Filler
	view     *View
	entities []string
	rows     []Row
}

// MaxViews bounds the enrichers a Set keeps (one per distinct view
// configuration of the loaded versions); past it the oldest is dropped
// (a version still using it keeps its own, no longer shared).
const MaxViews = 1024

// NewSet builds a Set. Stores without a Pinger are probed by a Lookup of
// nothing.
func NewSet(cfg Config) *Set {
	s := &Set{metrics: cfg.Metrics, now: cfg.Now, views: map[string]*Enricher{}}
	if s.now == nil {
		s.now = time.Now
	}
	q := cfg.FillQueue
	if q <= 0 {
		q = 1024
	}
	s.fills = make(chan fillJob, q)
	for _, st := range cfg.Stores {
		cs := chainStore{Store: st, name: st.Tier.String()}
		ping := func(ctx context.Context) error {
			if p, ok := st.Source.(Pinger); ok {
				return p.Ping(ctx)
			}
			return st.Source.Lookup(ctx, &View{}, nil, nil)
		}
		var report func(string, bool)
		if s.metrics != nil {
			report = s.metrics.FeatureBreaker
			s.metrics.FeatureBreaker(cs.name, false)
		}
		cs.breaker = NewBreaker(cs.name, cfg.Breaker, ping, report)
		s.stores = append(s.stores, cs)
	}
	return s
}

// Stores is how many stores the set has (0: no feature store configured).
func (s *Set) Stores() int { return len(s.stores) }

// Breaker is the breaker of the store of tier t (nil: none).
func (s *Set) Breaker(t Origin) *Breaker {
	for _, st := range s.stores {
		if st.Tier == t {
			return st.breaker
		}
	}
	return nil
}

// Run runs the breakers' probes and the read-through writes until ctx is
// done.
func (s *Set) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, st := range s.stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.breaker.Run(ctx)
		}()
	}
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case j := <-s.fills:
			fctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = j.to.Fill(fctx, j.view, j.entities, j.rows)
			cancel()
		}
	}
}

// Enricher is the enricher of a view (shared by the versions that read
// the same view the same way).
func (s *Set) Enricher(c ViewConfig) *Enricher {
	k := c.key()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.views[k]; ok {
		return e
	}
	if len(s.views) >= MaxViews {
		var oldest string
		var at int64 = math.MaxInt64
		for k, e := range s.views {
			if e.made < at {
				oldest, at = k, e.made
			}
		}
		delete(s.views, oldest)
	}
	v := c.View
	v.Fields = append([]string(nil), c.View.Fields...)
	e := &Enricher{set: s, cfg: c, view: &v, mem: newMemory(c.MemoryBytes, c.MemoryTTL), made: s.now().UnixNano()}
	e.cfg.Defaults = append([]float64(nil), c.Defaults...)
	s.views[k] = e
	return e
}

// Enricher fills one view's fields: memory, then each store in order,
// within the budget.
type Enricher struct {
	set  *Set
	cfg  ViewConfig
	view *View
	mem  *memory
	made int64
}

// Fields is the view's filled fields, in order.
func (e *Enricher) Fields() []string { return e.view.Fields }

// MemoryBytes is what the view's memory tier holds now.
func (e *Enricher) MemoryBytes() (used int64, entries int) { return e.mem.bytes() }

// Lookup fills out[i] (Values and Origins sized len(Fields()) by Lookup
// when nil) for entities[i], within Budget(now, ctx's deadline,
// timeout): every field gets a value and an origin, a default when no tier
// had it in time. Duplicate entities are looked up once. It never returns
// later than the budget (plus the time to copy what arrived).
func (e *Enricher) Lookup(ctx context.Context, entities []string, out []Result) {
	now := e.set.now()
	dl, has := ctx.Deadline()
	budget := Budget(now, dl, has, e.cfg.Timeout)
	end := now.Add(budget)
	nf := len(e.view.Fields)
	for i := range out {
		if len(out[i].Values) != nf {
			out[i].Values = make([]float64, nf)
		}
		if len(out[i].Origins) != nf {
			out[i].Origins = make([]Origin, nf)
		}
	}
	// Unique entities, each with its row and the tier that had it.
	uniq, of := dedupe(entities)
	rows := make([]Row, len(uniq))
	flat := make([]float64, len(uniq)*nf)
	for i := range rows {
		rows[i].Values = flat[i*nf : (i+1)*nf : (i+1)*nf]
	}
	tier := make([]Origin, len(uniq))
	answered := make([]bool, len(uniq)) // some tier answered for it (found or not)
	var pending []int
	hits := 0
	for i, ent := range uniq {
		if e.mem.get(ent, now, &rows[i]) {
			tier[i], answered[i] = Memory, true
			hits++
		} else {
			pending = append(pending, i)
		}
	}
	e.observe(Memory, hits, len(pending), e.set.now().Sub(now), false)
	allAnswered := true
	for si := range e.set.stores {
		if len(pending) == 0 {
			break
		}
		st := &e.set.stores[si]
		if !st.breaker.Allow() {
			allAnswered = false
			continue
		}
		t0 := e.set.now()
		left := end.Sub(t0)
		if left <= 0 {
			allAnswered = false
			break
		}
		if si < len(e.set.stores)-1 {
			left /= 2 // leave the next store its turn when this one stalls
		}
		sctx, cancel := context.WithDeadline(ctx, t0.Add(left))
		ents := make([]string, len(pending))
		got := make([]Row, len(pending))
		for j, i := range pending {
			ents[j] = uniq[i]
			got[j].Values = rows[i].Values
		}
		err := st.Source.Lookup(sctx, e.view, ents, got)
		cancel()
		took := e.set.now().Sub(t0)
		if err != nil {
			// A caller gone, or a budget too short to blame the store for
			// missing it, says nothing about the store.
			timedOut := errors.Is(err, context.DeadlineExceeded) || sctxExpired(t0, left, e.set.now())
			if !errors.Is(ctx.Err(), context.Canceled) && !(timedOut && left < MinBlame) {
				st.breaker.Done(false)
			}
			for j := range got {
				for k := range got[j].Values {
					got[j].Values[k] = math.NaN()
				}
			}
			e.observe(st.Tier, 0, 0, took, true)
			allAnswered = false
			continue
		}
		st.breaker.Done(true)
		var next []int
		var fillEnts []string
		var fillRows []Row
		h := 0
		for j, i := range pending {
			r := got[j]
			if !r.Found {
				next = append(next, i)
				continue
			}
			h++
			rows[i].Found, rows[i].At = true, r.At
			tier[i], answered[i] = st.Tier, true
			e.mem.put(uniq[i], rows[i], now)
			if si > 0 {
				fillEnts = append(fillEnts, uniq[i])
				fillRows = append(fillRows, rows[i])
			}
		}
		e.observe(st.Tier, h, len(next), took, false)
		if len(fillEnts) > 0 {
			e.fillBefore(si, fillEnts, fillRows)
		}
		pending = next
	}
	if allAnswered {
		// Every store said it does not know these: remember that too.
		for _, i := range pending {
			rows[i].Found, answered[i] = false, true
			for k := range rows[i].Values {
				rows[i].Values[k] = math.NaN()
			}
			e.mem.put(uniq[i], rows[i], now)
		}
	}
	for i, u := range of {
		r := &rows[u]
		res := &out[i]
		for k := 0; k < nf; k++ {
			v := r.Values[k]
			switch {
			case !r.Found || v != v:
				res.Values[k], res.Origins[k] = e.cfg.Defaults[k], Default
			case e.cfg.MaxAge > 0 && !r.At.IsZero() && now.Sub(r.At) > e.cfg.MaxAge:
				res.Values[k], res.Origins[k] = v, Stale
			default:
				res.Values[k], res.Origins[k] = v, tier[u]
			}
		}
	}
}

// fillBefore queues read-through writes of rows to the stores before
// store si that can be filled; a full queue drops them.
func (e *Enricher) fillBefore(si int, ents []string, rows []Row) {
	for _, st := range e.set.stores[:si] {
		f, ok := st.Source.(Filler)
		if !ok || !st.breaker.Allow() {
			continue
		}
		cp := make([]Row, len(rows))
		for i, r := range rows {
			cp[i] = Row{Found: r.Found, At: r.At, Values: append([]float64(nil), r.Values...)}
		}
		select {
		case e.set.fills <- fillJob{to: f, view: e.view, entities: ents, rows: cp}:
		default:
		}
	}
}

func (e *Enricher) observe(t Origin, hits, misses int, took time.Duration, failed bool) {
	if e.set.metrics != nil && (hits+misses > 0 || failed) {
		e.set.metrics.FeatureLookup(e.view.Name, t.String(), hits, misses, took, failed)
	}
}

// MinBlame is the least budget a store must have had for a timeout to
// count against it in its breaker: requests with almost no time left
// would otherwise open the breaker of a healthy store.
const MinBlame = time.Millisecond

func sctxExpired(t0 time.Time, left time.Duration, now time.Time) bool { return now.Sub(t0) >= left }

// dedupe returns the distinct entities and, for each given one, its index
// among them.
func dedupe(ents []string) (uniq []string, of []int) {
	of = make([]int, len(ents))
	if len(ents) <= 1 {
		return ents, of
	}
	idx := make(map[string]int, len(ents))
	for i, e := range ents {
		j, ok := idx[e]
		if !ok {
			j = len(uniq)
			idx[e] = j
			uniq = append(uniq, e)
		}
		of[i] = j
	}
	return uniq, of
}
