package outcomes

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

// The names CheckName accepts and refuses, at its boundaries.
func TestCheckNameTable(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"converted", true},
		{"a", true},
		{"Z", true},
		{"click_through.rate-7d", true},
		{"a9", true},
		{strings.Repeat("x", MaxNameLen), true},
		{strings.Repeat("x", MaxNameLen+1), false},
		{"", false},
		{"9lives", false},
		{"_hidden", false},
		{".dot", false},
		{"-dash", false},
		{"a b", false},
		{"a/b", false},
		{"café", false},
		{"a\x00", false},
	} {
		err := CheckName("metric", c.name)
		if (err == nil) != c.ok {
			t.Errorf("CheckName(%q) = %v, want ok %v", c.name, err, c.ok)
			continue
		}
		if err != nil {
			if e := errs.As(err); e.Code != errs.InvalidArgument || e.Field != "metric" {
				t.Errorf("CheckName(%q): code %q field %q, want invalid_argument on metric", c.name, e.Code, e.Field)
			}
		}
	}
}

// Check's boundaries: the largest accepted values pass, one past them
// fails, naming the index of the first bad outcome.
func TestCheckBoundaries(t *testing.T) {
	good := func() Posted { return Posted{RequestID: "r", Name: "converted", Value: 1} }
	for _, c := range []struct {
		name  string
		edit  func(*Posted)
		field string // "" = accepted
	}{
		{"request id of 128 bytes", func(p *Posted) { p.RequestID = strings.Repeat("r", MaxRequestID) }, ""},
		{"request id of 129 bytes", func(p *Posted) { p.RequestID = strings.Repeat("r", MaxRequestID+1) }, "outcomes[1].requestId"},
		{"instance at the bound", func(p *Posted) { p.Instance = MaxInstance }, ""},
		{"instance past the bound", func(p *Posted) { p.Instance = MaxInstance + 1 }, "outcomes[1].instance"},
		{"value 0", func(p *Posted) { p.Value = 0 }, ""},
		{"negative value (a refund)", func(p *Posted) { p.Value = -12.5 }, ""},
		{"huge finite value", func(p *Posted) { p.Value = math.MaxFloat64 }, ""},
		{"-Inf", func(p *Posted) { p.Value = math.Inf(-1) }, "outcomes[1].value"},
		{"a time in the past", func(p *Posted) { p.At = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			second := good()
			c.edit(&second)
			err := Check([]Posted{good(), second})
			if c.field == "" {
				if err != nil {
					t.Fatalf("Check = %v, want accepted", err)
				}
				return
			}
			if e := errs.As(err); err == nil || e.Field != c.field || e.Code != errs.InvalidArgument {
				t.Fatalf("Check = %v, want invalid_argument on %s", err, c.field)
			}
		})
	}
	// A batch of exactly MaxBatch is accepted; the first bad one of
	// several is the one named.
	full := make([]Posted, MaxBatch)
	for i := range full {
		full[i] = good()
	}
	if err := Check(full); err != nil {
		t.Errorf("Check(%d outcomes) = %v", MaxBatch, err)
	}
	full[7].Name, full[9].Value = "", math.NaN()
	if e := errs.As(Check(full)); e == nil || e.Field != "outcomes[7].name" {
		t.Errorf("two bad outcomes: %v, want the first, outcomes[7].name", e)
	}
}

// recStore is a Store that records what it is asked, and fails on demand.
type recStore struct {
	mu        sync.Mutex
	joins     []Join
	outs      []Outcome
	putCalls  int
	deletes   []time.Time
	failWrite error
	failJoins error
	failPut   error
}

func (s *recStore) WriteJoins(_ context.Context, js []Join) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failWrite != nil {
		return s.failWrite
	}
	s.joins = append(s.joins, js...)
	return nil
}

func (s *recStore) Joins(_ context.Context, ids []string) ([]Join, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failJoins != nil {
		return nil, s.failJoins
	}
	var out []Join
	for _, j := range s.joins {
		for _, id := range ids {
			if j.RequestID == id {
				out = append(out, j)
			}
		}
	}
	return out, nil
}

func (s *recStore) Put(_ context.Context, os []Outcome) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putCalls++
	if s.failPut != nil {
		return nil, s.failPut
	}
	fresh := make([]bool, len(os))
	for i := range os {
		fresh[i] = true
	}
	s.outs = append(s.outs, os...)
	return fresh, nil
}

func (s *recStore) Arms(context.Context, Query) ([]Arm, error)        { return nil, nil }
func (s *recStore) Pairs(context.Context, Query, int) ([]Pair, error) { return nil, nil }

func (s *recStore) DeleteBefore(_ context.Context, t time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes = append(s.deletes, t)
	return 1, nil
}

func (s *recStore) written() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.joins)
}

// What Post does with each outcome: the score of its instance (NaN past
// the scores), the caller's time kept in UTC or now, the version and unit
// of its own join; and the store's failures as unavailable.
func TestPostJoinsTable(t *testing.T) {
	created := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	paris := time.FixedZone("CEST", 2*3600)
	st := &recStore{joins: []Join{
		{RequestID: "s", Model: "fraud", Version: 4, Unit: "u1", Created: created, Scores: []float32{0.25, 0.5}},
		{RequestID: "n", Model: "fraud", Version: 5, Unit: "u2", Created: created},
	}}
	s := &Service{Store: st, Now: func() time.Time { return now }}
	all := func(string) bool { return true }
	for _, c := range []struct {
		name    string
		posted  Posted
		score   float64 // NaN: none
		at      time.Time
		version int
	}{
		{"instance 0 scored", Posted{RequestID: "s", Name: "y", Value: 1}, 0.25, now, 4},
		{"instance 1 scored", Posted{RequestID: "s", Instance: 1, Name: "y", Value: 0}, 0.5, now, 4},
		{"instance past the scores", Posted{RequestID: "s", Instance: 2, Name: "y", Value: 1}, math.NaN(), now, 4},
		{"no scores", Posted{RequestID: "n", Name: "y", Value: 1}, math.NaN(), now, 5},
		{"the caller's time, in UTC", Posted{RequestID: "n", Name: "z", Value: 1, At: time.Date(2026, 5, 1, 3, 0, 0, 0, paris)}, math.NaN(), time.Date(2026, 5, 1, 1, 0, 0, 0, time.UTC), 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(st.outs)
			res, err := s.Post(context.Background(), all, []Posted{c.posted})
			if err != nil || res.Accepted != 1 {
				t.Fatalf("Post = %+v, %v", res, err)
			}
			o := st.outs[before]
			if math.IsNaN(c.score) != math.IsNaN(o.Score) || (!math.IsNaN(c.score) && o.Score != c.score) {
				t.Errorf("score %v, want %v", o.Score, c.score)
			}
			if !o.At.Equal(c.at) || o.At.Location() != time.UTC {
				t.Errorf("at %v, want %v in UTC", o.At, c.at)
			}
			if o.Version != c.version || o.Created != created || o.Model != "fraud" {
				t.Errorf("joined to %s@%d created %v", o.Model, o.Version, o.Created)
			}
		})
	}

	// Only unknown ids: nothing is put.
	calls := st.putCalls
	res, err := s.Post(context.Background(), all, []Posted{{RequestID: "nope", Name: "y", Value: 1}})
	if err != nil || res.Unknown != 1 || res.Accepted != 0 || st.putCalls != calls {
		t.Errorf("all unknown: %+v, %v, Put called %d times", res, err, st.putCalls-calls)
	}
	// More unknown ids than the result names: all counted, a few named.
	many := make([]Posted, maxUnknownIDs+5)
	for i := range many {
		many[i] = Posted{RequestID: "x" + strings.Repeat("y", i), Name: "y", Value: 1}
	}
	res, _ = s.Post(context.Background(), all, many)
	if res.Unknown != len(many) || len(res.UnknownIDs) != maxUnknownIDs {
		t.Errorf("%d unknown: counted %d, named %d (want %d)", len(many), res.Unknown, len(res.UnknownIDs), maxUnknownIDs)
	}
	// A bad batch is refused before the store is read.
	st.failJoins = errors.New("must not be called")
	if _, err := s.Post(context.Background(), all, nil); errs.CodeOf(err) != errs.InvalidArgument {
		t.Errorf("empty batch: %v, want invalid_argument", err)
	}
	// The store's failures are unavailable (retryable), reads and writes.
	if _, err := s.Post(context.Background(), all, []Posted{{RequestID: "s", Name: "y", Value: 1}}); errs.CodeOf(err) != errs.Unavailable {
		t.Errorf("Joins failing: %v, want unavailable", err)
	}
	st.failJoins, st.failPut = nil, errors.New("disk full")
	if _, err := s.Post(context.Background(), all, []Posted{{RequestID: "s", Name: "y", Value: 1}}); errs.CodeOf(err) != errs.Unavailable || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Put failing: %v, want unavailable with the cause", err)
	}
}

// Joiner.Add's refusals and defaults.
func TestJoinerAddTable(t *testing.T) {
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	st := &recStore{}
	w := NewJoiner(st, JoinerConfig{Buffer: 2, Now: func() time.Time { return at }})
	if w.Add(Join{RequestID: strings.Repeat("r", MaxRequestID+1)}) {
		t.Error("a request id past MaxRequestID was queued")
	}
	d0 := w.Dropped() // whether that refusal counts as a drop is not pinned here
	if !w.Add(Join{RequestID: "a"}) || !w.Add(Join{RequestID: "b", Created: at.Add(-time.Minute)}) {
		t.Fatal("joins within the buffer refused")
	}
	if w.Add(Join{RequestID: "c"}) || w.Dropped() != d0+1 {
		t.Errorf("past the buffer of 2: dropped %d, want %d", w.Dropped(), d0+1)
	}
	w.Flush(context.Background())
	if len(st.joins) != 2 || !st.joins[0].Created.Equal(at) || !st.joins[1].Created.Equal(at.Add(-time.Minute)) {
		t.Errorf("joins %+v: want the zero Created set to now, a given one kept", st.joins)
	}
	// A store that fails: the batch is counted dropped, Flush still ends.
	st.failWrite = errors.New("locked")
	w.Add(Join{RequestID: "d"})
	w.Add(Join{RequestID: "e"})
	w.Flush(context.Background())
	if w.Dropped() != d0+3 || w.Written() != 2 {
		t.Errorf("after a failed write: dropped %d written %d, want %d and 2", w.Dropped(), w.Written(), d0+3)
	}
}

// Joiner.Run, on a fake clock: a partial batch waits at most FlushEvery,
// a full one is written at once, retention deletes what is older than
// Retention every CleanEvery, and the end writes what is buffered and
// refuses more.
func TestJoinerRunTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		st := &recStore{}
		w := NewJoiner(st, JoinerConfig{BatchSize: 3, FlushEvery: time.Second, Retention: time.Hour, CleanEvery: 10 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()

		w.Add(Join{RequestID: "a"})
		synctest.Wait()
		if st.written() != 0 {
			t.Fatalf("a partial batch written before FlushEvery")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if st.written() != 1 {
			t.Fatalf("after FlushEvery: %d written, want 1", st.written())
		}
		start := time.Now()
		for _, id := range []string{"b", "c", "d"} {
			w.Add(Join{RequestID: id})
		}
		synctest.Wait()
		if st.written() != 4 || time.Since(start) != 0 {
			t.Fatalf("a full batch: %d written after %v, want 4 at once", st.written(), time.Since(start))
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		st.mu.Lock()
		deletes := append([]time.Time(nil), st.deletes...)
		st.mu.Unlock()
		if want := t0.Add(10 * time.Second).Add(-time.Hour); len(deletes) != 1 || !deletes[0].Equal(want) {
			t.Fatalf("retention: DeleteBefore %v, want once, at the tick 10 s in, with now − 1h (%v)", deletes, want)
		}
		w.Add(Join{RequestID: "e"})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if st.written() != 5 {
			t.Errorf("at the end: %d written, want the buffered one too (5)", st.written())
		}
		if w.Add(Join{RequestID: "f"}) {
			t.Error("Add after Run ended queued a join")
		}
	})
}
