package registry_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/pgdb"
	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/registry/registrytest"
)

func openPostgres(t *testing.T, url, dir string) *registry.Postgres {
	t.Helper()
	d, err := registry.NewDir(filepath.Join(dir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := registry.OpenPostgres(context.Background(), url, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPostgresConformance(t *testing.T) {
	pgtest.Server(t)
	registrytest.Run(t, func(t *testing.T) registry.Store { return openPostgres(t, pgtest.URL(t), t.TempDir()) })
}

// Two gateways on one database: concurrent publishes and policy changes
// of one model get consecutive numbers, none refused.
func TestPostgresSharedByTwoGateways(t *testing.T) {
	url, dir := pgtest.URL(t), t.TempDir()
	a, b := openPostgres(t, url, dir), openPostgres(t, url, dir) // one artifact folder, as in the e2e
	ctx := context.Background()
	var wg sync.WaitGroup
	errc := make(chan error, 40)
	for i := range 20 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := s.SetPolicy(ctx, registry.Policy{Model: "fraud", Targets: []registry.Target{{Version: 1, Weight: 100}}, Reason: fmt.Sprint(i)}, -1)
			errc <- err
		}()
		go func() {
			defer wg.Done()
			_, _, err := s.Publish(ctx, registrytest.Package("fraud", []byte(fmt.Sprint("weights-", i)), nil))
			errc <- err
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	ps, err := b.Policies(ctx, "fraud")
	if err != nil || len(ps) != 20 {
		t.Fatalf("Policies = %d, %v; want 20", len(ps), err)
	}
	vs, err := a.List(ctx)
	if err != nil || len(vs) != 20 {
		t.Fatalf("List = %d, %v; want 20", len(vs), err)
	}
	for i := range 20 {
		if ps[i].Version != i+1 || vs[i].N != i+1 {
			t.Errorf("policy %d has version %d, version %d is %d: want consecutive numbers", i, ps[i].Version, i, vs[i].N)
		}
	}
	// The same content published by both at once is one version.
	var got [2]registry.Version
	var errs2 [2]error
	p := registrytest.Package("iris", []byte("same"), nil)
	wg.Add(2)
	for i, s := range []*registry.Postgres{a, b} {
		go func() { defer wg.Done(); got[i], _, errs2[i] = s.Publish(ctx, p) }()
	}
	wg.Wait()
	if errs2[0] != nil || errs2[1] != nil || got[0].N != 1 || got[1].N != 1 {
		t.Errorf("identical publishes: %v %v, %v %v; want iris@1 twice", got[0].ID(), errs2[0], got[1].ID(), errs2[1])
	}
}

// WatchChanges tells gateway B about a policy written by gateway A.
func TestPostgresWatchChanges(t *testing.T) {
	url, dir := pgtest.URL(t), t.TempDir()
	a, b := openPostgres(t, url, dir), openPostgres(t, url, dir)
	ctx, cancel := context.WithCancel(context.Background())
	changed := make(chan struct{}, 100)
	done := make(chan error, 1)
	go func() { done <- b.WatchChanges(ctx, func() { changed <- struct{}{} }) }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("no change seen after %s", what)
		}
	}
	wait("start") // once at start
	for i, write := range []func() error{
		func() error {
			_, err := a.SetPolicy(ctx, registry.Policy{Model: "fraud", Targets: []registry.Target{{Version: 1, Weight: 100}}}, -1)
			return err
		},
		func() error { _, _, err := a.Publish(ctx, registrytest.Package("fraud", []byte("w"), nil)); return err },
		func() error { return a.SaveRollout(ctx, "fraud", []byte(`{}`)) },
	} {
		start := time.Now()
		if err := write(); err != nil {
			t.Fatal(err)
		}
		wait(fmt.Sprint("write ", i))
		t.Logf("write %d seen by the other store after %s", i, time.Since(start))
	}
	// A change whose notification is lost (the counter moves, no NOTIFY)
	// is seen by the poll.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	start := time.Now()
	if _, err := conn.Exec(ctx, `UPDATE sluice_changes SET seq = seq + 1`); err != nil {
		t.Fatal(err)
	}
	wait("a change without its notification")
	t.Logf("a change without a notification seen after %s (polled every %s)", time.Since(start), registry.PollEvery)
	// The listening connection dies: the watcher listens again and the
	// next change is seen.
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetPolicy(ctx, registry.Policy{Model: "fraud", Targets: []registry.Target{{Version: 1, Weight: 100}}}, -1); err != nil {
		t.Fatal(err)
	}
	wait("a change after the listening connection was killed")
	// A version state is not a routing change: no wake-up.
	if err := a.SetState(ctx, "fraud", 1, registry.Ready, "", registry.Timings{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
		t.Error("SetState woke the watcher")
	case <-time.After(2 * registry.PollEvery):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("WatchChanges = %v", err)
	}
}

// A database migrated by a newer sluice is refused with an error saying
// so; several gateways starting at once migrate it once.
func TestPostgresMigrations(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, _ := registry.NewDir(t.TempDir())
			s, err := registry.OpenPostgres(ctx, url, d)
			if err == nil {
				s.Close()
			}
			errc <- err
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, `SELECT version FROM sluice_schema WHERE component='registry'`).Scan(&v); err != nil || v != registry.PostgresMigrations() {
		t.Fatalf("schema version %d, %v; want %d", v, err, registry.PostgresMigrations())
	}
	if _, err := conn.Exec(ctx, `UPDATE sluice_schema SET version=version+1 WHERE component='registry'`); err != nil {
		t.Fatal(err)
	}
	d, _ := registry.NewDir(t.TempDir())
	_, err = registry.OpenPostgres(ctx, url, d)
	var newer *pgdb.NewerSchemaError
	if !errors.As(err, &newer) || !strings.Contains(err.Error(), "newer than this sluice binary knows") {
		t.Errorf("open of a newer schema = %v; want a NewerSchemaError", err)
	}
}

// A stopped or unreachable database answers unavailable naming the
// store, and the URL's password is never in the error.
func TestPostgresUnreachable(t *testing.T) {
	d, _ := registry.NewDir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := registry.OpenPostgres(ctx, "postgres://sluice:s3cret-pw@127.0.0.1:1/sluice?sslmode=disable&connect_timeout=2", d)
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "cannot reach PostgreSQL") || !strings.Contains(err.Error(), "xxxxx") {
		t.Errorf("open of an unreachable database = %v; want cannot reach PostgreSQL, password redacted", err)
	}

	url, dir := pgtest.URL(t), t.TempDir()
	s := openPostgres(t, url, dir)
	s.Close() // as good as a stopped server for the calls after it
	_, err = s.SetPolicy(context.Background(), registry.Policy{Model: "fraud"}, -1)
	if e := errs.As(err); e.Code != errs.Unavailable || !strings.Contains(e.Message, "PostgreSQL") {
		t.Errorf("SetPolicy on a closed store = %v; want unavailable naming PostgreSQL", err)
	}
}
