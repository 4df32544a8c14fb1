// Package jobstest is the conformance suite of jobs.Store: every
// implementation must pass Run, from its own tests.
package jobstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// Clock is the suite's time: it moves only when a test moves it, so a
// lease expires without sleeping.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// NewDB makes a new, empty database whose stores read the time from now,
// and returns what opens a store on it: each call another handle on the
// same database (a separate connection pool, as another process would
// have), closed in t.Cleanup.
type NewDB func(t *testing.T, now func() time.Time) (open func() jobs.Store)

// Run runs the conformance suite of jobs.Store.
func Run(t *testing.T, newDB NewDB) {
	fresh := func(t *testing.T) (jobs.Store, *Clock) {
		c := &Clock{t: t0}
		return newDB(t, c.Now)(), c
	}
	t.Run("CreateGet", func(t *testing.T) { s, _ := fresh(t); testCreateGet(t, s) })
	t.Run("List", func(t *testing.T) { s, c := fresh(t); testList(t, s, c) })
	t.Run("SetScan", func(t *testing.T) { s, _ := fresh(t); testSetScan(t, s) })
	t.Run("SetScanMillion", func(t *testing.T) { s, _ := fresh(t); testSetScanMillion(t, s) })
	t.Run("ClaimOrderShards", func(t *testing.T) { s, _ := fresh(t); testClaimOrder(t, s) })
	t.Run("Leases", func(t *testing.T) { s, c := fresh(t); testLeases(t, s, c) })
	t.Run("ExpiredUnclaimedCompletes", func(t *testing.T) { s, c := fresh(t); testExpiredUnclaimed(t, s, c) })
	t.Run("CompleteOnce", func(t *testing.T) { s, c := fresh(t); testCompleteOnce(t, s, c) })
	t.Run("Errors", func(t *testing.T) { s, _ := fresh(t); testErrors(t, s) })
	t.Run("SetState", func(t *testing.T) { s, c := fresh(t); testSetState(t, s, c) })
	t.Run("RequestCancel", func(t *testing.T) { s, _ := fresh(t); testRequestCancel(t, s) })
	t.Run("Runnable", func(t *testing.T) { s, _ := fresh(t); testRunnable(t, s) })
	t.Run("ConcurrentClaims", func(t *testing.T) {
		c := &Clock{t: t0}
		open := newDB(t, c.Now)
		var ss []jobs.Store
		for range 4 {
			ss = append(ss, open())
		}
		testConcurrent(t, ss)
	})
}

var ctx = context.Background()

func spec(tenant string) jobs.Spec {
	return jobs.Spec{
		Model: "fraud", Version: 3, VersionID: "fraud@3",
		Input:   jobs.IO{URI: "file:in.jsonl", Format: "jsonl"},
		Output:  jobs.IO{URI: "file:out.jsonl", Format: "jsonl"},
		IDField: "id", ChunkRows: 10, MaxErrorRate: 0.25, Tenant: tenant,
	}
}

func create(t *testing.T, s jobs.Store, id, tenant string) {
	t.Helper()
	if err := s.Create(ctx, jobs.Job{ID: id, Spec: spec(tenant)}); err != nil {
		t.Fatalf("Create %s: %v", id, err)
	}
}

func get(t *testing.T, s jobs.Store, id string) jobs.Job {
	t.Helper()
	j, err := s.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return j
}

// starts are n chunks' starts, chunk i at offset 100*i.
func starts(n int) []jobio.Start {
	out := make([]jobio.Start, n)
	for i := range out {
		out[i] = jobio.Start{Chunk: i, Offset: int64(100 * i)}
	}
	return out
}

func scanned(t *testing.T, s jobs.Store, id string, chunks int) {
	t.Helper()
	if err := s.SetScan(ctx, id, int64(10*chunks), starts(chunks), nil); err != nil {
		t.Fatalf("SetScan %s: %v", id, err)
	}
}

func claim(t *testing.T, s jobs.Store, id, owner string, shard, shards int) (jobs.Claim, bool) {
	t.Helper()
	c, ok, err := s.Claim(ctx, id, owner, shard, shards, 10*time.Second)
	if err != nil {
		t.Fatalf("Claim %s by %s: %v", id, owner, err)
	}
	return c, ok
}

func mustClaim(t *testing.T, s jobs.Store, id, owner string, want int) jobs.Claim {
	t.Helper()
	c, ok := claim(t, s, id, owner, 0, 1)
	if !ok || c.Chunk != want {
		t.Fatalf("Claim by %s: chunk %d ok %v, want chunk %d", owner, c.Chunk, ok, want)
	}
	return c
}

func complete(t *testing.T, s jobs.Store, id string, chunk int, owner string, r jobs.ChunkResult) {
	t.Helper()
	if err := s.Complete(ctx, id, chunk, owner, r); err != nil {
		t.Fatalf("Complete %s chunk %d by %s: %v", id, chunk, owner, err)
	}
}

func ids(js []jobs.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

func testCreateGet(t *testing.T, s jobs.Store) {
	created := time.Date(2026, 2, 3, 4, 5, 6, 7000, time.UTC)
	sp := spec("acme")
	if err := s.Create(ctx, jobs.Job{ID: "j1", Spec: sp, Created: created}); err != nil {
		t.Fatal(err)
	}
	j := get(t, s, "j1")
	if j.ID != "j1" || j.Spec != sp || j.State != jobs.Queued || j.Scanned || !j.Created.Equal(created) || !j.Updated.Equal(created) {
		t.Errorf("Get = %+v, want j1 queued with its spec, created %v", j, created)
	}
	if !j.Started.IsZero() || !j.Finished.IsZero() || j.JobCounts != (jobs.Counts{}) || j.Errors != nil || j.CancelRequested {
		t.Errorf("a new job has times, counts or errors: %+v", j)
	}
	// A state, counts or errors in the created job are not taken.
	if err := s.Create(ctx, jobs.Job{ID: "j2", Spec: sp, State: jobs.Running, JobCounts: jobs.Counts{RowsDone: 5}}); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s, "j2"); j.State != jobs.Queued || j.RowsDone != 0 || j.Created.IsZero() {
		t.Errorf("created with a state and counts: %+v, want queued with none and a creation time", j)
	}
	if err := s.Create(ctx, jobs.Job{ID: "j1", Spec: spec("other")}); !errors.Is(err, jobs.ErrExists) {
		t.Errorf("Create of a taken id: %v, want ErrExists", err)
	}
	if get(t, s, "j1").Spec.Tenant != "acme" {
		t.Error("a refused Create changed the job")
	}
	if err := s.Create(ctx, jobs.Job{Spec: sp}); err == nil {
		t.Error("Create of a job with no id: no error")
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Get of an unknown id: %v, want ErrNotFound", err)
	}
}

func testList(t *testing.T, s jobs.Store, c *Clock) {
	for i := range 6 {
		tenant := "a"
		if i%2 == 1 {
			tenant = "b"
		}
		create(t, s, fmt.Sprintf("j%d", i), tenant)
		c.Advance(time.Second)
	}
	if _, err := s.SetState(ctx, "j4", []jobs.State{jobs.Queued}, jobs.Running, "", false); err != nil {
		t.Fatal(err)
	}
	list := func(o jobs.ListOptions) []string {
		t.Helper()
		js, err := s.List(ctx, o)
		if err != nil {
			t.Fatalf("List %+v: %v", o, err)
		}
		return ids(js)
	}
	for _, tc := range []struct {
		o    jobs.ListOptions
		want []string
	}{
		{jobs.ListOptions{}, []string{"j5", "j4", "j3", "j2", "j1", "j0"}},
		{jobs.ListOptions{Limit: 5000}, []string{"j5", "j4", "j3", "j2", "j1", "j0"}},
		{jobs.ListOptions{Tenant: "a"}, []string{"j4", "j2", "j0"}},
		{jobs.ListOptions{State: jobs.Running}, []string{"j4"}},
		{jobs.ListOptions{State: jobs.Queued, Tenant: "a"}, []string{"j2", "j0"}},
		{jobs.ListOptions{State: jobs.Failed}, nil},
		{jobs.ListOptions{Limit: 2}, []string{"j5", "j4"}},
		{jobs.ListOptions{Limit: 2, Before: "j4"}, []string{"j3", "j2"}},
		{jobs.ListOptions{Limit: 2, Before: "j2"}, []string{"j1", "j0"}},
		{jobs.ListOptions{Limit: 2, Before: "j0"}, nil},
		{jobs.ListOptions{Tenant: "b", Before: "j4"}, []string{"j3", "j1"}},
	} {
		if got := list(tc.o); !slices.Equal(got, tc.want) {
			t.Errorf("List %+v = %v, want %v", tc.o, got, tc.want)
		}
	}
	if _, err := s.List(ctx, jobs.ListOptions{Before: "nope"}); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("List before an unknown job: %v, want ErrNotFound", err)
	}
	if _, err := s.List(ctx, jobs.ListOptions{State: "sleeping"}); err == nil {
		t.Error("List of an unknown state: no error")
	}
}

func testSetScan(t *testing.T, s jobs.Store) {
	create(t, s, "j", "acme")
	errs := []jobs.RowError{{Chunk: 1, Line: 12, ID: "x", Message: "duplicate id x (first at line 3)"}}
	if err := s.SetScan(ctx, "j", 42, starts(5), errs); err != nil {
		t.Fatal(err)
	}
	j := get(t, s, "j")
	if !j.Scanned || j.RowsTotal != 42 || j.ChunksTotal != 5 || j.ChunksDone != 0 || !slices.Equal(j.Errors, errs) {
		t.Errorf("after SetScan: %+v", j)
	}
	// Once: a second scan changes nothing.
	if err := s.SetScan(ctx, "j", 7, starts(2), nil); err != nil {
		t.Errorf("a second SetScan: %v, want nil", err)
	}
	if j := get(t, s, "j"); j.RowsTotal != 42 || j.ChunksTotal != 5 || len(j.Errors) != 1 {
		t.Errorf("a second SetScan changed the job: %+v", j)
	}
	var got []int
	for {
		c, ok := claim(t, s, "j", "r", 0, 1)
		if !ok {
			break
		}
		if c.Start != (jobio.Start{Chunk: c.Chunk, Offset: int64(100 * c.Chunk)}) {
			t.Errorf("chunk %d starts at %+v", c.Chunk, c.Start)
		}
		got = append(got, c.Chunk)
	}
	if !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("claimed %v, want the 5 chunks of the first scan", got)
	}
	if err := s.SetScan(ctx, "nope", 1, starts(1), nil); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("SetScan of an unknown job: %v, want ErrNotFound", err)
	}
	// A scan of an empty input: no chunks.
	create(t, s, "empty", "acme")
	if err := s.SetScan(ctx, "empty", 0, nil, nil); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s, "empty"); !j.Scanned || j.ChunksTotal != 0 {
		t.Errorf("an empty scan: %+v", j)
	}
	if _, ok := claim(t, s, "empty", "r", 0, 1); ok {
		t.Error("claimed a chunk of an empty job")
	}
}

func testSetScanMillion(t *testing.T, s jobs.Store) {
	const n = millionChunks
	create(t, s, "big", "acme")
	if err := s.SetScan(ctx, "big", 1000*n, starts(n), nil); err != nil {
		t.Fatal(err)
	}
	if j := get(t, s, "big"); j.ChunksTotal != n {
		t.Fatalf("ChunksTotal %d, want %d", j.ChunksTotal, n)
	}
	c, ok := claim(t, s, "big", "r", n-1, n)
	if !ok || c.Chunk != n-1 || c.Start.Offset != 100*(n-1) {
		t.Errorf("the last shard's claim: %+v ok %v, want chunk %d", c, ok, n-1)
	}
	if c := mustClaim(t, s, "big", "r", 0); c.Start.Offset != 0 {
		t.Errorf("chunk 0 starts at %+v", c.Start)
	}
}

func testClaimOrder(t *testing.T, s jobs.Store) {
	create(t, s, "j", "acme")
	if _, ok := claim(t, s, "j", "r", 0, 1); ok {
		t.Error("claimed a chunk of a job not scanned")
	}
	scanned(t, s, "j", 10)
	var got []int
	for {
		c, ok := claim(t, s, "j", "r1", 1, 3)
		if !ok {
			break
		}
		if c.Job != "j" || c.Owner != "r1" || c.Redone || !c.Until.Equal(t0.Add(10*time.Second)) {
			t.Errorf("claim %+v", c)
		}
		got = append(got, c.Chunk)
	}
	if !slices.Equal(got, []int{1, 4, 7}) {
		t.Errorf("shard 1 of 3 claimed %v, want [1 4 7]", got)
	}
	got = got[:0]
	for {
		c, ok := claim(t, s, "j", "r2", 0, 1)
		if !ok {
			break
		}
		got = append(got, c.Chunk)
	}
	if !slices.Equal(got, []int{0, 2, 3, 5, 6, 8, 9}) {
		t.Errorf("one shard claimed %v, want the rest lowest first", got)
	}
	if _, _, err := s.Claim(ctx, "nope", "r", 0, 1, time.Second); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Claim of an unknown job: %v, want ErrNotFound", err)
	}
	for _, bad := range [][2]int{{0, 0}, {3, 3}, {-1, 2}} {
		if _, _, err := s.Claim(ctx, "j", "r", bad[0], bad[1], time.Second); err == nil || errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Claim shard %d of %d: %v, want an error", bad[0], bad[1], err)
		}
	}
	if _, _, err := s.Claim(ctx, "j", "r", 0, 1, 0); err == nil {
		t.Error("Claim with a zero lease: no error")
	}
}

func testLeases(t *testing.T, s jobs.Store, c *Clock) {
	create(t, s, "j", "acme")
	scanned(t, s, "j", 3)
	mustClaim(t, s, "j", "a", 0)
	mustClaim(t, s, "j", "b", 1) // chunk 0 is leased
	if err := s.Renew(ctx, "j", 0, "b", 10*time.Second); !errors.Is(err, jobs.ErrLeaseLost) {
		t.Errorf("Renew by a non-owner: %v, want ErrLeaseLost", err)
	}
	c.Advance(8 * time.Second)
	if err := s.Renew(ctx, "j", 1, "b", 10*time.Second); err != nil {
		t.Fatalf("Renew by the owner: %v", err)
	}
	c.Advance(3 * time.Second) // a's lease (10 s) expired, b's renewed one did not
	cl := mustClaim(t, s, "j", "c", 0)
	if !cl.Redone {
		t.Error("a chunk claimed again after its lease expired is not Redone")
	}
	if err := s.Renew(ctx, "j", 0, "a", 10*time.Second); !errors.Is(err, jobs.ErrLeaseLost) {
		t.Errorf("Renew by the old owner: %v, want ErrLeaseLost", err)
	}
	if err := s.Complete(ctx, "j", 0, "a", jobs.ChunkResult{Rows: 10}); !errors.Is(err, jobs.ErrLeaseLost) {
		t.Errorf("Complete by the old owner after another claimed: %v, want ErrLeaseLost", err)
	}
	mustClaim(t, s, "j", "c", 2) // chunk 1 is still b's
	c.Advance(8 * time.Second)   // b's lease of chunk 1 expired (renewed at +8 s until +18 s; now +19 s)
	if err := s.Renew(ctx, "j", 1, "b", 10*time.Second); !errors.Is(err, jobs.ErrLeaseLost) {
		t.Errorf("Renew of an expired lease: %v, want ErrLeaseLost", err)
	}
	complete(t, s, "j", 0, "c", jobs.ChunkResult{Rows: 10, Failed: 1})
	j := get(t, s, "j")
	if j.ChunksDone != 1 || j.RowsDone != 10 || j.RowsFailed != 1 || j.RowsRedone != 10 {
		t.Errorf("after the redone chunk: %+v, want 1 chunk, 10 rows (1 failed), 10 redone", j.JobCounts)
	}
	if err := s.Renew(ctx, "j", 0, "c", 10*time.Second); !errors.Is(err, jobs.ErrLeaseLost) {
		t.Errorf("Renew of a done chunk: %v, want ErrLeaseLost", err)
	}
	if err := s.Renew(ctx, "j", 7, "c", 10*time.Second); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Renew of an unknown chunk: %v, want ErrNotFound", err)
	}
}

func testExpiredUnclaimed(t *testing.T, s jobs.Store, c *Clock) {
	create(t, s, "j", "acme")
	scanned(t, s, "j", 2)
	mustClaim(t, s, "j", "a", 0)
	c.Advance(time.Minute)
	// Expired, but nobody claimed it since: the owner's work counts.
	complete(t, s, "j", 0, "a", jobs.ChunkResult{Rows: 10})
	if j := get(t, s, "j"); j.ChunksDone != 1 || j.RowsDone != 10 || j.RowsRedone != 0 {
		t.Errorf("after completing an expired, unclaimed lease: %+v", j.JobCounts)
	}
	mustClaim(t, s, "j", "b", 1)
}

func testCompleteOnce(t *testing.T, s jobs.Store, c *Clock) {
	create(t, s, "j", "acme")
	scanned(t, s, "j", 4)
	if err := s.Complete(ctx, "j", 0, "a", jobs.ChunkResult{Rows: 10}); !errors.Is(err, jobs.ErrLeaseLost) {
		t.Errorf("Complete of a chunk never claimed: %v, want ErrLeaseLost", err)
	}
	mustClaim(t, s, "j", "a", 0)
	mustClaim(t, s, "j", "a", 1)
	r := jobs.ChunkResult{Rows: 10, Failed: 2, Errors: []jobs.RowError{{Chunk: 0, Line: 3, Message: "bad"}}}
	complete(t, s, "j", 0, "a", r)
	complete(t, s, "j", 0, "a", r) // again: nothing added
	complete(t, s, "j", 0, "b", r) // by anyone: done is done
	complete(t, s, "j", 1, "a", jobs.ChunkResult{Rows: 7})
	j := get(t, s, "j")
	want := jobs.Counts{RowsTotal: 40, RowsDone: 17, RowsFailed: 2, ChunksTotal: 4, ChunksDone: 2}
	if j.JobCounts != want || len(j.Errors) != 1 {
		t.Errorf("counts %+v errors %v, want %+v and one error", j.JobCounts, j.Errors, want)
	}
	// A redone chunk's rows count in RowsRedone once, however often it
	// was completed.
	mustClaim(t, s, "j", "a", 2)
	c.Advance(time.Minute)
	mustClaim(t, s, "j", "b", 2)
	complete(t, s, "j", 2, "b", jobs.ChunkResult{Rows: 9})
	complete(t, s, "j", 2, "b", jobs.ChunkResult{Rows: 9})
	if j := get(t, s, "j"); j.RowsRedone != 9 || j.RowsDone != 26 || j.ChunksDone != 3 {
		t.Errorf("after a redone chunk completed twice: %+v, want 9 redone, 26 done, 3 chunks", j.JobCounts)
	}
	if err := s.Complete(ctx, "j", 9, "a", jobs.ChunkResult{}); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Complete of an unknown chunk: %v, want ErrNotFound", err)
	}
	if err := s.Complete(ctx, "j", 3, "a", jobs.ChunkResult{Rows: 1, Failed: 2}); err == nil || errors.Is(err, jobs.ErrLeaseLost) {
		t.Errorf("Complete with more failed rows than rows: %v, want an error", err)
	}
}

func testErrors(t *testing.T, s jobs.Store) {
	create(t, s, "j", "acme")
	scanErr := jobs.RowError{Chunk: 2, Line: 1, ID: "d", Message: "duplicate id d"}
	if err := s.SetScan(ctx, "j", 40, starts(4), []jobs.RowError{scanErr}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		mustClaim(t, s, "j", "a", i)
	}
	errsOf := func(chunk, n int) []jobs.RowError {
		var es []jobs.RowError
		for k := range n {
			es = append(es, jobs.RowError{Chunk: chunk, Line: int64(k + 1), ID: fmt.Sprint(chunk, "-", k), Field: "amount", Message: "must be a number"})
		}
		return es
	}
	// Out of order: chunk 3, then 2 (its first error is the scan's too), then 0.
	complete(t, s, "j", 3, "a", jobs.ChunkResult{Rows: 10, Failed: 10, Errors: errsOf(3, 10)})
	complete(t, s, "j", 2, "a", jobs.ChunkResult{Rows: 10, Failed: 10, Errors: append([]jobs.RowError{scanErr}, errsOf(2, 10)...)})
	complete(t, s, "j", 0, "a", jobs.ChunkResult{Rows: 10, Failed: 8, Errors: errsOf(0, 8)})
	j := get(t, s, "j")
	if j.RowsFailed != 28 {
		t.Errorf("RowsFailed %d, want 28 (every error counted)", j.RowsFailed)
	}
	if len(j.Errors) != jobs.MaxErrorsKept {
		t.Fatalf("kept %d errors, want %d", len(j.Errors), jobs.MaxErrorsKept)
	}
	perChunk := map[int]int{}
	for i, e := range j.Errors {
		if i > 0 {
			p := j.Errors[i-1]
			if p.Chunk > e.Chunk || (p.Chunk == e.Chunk && p.Line > e.Line) {
				t.Errorf("errors not in chunk order at %d: %+v after %+v", i, e, p)
			}
		}
		perChunk[e.Chunk]++
	}
	// The first 20 by chunk then line: chunk 0's 8, chunk 2's 11 (the
	// scan's duplicate once), chunk 3's first.
	if perChunk[0] != 8 || perChunk[2] != 11 || perChunk[3] != 1 {
		t.Errorf("kept errors per chunk %v, want 0:8 2:11 3:1", perChunk)
	}
	for _, e := range errsOf(0, 8) {
		if !slices.Contains(j.Errors, e) {
			t.Errorf("chunk 0's error %+v not kept", e)
		}
	}
	// A huge message is bounded.
	create(t, s, "k", "acme")
	scanned(t, s, "k", 1)
	mustClaim(t, s, "k", "a", 0)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = 'x'
	}
	complete(t, s, "k", 0, "a", jobs.ChunkResult{Rows: 1, Failed: 1, Errors: []jobs.RowError{{Message: string(big)}}})
	if es := get(t, s, "k").Errors; len(es) != 1 || len(es[0].Message) > 4096 {
		t.Errorf("a 1 MiB message is kept as %d bytes", len(es[0].Message))
	}
}

func testSetState(t *testing.T, s jobs.Store, c *Clock) {
	create(t, s, "j", "acme")
	set := func(from []jobs.State, to jobs.State, msg string, inc bool) bool {
		t.Helper()
		ok, err := s.SetState(ctx, "j", from, to, msg, inc)
		if err != nil {
			t.Fatalf("SetState %v → %s: %v", from, to, err)
		}
		return ok
	}
	if set([]jobs.State{jobs.Running}, jobs.Succeeded, "", false) {
		t.Error("SetState from running moved a queued job")
	}
	if j := get(t, s, "j"); j.State != jobs.Queued || !j.Started.IsZero() {
		t.Errorf("a refused SetState changed the job: %+v", j)
	}
	c.Advance(time.Second)
	if !set([]jobs.State{jobs.Queued}, jobs.Running, "", false) {
		t.Fatal("SetState queued → running refused")
	}
	started := t0.Add(time.Second)
	if j := get(t, s, "j"); j.State != jobs.Running || !j.Started.Equal(started) || !j.Finished.IsZero() || !j.Updated.Equal(started) {
		t.Errorf("after → running: %+v, want started %v", j, started)
	}
	c.Advance(time.Second)
	if !set([]jobs.State{jobs.Queued, jobs.Running}, jobs.Running, "", false) {
		t.Fatal("SetState running → running refused")
	}
	if j := get(t, s, "j"); !j.Started.Equal(started) {
		t.Errorf("a second move to running moved Started to %v", j.Started)
	}
	c.Advance(time.Second)
	if !set([]jobs.State{jobs.Running}, jobs.Cancelled, "cancelled by acme", true) {
		t.Fatal("SetState running → cancelled refused")
	}
	j := get(t, s, "j")
	if j.State != jobs.Cancelled || !j.Finished.Equal(t0.Add(3*time.Second)) || j.Message != "cancelled by acme" || !j.Incomplete || !j.Started.Equal(started) {
		t.Errorf("after → cancelled: %+v", j)
	}
	if set(nil, jobs.Running, "", false) {
		t.Error("SetState from no state moved the job")
	}
	if _, err := s.SetState(ctx, "j", []jobs.State{jobs.Cancelled}, "asleep", "", false); err == nil {
		t.Error("SetState to an unknown state: no error")
	}
	if _, err := s.SetState(ctx, "nope", []jobs.State{jobs.Queued}, jobs.Running, "", false); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("SetState of an unknown job: %v, want ErrNotFound", err)
	}
}

func testRequestCancel(t *testing.T, s jobs.Store) {
	create(t, s, "q", "acme")
	create(t, s, "done", "acme")
	if _, err := s.SetState(ctx, "done", []jobs.State{jobs.Queued}, jobs.Succeeded, "", false); err != nil {
		t.Fatal(err)
	}
	j, err := s.RequestCancel(ctx, "q")
	if err != nil || !j.CancelRequested || j.ID != "q" {
		t.Errorf("RequestCancel of a queued job: %+v, %v", j, err)
	}
	if j := get(t, s, "q"); !j.CancelRequested || j.State != jobs.Queued {
		t.Errorf("after RequestCancel: %+v, want queued, cancel requested", j)
	}
	if j, err := s.RequestCancel(ctx, "q"); err != nil || !j.CancelRequested {
		t.Errorf("RequestCancel again: %+v, %v", j, err)
	}
	j, err = s.RequestCancel(ctx, "done")
	if err != nil || j.CancelRequested || j.State != jobs.Succeeded {
		t.Errorf("RequestCancel of a final job: %+v, %v; want it unchanged", j, err)
	}
	if _, err := s.RequestCancel(ctx, "nope"); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("RequestCancel of an unknown job: %v, want ErrNotFound", err)
	}
}

func testRunnable(t *testing.T, s jobs.Store) {
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		create(t, s, id, "acme")
	}
	move := func(id string, to jobs.State) {
		if ok, err := s.SetState(ctx, id, []jobs.State{jobs.Queued}, to, "", false); err != nil || !ok {
			t.Fatalf("SetState %s → %s: %v %v", id, to, ok, err)
		}
	}
	move("b", jobs.Running)
	move("c", jobs.Failed)
	move("d", jobs.Succeeded)
	got, err := s.Runnable(ctx, 10)
	if err != nil || !slices.Equal(got, []string{"a", "b", "e"}) {
		t.Errorf("Runnable = %v, %v; want [a b e] (oldest first)", got, err)
	}
	if got, err := s.Runnable(ctx, 2); err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Runnable(2) = %v, %v; want [a b]", got, err)
	}
}

// testConcurrent: several handles (as several processes) claim until no
// chunk is left; none is claimed twice and every one is done once.
func testConcurrent(t *testing.T, ss []jobs.Store) {
	const chunks = 120
	create(t, ss[0], "j", "acme")
	scanned(t, ss[0], "j", chunks)
	var mu sync.Mutex
	seen := map[int]string{}
	var twice []string
	var wg sync.WaitGroup
	errc := make(chan error, len(ss))
	for k, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprint("r", k)
			for {
				c, ok, err := s.Claim(ctx, "j", owner, 0, 1, time.Hour)
				if err != nil {
					errc <- fmt.Errorf("%s: claim: %w", owner, err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				if prev, dup := seen[c.Chunk]; dup {
					twice = append(twice, fmt.Sprintf("chunk %d by %s and %s", c.Chunk, prev, owner))
				}
				seen[c.Chunk] = owner
				mu.Unlock()
				if err := s.Complete(ctx, "j", c.Chunk, owner, jobs.ChunkResult{Rows: 10}); err != nil {
					errc <- fmt.Errorf("%s: complete %d: %w", owner, c.Chunk, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if len(twice) > 0 {
		t.Errorf("claimed twice: %v", twice)
	}
	if len(seen) != chunks {
		t.Errorf("%d chunks claimed, want %d", len(seen), chunks)
	}
	j := get(t, ss[len(ss)-1], "j")
	if j.ChunksDone != chunks || j.RowsDone != 10*chunks || j.RowsRedone != 0 {
		t.Errorf("after the concurrent runners: %+v", j.JobCounts)
	}
}
