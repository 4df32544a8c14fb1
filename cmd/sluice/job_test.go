package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/api"
)

func jobAt(state api.JobState, done, total, failed int64) api.JobStatus {
	return api.JobStatus{Job: api.Job{ID: "j1", State: state, Scanned: total > 0,
		Spec:      api.JobSpec{Model: "fraud", Version: 3, VersionID: "fraud@3", Input: api.JobIO{URI: "file:in.jsonl", Format: "jsonl"}, Output: api.JobIO{URI: "file:out.jsonl", Format: "jsonl"}, IDField: "id", ChunkRows: 1000},
		JobCounts: api.JobCounts{RowsTotal: total, RowsDone: done, RowsFailed: failed, ChunksTotal: int(total / 1000), ChunksDone: int(done / 1000)}},
		RowsPerSecond: 12345.4, ETASeconds: 44.2}
}

func TestJobProgressText(t *testing.T) {
	running := jobAt("running", 450_000, 1_000_000, 3)
	queued := jobAt("queued", 0, 0, 0)
	queued.ETASeconds = -1
	cancelling := running
	cancelling.CancelRequested = true
	for _, c := range []struct {
		name string
		st   api.JobStatus
		line string // progressLine
		bar  string // progressBar at 200 columns
	}{
		{"running", running, "running 45.0% 450000/1000000 rows, 3 failed, 0 redone, chunks 450/1000, 12345 rows/s, ETA 45s",
			"[##########--------------]  45.0%  450,000/1,000,000 rows  3 failed  0 redone  chunks 450/1,000  12,345 rows/s  ETA 45s"},
		{"queued", queued, "queued, reading the input", "[------------------------] queued: reading the input"},
		{"cancelling", cancelling, "running (cancelling) 45.0% 450000/1000000 rows, 3 failed, 0 redone, chunks 450/1000, 12345 rows/s, ETA 45s",
			"[##########--------------] cancelling   45.0%  450,000/1,000,000 rows  3 failed  0 redone  chunks 450/1,000  12,345 rows/s  ETA 45s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := progressLine(&c.st); got != c.line {
				t.Errorf("line\n got %q\nwant %q", got, c.line)
			}
			if got := progressBar(&c.st, 200); got != c.bar {
				t.Errorf("bar\n got %q\nwant %q", got, c.bar)
			}
		})
	}
	if got := progressBar(&running, 40); len([]rune(got)) != 39 {
		t.Errorf("a 40-column bar is %d columns: %q", len([]rune(got)), got)
	}
	for _, c := range []struct {
		secs float64
		want string
	}{{-1, "?"}, {0, "-"}, {0.2, "1s"}, {59, "59s"}, {61, "1m01s"}, {3600 * 3.5, "3h30m"}} {
		if got := eta(c.secs); got != c.want {
			t.Errorf("eta(%g) = %q, want %q", c.secs, got, c.want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -12345: "-12,345"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestJobStatusText(t *testing.T) {
	st := jobAt("failed", 3000, 10_000, 40)
	st.Message = "40 of 10000 rows failed, more than maxErrorRate 0 allows (0)"
	st.Errors = []api.JobRowError{{Chunk: 0, Line: 12, ID: "tx-9", Field: "amount", Message: "must be a number"}, {Line: 40, Message: "duplicate id"}}
	var b bytes.Buffer
	writeJobStatus(&b, &st)
	text := squeeze(b.String())
	for _, want := range []string{"state failed", "message 40 of 10000 rows failed", "version fraud@3", "rows 3,000 of 10,000 done (30.0%), 40 failed, 0 redone",
		"chunks 3 of 10 (1000 rows each)", "first errors (2 shown of 40 failed rows):", `  line 12 id "tx-9": amount: must be a number`, "  line 40: duplicate id"} {
		if !strings.Contains(text, squeeze(want)) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	if err := jobExit(&st); err == nil || !strings.Contains(err.Error(), "job j1 failed: 40 of 10000") {
		t.Errorf("exit: %v", err)
	}
	b.Reset()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	a, c := jobAt("running", 500, 1000, 0), jobAt("queued", 0, 0, 0)
	a.Created, c.ID, c.Created = now.Add(-90*time.Second), "j2-longer-id", now.Add(-3*time.Hour)
	writeJobTable(&b, []api.JobStatus{a, c}, now)
	want := "ID            STATE    VERSION  ROWS   FAILED  DONE   CREATED  INPUT          OUTPUT\n" +
		"j1            running  fraud@3  1,000  0       50.0%  1m ago   file:in.jsonl  file:out.jsonl\n" +
		"j2-longer-id  queued   fraud@3  -      0       -      3h ago   file:in.jsonl  file:out.jsonl\n"
	if b.String() != want {
		t.Errorf("table\n%s\nwant\n%s", b.String(), want)
	}
}

// TestWatchJob: --watch follows a job through a server that answers 503
// for a while (a restart) to its end, one line per change off a
// terminal, and exits by the job's final state.
func TestWatchJob(t *testing.T) {
	for _, c := range []struct {
		final   api.JobState
		wantErr string
	}{{"succeeded", ""}, {"cancelled", "job j1 cancelled: cancelled by the user"}} {
		t.Run(string(c.final), func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				n++
				i := n
				mu.Unlock()
				if r.URL.Path != "/v1/jobs/j1" {
					http.NotFound(w, r)
					return
				}
				var st api.JobStatus
				switch {
				case i <= 2:
					st = jobAt("running", 1000, 4000, 0)
				case i == 3:
					w.WriteHeader(503)
					w.Write([]byte(`{"error":{"code":"unavailable","message":"restarting"}}`))
					return
				case i == 4:
					st = jobAt("running", 3000, 4000, 0)
				default:
					st = jobAt(c.final, 4000, 4000, 0)
					st.ETASeconds = 0
					if c.final == "cancelled" {
						st.Message = "cancelled by the user"
					}
				}
				json.NewEncoder(w).Encode(st)
			}))
			defer ts.Close()
			cmd := &cobra.Command{}
			var out, errOut bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SetContext(context.Background())
			err := watchJob(cmd, newClient(ts.URL), "j1", time.Millisecond)
			if (err == nil) != (c.wantErr == "") || (err != nil && err.Error() != c.wantErr) {
				t.Fatalf("watch: %v, want %q", err, c.wantErr)
			}
			lines := strings.Split(out.String(), "\n")
			var progress []string
			for _, l := range lines {
				if len(l) > 9 && l[2] == ':' && l[5] == ':' {
					progress = append(progress, l[9:])
				}
			}
			want := []string{"running 25.0% 1000/4000 rows, 0 failed, 0 redone, chunks 1/4, 12345 rows/s, ETA 45s",
				"running 75.0% 3000/4000 rows, 0 failed, 0 redone, chunks 3/4, 12345 rows/s, ETA 45s",
				string(c.final) + " 100.0% 4000/4000 rows, 0 failed, 0 redone, chunks 4/4, 12345 rows/s, ETA -"}
			if strings.Join(progress, "\n") != strings.Join(want, "\n") {
				t.Fatalf("progress lines\n%s\nwant\n%s\n(all: %s)", strings.Join(progress, "\n"), strings.Join(want, "\n"), out.String())
			}
			if !strings.Contains(squeeze(out.String()), "state "+string(c.final)) || !strings.Contains(errOut.String(), "retrying") {
				t.Fatalf("out %s\nerr %s", out.String(), errOut.String())
			}
		})
	}
}

// TestWatchJobGivesUpOnA404: a job that is not there ends the watch at once.
func TestWatchJobGivesUpOnA404(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		w.Write([]byte(`{"error":{"code":"job_not_found","field":"id","message":"no job \"j1\""}}`))
	}))
	defer ts.Close()
	cmd := &cobra.Command{}
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetContext(context.Background())
	if err := watchJob(cmd, newClient(ts.URL), "j1", time.Millisecond); err == nil || !strings.Contains(err.Error(), "job_not_found") {
		t.Fatalf("watch: %v", err)
	}
}

// squeeze turns every run of spaces into one.
func squeeze(s string) string {
	for strings.Contains(s, "  ") {
		s = strings.ReplaceAll(s, "  ", " ")
	}
	return s
}
