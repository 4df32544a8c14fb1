package jobs

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// This file holds the jobs' pure decisions: progress, the error-rate
// rule, which state follows which, the backoff of a retried chunk and the
// submit's validation. The manager and the runner call them; each is
// table-tested.

// Progress is a job's throughput and ETA at now: rows done per second of
// running time (Started to Finished, or to now while it runs), and the
// seconds left at that rate; -1 when not known (not started, not
// scanned, nothing done yet). A final job's ETA is 0.
func Progress(j Job, now time.Time) (rowsPerSecond, etaSeconds float64) {
	if j.Started.IsZero() {
		if Final(j.State) {
			return 0, 0
		}
		return 0, -1
	}
	end := now
	if !j.Finished.IsZero() {
		end = j.Finished
	}
	if secs := end.Sub(j.Started).Seconds(); secs > 0 {
		rowsPerSecond = float64(j.RowsDone) / secs
	}
	switch {
	case Final(j.State):
		return rowsPerSecond, 0
	case !j.Scanned || rowsPerSecond <= 0:
		return rowsPerSecond, -1
	}
	left := float64(j.RowsTotal - j.RowsDone)
	if left < 0 {
		left = 0
	}
	return rowsPerSecond, left / rowsPerSecond
}

// StatusOf is j with its progress at now.
func StatusOf(j Job, now time.Time) Status {
	rps, eta := Progress(j, now)
	return Status{Job: j, RowsPerSecond: rps, ETASeconds: eta}
}

// OverErrorRate says whether failed rows of total are past the job's
// rate: failed > rate × total. Failures only grow and total is the
// input's (known once scanned), so a job is failed as soon as this holds:
// no later row can bring the rate back under.
func OverErrorRate(failed, total int64, rate float64) bool {
	if total <= 0 {
		return false
	}
	return float64(failed) > rate*float64(total)
}

// ErrorRateMessage is a failed job's message for failed rows of total.
func ErrorRateMessage(failed, total int64, rate float64) string {
	return fmt.Sprintf("%d of %d rows failed, more than maxErrorRate %g allows (%d); see errors for the first ones, fix the input or raise maxErrorRate",
		failed, total, rate, int64(math.Floor(rate*float64(total))))
}

// CanMove says whether a job may go from one state to another: queued to
// running, and either of those to one of the final states (a queued job
// fails when its scan does, or is cancelled before it starts). A final
// state is never left.
func CanMove(from, to State) bool {
	switch from {
	case Queued:
		return to == Running || to == Failed || to == Cancelled
	case Running:
		return to == Succeeded || to == Failed || to == Cancelled
	}
	return false
}

// From lists the states a job may move to `to` from, for Store.SetState.
func From(to State) []State {
	var out []State
	for _, s := range []State{Queued, Running} {
		if CanMove(s, to) {
			out = append(out, s)
		}
	}
	return out
}

// Step is what a runner does next with a job, from a look at it.
type Step int

// The steps.
const (
	StepStop     Step = iota // final: nothing to do
	StepCancel               // cancel requested: move to Cancelled
	StepFail                 // past its error rate: move to Failed
	StepScan                 // not scanned yet: scan the input
	StepRun                  // chunks left: claim and score them
	StepAssemble             // every chunk done: assemble the output and succeed
)

func (s Step) String() string {
	return [...]string{"stop", "cancel", "fail", "scan", "run", "assemble"}[s]
}

// Next decides a job's next step from its state and counts. A cancel
// request wins over everything but a final state; the error rate over
// the remaining chunks (they could not bring it back); assembly when
// every chunk is done, even if the job is still queued (a crash between
// the last chunk and the move to running cannot happen, but a store
// restored from a copy could show it).
func Next(j Job) Step {
	switch {
	case Final(j.State):
		return StepStop
	case j.CancelRequested:
		return StepCancel
	case !j.Scanned:
		return StepScan
	case OverErrorRate(j.RowsFailed, j.RowsTotal, j.Spec.MaxErrorRate):
		return StepFail
	case j.ChunksDone >= j.ChunksTotal:
		return StepAssemble
	}
	return StepRun
}

// Backoff bounds.
const (
	BackoffBase = 100 * time.Millisecond
	BackoffMax  = 30 * time.Second
)

// Backoff is how long a runner waits before retrying a chunk after its
// attempt-th retryable failure (attempt from 1): the error's Retry-After
// when it sets one, else BackoffBase doubled per attempt; either at most
// BackoffMax. jitter in [0, 1) adds up to that fraction (so runners that
// failed together do not retry together).
func Backoff(attempt int, retryAfter time.Duration, jitter float64) time.Duration {
	d := retryAfter
	if d <= 0 {
		d = BackoffBase
		for i := 1; i < attempt && d < BackoffMax; i++ {
			d *= 2
		}
	}
	if jitter > 0 && jitter < 1 {
		d += time.Duration(float64(d) * jitter)
	}
	return min(d, BackoffMax)
}

// Retryable says whether a Predictor's error is worth a retry of the
// chunk (queue full, quota, unavailable, not ready, a deadline: the
// catalogue's retry_client), and the wait the error asks for. Such an
// error is never the rows' fault, so it never counts as a row failure.
func Retryable(err error) (bool, time.Duration) {
	e := errs.As(err)
	if e == nil {
		return false, 0
	}
	return errs.Lookup(e.Code).RetryClient, e.RetryAfter
}

var (
	idRE    = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
	modelRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
)

// FormatOf is the format a URI's extension names ("" when none does).
func FormatOf(uri string) string {
	switch strings.ToLower(path.Ext(strings.TrimSuffix(uri, "/"))) {
	case ".jsonl", ".ndjson":
		return jobio.FormatJSONL
	case ".csv":
		return jobio.FormatCSV
	case ".parquet", ".pq":
		return jobio.FormatParquet
	}
	return ""
}

func validFormat(f string) bool {
	return f == jobio.FormatJSONL || f == jobio.FormatCSV || f == jobio.FormatParquet
}

func invalid(field, format string, args ...any) *errs.Error {
	return errs.Field(errs.JobInvalid, field, format, args...)
}

// Normalize checks a submit's fields and fills in its defaults: the
// formats (from the URIs' extensions; the output's from the input's when
// its URI names none), idField, chunkRows, maxErrorRate. It checks what
// needs no model and no file; the manager checks the rest. The error is
// a job_invalid naming the field and the fix.
func Normalize(s Submit) (Submit, error) {
	if s.Model == "" {
		return s, invalid("model", "a model is required: the name of a deployed model")
	}
	if !modelRE.MatchString(s.Model) {
		return s, invalid("model", "%q is not a model name (lowercase letters, digits and '-', at most 63 characters)", errs.Clip(s.Model))
	}
	if s.Version < 0 {
		return s, invalid("version", "must be a version number ≥ 1, or absent for the deployment's primary; got %d", s.Version)
	}
	if s.ID != "" && !idRE.MatchString(s.ID) {
		return s, invalid("id", "%q is not a job id: 1 to 64 lowercase letters, digits and '-'; or leave it out and the server picks one", errs.Clip(s.ID))
	}
	if s.Input.URI == "" {
		return s, invalid("input.uri", "an input is required: file:NAME (in the server's --jobs-dir) or s3://BUCKET/KEY")
	}
	if s.Output.URI == "" {
		return s, invalid("output.uri", "an output is required: file:NAME (in the server's --jobs-dir) or s3://BUCKET/KEY")
	}
	if s.Input.URI == s.Output.URI {
		return s, invalid("output.uri", "the output is the input (%q); name another output", errs.Clip(s.Output.URI))
	}
	if s.Input.Format == "" {
		s.Input.Format = FormatOf(s.Input.URI)
		if s.Input.Format == "" {
			return s, invalid("input.format", "the format of %q is not known from its extension; set input.format to jsonl, csv or parquet", errs.Clip(s.Input.URI))
		}
	} else if !validFormat(s.Input.Format) {
		return s, invalid("input.format", "%q is not a format: use jsonl, csv or parquet", errs.Clip(s.Input.Format))
	}
	if s.Output.Format == "" {
		s.Output.Format = FormatOf(s.Output.URI)
		if s.Output.Format == "" {
			s.Output.Format = s.Input.Format
		}
	} else if !validFormat(s.Output.Format) {
		return s, invalid("output.format", "%q is not a format: use jsonl, csv or parquet", errs.Clip(s.Output.Format))
	}
	if s.IDField == "" {
		s.IDField = DefaultIDField
	} else if len(s.IDField) > 256 || strings.ContainsFunc(s.IDField, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return s, invalid("idField", "%q is not a column name (at most 256 characters, no control characters)", errs.Clip(s.IDField))
	}
	switch {
	case s.ChunkRows == 0:
		s.ChunkRows = DefaultChunkRows
	case s.ChunkRows < 1 || s.ChunkRows > MaxChunkRows:
		return s, invalid("chunkRows", "must be 1 to %d rows, got %d (default %d)", MaxChunkRows, s.ChunkRows, DefaultChunkRows)
	}
	if s.MaxErrorRate == nil {
		zero := 0.0
		s.MaxErrorRate = &zero
	} else if r := *s.MaxErrorRate; math.IsNaN(r) || r < 0 || r > 1 {
		return s, invalid("maxErrorRate", "must be a fraction from 0 to 1 of the rows that may fail, got %g", r)
	} else {
		r := *s.MaxErrorRate // a copy: the caller's pointer is not shared
		s.MaxErrorRate = &r
	}
	return s, nil
}

// SameSubmit says whether a normalized submit asks for what job j runs:
// a repeat of a submit with a client-chosen id (answered with the job),
// not another job under a taken id. A submit without a version matches
// whatever version the job pinned.
func SameSubmit(s Submit, tenant string, j Job) bool {
	sp := j.Spec
	return sp.Tenant == tenant && sp.Model == s.Model && (s.Version == 0 || s.Version == sp.Version) &&
		sp.Input == s.Input && sp.Output == s.Output && sp.IDField == s.IDField && sp.ChunkRows == s.ChunkRows &&
		s.MaxErrorRate != nil && sp.MaxErrorRate == *s.MaxErrorRate
}

// ChunkBytes bounds the input bytes of one chunk a runner holds: a line
// (a JSONL row, a CSV record) may take at most LineBytes(chunkRows) of
// it, so memory stays bounded whatever the file holds. A longer line is
// a row error (JSONL) or ends the job (CSV cannot resynchronise inside a
// quoted cell); fewer chunkRows allow longer lines.
const ChunkBytes = 64 << 20

// LineBytes is the longest line a job of chunkRows rows reads: ChunkBytes
// over the rows, at least 4 KiB and at most 1 MiB.
func LineBytes(chunkRows int) int {
	if chunkRows <= 0 {
		chunkRows = DefaultChunkRows
	}
	return min(max(ChunkBytes/chunkRows, 4<<10), 1<<20)
}
