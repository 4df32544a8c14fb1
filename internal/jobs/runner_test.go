package jobs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// waitFor polls the job (in fake time) until cond holds, failing after
// within.
func waitFor(t *testing.T, s Store, id string, within time.Duration, cond func(Job) bool) Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := s.Get(context.Background(), id)
		if err == nil && cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: condition not met within %v: %+v (err %v)", id, within, j, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func inState(s State) func(Job) bool { return func(j Job) bool { return j.State == s } }

// startRun runs r.Run until the returned stop is called.
func startRun(r *Runner) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	return func() { cancel(); wg.Wait() }
}

func submit(t *testing.T, m *Manager, s Submit) Status {
	t.Helper()
	st, err := m.Submit(context.Background(), "acme", s)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return st
}

// StoreMaker makes the Store a scenario runs on (inside its synctest
// bubble: a store's goroutines are the bubble's, closed in t.Cleanup).
type StoreMaker func(t *testing.T) Store

// RunnerScenarios runs the runner's scenarios on the stores newStore
// makes: the memory store here, SQLite and PostgreSQL (jobsdb) from
// store_test.go.
func RunnerScenarios(t *testing.T, newStore StoreMaker) {
	for _, c := range []struct {
		name string
		f    func(*testing.T, StoreMaker)
	}{
		{"ScoresEveryRowOnce", testRunnerScoresEveryRowOnce},
		{"CancelStopsWithinASecond", testRunnerCancelStopsWithinASecond},
		{"FailsPastTheErrorRate", testRunnerFailsPastTheErrorRate},
		{"FailsAtTheScan", testRunnerFailsAtTheScan},
		{"PredictorErrors", testRunnerPredictorErrors},
		{"ResumesAfterACrash", testRunnerResumesAfterACrash},
		{"RunShard", testRunShard},
		{"RunShardExitsWhenItsChunksAreDone", testRunShardExitsWhenItsChunksAreDone},
		{"Metrics", testRunnerMetrics},
		{"CSVToParquet", testRunnerCSVToParquet},
		{"CancelDuringTheScan", testRunnerCancelDuringTheScan},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(t, newStore) })
	}
}

func TestRunner(t *testing.T) {
	RunnerScenarios(t, func(*testing.T) Store { return newMemStore() })
}

// A job with bad rows of every kind: a line that is no JSON, an id
// repeated across chunks and within one, a row the model refuses. Each
// is counted failed and listed; the duplicates and the unreadable line
// stay out of the output, the refused row is in it with its error, every
// other id once with its score.
func testRunnerScoresEveryRowOnce(t *testing.T, newStore StoreMaker) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, newStore)
		in := jsonlInput(10) +
			"not json\n" + // line 11
			`{"id":"r2","x":5}` + "\n" + // line 12: r2 is in chunk 0
			`{"id":"neg","x":-1}` + "\n" + // line 13: refused
			`{"id":"r11","x":11}` + "\n" + `{"id":"r11","x":12}` + "\n" // 14, 15: a duplicate within a chunk
		e.write(t, "in.jsonl", in)
		cfg := e.config()
		r := NewRunner(cfg)
		cfg.Wake = r.Wake
		m := NewManager(cfg)
		stop := startRun(r)
		defer stop()
		st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}, ChunkRows: 4, MaxErrorRate: ptr(0.5)})
		if st.Spec.Version != 3 || st.Spec.VersionID != "fraud@3" || st.State != Queued {
			t.Fatalf("submitted %+v; want fraud@3 pinned, queued", st.Spec)
		}
		j := waitFor(t, e.store, st.ID, 10*time.Second, inState(Succeeded))
		if j.RowsTotal != 15 || j.RowsDone != 15 || j.RowsFailed != 4 || j.ChunksDone != 4 || j.ChunksTotal != 4 || j.RowsRedone != 0 {
			t.Fatalf("counts %+v; want 15 rows, 4 failed, 4 chunks", j.JobCounts)
		}
		var msgs []string
		for _, re := range j.Errors {
			msgs = append(msgs, fmt.Sprintf("%d:%d:%s:%s", re.Chunk, re.Line, re.ID, re.Message))
		}
		all := strings.Join(msgs, "\n")
		for _, want := range []string{"2:11::not a JSON object", `2:12:r2:duplicate id "r2" (first on line 3)`, "3:13:neg:must be ≥ 0", `3:15:r11:duplicate id "r11" (first on line 14)`} {
			if !strings.Contains(all, want) {
				t.Errorf("errors lack %q:\n%s", want, all)
			}
		}
		out := readJSONL(t, filepath.Join(e.dir, "out.jsonl"))
		if _, err := os.Stat(filepath.Join(e.dir, "out.jsonl.parts")); !os.IsNotExist(err) {
			t.Errorf("a succeeded job's parts are left: %v", err)
		}
		if got, want := order(t, filepath.Join(e.dir, "out.jsonl")), "r0,r1,r2,r3,r4,r5,r6,r7,r8,r9,neg,r11"; got != want {
			t.Errorf("output in order %s; want the input's %s", got, want)
		}
		if got, want := ids(out), "neg,r0,r1,r11,r2,r3,r4,r5,r6,r7,r8,r9"; got != want {
			t.Fatalf("output ids %s; want %s", got, want)
		}
		if o := out["r2"]; o.Outputs["score"] != 4.0 || o.VersionID != "fraud@3" {
			t.Errorf("r2 = %+v; want its first row's score 4 by fraud@3", o)
		}
		if o := out["neg"]; o.Error == nil || o.Error.Field != "x" || o.Outputs != nil {
			t.Errorf("neg = %+v; want its error on field x", o)
		}
		if o := out["r11"]; o.Outputs["score"] != 22.0 {
			t.Errorf("r11 = %+v; want the first row's score", o)
		}
		if st2, err := m.Get(context.Background(), "acme", false, st.ID); err != nil || st2.ETASeconds != 0 {
			t.Errorf("status %+v, %v; want ETA 0", st2, err)
		}
	})
}

// A cancel stops a running job within a second: the predict calls in
// flight are cancelled, the parts committed are kept, the job is marked
// incomplete.
func testRunnerCancelStopsWithinASecond(t *testing.T, newStore StoreMaker) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, newStore)
		e.write(t, "in.jsonl", jsonlInput(100))
		cfg := e.config()
		r := NewRunner(cfg)
		cfg.Wake = r.Wake
		m := NewManager(cfg)
		stop := startRun(r)
		defer stop()
		e.pred.free = 3
		e.pred.setBlock(make(chan struct{})) // every call after the first 3 hangs
		st := submit(t, m, Submit{Model: "fraud", Version: 2, Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}, ChunkRows: 10})
		waitFor(t, e.store, st.ID, time.Second, func(Job) bool { _, _, n := e.pred.stats(); return n > 0 })
		asked := time.Now()
		if _, err := m.Cancel(context.Background(), "acme", false, st.ID); err != nil {
			t.Fatal(err)
		}
		j := waitFor(t, e.store, st.ID, time.Second, inState(Cancelled))
		if took := time.Since(asked); took > time.Second {
			t.Errorf("cancelled after %v; want within a second", took)
		}
		if !j.Incomplete || j.ChunksDone == j.ChunksTotal {
			t.Errorf("job %+v; want incomplete with chunks left", j)
		}
		synctest.Wait()
		if _, _, n := e.pred.stats(); n != 0 {
			t.Errorf("%d predict calls still in flight after the cancel", n)
		}
		if _, err := m.Cancel(context.Background(), "acme", false, st.ID); errs.CodeOf(err) != errs.JobConflict {
			t.Errorf("a second cancel: %v; want job_conflict", err)
		}
	})
}

// A job fails as soon as its failures pass maxErrorRate, naming the rate.
func testRunnerFailsPastTheErrorRate(t *testing.T, newStore StoreMaker) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, newStore)
		e.write(t, "in.jsonl", `{"id":"a","x":-1}`+"\n"+jsonlInput(50))
		cfg := e.config()
		r := NewRunner(cfg)
		m := NewManager(cfg)
		stop := startRun(r)
		defer stop()
		st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}, ChunkRows: 5})
		j := waitFor(t, e.store, st.ID, 10*time.Second, inState(Failed))
		if !strings.Contains(j.Message, "maxErrorRate 0") || !j.Incomplete || j.ChunksDone == j.ChunksTotal {
			t.Errorf("failed job %+v; want the rate named, incomplete, chunks left", j)
		}
	})
}

// Bad rows found by the scan past the rate fail the job before any chunk
// runs, with the scan's first errors listed.
func testRunnerFailsAtTheScan(t *testing.T, newStore StoreMaker) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, newStore)
		e.write(t, "in.jsonl", jsonlInput(3)+"oops\n"+jsonlInput(3)) // r0..r2 twice
		cfg := e.config()
		r := NewRunner(cfg)
		m := NewManager(cfg)
		stop := startRun(r)
		defer stop()
		st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}, MaxErrorRate: ptr(0.25)})
		j := waitFor(t, e.store, st.ID, 10*time.Second, inState(Failed))
		if !strings.Contains(j.Message, "4 of 7 rows failed") || len(j.Errors) != 4 || j.ChunksDone != 0 {
			t.Errorf("job %+v; want failed at the scan with its 4 errors", j)
		}
		if _, calls, _ := e.pred.stats(); calls != 0 {
			t.Errorf("%d rows scored; want none", calls)
		}
	})
}

// The predictor's retryable errors back off and retry the chunk without
// counting a failure; another error fails the job with its message.
func testRunnerPredictorErrors(t *testing.T, newStore StoreMaker) {
	qf := &errs.Error{Code: errs.QueueFull, Message: "batch work queue is full", RetryAfter: time.Second}
	cases := []struct {
		name  string
		errs  []error
		state State
		msg   string
	}{
		{"retryable", []error{qf, qf, errs.New(errs.Unavailable, "replica crashed")}, Succeeded, ""},
		{"fatal", []error{errs.New(errs.NotFound, "version fraud@3 is not loaded")}, Failed, "fraud@3: version fraud@3 is not loaded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnvWith(t, newStore)
				e.pred.errs = c.errs
				e.write(t, "in.jsonl", jsonlInput(20))
				cfg := e.config()
				cfg.ChunksInFlight = 1
				r := NewRunner(cfg)
				m := NewManager(cfg)
				stop := startRun(r)
				defer stop()
				st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}, ChunkRows: 5})
				j := waitFor(t, e.store, st.ID, 30*time.Second, func(j Job) bool { return Final(j.State) })
				if j.State != c.state || !strings.Contains(j.Message, c.msg) || (c.state == Succeeded && j.RowsFailed != 0) {
					t.Errorf("job %s %q failed %d; want %s %q", j.State, j.Message, j.RowsFailed, c.state, c.msg)
				}
			})
		})
	}
}

// A runner killed between a chunk's commit and its completion: another
// runner (a restarted server: another owner) claims the chunk once its
// lease expires, writes nothing again, and completes it. Rows redone are
// one chunk; the output holds every id once.
func testRunnerResumesAfterACrash(t *testing.T, newStore StoreMaker) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, newStore)
		e.write(t, "in.jsonl", jsonlInput(40))
		cfg := e.config()
		cfg.ChunksInFlight, cfg.Runners = 1, 1
		cfg.Owner = "first"
		r1 := NewRunner(cfg)
		m := NewManager(cfg)
		e.hooks.setCompleteHook(func(chunk int) error {
			if chunk == 2 {
				return fmt.Errorf("the store takes no completion of chunk 2")
			}
			return nil
		})
		stop1 := startRun(r1)
		st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}, ChunkRows: 10})
		waitFor(t, e.store, st.ID, 10*time.Second, func(j Job) bool { return j.ChunksDone == 2 })
		time.Sleep(2 * time.Second) // chunk 2 committed, its completion retried
		stop1()                     // the crash: its chunk's lease is left to expire
		e.hooks.setCompleteHook(nil)
		parts, _ := filepath.Glob(filepath.Join(e.dir, "out.jsonl.parts", "chunk-*"))
		if len(parts) != 3 {
			t.Fatalf("parts %v; want 3 committed (2 recorded done, 1 not)", parts)
		}
		cfg.Owner = "second"
		r2 := NewRunner(cfg)
		stop2 := startRun(r2)
		defer stop2()
		j := waitFor(t, e.store, st.ID, 30*time.Second, inState(Succeeded))
		if j.RowsRedone != 10 || j.RowsDone != 40 {
			t.Errorf("counts %+v; want 10 rows redone of 40", j.JobCounts)
		}
		if got := len(readJSONL(t, filepath.Join(e.dir, "out.jsonl"))); got != 40 {
			t.Errorf("output has %d ids; want 40", got)
		}
	})
}

// Shards split a job: each runs its chunks, the last one assembles, no
// chunk is done twice.
func testRunShard(t *testing.T, newStore StoreMaker) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, newStore)
		e.write(t, "in.jsonl", jsonlInput(95))
		cfg := e.config()
		m := NewManager(cfg)
		st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}, ChunkRows: 10})
		// The scan runs in whichever shard gets there first.
		var wg sync.WaitGroup
		shardErrs := make([]error, 3)
		for i := range 3 {
			c := cfg
			c.Owner = fmt.Sprintf("shard-%d", i)
			r := NewRunner(c)
			wg.Go(func() { shardErrs[i] = r.RunShard(context.Background(), st.ID, i, 3) })
		}
		wg.Wait()
		for i, err := range shardErrs {
			if err != nil {
				t.Errorf("shard %d: %v", i, err)
			}
		}
		j, _ := e.store.Get(context.Background(), st.ID)
		if j.State != Succeeded || j.RowsDone != 95 || j.RowsRedone != 0 || j.ChunksDone != 10 {
			t.Fatalf("job %s %+v; want succeeded, 95 rows, none redone", j.State, j.JobCounts)
		}
		if got := len(readJSONL(t, filepath.Join(e.dir, "out.jsonl"))); got != 95 {
			t.Errorf("output has %d ids; want 95", got)
		}
		if _, rows, _ := e.pred.stats(); rows != 95 {
			t.Errorf("%d rows scored; want 95 (each once)", rows)
		}
	})
}

// A shard whose chunks are all done exits though other shards' chunks
// are left (their runners may not have started yet).
func testRunShardExitsWhenItsChunksAreDone(t *testing.T, newStore StoreMaker) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, newStore)
		e.write(t, "in.jsonl", jsonlInput(40))
		cfg := e.config()
		m := NewManager(cfg)
		st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}, ChunkRows: 10})
		if err := NewRunner(cfg).RunShard(context.Background(), st.ID, 0, 2); err != nil {
			t.Fatal(err)
		}
		j, _ := e.store.Get(context.Background(), st.ID)
		if j.State != Running || j.ChunksDone != 2 {
			t.Fatalf("job %s with %d chunks done; want running with shard 0's 2", j.State, j.ChunksDone)
		}
		if e.mem != nil {
			if owners := e.mem.chunkOwners(st.ID); owners != "done  done  " {
				t.Errorf("chunks %q; want 0 and 2 done", owners)
			}
		}
		if err := NewRunner(cfg).RunShard(context.Background(), st.ID, 1, 2); err != nil {
			t.Fatal(err)
		}
		if j, _ := e.store.Get(context.Background(), st.ID); j.State != Succeeded {
			t.Fatalf("job %s; want succeeded after shard 1", j.State)
		}
	})
}

// A lost lease abandons the chunk: nothing is recorded by the runner
// that lost it.

// The per-job series count the rows while the job runs and are gone once
// it ends; sluice_jobs counts the store's jobs by state.
func testRunnerMetrics(t *testing.T, newStore StoreMaker) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, newStore)
		e.write(t, "in.jsonl", `{"id":"bad","x":-1}`+"\n"+jsonlInput(29))
		reg := prometheus.NewRegistry()
		cfg := e.config()
		cfg.Metrics = reg
		r := NewRunner(cfg)
		m := NewManager(cfg)
		e.pred.free = 2
		block := make(chan struct{})
		e.pred.setBlock(block)
		stop := startRun(r)
		defer stop()
		st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}, ChunkRows: 10, MaxErrorRate: ptr(0.5)})
		waitFor(t, e.store, st.ID, 5*time.Second, func(j Job) bool { return j.ChunksDone == 2 })
		time.Sleep(time.Second) // the watcher sets the rate
		if v := testutil.ToFloat64(r.m.rows.WithLabelValues(st.ID, "ok")); v != 19 {
			t.Errorf("rows ok = %g; want 19", v)
		}
		if v := testutil.ToFloat64(r.m.rows.WithLabelValues(st.ID, "failed")); v != 1 {
			t.Errorf("rows failed = %g; want 1", v)
		}
		if n := testutil.CollectAndCount(r.m.rps); n != 1 {
			t.Errorf("%d rows/s series; want the job's", n)
		}
		close(block)
		waitFor(t, e.store, st.ID, 5*time.Second, inState(Succeeded))
		synctest.Wait()
		if n := testutil.CollectAndCount(r.m.rows) + testutil.CollectAndCount(r.m.rps); n != 0 {
			t.Errorf("%d per-job series left after the job ended", n)
		}
		if n := testutil.CollectAndCount(r.m.chunk); n != 1 {
			t.Errorf("chunk histogram missing")
		}
		want := "# HELP sluice_jobs Batch jobs in the job store, by state.\n# TYPE sluice_jobs gauge\n" +
			"sluice_jobs{state=\"cancelled\"} 0\nsluice_jobs{state=\"failed\"} 0\nsluice_jobs{state=\"queued\"} 0\nsluice_jobs{state=\"running\"} 0\nsluice_jobs{state=\"succeeded\"} 1\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_jobs"); err != nil {
			t.Error(err)
		}
	})
}

// CSV in, Parquet out: every id once.
func testRunnerCSVToParquet(t *testing.T, newStore StoreMaker) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, newStore)
		var b strings.Builder
		b.WriteString("id,x,extra\n")
		for i := range 25 {
			fmt.Fprintf(&b, "c%d,%d,ignored\n", i, i)
		}
		b.WriteString("bad,notanumber,z\n")
		e.write(t, "in.csv", b.String())
		cfg := e.config()
		r := NewRunner(cfg)
		m := NewManager(cfg)
		stop := startRun(r)
		defer stop()
		st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.csv"}, Output: IO{URI: "file:out.parquet"}, ChunkRows: 7, MaxErrorRate: ptr(0.1)})
		j := waitFor(t, e.store, st.ID, 10*time.Second, inState(Succeeded))
		if j.RowsTotal != 26 || j.RowsFailed != 1 || len(j.Errors) != 1 || j.Errors[0].Line != 27 || j.Errors[0].Field != "x" {
			t.Fatalf("job %+v errors %+v; want 26 rows, the bad one on line 27 field x", j.JobCounts, j.Errors)
		}
		f, err := os.Open(filepath.Join(e.dir, "out.parquet"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st2, _ := f.Stat()
		pf, err := parquet.OpenFile(f, st2.Size())
		if err != nil {
			t.Fatal(err)
		}
		if pf.NumRows() != 26 { // the bad row has its id: written with its error
			t.Errorf("parquet output has %d rows; want 26", pf.NumRows())
		}
	})
}

// A cancel during the scan stops it: the job is cancelled, nothing is
// scored.
func testRunnerCancelDuringTheScan(t *testing.T, newStore StoreMaker) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvWith(t, newStore)
		e.write(t, "in.jsonl", jsonlInput(10))
		cfg := e.config()
		slow := &slowObjects{ObjectStore: e.local}
		cfg.Objects = func(jobio.Location) (jobio.ObjectStore, error) { return slow, nil }
		r := NewRunner(cfg)
		m := NewManager(cfg)
		st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}})
		slow.delay.Store(int64(time.Hour)) // every read from now on takes an hour
		stop := startRun(r)
		defer stop()
		time.Sleep(100 * time.Millisecond)
		if _, err := e.store.RequestCancel(context.Background(), st.ID); err != nil { // as a cancel that found the job running would
			t.Fatal(err)
		}
		j := waitFor(t, e.store, st.ID, time.Second, func(j Job) bool { return Final(j.State) })
		if j.State != Cancelled || j.Scanned {
			t.Fatalf("job %s scanned %v; want cancelled before its scan ended", j.State, j.Scanned)
		}
	})
}

// slowObjects delays every read of an opened object by delay (or until
// the object's context ends: here, never; the runner's scan is cut by its
// context through jobio's reader checks between chunks).
type slowObjects struct {
	jobio.ObjectStore
	delay atomic.Int64
}

func (s *slowObjects) Open(ctx context.Context, key string) (jobio.Object, error) {
	o, err := s.ObjectStore.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return &slowObject{Object: o, ctx: ctx, d: time.Duration(s.delay.Load())}, nil
}

type slowObject struct {
	jobio.Object
	ctx context.Context
	d   time.Duration
}

func (o *slowObject) Read(p []byte) (int, error) {
	if o.d > 0 {
		select {
		case <-time.After(o.d):
		case <-o.ctx.Done():
			return 0, o.ctx.Err()
		}
	}
	return o.Object.Read(p)
}

func TestRunnerAbandonsALostLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.write(t, "in.jsonl", jsonlInput(10))
		cfg := e.config()
		cfg.Runners, cfg.ChunksInFlight = 1, 1
		r := NewRunner(cfg)
		m := NewManager(cfg)
		block := make(chan struct{})
		e.pred.setBlock(block)
		stop := startRun(r)
		defer stop()
		st := submit(t, m, Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}})
		waitFor(t, e.store, st.ID, 5*time.Second, func(Job) bool { _, _, n := e.pred.stats(); return n > 0 })
		e.mem.mu.Lock()
		e.mem.jobs[st.ID].chunks[0].owner = "thief" // another runner took it
		e.mem.mu.Unlock()
		time.Sleep(cfg.withDefaults().Lease / 2) // a renewal finds it lost
		synctest.Wait()
		if _, _, n := e.pred.stats(); n != 0 {
			t.Fatalf("the predict call goes on after the lease was lost")
		}
		j, _ := e.store.Get(context.Background(), st.ID)
		if j.ChunksDone != 0 {
			t.Fatalf("chunk recorded done by the runner that lost it")
		}
		close(block)
	})
}
