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
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
)

// TestPostgresJobShards: one `sluice serve --job-runners 0` and two
// `sluice job run --shard 0/2` and `1/2` processes on one PostgreSQL
// split a job. Both runners exit 0; the job succeeds with every chunk
// done, none redone; every chunk was claimed once, each by its shard's
// runner; the output holds every input id exactly once, scored.
func TestPostgresJobShards(t *testing.T) {
	store := pgtest.URL(t)
	data, dir := t.TempDir(), t.TempDir()
	const rows, chunkRows = 3000, 100
	f, err := os.Create(filepath.Join(dir, "in.jsonl"))
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

	srv := startServer(t, "--data", data, "--store", store, "--jobs-dir", dir, "--job-runners", "0")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", srv.logs)
		}
	})
	out, stderr, err := sluice(t, "job", "submit", "fraud", "--input", "file:in.jsonl", "--output", "file:out.jsonl",
		"--chunk-rows", fmt.Sprint(chunkRows), "--id", "shards", "--server", srv.url)
	if err != nil {
		t.Fatalf("job submit: %v\n%s%s", err, out, stderr)
	}

	// The two runners, at once.
	type result struct {
		shard    string
		out, err string
		code     int
	}
	results := make(chan result, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, shard := range []string{"0/2", "1/2"} {
		cmd := exec.CommandContext(ctx, binary, "job", "run", "shards", "--shard", shard, "--store", store,
			"--jobs-dir", dir, "--server", srv.url, "--lease", "3s", "--owner", "runner-"+shard[:1])
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			err := cmd.Wait()
			code := 0
			if err != nil {
				code = -1
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
			}
			results <- result{shard, o.String(), e.String(), code}
		}()
	}
	for range 2 {
		r := <-results
		if r.code != 0 || !strings.Contains(r.out, "no chunk left") {
			t.Errorf("sluice job run --shard %s: exit %d\nstdout: %s\nstderr: %s", r.shard, r.code, r.out, r.err)
		} else {
			t.Logf("shard %s: %s", r.shard, strings.TrimSpace(r.out))
		}
	}

	// Both ended: the job is final (the last runner assembled the output).
	st, err := newClient(srv.url).Job(context.Background(), "shards")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "succeeded" || st.ChunksTotal != rows/chunkRows || st.ChunksDone != st.ChunksTotal ||
		st.RowsDone != rows || st.RowsFailed != 0 || st.RowsRedone != 0 {
		t.Errorf("job after both shards: %s, chunks %d/%d, rows %d (failed %d, redone %d); want succeeded, %d/%d, %d, 0, 0",
			st.State, st.ChunksDone, st.ChunksTotal, st.RowsDone, st.RowsFailed, st.RowsRedone, rows/chunkRows, rows/chunkRows, rows)
	}

	// Each chunk claimed once, by its shard's runner.
	conn, err := pgx.Connect(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	q, err := conn.Query(ctx, `SELECT idx, state, owner, claims FROM job_chunks WHERE job = 'shards' ORDER BY idx`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for q.Next() {
		var idx, claims int
		var state, owner string
		if err := q.Scan(&idx, &state, &owner, &claims); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("runner-%d", idx%2); state != "done" || claims != 1 || owner != want {
			t.Errorf("chunk %d: %s by %s, claimed %d times; want done by %s, once", idx, state, owner, claims, want)
		}
		n++
	}
	if q.Err() != nil || n != rows/chunkRows {
		t.Errorf("%d chunks in the store (%v), want %d", n, q.Err(), rows/chunkRows)
	}

	// Every id once, scored.
	b, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
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
	for i := range rows {
		if id := fmt.Sprintf("s%05d", i); seen[id] != 1 {
			t.Errorf("id %s is in the output %d times, want once", id, seen[id])
		}
	}
	if len(seen) != rows {
		t.Errorf("%d ids in the output, want %d", len(seen), rows)
	}
}
