// Package recordstest is the conformance suite of records.Store: every
// implementation must pass Run, from its own tests.
package recordstest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/records"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func inserts(rs ...records.Record) []records.Op {
	ops := make([]records.Op, len(rs))
	for i, r := range rs {
		ops[i] = records.Op{Record: r}
	}
	return ops
}

func ids(rs []records.Record) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.RequestID)
	}
	return fmt.Sprint(out)
}

// Run runs the conformance suite of records.Store. open returns a new,
// empty store for each subtest; it closes the store in t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) records.Store) {
	ctx := context.Background()
	list := func(t *testing.T, s records.Store, f records.Filter) []records.Record {
		t.Helper()
		rs, err := s.List(ctx, f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		return rs
	}
	write := func(t *testing.T, s records.Store, ops []records.Op) {
		t.Helper()
		if err := s.Write(ctx, ops); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}

	t.Run("ListFilters", func(t *testing.T) {
		s := open(t)
		write(t, s, inserts(
			records.Record{RequestID: "a1", Tenant: "acme", Model: "fraud", Version: 3, Outcome: "ok", InputHash: "h1", CreatedAt: t0, LatencyMs: 1.5},
			records.Record{RequestID: "a2", Tenant: "acme", Model: "fraud", Version: 4, Outcome: "invalid_argument", CreatedAt: t0.Add(time.Minute)},
			records.Record{RequestID: "b1", Tenant: "beta", Model: "fraud", Version: 3, Outcome: "ok", CreatedAt: t0.Add(2 * time.Minute), Input: []byte(`{"x":1}`)},
			records.Record{RequestID: "b2", Tenant: "beta", Model: "churn", Version: 1, Outcome: "ok", CreatedAt: t0.Add(3 * time.Minute)},
		))
		tests := []struct {
			name string
			f    records.Filter
			want string
		}{
			{"all, newest first", records.Filter{}, "[b2 b1 a2 a1]"},
			{"tenant acme sees only its own", records.Filter{Tenant: "acme"}, "[a2 a1]"},
			{"tenant beta sees only its own", records.Filter{Tenant: "beta"}, "[b2 b1]"},
			{"tenant asking for another's id", records.Filter{Tenant: "acme", RequestID: "b1"}, "[]"},
			{"request id", records.Filter{RequestID: "a2"}, "[a2]"},
			{"model", records.Filter{Model: "fraud"}, "[b1 a2 a1]"},
			{"model and version", records.Filter{Model: "fraud", Version: 3}, "[b1 a1]"},
			{"outcome", records.Filter{Outcome: "invalid_argument"}, "[a2]"},
			{"since is inclusive", records.Filter{Since: t0.Add(2 * time.Minute)}, "[b2 b1]"},
			{"limit", records.Filter{Limit: 1}, "[b2]"},
			{"everything at once", records.Filter{Tenant: "beta", Model: "fraud", Version: 3, Outcome: "ok", Since: t0}, "[b1]"},
			{"unknown tenant", records.Filter{Tenant: "nobody"}, "[]"},
			{"model globs", records.Filter{Models: []string{"fr*"}}, "[b1 a2 a1]"},
			{"model globs, several", records.Filter{Models: []string{"nope", "ch?rn"}}, "[b2]"},
			{"model globs with a tenant", records.Filter{Tenant: "beta", Models: []string{"fraud"}}, "[b1]"},
			{"empty model globs match nothing", records.Filter{Models: []string{}}, "[]"},
			{"glob semantics of path.Match, not SQL LIKE", records.Filter{Models: []string{"fraud_", "%"}}, "[]"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if got := ids(list(t, s, tc.f)); got != tc.want {
					t.Errorf("got %s, want %s", got, tc.want)
				}
			})
		}
		got := list(t, s, records.Filter{RequestID: "b1"})
		if len(got) != 1 {
			t.Fatalf("list b1: %+v", got)
		}
		r := got[0]
		if string(r.Input) != `{"x":1}` || r.Attempts != 1 || !r.CreatedAt.Equal(t0.Add(2*time.Minute)) || r.Model != "fraud" || r.Version != 3 || r.Tenant != "beta" || r.Outcome != "ok" {
			t.Errorf("round trip: %+v", r)
		}
		if got := list(t, s, records.Filter{RequestID: "a1"}); got[0].LatencyMs != 1.5 || got[0].InputHash != "h1" || got[0].Input != nil {
			t.Errorf("round trip a1: %+v", got[0])
		}
	})

	t.Run("Defaults", func(t *testing.T) {
		s := open(t)
		before := time.Now().Add(-time.Second)
		write(t, s, inserts(records.Record{RequestID: "r", Tenant: "acme"}, records.Record{RequestID: "q", Tenant: "acme", Attempts: 3, CreatedAt: t0}))
		r := list(t, s, records.Filter{RequestID: "r"})
		if len(r) != 1 || r[0].Attempts != 1 || r[0].CreatedAt.Before(before) || r[0].CreatedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("a record without attempts or time = %+v, want attempts 1, created about now", r)
		}
		if q := list(t, s, records.Filter{RequestID: "q"}); len(q) != 1 || q[0].Attempts != 3 {
			t.Errorf("attempts given are kept: %+v", q)
		}
	})

	t.Run("Limits", func(t *testing.T) {
		s := open(t)
		var rs []records.Record
		for i := range records.DefaultLimit + 5 {
			rs = append(rs, records.Record{RequestID: fmt.Sprint("r", i), CreatedAt: t0.Add(time.Duration(i) * time.Second)})
		}
		write(t, s, inserts(rs...))
		if got := list(t, s, records.Filter{}); len(got) != records.DefaultLimit || got[0].RequestID != fmt.Sprint("r", records.DefaultLimit+4) {
			t.Errorf("no limit: %d records, first %s; want the newest %d", len(got), got[0].RequestID, records.DefaultLimit)
		}
		if got := list(t, s, records.Filter{Limit: records.MaxLimit + 1}); len(got) != records.DefaultLimit+5 {
			t.Errorf("limit above the maximum: %d records, want all %d", len(got), records.DefaultLimit+5)
		}
	})

	t.Run("MaxBytes", func(t *testing.T) {
		// Records of 1 KiB of input written in batches whose times
		// interleave (the newest in the last batch): a listing stops
		// after the record that takes it past MaxBytes, newest first.
		s := open(t)
		input := []byte(`"` + strings.Repeat("x", 1<<10) + `"`)
		row := int64(0)
		for b := 0; b < 4; b++ {
			var ops []records.Op
			for i := 0; i < 25; i++ {
				row++
				ops = append(ops, records.Op{Row: row, Record: records.Record{RequestID: fmt.Sprint("r", i*4+b), Model: "m", Input: input,
					CreatedAt: t0.Add(time.Duration(i*4+b) * time.Second)}})
			}
			write(t, s, ops)
		}
		one := (&records.Record{RequestID: "r10", Model: "m", Input: input}).Bytes()
		for _, k := range []int64{1, 5, 12} {
			rs := list(t, s, records.Filter{Limit: 100, MaxBytes: k*one - 1})
			if int64(len(rs)) != k {
				t.Fatalf("MaxBytes of %d records less a byte: %d records", k, len(rs))
			}
			for i, r := range rs {
				if want := fmt.Sprint("r", 99-i); r.RequestID != want {
					t.Fatalf("MaxBytes %d: record %d is %s, want %s (newest first)", k*one-1, i, r.RequestID, want)
				}
			}
		}
		if rs := list(t, s, records.Filter{Limit: 100}); len(rs) != 100 {
			t.Errorf("the default MaxBytes cut 100 records of 1 KiB to %d", len(rs))
		}
	})

	t.Run("SameTimeNewestRowFirst", func(t *testing.T) {
		s := open(t)
		write(t, s, []records.Op{
			{Row: 1, Record: records.Record{RequestID: "first", CreatedAt: t0}},
			{Row: 2, Record: records.Record{RequestID: "second", CreatedAt: t0}},
		})
		if got := ids(list(t, s, records.Filter{})); got != "[second first]" {
			t.Errorf("got %s, want [second first]", got)
		}
	})

	t.Run("Pages", func(t *testing.T) {
		s := open(t)
		var ops []records.Op
		for i := 0; i < 7; i++ { // pairs created at the same time: the row breaks the tie
			ops = append(ops, records.Op{Row: int64(i + 1), Record: records.Record{RequestID: fmt.Sprint("r", i), Model: "m", CreatedAt: t0.Add(time.Duration(i/2) * time.Second)}})
		}
		write(t, s, ops)
		var got []string
		f := records.Filter{Model: "m", Limit: 3}
		for page := 0; page < 10; page++ {
			rs := list(t, s, f)
			if len(rs) > 3 {
				t.Fatalf("a page of %d, limit 3", len(rs))
			}
			if len(rs) == 0 {
				break
			}
			for _, r := range rs {
				got = append(got, r.RequestID)
			}
			last := rs[len(rs)-1]
			if last.Row == 0 {
				t.Fatal("List left Row unset")
			}
			f.Before = &records.Position{CreatedAt: last.CreatedAt, Row: last.Row}
		}
		if fmt.Sprint(got) != "[r6 r5 r4 r3 r2 r1 r0]" {
			t.Errorf("pages: %v, want every record once, newest first", got)
		}
	})

	t.Run("Bumps", func(t *testing.T) {
		s := open(t)
		write(t, s, []records.Op{
			{Row: 10, Record: records.Record{RequestID: "x", Tenant: "acme", CreatedAt: t0}},
			{Row: 11, Record: records.Record{RequestID: "x", Tenant: "beta", CreatedAt: t0.Add(time.Hour)}},
			{Row: 12, Record: records.Record{RequestID: "y", Tenant: "acme", CreatedAt: t0}},
			// A bump after its insert, in the same Write, finds it.
			{Bump: true, Row: 12, Record: records.Record{RequestID: "y", Tenant: "acme"}},
		})
		write(t, s, []records.Op{
			// By tenant and request id: per tenant.
			{Bump: true, Record: records.Record{Tenant: "acme", RequestID: "x"}},
			// By row.
			{Bump: true, Row: 11},
			{Bump: true, Row: 11},
			// Unknown records: nothing to bump, not an error.
			{Bump: true, Record: records.Record{Tenant: "acme", RequestID: "nobody"}},
			{Bump: true, Row: 999},
		})
		want := map[string]int{"acme x": 2, "beta x": 3, "acme y": 2}
		for _, r := range list(t, s, records.Filter{}) {
			if k := r.Tenant + " " + r.RequestID; r.Attempts != want[k] {
				t.Errorf("%s: attempts %d, want %d", k, r.Attempts, want[k])
			}
		}
	})

	t.Run("Cached", func(t *testing.T) {
		// Record.Cached (instances answered from the prediction cache)
		// round trips, and a bump keeps it.
		s := open(t)
		write(t, s, []records.Op{
			{Row: 1, Record: records.Record{RequestID: "none", Tenant: "acme", CreatedAt: t0}},
			{Row: 2, Record: records.Record{RequestID: "some", Tenant: "acme", CreatedAt: t0, Cached: 3}},
			{Row: 3, Record: records.Record{RequestID: "all", Tenant: "acme", CreatedAt: t0, Cached: 1000}},
		})
		write(t, s, []records.Op{{Bump: true, Row: 2}})
		want := map[string]int{"none": 0, "some": 3, "all": 1000}
		got := list(t, s, records.Filter{})
		if len(got) != 3 {
			t.Fatalf("listed %d records, want 3", len(got))
		}
		for _, r := range got {
			if r.Cached != want[r.RequestID] {
				t.Errorf("%s: cached %d, want %d", r.RequestID, r.Cached, want[r.RequestID])
			}
		}
	})

	t.Run("Features", func(t *testing.T) {
		// Record.Features (the enrichment: entities, values, sources)
		// round trips, and a bump keeps it; a record without is nil.
		s := open(t)
		feat := []byte(`[{"entity":"c1","values":{"declines5m":3},"sources":{"declines5m":"redis"}}]`)
		write(t, s, []records.Op{
			{Row: 1, Record: records.Record{RequestID: "none", Tenant: "acme", CreatedAt: t0}},
			{Row: 2, Record: records.Record{RequestID: "some", Tenant: "acme", CreatedAt: t0, Features: feat}},
		})
		write(t, s, []records.Op{{Bump: true, Row: 2}})
		got := list(t, s, records.Filter{})
		if len(got) != 2 {
			t.Fatalf("listed %d records, want 2", len(got))
		}
		for _, r := range got {
			want := []byte(nil)
			if r.RequestID == "some" {
				want = feat
			}
			if string(r.Features) != string(want) || (want == nil) != (r.Features == nil) {
				t.Errorf("%s: features %q, want %q", r.RequestID, r.Features, want)
			}
		}
	})

	t.Run("Outputs", func(t *testing.T) {
		// Record.Outputs (the answer the caller got) round trips, with
		// features beside it, and a bump keeps it; a record without is nil.
		s := open(t)
		outs := []byte(`[{"riskScore":0.8455931,"label":"fraud"}]`)
		write(t, s, []records.Op{
			{Row: 1, Record: records.Record{RequestID: "none", Tenant: "acme", CreatedAt: t0}},
			{Row: 2, Record: records.Record{RequestID: "some", Tenant: "acme", CreatedAt: t0, Outputs: outs, Features: []byte(`[]`)}},
		})
		write(t, s, []records.Op{{Bump: true, Row: 2}})
		got := list(t, s, records.Filter{})
		if len(got) != 2 {
			t.Fatalf("listed %d records, want 2", len(got))
		}
		for _, r := range got {
			want := []byte(nil)
			if r.RequestID == "some" {
				want = outs
				if string(r.Features) != "[]" || r.Attempts != 2 {
					t.Errorf("some: features %q attempts %d", r.Features, r.Attempts)
				}
			}
			if string(r.Outputs) != string(want) || (want == nil) != (r.Outputs == nil) {
				t.Errorf("%s: outputs %q, want %q", r.RequestID, r.Outputs, want)
			}
		}
	})

	t.Run("Rows", func(t *testing.T) {
		s := open(t)
		if n, err := s.MaxRow(ctx); err != nil || n != 0 {
			t.Errorf("MaxRow of an empty store = %d, %v; want 0", n, err)
		}
		write(t, s, []records.Op{{Row: 7, Record: records.Record{RequestID: "a"}}, {Row: 3, Record: records.Record{RequestID: "b"}}})
		if n, err := s.MaxRow(ctx); err != nil || n != 7 {
			t.Errorf("MaxRow = %d, %v; want 7", n, err)
		}
		write(t, s, inserts(records.Record{RequestID: "c"})) // the store picks a free row
		n, err := s.MaxRow(ctx)
		if err != nil || n <= 7 {
			t.Errorf("MaxRow after a store-picked row = %d, %v; want > 7", n, err)
		}
		if got := list(t, s, records.Filter{}); len(got) != 3 {
			t.Errorf("%d records, want 3", len(got))
		}
	})

	t.Run("WriteIsAtomic", func(t *testing.T) {
		s := open(t)
		write(t, s, []records.Op{{Row: 1, Record: records.Record{RequestID: "kept", Tenant: "acme"}}})
		err := s.Write(ctx, []records.Op{
			{Row: 2, Record: records.Record{RequestID: "a"}},
			{Bump: true, Record: records.Record{Tenant: "acme", RequestID: "kept"}},
			{Row: 1, Record: records.Record{RequestID: "row in use"}},
		})
		if err == nil {
			t.Fatal("a Write inserting a row in use succeeded")
		}
		got := list(t, s, records.Filter{})
		if ids(got) != "[kept]" || got[0].Attempts != 1 {
			t.Errorf("after a failed Write: %+v, want only kept, attempts 1 (all or nothing)", got)
		}
		if err := s.Write(ctx, nil); err != nil {
			t.Errorf("an empty Write: %v", err)
		}
	})

	t.Run("DeleteBefore", func(t *testing.T) {
		s := open(t)
		write(t, s, inserts(
			records.Record{RequestID: "old", CreatedAt: t0.Add(-time.Hour)},
			records.Record{RequestID: "older", CreatedAt: t0.Add(-2 * time.Hour)},
			records.Record{RequestID: "edge", CreatedAt: t0},
			records.Record{RequestID: "new", CreatedAt: t0.Add(time.Hour)},
		))
		n, err := s.DeleteBefore(ctx, t0)
		if err != nil || n != 2 {
			t.Fatalf("DeleteBefore = %d, %v; want 2", n, err)
		}
		if got := ids(list(t, s, records.Filter{})); got != "[new edge]" {
			t.Errorf("after delete: %s, want [new edge] (a record at the cut stays)", got)
		}
		if n, err := s.DeleteBefore(ctx, t0); err != nil || n != 0 {
			t.Errorf("DeleteBefore again = %d, %v; want 0", n, err)
		}
	})

	t.Run("SavedAnswers", func(t *testing.T) {
		s := open(t)
		until := t0.Add(10 * time.Minute)
		write(t, s, []records.Op{
			{Row: 7, Record: records.Record{RequestID: "r1", Tenant: "acme", Model: "fraud", Outcome: "ok", CreatedAt: t0,
				Saved: &records.Saved{Key: "fraud@0|h1", Status: 200, Answer: []byte("answer-1"), Until: until}}},
			{Row: 8, Record: records.Record{RequestID: "r2", Tenant: "acme", Model: "fraud", Outcome: "ok", CreatedAt: t0,
				Saved: &records.Saved{Key: "fraud@0|h2", Status: 200, Until: until}}}, // answer too large: none
			{Row: 9, Record: records.Record{RequestID: "r3", Tenant: "acme", Model: "fraud", Outcome: "ok", CreatedAt: t0}},
		})
		f, err := s.Lookup(ctx, "acme", "r1", t0)
		if err != nil || f == nil || f.Row != 7 || f.Key != "fraud@0|h1" || f.Status != 200 || string(f.Answer) != "answer-1" || !f.Until.Equal(until) {
			t.Fatalf("Lookup(r1) = %+v, %v", f, err)
		}
		if f, err := s.Lookup(ctx, "acme", "r2", t0); err != nil || f == nil || f.Row != 8 || f.Answer != nil {
			t.Errorf("Lookup(r2), saved without its answer = %+v, %v", f, err)
		}
		for _, c := range []struct{ tenant, id string }{{"acme", "r3"}, {"beta", "r1"}, {"acme", "nope"}} {
			if f, err := s.Lookup(ctx, c.tenant, c.id, t0); err != nil || f != nil {
				t.Errorf("Lookup(%s, %s) = %+v, %v; want none", c.tenant, c.id, f, err)
			}
		}
		if f, err := s.Lookup(ctx, "acme", "r1", until); err != nil || f != nil {
			t.Errorf("Lookup at the end of the window = %+v, %v; want none", f, err)
		}
		// A retry computed again (its first answer was not replayable)
		// replaces the saved answer of the id.
		write(t, s, []records.Op{{Row: 10, Record: records.Record{RequestID: "r1", Tenant: "acme", Model: "fraud", Outcome: "ok", CreatedAt: t0,
			Saved: &records.Saved{Key: "fraud@0|h1", Status: 200, Answer: []byte("answer-2"), Until: until}}}})
		if f, err := s.Lookup(ctx, "acme", "r1", t0); err != nil || f == nil || f.Row != 10 || string(f.Answer) != "answer-2" {
			t.Errorf("Lookup after a second save = %+v, %v", f, err)
		}
		if n, err := s.ExpireReplays(ctx, until.Add(time.Second)); err != nil || n != 2 {
			t.Errorf("ExpireReplays = %d, %v; want 2", n, err)
		}
		if rs := list(t, s, records.Filter{}); len(rs) != 4 {
			t.Errorf("ExpireReplays deleted records: %d left, want 4", len(rs))
		}
		if err := s.Write(ctx, []records.Op{{Record: records.Record{RequestID: "r4", Tenant: "acme", Saved: &records.Saved{Key: "k", Status: 200, Until: until}}}}); err == nil {
			t.Error("a saved answer without its record's row was accepted")
		}
	})
}
