package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
	"github.com/sluiceml/sluice/internal/testwait"
)

// shardJob is a job of the fraud example on one PostgreSQL, scored by
// `sluice job run` processes beside a `sluice serve --job-runners 0`.
type shardJob struct {
	store, dir string
	rows       int
	srv        *proc
}

// newShardJob writes rows input lines, starts the server and submits
// job "shards" in chunks of chunkRows.
func newShardJob(t *testing.T, rows, chunkRows int) *shardJob {
	t.Helper()
	j := &shardJob{store: pgtest.URL(t), dir: t.TempDir(), rows: rows}
	f, err := os.Create(filepath.Join(j.dir, "in.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range rows {
		fmt.Fprintf(w, `{"id":"s%05d","amount":%g,"accountAgeDays":%d,"declines5m":%d,"country":%q}`+"\n",
			i, float64(i%700)*1.5+1, i%3000, i%4, [...]string{"US", "GB", "DE"}[i%3])
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	j.srv = startServer(t, "--data", t.TempDir(), "--store", j.store, "--jobs-dir", j.dir, "--job-runners", "0")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", j.srv.logs)
		}
	})
	out, stderr, err := sluice(t, "job", "submit", "fraud", "--input", "file:in.jsonl", "--output", "file:out.jsonl",
		"--chunk-rows", fmt.Sprint(chunkRows), "--id", "shards", "--server", j.srv.url)
	if err != nil {
		t.Fatalf("job submit: %v\n%s%s", err, out, stderr)
	}
	return j
}

// runner is one `sluice job run` process.
type runner struct {
	shard    string
	cmd      *exec.Cmd
	out, err strings.Builder
	done     chan struct{}
	code     int
}

// run starts `sluice job run shards --shard shard` as owner.
func (j *shardJob) run(t *testing.T, shard, owner string) *runner {
	t.Helper()
	r := &runner{shard: shard, done: make(chan struct{})}
	r.cmd = exec.Command(binary, "job", "run", "shards", "--shard", shard, "--store", j.store,
		"--jobs-dir", j.dir, "--server", j.srv.url, "--lease", "5s", "--owner", owner)
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.err
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		err := r.cmd.Wait()
		if err != nil {
			r.code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				r.code = ee.ExitCode()
			}
		}
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

// wait waits for the runner's exit and checks it said its shard is done.
func (r *runner) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("sluice job run --shard %s did not end\n%s", r.shard, r.err.String())
	}
	if r.code != 0 || !strings.Contains(r.out.String(), "no chunk left") {
		t.Errorf("sluice job run --shard %s: exit %d\nstdout: %s\nstderr: %s", r.shard, r.code, r.out.String(), r.err.String())
		return
	}
	t.Logf("shard %s: %s", r.shard, strings.TrimSpace(r.out.String()))
}

// chunk is a row of job_chunks.
type chunk struct {
	idx, claims  int
	state, owner string
}

func (j *shardJob) chunks(t *testing.T) []chunk {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, j.store)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	q, err := conn.Query(ctx, `SELECT idx, state, owner, claims FROM job_chunks WHERE job = 'shards' ORDER BY idx`)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var out []chunk
	for q.Next() {
		var c chunk
		if err := q.Scan(&c.idx, &c.state, &c.owner, &c.claims); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkOutput: every input id exactly once in the output, scored.
func (j *shardJob) checkOutput(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(j.dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for line := range strings.Lines(string(b)) {
		var r struct {
			ID        string         `json:"id"`
			VersionID string         `json:"versionId"`
			Outputs   map[string]any `json:"outputs"`
			Error     any            `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		if r.Error != nil || r.Outputs["riskScore"] == nil || !strings.HasPrefix(r.VersionID, "fraud@") {
			t.Errorf("output row %s: %s", r.ID, strings.TrimSpace(line))
		}
		seen[r.ID]++
	}
	bad := 0
	for i := range j.rows {
		if id := fmt.Sprintf("s%05d", i); seen[id] != 1 && bad < 10 {
			t.Errorf("id %s is in the output %d times, want once", id, seen[id])
			bad++
		}
	}
	if len(seen) != j.rows {
		t.Errorf("%d ids in the output, want %d", len(seen), j.rows)
	}
}

// TestPostgresJobShards: one `sluice serve --job-runners 0` and two
// `sluice job run --shard 0/2` and `1/2` processes on one PostgreSQL
// split a job. Both runners exit 0; the job succeeds with every chunk
// done, none redone; every chunk was claimed once, each by its shard's
// runner; the output holds every input id exactly once, scored.
func TestPostgresJobShards(t *testing.T) {
	const rows, chunkRows = 3000, 100
	j := newShardJob(t, rows, chunkRows)
	rs := []*runner{j.run(t, "0/2", "runner-0"), j.run(t, "1/2", "runner-1")}
	for _, r := range rs {
		r.wait(t)
	}
	st, err := newClient(j.srv.url).Job(context.Background(), "shards")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "succeeded" || st.ChunksTotal != rows/chunkRows || st.ChunksDone != st.ChunksTotal ||
		st.RowsDone != rows || st.RowsFailed != 0 || st.RowsRedone != 0 {
		t.Errorf("job after both shards: %s, chunks %d/%d, rows %d (failed %d, redone %d); want succeeded, %d/%d, %d, 0, 0",
			st.State, st.ChunksDone, st.ChunksTotal, st.RowsDone, st.RowsFailed, st.RowsRedone, rows/chunkRows, rows/chunkRows, rows)
	}
	cs := j.chunks(t)
	for _, c := range cs {
		if want := fmt.Sprintf("runner-%d", c.idx%2); c.state != "done" || c.claims != 1 || c.owner != want {
			t.Errorf("chunk %d: %s by %s, claimed %d times; want done by %s, once", c.idx, c.state, c.owner, c.claims, want)
		}
	}
	if len(cs) != rows/chunkRows {
		t.Errorf("%d chunks in the store, want %d", len(cs), rows/chunkRows)
	}
	j.checkOutput(t)
}

// TestPostgresJobShardKilled: shard 0's runner is killed (SIGKILL) mid-job
// and started again; its chunks' leases expire and the new runner claims
// them. The job succeeds with every id once in the output; the chunks
// claimed twice are shard 0's, at most the two it had in flight, and
// rowsRedone counts their rows.
func TestPostgresJobShardKilled(t *testing.T) {
	const rows, chunkRows = 20000, 50
	j := newShardJob(t, rows, chunkRows)
	r0 := j.run(t, "0/2", "runner-0")
	r1 := j.run(t, "1/2", "runner-1")
	// Kill shard 0's runner once it has done some of its chunks and not
	// all of them.
	err := testwait.Poll(2*time.Minute, func() error {
		done := 0
		for _, c := range j.chunks(t) {
			if c.owner == "runner-0" && c.state == "done" {
				done++
			}
		}
		if done < 10 {
			return fmt.Errorf("runner-0 has done %d chunks", done)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r0.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-r0.done
	left := 0
	for _, c := range j.chunks(t) {
		if c.idx%2 == 0 && c.state != "done" {
			left++
		}
	}
	if left == 0 {
		t.Skip("runner-0 finished its shard before it was killed: the machine outran the poll")
	}
	t.Logf("killed runner-0 with %d chunks of its shard not done", left)
	r0b := j.run(t, "0/2", "runner-0b")
	r0b.wait(t)
	r1.wait(t)

	st, err := newClient(j.srv.url).Job(context.Background(), "shards")
	if err != nil {
		t.Fatal(err)
	}
	redone := 0
	for _, c := range j.chunks(t) {
		if c.state != "done" {
			t.Errorf("chunk %d: %s", c.idx, c.state)
		}
		if c.claims > 1 {
			redone++
			if c.idx%2 != 0 || c.owner != "runner-0b" || c.claims != 2 {
				t.Errorf("chunk %d claimed %d times, done by %s: want only shard 0's redone, by runner-0b, once more", c.idx, c.claims, c.owner)
			}
		}
	}
	if st.State != "succeeded" || st.ChunksDone != st.ChunksTotal || st.RowsDone != rows || redone > 2 || st.RowsRedone != int64(redone*chunkRows) {
		t.Errorf("job after the kill: %s, chunks %d/%d, rows %d, redone %d rows in %d chunks; want succeeded, all, %d, ≤ 2 chunks (the runner's in flight) of %d rows",
			st.State, st.ChunksDone, st.ChunksTotal, st.RowsDone, st.RowsRedone, redone, rows, chunkRows)
	}
	t.Logf("after kill -9: %d chunks redone (%d rows)", redone, st.RowsRedone)
	j.checkOutput(t)
}
