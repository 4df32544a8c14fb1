// Package featuretest is the conformance suite every features.Source
// passes (redisfeat against a real redis-server, pgfeat against a real
// PostgreSQL): values and their absence, unknown entities, timestamps, a
// batch in one call, integer entities, the context's deadline, and the
// read-through fill of a Filler.
package featuretest

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/features"
)

// Store is a Source under test and how to put rows into it.
type Store struct {
	Source features.Source
	// Put writes entity's values of view v (nil: the field is absent or
	// NULL) and its timestamp (zero: none), creating what the store needs
	// (a table) on first use.
	Put func(ctx context.Context, v *features.View, entity string, values []*float64, at time.Time) error
	// Stall (optional) makes the store stop answering until the returned
	// func is called (SIGSTOP, a lock): Lookup must return at ctx's
	// deadline with an error.
	Stall func(t *testing.T) (resume func())
}

// Run runs the suite; open makes a fresh store for each subtest.
func Run(t *testing.T, open func(t *testing.T) Store) {
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		t.Cleanup(cancel)
		return c
	}
	view := func(name string) *features.View {
		return &features.View{Name: name, Entity: "card_id", Fields: []string{"declines5m", "avg_amount"}}
	}
	f := func(v float64) *float64 { return &v }
	lookup := func(t *testing.T, s Store, v *features.View, ents ...string) []features.Row {
		t.Helper()
		out := make([]features.Row, len(ents))
		for i := range out {
			out[i].Values = make([]float64, len(v.Fields))
		}
		if err := s.Source.Lookup(ctx(t), v, ents, out); err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		return out
	}

	t.Run("ValuesAndAbsence", func(t *testing.T) {
		s := open(t)
		v := view("card_stats")
		at := time.Unix(1_700_000_000, 0)
		if err := s.Put(ctx(t), v, "c1", []*float64{f(3), f(12.25)}, at); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx(t), v, "c2", []*float64{f(0), nil}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		out := lookup(t, s, v, "c1", "nobody", "c2")
		if !out[0].Found || out[0].Values[0] != 3 || out[0].Values[1] != 12.25 || !out[0].At.Equal(at) {
			t.Errorf("c1: %+v", out[0])
		}
		if out[1].Found {
			t.Errorf("an unknown entity was found: %+v", out[1])
		}
		if !out[2].Found || out[2].Values[0] != 0 || !math.IsNaN(out[2].Values[1]) || !out[2].At.IsZero() {
			t.Errorf("c2 (0 and an absent value must differ; no timestamp): %+v", out[2])
		}
	})
	t.Run("Batch", func(t *testing.T) {
		s := open(t)
		v := view("card_batch")
		ents := make([]string, 100)
		for i := range ents {
			ents[i] = "card-" + strconv.Itoa(i)
			if i%2 == 0 {
				if err := s.Put(ctx(t), v, ents[i], []*float64{f(float64(i)), f(float64(i) / 4)}, time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		out := lookup(t, s, v, ents...)
		for i, r := range out {
			if r.Found != (i%2 == 0) || r.Found && (r.Values[0] != float64(i) || r.Values[1] != float64(i)/4) {
				t.Fatalf("entity %d: %+v", i, r)
			}
		}
	})
	t.Run("ManyFields", func(t *testing.T) {
		// 50 features (a store may read them another way than a few):
		// values, an absent one, a timestamp, an unknown entity.
		s := open(t)
		v := &features.View{Name: "wide_stats", Entity: "card_id"}
		vals := make([]*float64, 50)
		for k := range 50 {
			v.Fields = append(v.Fields, "f"+strconv.Itoa(k))
			if k != 7 {
				vals[k] = f(float64(k) + 0.5)
			}
		}
		at := time.Unix(1_700_000_200, 0)
		if err := s.Put(ctx(t), v, "w1", vals, at); err != nil {
			t.Fatal(err)
		}
		out := lookup(t, s, v, "w1", "nobody")
		r := out[0]
		if !r.Found || !r.At.Equal(at) || !math.IsNaN(r.Values[7]) || out[1].Found {
			t.Fatalf("w1: found %v at %v f7 %v; nobody found %v", r.Found, r.At, r.Values[7], out[1].Found)
		}
		for k, x := range r.Values {
			if k != 7 && x != float64(k)+0.5 {
				t.Errorf("f%d = %v, want %v", k, x, float64(k)+0.5)
			}
		}
		// A view of fewer fields of the same data reads only those.
		narrow := &features.View{Name: "wide_stats", Entity: "card_id", Fields: []string{"f49", "f3"}}
		out = lookup(t, s, narrow, "w1")
		if out[0].Values[0] != 49.5 || out[0].Values[1] != 3.5 {
			t.Errorf("narrow view: %v", out[0].Values)
		}
	})
	t.Run("IntEntity", func(t *testing.T) {
		s := open(t)
		v := &features.View{Name: "user_stats", Entity: "user_id", EntityInt: true, Fields: []string{"n"}}
		if err := s.Put(ctx(t), v, "42", []*float64{f(7)}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		out := lookup(t, s, v, "42", "43")
		if !out[0].Found || out[0].Values[0] != 7 || out[1].Found {
			t.Errorf("int entities: %+v", out)
		}
	})
	t.Run("Deadline", func(t *testing.T) {
		s := open(t)
		v := view("card_stats")
		c, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Millisecond))
		defer cancel()
		out := []features.Row{{Values: make([]float64, 2)}}
		if err := s.Source.Lookup(c, v, []string{"c1"}, out); err == nil {
			t.Error("Lookup with a passed deadline returned no error")
		}
		if s.Stall == nil {
			return
		}
		resume := s.Stall(t)
		defer resume()
		c, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Source.Lookup(c, v, []string{"c1"}, out) }()
		select {
		case err := <-done:
			if err == nil {
				t.Error("a stalled store answered")
			} else if !errors.Is(err, context.DeadlineExceeded) && c.Err() == nil {
				t.Errorf("returned before the deadline: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Lookup on a stalled store did not return at its deadline (waited 5s for a 50ms deadline)")
		}
	})
	t.Run("Fill", func(t *testing.T) {
		s := open(t)
		fl, ok := s.Source.(features.Filler)
		if !ok {
			t.Skip("not a Filler")
		}
		v := view("card_fill")
		at := time.Unix(1_700_000_100, 0)
		rows := []features.Row{{Found: true, Values: []float64{1, math.NaN()}, At: at}}
		if err := fl.Fill(ctx(t), v, []string{"f1"}, rows); err != nil {
			t.Fatal(err)
		}
		out := lookup(t, s, v, "f1")
		if !out[0].Found || out[0].Values[0] != 1 || !math.IsNaN(out[0].Values[1]) || !out[0].At.Equal(at) {
			t.Errorf("filled row read back as %+v", out[0])
		}
	})
}
