package recordsdb_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/records/recordsdb"
	"github.com/sluiceml/sluice/internal/records/recordstest"
	"github.com/sluiceml/sluice/internal/testwait"
)

func openPostgres(t *testing.T, url string) *recordsdb.Postgres {
	t.Helper()
	s, err := recordsdb.OpenPostgres(context.Background(), url, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPostgresConformance(t *testing.T) {
	pgtest.Server(t)
	recordstest.Run(t, func(t *testing.T) records.Store { return openPostgres(t, pgtest.URL(t)) })
}

// Two gateways' writers on one database: their row ids never collide,
// every record is written, and a retry's bump through the other gateway
// (by the row Lookup found) lands on the record.
func TestPostgresTwoWriters(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	var ws []*records.Writer
	var wg sync.WaitGroup
	for _, s := range []*recordsdb.Postgres{a, b} {
		w := records.NewWriter(s, records.Config{BatchSize: 50, FlushEvery: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
		ws = append(ws, w)
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(ctx) }()
	}
	const per = 500
	until := time.Now().Add(time.Hour)
	for i := range per {
		for k, w := range ws {
			r := records.Record{RequestID: fmt.Sprintf("g%d-%d", k, i), Tenant: "acme", Model: fmt.Sprint("m", i%3), Outcome: "ok"}
			if i == 0 {
				r.RequestID, r.Retryable = fmt.Sprintf("client-%d", k), true
				r.Saved = &records.Saved{Key: "k", Status: 200, Answer: []byte("a"), Until: until}
			}
			if !w.Add(r) {
				t.Fatal("Add refused")
			}
		}
	}
	// Until every record is written or failed; the checks below say which.
	_ = testwait.Poll(30*time.Second, func() error {
		if ws[0].Written()+ws[1].Written()+ws[0].Failed()+ws[1].Failed() < 2*per {
			return errors.New("records outstanding")
		}
		return nil
	})
	cancel()
	wg.Wait()
	for _, w := range ws {
		if w.Failed() != 0 || w.Written() != per {
			t.Errorf("writer: %d written, %d failed; want %d, 0", w.Written(), w.Failed(), per)
		}
	}
	rs, err := a.List(context.Background(), records.Filter{Limit: records.MaxLimit})
	if err != nil || len(rs) != 2*per {
		t.Fatalf("List = %d, %v; want %d", len(rs), err, 2*per)
	}
	f, err := b.Lookup(context.Background(), "acme", "client-0", time.Now())
	if err != nil || f == nil {
		t.Fatalf("Lookup through the other gateway = %+v, %v", f, err)
	}
	if err := b.Write(context.Background(), []records.Op{{Bump: true, Row: f.Row}}); err != nil {
		t.Fatal(err)
	}
	got, _ := a.List(context.Background(), records.Filter{RequestID: "client-0"})
	if len(got) != 1 || got[0].Attempts != 2 {
		t.Errorf("after the bump: %+v, want attempts 2", got)
	}
	if ms, _ := a.List(context.Background(), records.Filter{Models: []string{"m[12]"}, Limit: records.MaxLimit}); len(ms) == 0 || strings.HasPrefix(ms[0].Model, "m0") {
		t.Errorf("model globs: %d records", len(ms))
	}
}

// A database that stops answering fails the writer's batches: the
// records are dropped and counted (the rule of any failed write), the
// writer keeps running, and writes succeed again once it answers.
func TestPostgresWriterOnClosedStore(t *testing.T) {
	url := pgtest.URL(t)
	s := openPostgres(t, url)
	s.Close()
	w := records.NewWriter(s, records.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	w.Add(records.Record{RequestID: "lost"})
	cancel()
	<-done
	if w.Failed() != 1 || !strings.Contains(w.Warning(), "writing failed") {
		t.Errorf("failed %d, warning %q; want 1 failed and a warning", w.Failed(), w.Warning())
	}
}
