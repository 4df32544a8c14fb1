package jobs

import (
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

func TestProgress(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	running := func(done, total int64, scanned bool) Job {
		return Job{State: Running, Scanned: scanned, Started: t0, JobCounts: Counts{RowsDone: done, RowsTotal: total}}
	}
	cases := []struct {
		name     string
		j        Job
		now      time.Time
		rps, eta float64
	}{
		{"queued", Job{State: Queued}, t0, 0, -1},
		{"just started", running(0, 100, true), t0, 0, -1},
		{"half way", running(500, 1000, true), t0.Add(10 * time.Second), 50, 10},
		{"not scanned", running(500, 0, false), t0.Add(10 * time.Second), 50, -1},
		{"nothing done yet", running(0, 1000, true), t0.Add(10 * time.Second), 0, -1},
		{"succeeded", Job{State: Succeeded, Scanned: true, Started: t0, Finished: t0.Add(4 * time.Second), JobCounts: Counts{RowsDone: 100, RowsTotal: 100}}, t0.Add(time.Hour), 25, 0},
		{"cancelled before start", Job{State: Cancelled}, t0, 0, 0},
		{"done past total", running(120, 100, true), t0.Add(time.Second), 120, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rps, eta := Progress(c.j, c.now)
			if rps != c.rps || eta != c.eta {
				t.Errorf("Progress = %g rows/s, eta %g; want %g, %g", rps, eta, c.rps, c.eta)
			}
		})
	}
}

func TestOverErrorRate(t *testing.T) {
	cases := []struct {
		failed, total int64
		rate          float64
		want          bool
	}{
		{0, 100, 0, false},
		{1, 100, 0, true},
		{1, 100, 0.01, false}, // exactly the rate is allowed
		{2, 100, 0.01, true},
		{100, 100, 1, false},
		{5, 0, 0, false}, // total unknown: never before the scan
	}
	for _, c := range cases {
		if got := OverErrorRate(c.failed, c.total, c.rate); got != c.want {
			t.Errorf("OverErrorRate(%d, %d, %g) = %v; want %v", c.failed, c.total, c.rate, got, c.want)
		}
	}
	if m := ErrorRateMessage(3, 100, 0.02); !strings.Contains(m, "3 of 100 rows failed") || !strings.Contains(m, "maxErrorRate 0.02 allows (2)") {
		t.Errorf("message %q", m)
	}
}

func TestCanMove(t *testing.T) {
	all := []State{Queued, Running, Succeeded, Failed, Cancelled}
	allowed := map[[2]State]bool{
		{Queued, Running}: true, {Queued, Failed}: true, {Queued, Cancelled}: true,
		{Running, Succeeded}: true, {Running, Failed}: true, {Running, Cancelled}: true,
	}
	for _, from := range all {
		for _, to := range all {
			if got := CanMove(from, to); got != allowed[[2]State{from, to}] {
				t.Errorf("CanMove(%s, %s) = %v", from, to, got)
			}
		}
	}
	if f := From(Succeeded); len(f) != 1 || f[0] != Running {
		t.Errorf("From(succeeded) = %v", f)
	}
	if f := From(Cancelled); len(f) != 2 {
		t.Errorf("From(cancelled) = %v", f)
	}
}

func TestNext(t *testing.T) {
	scanned := func(done, total int, failed, rows int64, rate float64) Job {
		return Job{State: Running, Scanned: true, Spec: Spec{MaxErrorRate: rate},
			JobCounts: Counts{ChunksDone: done, ChunksTotal: total, RowsFailed: failed, RowsTotal: rows}}
	}
	cancel := scanned(1, 4, 0, 40, 0)
	cancel.CancelRequested = true
	finalCancel := Job{State: Succeeded, CancelRequested: true}
	cases := []struct {
		name string
		j    Job
		want Step
	}{
		{"queued", Job{State: Queued}, StepScan},
		{"chunks left", scanned(1, 4, 0, 40, 0), StepRun},
		{"all done", scanned(4, 4, 0, 40, 0), StepAssemble},
		{"past the rate", scanned(1, 4, 1, 40, 0), StepFail},
		{"past the rate with all done", scanned(4, 4, 5, 40, 0.1), StepFail},
		{"within the rate", scanned(4, 4, 4, 40, 0.1), StepAssemble},
		{"cancel requested", cancel, StepCancel},
		{"final wins over cancel", finalCancel, StepStop},
		{"failed", Job{State: Failed}, StepStop},
	}
	for _, c := range cases {
		if got := Next(c.j); got != c.want {
			t.Errorf("%s: Next = %s; want %s", c.name, got, c.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	cases := []struct {
		attempt int
		after   time.Duration
		jitter  float64
		want    time.Duration
	}{
		{1, 0, 0, 100 * time.Millisecond},
		{2, 0, 0, 200 * time.Millisecond},
		{4, 0, 0, 800 * time.Millisecond},
		{20, 0, 0, BackoffMax},
		{1, 3 * time.Second, 0, 3 * time.Second}, // Retry-After wins
		{1, time.Hour, 0, BackoffMax},
		{1, 0, 0.5, 150 * time.Millisecond},
		{20, 0, 0.9, BackoffMax},
	}
	for _, c := range cases {
		if got := Backoff(c.attempt, c.after, c.jitter); got != c.want {
			t.Errorf("Backoff(%d, %v, %g) = %v; want %v", c.attempt, c.after, c.jitter, got, c.want)
		}
	}
}

func TestRetryable(t *testing.T) {
	cases := []struct {
		err   error
		retry bool
		after time.Duration
	}{
		{&errs.Error{Code: errs.QueueFull, RetryAfter: 2 * time.Second}, true, 2 * time.Second},
		{errs.New(errs.QuotaExceeded, "over quota"), true, 0},
		{errs.New(errs.Unavailable, "replica crashed"), true, 0},
		{errs.New(errs.NotReady, "loading"), true, 0},
		{errs.New(errs.NotFound, "no version"), false, 0},
		{errs.New(errs.InvalidArgument, "bad rows"), false, 0},
		{errs.New(errs.PermissionDenied, "no"), false, 0},
	}
	for _, c := range cases {
		if retry, after := Retryable(c.err); retry != c.retry || after != c.after {
			t.Errorf("Retryable(%s) = %v, %v; want %v, %v", errs.CodeOf(c.err), retry, after, c.retry, c.after)
		}
	}
}

func TestNormalize(t *testing.T) {
	base := func() Submit {
		return Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.csv"}}
	}
	t.Run("defaults", func(t *testing.T) {
		s, err := Normalize(base())
		if err != nil {
			t.Fatal(err)
		}
		if s.Input.Format != "jsonl" || s.Output.Format != "csv" || s.IDField != "id" || s.ChunkRows != DefaultChunkRows || s.MaxErrorRate == nil || *s.MaxErrorRate != 0 {
			t.Errorf("normalized %+v", s)
		}
		in := base()
		in.Output.URI = "s3://b/scores"
		if s, _ := Normalize(in); s.Output.Format != "jsonl" {
			t.Errorf("an output without an extension takes the input's format; got %q", s.Output.Format)
		}
	})
	cases := []struct {
		name  string
		edit  func(*Submit)
		field string
		msg   string
	}{
		{"no model", func(s *Submit) { s.Model = "" }, "model", "a model is required"},
		{"bad model", func(s *Submit) { s.Model = "Fraud!" }, "model", "not a model name"},
		{"negative version", func(s *Submit) { s.Version = -1 }, "version", "≥ 1"},
		{"bad id", func(s *Submit) { s.ID = "Job_1" }, "id", "1 to 64 lowercase letters"},
		{"long id", func(s *Submit) { s.ID = strings.Repeat("a", 65) }, "id", "1 to 64"},
		{"no input", func(s *Submit) { s.Input.URI = "" }, "input.uri", "an input is required"},
		{"no output", func(s *Submit) { s.Output.URI = "" }, "output.uri", "an output is required"},
		{"output is input", func(s *Submit) { s.Output.URI = s.Input.URI }, "output.uri", "the output is the input"},
		{"unknown extension", func(s *Submit) { s.Input.URI = "file:in.txt" }, "input.format", "set input.format"},
		{"bad input format", func(s *Submit) { s.Input.Format = "xml" }, "input.format", "use jsonl, csv or parquet"},
		{"bad output format", func(s *Submit) { s.Output.Format = "avro" }, "output.format", "use jsonl, csv or parquet"},
		{"chunk rows 0 is the default, negative is not", func(s *Submit) { s.ChunkRows = -5 }, "chunkRows", "must be 1 to 100000"},
		{"chunk rows too many", func(s *Submit) { s.ChunkRows = MaxChunkRows + 1 }, "chunkRows", "must be 1 to 100000"},
		{"rate above 1", func(s *Submit) { s.MaxErrorRate = ptr(1.5) }, "maxErrorRate", "from 0 to 1"},
		{"rate below 0", func(s *Submit) { s.MaxErrorRate = ptr(-0.1) }, "maxErrorRate", "from 0 to 1"},
		{"id field with a newline", func(s *Submit) { s.IDField = "a\nb" }, "idField", "not a column name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := base()
			c.edit(&s)
			_, err := Normalize(s)
			e := errs.As(err)
			if e == nil || e.Code != errs.JobInvalid || e.Field != c.field || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("Normalize = %v (field %q); want job_invalid on %s with %q", err, e.Field, c.field, c.msg)
			}
		})
	}
}

func TestFormatOf(t *testing.T) {
	for uri, want := range map[string]string{
		"file:a.jsonl": "jsonl", "s3://b/k.CSV": "csv", "file:x/y.parquet": "parquet", "file:a.ndjson": "jsonl", "file:a": "", "s3://b/a.json": "",
	} {
		if got := FormatOf(uri); got != want {
			t.Errorf("FormatOf(%q) = %q; want %q", uri, got, want)
		}
	}
}

func TestLineBytes(t *testing.T) {
	for rows, want := range map[int]int{1: 1 << 20, 64: 1 << 20, 1000: 67108, MaxChunkRows: 4 << 10, 0: 67108} {
		if got := LineBytes(rows); got != want {
			t.Errorf("LineBytes(%d) = %d; want %d", rows, got, want)
		}
	}
}
