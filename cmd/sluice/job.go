package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/client"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/top"
)

// newJobCmd is `sluice job`: batch prediction jobs (docs/jobs.md). Its
// subcommands: submit, status, list, cancel (this file) and run (the
// runner process, jobrun.go).
func newJobCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Batch prediction jobs: score every row of a file with one model version (docs/jobs.md)",
		Args:  cobra.NoArgs,
	}
	for _, sub := range jobCommands {
		cmd.AddCommand(sub())
	}
	return cmd
}

// jobCommands build the subcommands of `sluice job`. A file that adds one
// appends its constructor in an init (jobrun.go: `sluice job run`), so
// the files change no shared line; cobra lists them by name.
var jobCommands = []func() *cobra.Command{newJobSubmitCmd, newJobStatusCmd, newJobListCmd, newJobCancelCmd}

// watchFlags are --watch and --interval of submit and status.
type watchFlags struct {
	watch    bool
	interval time.Duration
}

func (f *watchFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.watch, "watch", false, "follow the job until it ends: a progress bar on a terminal, one line per change otherwise; exit 0 when it succeeds, 1 when it fails or is cancelled")
	cmd.Flags().DurationVar(&f.interval, "interval", time.Second, "with --watch: how often the job's status is read")
}

func newJobSubmitCmd() *cobra.Command {
	var (
		server                      string
		in, out                     string
		format, inFormat, outFormat string
		version, chunkRows          int
		idField, id                 string
		maxErrorRate                float64
		wf                          watchFlags
	)
	cmd := &cobra.Command{
		Use:   "submit MODEL --input URI --output URI",
		Short: "Submit a batch job: score every row of --input with MODEL's primary (or --version), write each row's answer to --output",
		Long: `submit asks the server to score every row of a file with one version of a
model and write one output row per input row, exactly once. URIs are
file:NAME (inside the server's --jobs-dir) or s3://BUCKET/KEY (in the
object store of the server's --artifacts). Formats (jsonl, csv, parquet)
come from the extensions unless --format (both), --input-format or
--output-format name them. Without --version the job pins the
deployment's primary when it is submitted and keeps it to the end.

Submitting the same --id with the same flags again answers with that job
(a safe retry); another job's --id is refused. See docs/jobs.md.`,
		Example: `  sluice job submit fraud --input file:transactions.jsonl --output file:scores.jsonl --watch
  sluice job submit fraud --version 3 --input s3://data/day.parquet --output s3://data/day.scores.parquet --chunk-rows 5000
  sluice job submit churn --input file:users.csv --output file:users.out.jsonl --id-field user_id --max-error-rate 0.01`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if in == "" || out == "" {
				return errors.New("--input and --output are required (file:NAME in the server's --jobs-dir, or s3://BUCKET/KEY)")
			}
			if version < 0 {
				return fmt.Errorf("--version must be a version number (1, 2, …), got %d", version)
			}
			if err := wf.check(); err != nil {
				return err
			}
			s := api.JobSubmit{Model: args[0], Version: version, Input: api.JobIO{URI: in, Format: inFormat}, Output: api.JobIO{URI: out, Format: outFormat},
				IDField: idField, ChunkRows: chunkRows, ID: id}
			if s.Input.Format == "" {
				s.Input.Format = format
			}
			if s.Output.Format == "" {
				s.Output.Format = format
			}
			if cmd.Flags().Changed("max-error-rate") {
				s.MaxErrorRate = &maxErrorRate
			}
			c := apiClient(cmd, server)
			st, created, err := c.SubmitJob(cmd.Context(), s)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			verb := "submitted"
			if !created {
				verb = "already submitted" // the same --id and flags: that job
			}
			fmt.Fprintf(w, "%s %s: %s, %s → %s (%s)\n", st.ID, verb, st.Spec.VersionID, st.Spec.Input.URI, st.Spec.Output.URI, st.State)
			if !wf.watch {
				fmt.Fprintf(w, "follow it with: sluice job status %s --watch\n", st.ID)
				return nil
			}
			return watchJob(cmd, c, st.ID, wf.interval)
		},
	}
	serverFlag(cmd, &server)
	f := cmd.Flags()
	f.StringVar(&in, "input", "", "the rows to score: file:NAME (in the server's --jobs-dir) or s3://BUCKET/KEY")
	f.StringVar(&out, "output", "", "where the answers go (must not exist): file:NAME or s3://BUCKET/KEY")
	f.StringVar(&format, "format", "", "the format of both files, jsonl, csv or parquet (default: from each URI's extension)")
	f.StringVar(&inFormat, "input-format", "", "the input's format (default: --format, else from its extension)")
	f.StringVar(&outFormat, "output-format", "", "the output's format (default: --format, else from its extension, else the input's)")
	f.IntVar(&version, "version", 0, "the version to score with (default: the deployment's primary at submit, pinned for the whole job)")
	f.StringVar(&idField, "id-field", "", `the input's id column or key, copied to each output row (default "id")`)
	f.IntVar(&chunkRows, "chunk-rows", 0, "rows per chunk, the unit of progress, commit and resume (default 1000, at most 100000)")
	f.Float64Var(&maxErrorRate, "max-error-rate", 0, "the fraction (0 to 1) of rows that may fail before the job fails (default 0: the first bad row fails it)")
	f.StringVar(&id, "id", "", "the job's id (lowercase letters, digits and '-', at most 64); the same submit again returns that job (default: the server picks one)")
	wf.register(cmd)
	return cmd
}

func (f *watchFlags) check() error {
	if f.watch && f.interval <= 0 {
		return fmt.Errorf("--interval must be positive, got %s", f.interval)
	}
	return nil
}

func newJobStatusCmd() *cobra.Command {
	var server string
	var wf watchFlags
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a batch job: state, version, rows done, failed and redone, chunks, rows/s, ETA, the first errors (--watch: follow it to the end)",
		Long: `status prints a job's state and progress. With --watch it follows the job
until it ends (a progress bar on a terminal, one line per change when the
output is a file or a pipe), then prints the final status. The exit
status is 0 for a job that succeeded, queued or running (without
--watch), and 1 for one that failed or was cancelled, with its message.`,
		Example: `  sluice job status job-3f2a9c01b4de
  sluice job status nightly-2026-12-01 --watch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return err
			}
			c := apiClient(cmd, server)
			if wf.watch {
				return watchJob(cmd, c, args[0], wf.interval)
			}
			st, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			writeJobStatus(cmd.OutOrStdout(), st)
			return jobExit(st)
		},
	}
	serverFlag(cmd, &server)
	wf.register(cmd)
	return cmd
}

func newJobListCmd() *cobra.Command {
	var server, state, tenantName string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--state S]",
		Short: "List batch jobs, newest first: yours (an admin of every model: every tenant's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 1000 {
				return fmt.Errorf("--limit must be 1 to 1000, got %d", limit)
			}
			js, err := apiClient(cmd, server).Jobs(cmd.Context(), client.JobsQuery{State: state, Limit: limit, Tenant: tenantName})
			if err != nil {
				return err
			}
			writeJobTable(cmd.OutOrStdout(), js, time.Now())
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&state, "state", "", "only jobs in this state: queued, running, succeeded, failed or cancelled")
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many jobs (1 to 1000)")
	cmd.Flags().StringVar(&tenantName, "tenant", "", "an admin's: only this tenant's jobs")
	return cmd
}

func newJobCancelCmd() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a batch job: a queued one at once, a running one within a second; committed parts are kept (the job is marked incomplete)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := apiClient(cmd, server).CancelJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if st.State == "cancelled" {
				fmt.Fprintf(w, "%s cancelled\n", st.ID)
			} else {
				fmt.Fprintf(w, "%s cancel requested: its runners stop within a second (follow it with: sluice job status %s --watch)\n", st.ID, st.ID)
			}
			return nil
		},
	}
	serverFlag(cmd, &server)
	return cmd
}

// watchOutage is how long watchJob keeps polling through failed reads
// (a server restarting: the job resumes where it stopped) before it gives
// up.
const watchOutage = 2 * time.Minute

// watchJob follows job id until it ends, then prints its status and
// returns jobExit's answer. On a terminal it redraws one progress line;
// otherwise it prints a line each time the job's progress changes. A read
// that fails for want of the server (no answer, 5xx) is retried each
// interval for up to watchOutage; another error ends the watch.
func watchJob(cmd *cobra.Command, c *client.Client, id string, interval time.Duration) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w := cmd.OutOrStdout()
	width := 0
	if w == io.Writer(os.Stdout) {
		width = top.TerminalWidth(os.Stdout.Fd()) // 0: not a terminal
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last string
	var failingSince time.Time
	for {
		rctx, cancel := context.WithTimeout(ctx, max(interval, 10*time.Second))
		st, err := c.Job(rctx, id)
		cancel()
		switch {
		case err == nil:
			failingSince = time.Time{}
		case ctx.Err() != nil:
			if width > 0 && last != "" {
				fmt.Fprintln(w)
			}
			return fmt.Errorf("stopped watching job %s (it goes on: sluice job status %s)", id, id)
		case !transient(err):
			if width > 0 && last != "" {
				fmt.Fprintln(w)
			}
			return err
		default:
			if failingSince.IsZero() {
				failingSince = time.Now()
				fmt.Fprintf(cmd.ErrOrStderr(), "\nsluice: reading job %s: %v; retrying for up to %s\n", id, err, watchOutage)
			} else if time.Since(failingSince) > watchOutage {
				return fmt.Errorf("job %s: no answer for %s: %w", id, watchOutage, err)
			}
		}
		if st != nil {
			final := jobFinal(st.State)
			if width > 0 {
				line := progressBar(st, width)
				if line != last {
					fmt.Fprint(w, "\r"+line+"\x1b[K")
					last = line
				}
				if final {
					fmt.Fprintln(w)
				}
			} else if line := progressLine(st); line != last {
				fmt.Fprintf(w, "%s %s\n", time.Now().UTC().Format("15:04:05"), line)
				last = line
			}
			if final {
				fmt.Fprintln(w)
				writeJobStatus(w, st)
				return jobExit(st)
			}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// transient says whether a failed read is worth retrying: no answer, or
// a 5xx (the server restarting or the job store briefly away).
func transient(err error) bool {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Status >= 500
	}
	return true // the connection: refused, reset, timed out
}

func jobFinal(s api.JobState) bool {
	return s == "succeeded" || s == "failed" || s == "cancelled"
}

// jobExit is the command's answer for a job: nil unless it failed or
// was cancelled.
func jobExit(st *api.JobStatus) error {
	switch st.State {
	case "failed", "cancelled":
		msg := st.Message
		if msg == "" {
			msg = "no message"
		}
		return fmt.Errorf("job %s %s: %s", st.ID, st.State, msg)
	}
	return nil
}

// progressLine is one line of a job's progress, for logs and pipes:
// "running 45.0% 450000/1000000 rows, 3 failed, 0 redone, chunks 450/1000, 12345 rows/s, ETA 44s".
func progressLine(st *api.JobStatus) string {
	var b strings.Builder
	b.WriteString(string(st.State))
	if st.CancelRequested && !jobFinal(st.State) {
		b.WriteString(" (cancelling)")
	}
	if !st.Scanned && !jobFinal(st.State) {
		b.WriteString(", reading the input")
		return b.String()
	}
	fmt.Fprintf(&b, " %s %d/%d rows, %d failed, %d redone, chunks %d/%d, %s rows/s, ETA %s",
		percent(st.RowsDone, st.RowsTotal), st.RowsDone, st.RowsTotal, st.RowsFailed, st.RowsRedone, st.ChunksDone, st.ChunksTotal,
		strconv.FormatFloat(math.Round(st.RowsPerSecond), 'f', 0, 64), eta(st.ETASeconds))
	return b.String()
}

// progressBar is a terminal's progress line, at most width columns:
// "[#########-----------]  45.0%  450,000/1,000,000 rows  3 failed  0 redone  chunks 450/1,000  12,345 rows/s  ETA 44s".
func progressBar(st *api.JobStatus, width int) string {
	const barWidth = 24
	fill := 0
	if st.RowsTotal > 0 {
		fill = int(float64(barWidth) * float64(st.RowsDone) / float64(st.RowsTotal))
	}
	fill = min(max(fill, 0), barWidth)
	bar := "[" + strings.Repeat("#", fill) + strings.Repeat("-", barWidth-fill) + "]"
	var tail string
	switch {
	case !st.Scanned && !jobFinal(st.State):
		tail = string(st.State) + ": reading the input"
	default:
		tail = fmt.Sprintf("%6s  %s/%s rows  %s failed  %s redone  chunks %s/%s  %s rows/s  ETA %s",
			percent(st.RowsDone, st.RowsTotal), thousands(st.RowsDone), thousands(st.RowsTotal), thousands(st.RowsFailed), thousands(st.RowsRedone),
			thousands(int64(st.ChunksDone)), thousands(int64(st.ChunksTotal)), thousands(int64(math.Round(st.RowsPerSecond))), eta(st.ETASeconds))
		if st.CancelRequested && !jobFinal(st.State) {
			tail = "cancelling  " + tail
		}
	}
	line := bar + " " + tail
	if r := []rune(line); width > 0 && len(r) > width-1 {
		line = string(r[:max(width-1, 0)]) // (the last column left free: a full line wraps on some terminals)
	}
	return line
}

func percent(done, total int64) string {
	if total <= 0 {
		return "0.0%"
	}
	return strconv.FormatFloat(100*float64(done)/float64(total), 'f', 1, 64) + "%"
}

// eta renders seconds left: "44s", "12m05s", "3h20m"; "?" unknown, "-" none.
func eta(secs float64) string {
	switch {
	case secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0):
		return "?"
	case secs == 0:
		return "-"
	}
	d := time.Duration(math.Ceil(secs)) * time.Second
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// thousands writes n with commas: 1234567 → "1,234,567".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writeJobStatus prints a job's full status.
func writeJobStatus(w io.Writer, st *api.JobStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	state := string(st.State)
	if st.CancelRequested && !jobFinal(st.State) {
		state += " (cancel requested)"
	}
	if st.Incomplete {
		state += ", incomplete: committed parts under " + st.Spec.Output.URI + ".parts/"
	}
	fmt.Fprintf(tw, "job\t%s\n", st.ID)
	fmt.Fprintf(tw, "state\t%s\n", state)
	if st.Message != "" {
		fmt.Fprintf(tw, "message\t%s\n", st.Message)
	}
	fmt.Fprintf(tw, "version\t%s\n", st.Spec.VersionID)
	if st.Spec.Tenant != "" {
		fmt.Fprintf(tw, "tenant\t%s\n", st.Spec.Tenant)
	}
	fmt.Fprintf(tw, "input\t%s (%s, id field %q)\n", st.Spec.Input.URI, st.Spec.Input.Format, st.Spec.IDField)
	fmt.Fprintf(tw, "output\t%s (%s)\n", st.Spec.Output.URI, st.Spec.Output.Format)
	if st.Scanned {
		fmt.Fprintf(tw, "rows\t%s of %s done (%s), %s failed, %s redone\n", thousands(st.RowsDone), thousands(st.RowsTotal), percent(st.RowsDone, st.RowsTotal),
			thousands(st.RowsFailed), thousands(st.RowsRedone))
		fmt.Fprintf(tw, "chunks\t%s of %s (%d rows each)\n", thousands(int64(st.ChunksDone)), thousands(int64(st.ChunksTotal)), st.Spec.ChunkRows)
	} else {
		fmt.Fprintf(tw, "rows\tnot counted yet (the input is read once when the job starts)\n")
	}
	fmt.Fprintf(tw, "speed\t%s rows/s, ETA %s\n", thousands(int64(math.Round(st.RowsPerSecond))), eta(st.ETASeconds))
	fmt.Fprintf(tw, "max error rate\t%g\n", st.Spec.MaxErrorRate)
	times := "created " + st.Created.UTC().Format(time.RFC3339)
	if !st.Started.IsZero() {
		times += ", started " + st.Started.UTC().Format(time.RFC3339)
	}
	if !st.Finished.IsZero() {
		times += ", finished " + st.Finished.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(tw, "times\t%s\n", times)
	tw.Flush()
	if len(st.Errors) > 0 {
		fmt.Fprintf(w, "first errors (%d shown of %s failed rows):\n", len(st.Errors), thousands(max(st.RowsFailed, int64(len(st.Errors)))))
		for _, e := range st.Errors {
			fmt.Fprintf(w, "  %s\n", rowError(e))
		}
	}
}

// rowError renders one failed row: `line 12 id "tx-9": amount: must be a number`.
func rowError(e api.JobRowError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "line %d", e.Line)
	if e.ID != "" {
		fmt.Fprintf(&b, " id %q", e.ID)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// writeJobTable prints jobs as an aligned table.
func writeJobTable(w io.Writer, js []api.JobStatus, now time.Time) {
	if len(js) == 0 {
		fmt.Fprintln(w, "no jobs")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tVERSION\tROWS\tFAILED\tDONE\tCREATED\tINPUT\tOUTPUT")
	for _, st := range js {
		rows, done := "-", "-"
		if st.Scanned {
			rows, done = thousands(st.RowsTotal), percent(st.RowsDone, st.RowsTotal)
		}
		state := string(st.State)
		if st.CancelRequested && !jobFinal(st.State) {
			state += "*" // cancelling
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s ago\t%s\t%s\n", st.ID, state, st.Spec.VersionID, rows, thousands(st.RowsFailed), done,
			age(now.Sub(st.Created)), st.Spec.Input.URI, st.Spec.Output.URI)
	}
	tw.Flush()
}

// age renders a duration coarsely: "40s", "12m", "3h", "5d".
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
