package recordsdb

// The Writer's tests run here, against the SQLite store: package records
// cannot import its own implementations.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/records"
)

func openTest(t *testing.T) *SQLite {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func idsOf(rs []records.Record) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.RequestID)
	}
	return ids
}

func TestStoreBumpAndDelete(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if err := s.Insert(ctx, []records.Record{
		{RequestID: "x", Tenant: "acme", CreatedAt: t0},
		{RequestID: "x", Tenant: "beta", CreatedAt: t0.Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.BumpAttempts(ctx, "acme", "x"); err != nil {
		t.Fatal(err)
	}
	a, _ := s.List(ctx, records.Filter{Tenant: "acme"})
	b, _ := s.List(ctx, records.Filter{Tenant: "beta"})
	if a[0].Attempts != 2 || b[0].Attempts != 1 {
		t.Errorf("attempts acme %d beta %d, want 2 and 1 (a bump is per tenant)", a[0].Attempts, b[0].Attempts)
	}
	n, err := s.DeleteBefore(ctx, t0.Add(time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("DeleteBefore = %d, %v; want 1", n, err)
	}
	if all, _ := s.List(ctx, records.Filter{}); fmt.Sprint(idsOf(all)) != "[x]" || all[0].Tenant != "beta" {
		t.Errorf("after delete: %+v", all)
	}
}

func runWriter(t *testing.T, w *records.Writer) (cancel func() error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() error { stop(); return <-done }
}

func TestWriterFlushesEverythingOnShutdown(t *testing.T) {
	s := openTest(t)
	// Long FlushEvery and a batch larger than N: nothing is written before
	// shutdown, so the final drain must write all of it.
	w := records.NewWriter(s, records.Config{BatchSize: 5000, FlushEvery: time.Hour, Now: func() time.Time { return t0 }})
	stop := runWriter(t, w)
	const n = 1234
	for i := range n {
		if !w.Add(records.Record{RequestID: fmt.Sprint("r", i), Tenant: "acme", Model: "fraud", Version: 1, Outcome: "ok"}) {
			t.Fatalf("Add %d refused", i)
		}
	}
	if !w.Bump("acme", "r7") {
		t.Fatal("Bump refused")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(context.Background(), records.Filter{Limit: records.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Errorf("%d records in the database, want %d", len(got), n)
	}
	if w.Written() != n+1 || w.Overflows() != 0 || w.Failed() != 0 {
		t.Errorf("written %d overflows %d failed %d", w.Written(), w.Overflows(), w.Failed())
	}
	r7, _ := s.List(context.Background(), records.Filter{RequestID: "r7"})
	if len(r7) != 1 || r7[0].Attempts != 2 || !r7[0].CreatedAt.Equal(t0) {
		t.Errorf("r7 = %+v, want attempts 2 (bump after insert) and CreatedAt from the clock", r7)
	}
	if w.Add(records.Record{RequestID: "late"}) {
		t.Error("Add after Run returned was accepted")
	}
}

func TestWriterWritesFullBatchesWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openTest(t)
		w := records.NewWriter(s, records.Config{BatchSize: 10, FlushEvery: time.Hour})
		stop := runWriter(t, w)
		defer stop()
		for i := range 25 {
			w.Add(records.Record{RequestID: fmt.Sprint(i), CreatedAt: t0})
		}
		// Two full batches go out on the wake channel; the partial one waits
		// for FlushEvery, an hour of the bubble's time that does not pass.
		synctest.Wait()
		if n, b := w.Written(), w.Buffered(); n != 20 || b != 5 {
			t.Errorf("written %d, buffered %d; want 20 and 5 (a partial batch waits for FlushEvery)", n, b)
		}
	})
}

func TestWriterOverflow(t *testing.T) {
	s := openTest(t)
	w := records.NewWriter(s, records.Config{Buffer: 3, BatchSize: 100})
	// Not running: nothing drains, so the fourth Add overflows.
	var accepted []bool
	for i := range 5 {
		accepted = append(accepted, w.Add(records.Record{RequestID: fmt.Sprint(i)}))
	}
	accepted = append(accepted, w.Bump("t", "0"))
	if fmt.Sprint(accepted) != "[true true true false false false]" {
		t.Errorf("accepted %v", accepted)
	}
	if w.Overflows() != 3 {
		t.Errorf("overflows %d, want 3", w.Overflows())
	}
	stop := runWriter(t, w)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.List(context.Background(), records.Filter{}); len(got) != 3 {
		t.Errorf("%d written, want the 3 buffered", len(got))
	}
}

func TestWriterRetention(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := t0
	if err := s.Insert(ctx, []records.Record{
		{RequestID: "old", CreatedAt: now.Add(-49 * time.Hour)},
		{RequestID: "edge", CreatedAt: now.Add(-47 * time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	w := records.NewWriter(s, records.Config{Retention: 48 * time.Hour, Now: func() time.Time { return now }})
	stop := runWriter(t, w)
	w.Add(records.Record{RequestID: "new"})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got, _ := s.List(ctx, records.Filter{})
	if fmt.Sprint(idsOf(got)) != "[new edge]" {
		t.Errorf("after retention: %v, want [new edge]", idsOf(got))
	}
}

// clock is an injectable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
