package main

// Batch prediction jobs (issue 20) through the real binary: inputs made
// here in a temporary --jobs-dir (JSONL, CSV, Parquet) scored by the
// fraud example, every output row checked against what /v1 predict
// answers for the same row; bad rows, bad submits, cancel, kill -9 and
// resume on the same --data, the CLI as a user drives it, tenants, and
// s3:// input and output on SeaweedFS (TestS3Jobs, under `make test-s3`).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/parquet-go/parquet-go"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
	"github.com/sluiceml/sluice/internal/registry/s3/s3test"
	"github.com/sluiceml/sluice/internal/testwait"
)

// jobWait bounds every wait for a job to end: generous, since the
// machine is shared; no test asserts how long a job took.
const jobWait = 3 * time.Minute

// fraudID is input row i's id.
func fraudID(i int) string { return fmt.Sprintf("r%07d", i) }

// fraudRow is input row i's fields (the fraud example's schema).
func fraudRow(i int) (amount float64, age, declines int, country string) {
	return float64(i%5000)*0.37 + 1, i % 3650, i % 6, [...]string{"US", "GB", "DE"}[i%3]
}

func fraudInstance(i int) map[string]any {
	a, age, d, c := fraudRow(i)
	return map[string]any{"amount": a, "accountAgeDays": age, "declines5m": d, "country": c}
}

// fraudLine is row i as a JSONL line (no newline).
func fraudLine(i int) string {
	a, age, d, c := fraudRow(i)
	return fmt.Sprintf(`{"id":%q,"amount":%s,"accountAgeDays":%d,"declines5m":%d,"country":%q}`,
		fraudID(i), strconv.FormatFloat(a, 'g', -1, 64), age, d, c)
}

// writeFraudJSONL writes rows 0..n-1; bad replaces row i's line.
func writeFraudJSONL(t *testing.T, path string, n int, bad map[int]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := 0; i < n; i++ {
		line, ok := bad[i]
		if !ok {
			line = fraudLine(i)
		}
		w.WriteString(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeFraudCSV(t *testing.T, path string, n int) {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"id", "amount", "accountAgeDays", "declines5m", "country"})
	for i := 0; i < n; i++ {
		a, age, d, c := fraudRow(i)
		w.Write([]string{fraudID(i), strconv.FormatFloat(a, 'g', -1, 64), strconv.Itoa(age), strconv.Itoa(d), c})
	}
	w.Flush()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fraudParquet is an input row in Parquet.
type fraudParquet struct {
	ID             string  `parquet:"id"`
	Amount         float64 `parquet:"amount"`
	AccountAgeDays int64   `parquet:"accountAgeDays"`
	Declines5m     int64   `parquet:"declines5m"`
	Country        string  `parquet:"country"`
}

// writeFraudParquet writes rows 0..n-1 in row groups of 700 rows (not a
// multiple of any chunk size the tests use, so chunks cross row groups).
func writeFraudParquet(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[fraudParquet](f)
	rows := make([]fraudParquet, 0, 700)
	for i := 0; i < n; i++ {
		a, age, d, c := fraudRow(i)
		rows = append(rows, fraudParquet{fraudID(i), a, int64(age), int64(d), c})
		if len(rows) == cap(rows) || i == n-1 {
			if _, err := w.Write(rows); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeFraudInput(t *testing.T, path string, n int) {
	t.Helper()
	switch filepath.Ext(path) {
	case ".jsonl":
		writeFraudJSONL(t, path, n, nil)
	case ".csv":
		writeFraudCSV(t, path, n)
	case ".parquet":
		writeFraudParquet(t, path, n)
	default:
		t.Fatalf("no writer for %s", path)
	}
}

// onlineScores asks /v1/models/fraud:predict for rows 0..n-1, 1,000 rows
// a request, and returns each row's riskScore.
func onlineScores(t *testing.T, url, key string, n int) []float64 {
	t.Helper()
	out := make([]float64, 0, n)
	for lo := 0; lo < n; lo += 1000 {
		hi := min(lo+1000, n)
		inst := make([]map[string]any, 0, hi-lo)
		for i := lo; i < hi; i++ {
			inst = append(inst, fraudInstance(i))
		}
		body, _ := json.Marshal(map[string]any{"instances": inst, "deadlineMs": 10000})
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/models/fraud:predict", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var p api.PredictResponse
		if resp.StatusCode != 200 || json.Unmarshal(b, &p) != nil || len(p.Predictions) != hi-lo {
			t.Fatalf("online predict rows %d-%d: %d %s", lo, hi, resp.StatusCode, b)
		}
		for _, pr := range p.Predictions {
			out = append(out, pr["riskScore"])
		}
	}
	return out
}

// jobOut is one output row, whatever the output's format.
type jobOut struct {
	ID, VersionID string
	Score         *float64 // nil: the row failed
	ErrField      string
	ErrMessage    string
}

// outParquet is an output row in Parquet.
type outParquet struct {
	ID           string   `parquet:"id"`
	VersionID    string   `parquet:"versionId"`
	RiskScore    *float64 `parquet:"riskScore,optional"`
	ErrorField   *string  `parquet:"errorField,optional"`
	ErrorMessage *string  `parquet:"errorMessage,optional"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// readJobOutput reads an output (or one part of it: a part has no CSV
// header) in format.
func readJobOutput(t *testing.T, path, format string, header bool) []jobOut {
	t.Helper()
	var out []jobOut
	switch format {
	case "jsonl":
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if line == "" && len(b) == 0 {
				break
			}
			var r jobio.OutRow
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s line %d %q: %v", path, n+1, line, err)
			}
			o := jobOut{ID: r.ID, VersionID: r.VersionID}
			if r.Error != nil {
				o.ErrField, o.ErrMessage = r.Error.Field, r.Error.Message
			}
			if v, ok := r.Outputs["riskScore"].(float64); ok {
				o.Score = &v
			}
			out = append(out, o)
		}
	case "csv":
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		recs, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if header {
			if len(recs) == 0 || !slices.Equal(recs[0], []string{"id", "versionId", "riskScore", "errorField", "errorMessage"}) {
				t.Fatalf("%s: header %q", path, recs[:min(1, len(recs))])
			}
			recs = recs[1:]
		}
		for _, r := range recs {
			o := jobOut{ID: r[0], VersionID: r[1], ErrField: r[3], ErrMessage: r[4]}
			if r[2] != "" {
				v, err := strconv.ParseFloat(r[2], 64)
				if err != nil {
					t.Fatalf("%s: riskScore %q: %v", path, r[2], err)
				}
				o.Score = &v
			}
			out = append(out, o)
		}
	case "parquet":
		rows, err := parquet.ReadFile[outParquet](path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, r := range rows {
			out = append(out, jobOut{ID: r.ID, VersionID: r.VersionID, Score: r.RiskScore, ErrField: deref(r.ErrorField), ErrMessage: deref(r.ErrorMessage)})
		}
	default:
		t.Fatalf("no reader for %s", format)
	}
	return out
}

// byID indexes rows by id, failing the test on an id seen twice.
func byID(t *testing.T, rows []jobOut) map[string]jobOut {
	t.Helper()
	m := make(map[string]jobOut, len(rows))
	for _, r := range rows {
		if _, dup := m[r.ID]; dup {
			t.Fatalf("id %q is in the output twice", r.ID)
		}
		m[r.ID] = r
	}
	return m
}

// checkScored says every row 0..n-1 is in rows exactly once, scored by
// fraud@1 with the riskScore /v1 answered (want; nil: not compared).
func checkScored(t *testing.T, rows []jobOut, n int, want []float64) {
	t.Helper()
	m := byID(t, rows)
	if len(m) != n {
		t.Errorf("output holds %d ids, the input %d", len(m), n)
	}
	bad := 0
	for i := 0; i < n && bad < 5; i++ {
		r, ok := m[fraudID(i)]
		switch {
		case !ok:
			t.Errorf("id %s is missing from the output", fraudID(i))
			bad++
		case r.VersionID != "fraud@1" || r.Score == nil || r.ErrMessage != "":
			t.Errorf("row %s: %+v", r.ID, r)
			bad++
		case want != nil && float32(*r.Score) != float32(want[i]):
			// The model computes in float32; /v1 writes it in shortest
			// form, a job's output as a float64: equal as float32.
			t.Errorf("row %s: riskScore %v, /v1 predict says %v", r.ID, *r.Score, want[i])
			bad++
		}
	}
}

// jobsAPI calls the jobs routes as one tenant (key "" : none).
type jobsAPI struct{ url, key string }

func (c jobsAPI) call(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// jobAnswer decodes a job or an error body.
func jobAnswer(t *testing.T, code int, b []byte) (api.JobStatus, api.ErrorDetail) {
	t.Helper()
	var st api.JobStatus
	var e api.ErrorBody
	if code/100 == 2 {
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("a %d answer that is no job: %v %s", code, err, b)
		}
	} else if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("a %d answer without an error body: %s", code, b)
	}
	return st, e.Error
}

func (c jobsAPI) submit(t *testing.T, body any) (int, api.JobStatus, api.ErrorDetail) {
	t.Helper()
	code, b := c.call(t, http.MethodPost, "/v1/jobs", body)
	st, e := jobAnswer(t, code, b)
	return code, st, e
}

// mustSubmit submits and fails the test unless the job was created.
func (c jobsAPI) mustSubmit(t *testing.T, s api.JobSubmit) api.JobStatus {
	t.Helper()
	code, st, e := c.submit(t, s)
	if code != http.StatusCreated || st.ID == "" {
		t.Fatalf("submit %+v: %d %+v", s, code, e)
	}
	return st
}

func (c jobsAPI) status(t *testing.T, id string) (int, api.JobStatus, api.ErrorDetail) {
	t.Helper()
	code, b := c.call(t, http.MethodGet, "/v1/jobs/"+id, nil)
	st, e := jobAnswer(t, code, b)
	return code, st, e
}

func (c jobsAPI) cancel(t *testing.T, id string) (int, api.JobStatus, api.ErrorDetail) {
	t.Helper()
	code, b := c.call(t, http.MethodPost, "/v1/jobs/"+id+":cancel", nil)
	st, e := jobAnswer(t, code, b)
	return code, st, e
}

func (c jobsAPI) list(t *testing.T, query string) (int, api.JobList) {
	t.Helper()
	code, b := c.call(t, http.MethodGet, "/v1/jobs"+query, nil)
	var l api.JobList
	if code == 200 {
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("job list: %v %s", err, b)
		}
	}
	return code, l
}

// until polls the job until cond holds (or the job ends without it).
func (c jobsAPI) until(t *testing.T, id, what string, cond func(api.JobStatus) bool) api.JobStatus {
	t.Helper()
	var st api.JobStatus
	err := testwait.Poll(jobWait, func() error {
		code, s, e := c.status(t, id)
		if code != 200 {
			return fmt.Errorf("GET /v1/jobs/%s: %d %+v", id, code, e)
		}
		st = s
		if cond(s) {
			return nil
		}
		if s.State == "succeeded" || s.State == "failed" || s.State == "cancelled" {
			return fmt.Errorf("job %s ended %s (%s) before %s: %+v", id, s.State, s.Message, what, s.JobCounts)
		}
		return fmt.Errorf("job %s is %s, not yet %s: %+v", id, s.State, what, s.JobCounts)
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// wait polls the job until it is final.
func (c jobsAPI) wait(t *testing.T, id string) api.JobStatus {
	t.Helper()
	return c.until(t, id, "final", func(s api.JobStatus) bool {
		return s.State == "succeeded" || s.State == "failed" || s.State == "cancelled"
	})
}

func fraudJob(in, out string) api.JobSubmit {
	return api.JobSubmit{Model: "fraud", Input: api.JobIO{URI: in}, Output: api.JobIO{URI: out}}
}

func rate(r float64) *float64 { return &r }

// startJobsServer serves the built-in examples with dir as --jobs-dir.
func startJobsServer(t *testing.T, data, dir string, extra ...string) *proc {
	t.Helper()
	srv := startServer(t, append([]string{"--data", data, "--jobs-dir", dir}, extra...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", srv.logs)
		}
	})
	return srv
}

// TestJobsFormats scores JSONL, CSV and Parquet inputs (and a CSV into a
// Parquet output): each job succeeds, its output holds every input id
// once with the version and the riskScore /v1 predict answers for the
// same row. A repeat of a submit with its id answers the job; the same
// id with another body is a conflict.
func TestJobsFormats(t *testing.T) {
	dir := t.TempDir()
	srv := startJobsServer(t, t.TempDir(), dir)
	c := jobsAPI{url: srv.url}
	const n = 2500
	want := onlineScores(t, srv.url, "", n)
	for _, tc := range []struct{ name, in, out, outFormat string }{
		{"jsonl", "in.jsonl", "out.jsonl", "jsonl"},
		{"csv", "in.csv", "out.csv", "csv"},
		{"parquet", "in.parquet", "out.parquet", "parquet"},
		{"csv to parquet", "in.csv", "csv-out.parquet", "parquet"},
		{"parquet to jsonl", "in.parquet", "parquet-out.jsonl", "jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, tc.in)); err != nil {
				writeFraudInput(t, filepath.Join(dir, tc.in), n)
			}
			s := fraudJob("file:"+tc.in, "file:"+tc.out)
			s.ChunkRows = 1000
			s.ID = "fmt-" + strings.ReplaceAll(tc.name, " ", "-")
			st := c.mustSubmit(t, s)
			if st.ID != s.ID || st.Spec.VersionID != "fraud@1" || st.Spec.Version != 1 || st.Spec.ChunkRows != 1000 || st.Spec.IDField != "id" {
				t.Errorf("submitted %+v", st)
			}
			if st.Spec.Input.Format == "" || st.Spec.Output.Format != tc.outFormat {
				t.Errorf("formats from the extensions: input %q output %q", st.Spec.Input.Format, st.Spec.Output.Format)
			}
			// The same submit again: the job, not a second one.
			if code, again, e := c.submit(t, s); code != http.StatusOK || again.ID != s.ID {
				t.Errorf("repeat of the submit: %d %+v %+v", code, again.ID, e)
			}
			other := s
			other.ChunkRows = 500
			if code, _, e := c.submit(t, other); code != http.StatusConflict || e.Code != "job_conflict" {
				t.Errorf("id %s with another body: %d %+v", s.ID, code, e)
			}
			st = c.wait(t, s.ID)
			if st.State != "succeeded" || st.RowsTotal != n || st.RowsDone != n || st.RowsFailed != 0 || st.RowsRedone != 0 ||
				st.ChunksTotal != 3 || st.ChunksDone != 3 || st.Incomplete || len(st.Errors) != 0 {
				t.Fatalf("job ended %s %q: %+v errors %+v", st.State, st.Message, st.JobCounts, st.Errors)
			}
			if st.Started.IsZero() || st.Finished.IsZero() {
				t.Errorf("started %v finished %v", st.Started, st.Finished)
			}
			checkScored(t, readJobOutput(t, filepath.Join(dir, tc.out), tc.outFormat, true), n, want)
		})
	}
	code, l := c.list(t, "")
	if code != 200 || len(l.Jobs) != 5 {
		t.Errorf("GET /v1/jobs: %d, %d jobs", code, len(l.Jobs))
	}
	if code, l = c.list(t, "?state=failed"); code != 200 || len(l.Jobs) != 0 {
		t.Errorf("GET /v1/jobs?state=failed: %d, %d jobs", code, len(l.Jobs))
	}
	if code, l = c.list(t, "?limit=2"); code != 200 || len(l.Jobs) != 2 {
		t.Errorf("GET /v1/jobs?limit=2: %d, %d jobs", code, len(l.Jobs))
	} else if code, more := c.list(t, "?limit=10&before="+l.Jobs[1].ID); code != 200 || len(more.Jobs) != 3 {
		t.Errorf("GET /v1/jobs?before=%s: %d, %d jobs", l.Jobs[1].ID, code, len(more.Jobs))
	}
	if code, _, e := c.status(t, "no-such-job"); code != http.StatusNotFound || e.Code != "job_not_found" {
		t.Errorf("GET of an unknown job: %d %+v", code, e)
	}
	if code, _, e := c.cancel(t, "fmt-jsonl"); code != http.StatusConflict || e.Code != "job_conflict" {
		t.Errorf("cancel of a succeeded job: %d %+v", code, e)
	}
	// The job metrics are on /metrics.
	code, b := c.call(t, http.MethodGet, "/metrics", nil)
	for _, m := range []string{"sluice_jobs{", "sluice_job_chunk_seconds"} {
		if code != 200 || !strings.Contains(string(b), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	srv.stop(t)
}

// TestJobsBadRows: a wrong type, a missing field and a duplicate id are
// listed in errors with their ids and counted in rowsFailed; the job
// succeeds under maxErrorRate (the two invalid rows in the output with
// their errors, the duplicate not: each id once) and fails above it,
// publishing no output.
func TestJobsBadRows(t *testing.T) {
	dir := t.TempDir()
	srv := startJobsServer(t, t.TempDir(), dir)
	c := jobsAPI{url: srv.url}
	const n = 200
	a5, age5, d5, c5 := fraudRow(5)
	writeFraudJSONL(t, filepath.Join(dir, "bad.jsonl"), n, map[int]string{
		10: `{"id":"r0000010","amount":"abc","accountAgeDays":5}`,
		20: `{"id":"r0000020","amount":3}`,
		30: fmt.Sprintf(`{"id":"r0000005","amount":%v,"accountAgeDays":%d,"declines5m":%d,"country":%q}`, a5, age5, d5, c5),
	})

	s := fraudJob("file:bad.jsonl", "file:bad-ok.jsonl")
	s.ChunkRows = 50
	s.MaxErrorRate = rate(0.05)
	st := c.wait(t, c.mustSubmit(t, s).ID)
	if st.State != "succeeded" || st.RowsTotal != n || st.RowsDone != n || st.RowsFailed != 3 || st.ChunksDone != 4 {
		t.Fatalf("under maxErrorRate: %s %q %+v", st.State, st.Message, st.JobCounts)
	}
	errsByID := map[string]api.JobRowError{}
	for _, e := range st.Errors {
		errsByID[e.ID] = e
	}
	if e := errsByID["r0000010"]; e.Field != "amount" || e.Message == "" {
		t.Errorf("wrong type: %+v (errors %+v)", e, st.Errors)
	}
	if e := errsByID["r0000020"]; e.Field != "accountAgeDays" || e.Message == "" {
		t.Errorf("missing field: %+v (errors %+v)", e, st.Errors)
	}
	if e := errsByID["r0000005"]; !strings.Contains(e.Message, "duplicate") || e.Line != 31 {
		t.Errorf("duplicate id: %+v (errors %+v)", e, st.Errors)
	}
	if len(st.Errors) != 3 {
		t.Errorf("errors listed: %+v", st.Errors)
	}
	m := byID(t, readJobOutput(t, filepath.Join(dir, "bad-ok.jsonl"), "jsonl", true))
	if len(m) != n-1 { // r0000030 is not in the input; r0000005 once
		t.Errorf("output holds %d ids, want %d", len(m), n-1)
	}
	if r := m["r0000010"]; r.Score != nil || r.ErrField != "amount" || r.ErrMessage == "" || r.VersionID != "fraud@1" {
		t.Errorf("wrong type's output row: %+v", r)
	}
	if r := m["r0000020"]; r.Score != nil || r.ErrField != "accountAgeDays" || r.ErrMessage == "" {
		t.Errorf("missing field's output row: %+v", r)
	}
	if r := m["r0000005"]; r.Score == nil || r.ErrMessage != "" {
		t.Errorf("the first r0000005 is scored: %+v", r)
	}
	if _, ok := m["r0000030"]; ok {
		t.Errorf("r0000030 is not in the input but in the output")
	}

	for _, mer := range []*float64{rate(0.01), nil} {
		out := fmt.Sprintf("bad-fail-%v.jsonl", mer != nil)
		s := fraudJob("file:bad.jsonl", "file:"+out)
		s.ChunkRows = 50
		s.MaxErrorRate = mer
		st := c.wait(t, c.mustSubmit(t, s).ID)
		if st.State != "failed" || !strings.Contains(st.Message, "maxErrorRate") || len(st.Errors) == 0 {
			t.Errorf("maxErrorRate %v: %s %q %+v %+v", st.Spec.MaxErrorRate, st.State, st.Message, st.JobCounts, st.Errors)
		}
		// At 0 the scan's duplicate alone fails the job before a row is
		// scored: the error is listed (the counts sum scored chunks only).
		dup := false
		for _, e := range st.Errors {
			dup = dup || e.ID == "r0000005" && strings.Contains(e.Message, "duplicate")
		}
		if !dup {
			t.Errorf("maxErrorRate %v: the duplicate is not among the errors %+v", st.Spec.MaxErrorRate, st.Errors)
		}
		t.Logf("maxErrorRate %v: %s: %s; %+v", st.Spec.MaxErrorRate, st.State, st.Message, st.JobCounts)
		if _, err := os.Stat(filepath.Join(dir, out)); !os.IsNotExist(err) {
			t.Errorf("a failed job published %s: %v", out, err)
		}
	}
	srv.stop(t)
}

// tree lists the files under dir with their sizes.
func tree(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m[p] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestJobsBadSubmits: each bad submit is refused with a clear error
// naming what is wrong, and nothing is written: no job, no file.
func TestJobsBadSubmits(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFraudJSONL(t, filepath.Join(dir, "in.jsonl"), 10, nil)
	writeFraudJSONL(t, filepath.Join(outside, "in.jsonl"), 10, nil)
	writeFraudJSONL(t, filepath.Join(dir, "exists.jsonl"), 1, nil)
	if err := os.WriteFile(filepath.Join(dir, "noid.csv"), []byte("amount,accountAgeDays,declines5m,country\n1,2,3,US\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "in.jsonl"), filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	srv := startJobsServer(t, t.TempDir(), dir)
	c := jobsAPI{url: srv.url}
	before, beforeOut := tree(t, dir), tree(t, outside)

	with := func(f func(*api.JobSubmit)) api.JobSubmit {
		s := fraudJob("file:in.jsonl", "file:out.jsonl")
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name  string
		body  any
		code  int    // 0: 400
		ecode string // "": job_invalid
		want  []string
	}{
		{"unknown model", with(func(s *api.JobSubmit) { s.Model = "nope" }), 0, "", []string{"nope"}},
		{"unknown version", with(func(s *api.JobSubmit) { s.Version = 9 }), 0, "", []string{"9"}},
		{"no model", with(func(s *api.JobSubmit) { s.Model = "" }), 0, "", []string{"model"}},
		{"missing input", with(func(s *api.JobSubmit) { s.Input.URI = "file:missing.jsonl" }), 0, "", []string{"missing.jsonl"}},
		{"no input", with(func(s *api.JobSubmit) { s.Input.URI = "" }), 0, "", []string{"input"}},
		{"no output", with(func(s *api.JobSubmit) { s.Output.URI = "" }), 0, "", []string{"output"}},
		{"traversal", with(func(s *api.JobSubmit) { s.Input.URI = "file:../x.jsonl" }), 0, "", []string{"..", "file:../x.jsonl"}},
		{"output traversal", with(func(s *api.JobSubmit) { s.Output.URI = "file:a/../../out.jsonl" }), 0, "", []string{".."}},
		{"absolute outside", with(func(s *api.JobSubmit) { s.Input.URI = "file://" + filepath.Join(outside, "in.jsonl") }), 0, "", []string{"jobs dir"}},
		{"symlink out", with(func(s *api.JobSubmit) { s.Input.URI = "file:link.jsonl" }), 0, "", []string{"link.jsonl"}},
		{"symlinked dir out", with(func(s *api.JobSubmit) { s.Input.URI = "file:sub/in.jsonl" }), 0, "", []string{"sub/in.jsonl"}},
		{"output through a symlinked dir", with(func(s *api.JobSubmit) { s.Output.URI = "file:sub/out.jsonl" }), 0, "", []string{"sub/out.jsonl"}},
		{"unknown scheme", with(func(s *api.JobSubmit) { s.Input.URI = "http://example.com/in.jsonl" }), 0, "", []string{"scheme"}},
		{"format not the file's", with(func(s *api.JobSubmit) { s.Input.Format = "parquet" }), 0, "", []string{"parquet"}},
		{"unknown format", with(func(s *api.JobSubmit) { s.Input.Format = "xml" }), 0, "", []string{"xml"}},
		{"no format from the extension", with(func(s *api.JobSubmit) { s.Input.URI = "file:in.txt" }), 0, "", []string{"format", "in.txt"}},
		{"csv without the id column", with(func(s *api.JobSubmit) { s.Input.URI = "file:noid.csv" }), 0, "", []string{"id column"}},
		{"id field not in the input", with(func(s *api.JobSubmit) { s.Input.URI = "file:noid.csv"; s.IDField = "key" }), 0, "", []string{"key"}},
		{"output exists", with(func(s *api.JobSubmit) { s.Output.URI = "file:exists.jsonl" }), 0, "", []string{"exists.jsonl"}},
		{"output is the input", with(func(s *api.JobSubmit) { s.Output.URI = "file:in.jsonl" }), 0, "", []string{"in.jsonl"}},
		{"chunkRows negative", with(func(s *api.JobSubmit) { s.ChunkRows = -1 }), 0, "", []string{"chunkRows"}},
		{"chunkRows too big", with(func(s *api.JobSubmit) { s.ChunkRows = 100_001 }), 0, "", []string{"chunkRows"}},
		{"maxErrorRate above 1", with(func(s *api.JobSubmit) { s.MaxErrorRate = rate(1.5) }), 0, "", []string{"maxErrorRate"}},
		{"maxErrorRate negative", with(func(s *api.JobSubmit) { s.MaxErrorRate = rate(-0.1) }), 0, "", []string{"maxErrorRate"}},
		{"bad id", with(func(s *api.JobSubmit) { s.ID = "Has/Slash" }), 0, "", []string{"id"}},
		{"unknown key", `{"model":"fraud","input":{"uri":"file:in.jsonl"},"output":{"uri":"file:out.jsonl"},"chunkrows":5}`, 0, "*", []string{"chunkrows"}},
		{"not json", `{"model":`, 0, "*", nil},
	} {
		code, st, e := c.submit(t, tc.body)
		wantCode, wantE := tc.code, tc.ecode
		if wantCode == 0 {
			wantCode = http.StatusBadRequest
		}
		if wantE == "" {
			wantE = "job_invalid"
		}
		if code != wantCode || (wantE != "*" && e.Code != wantE) {
			t.Errorf("%s: %d %s %q (job %q), want %d %s", tc.name, code, e.Code, e.Message, st.ID, wantCode, wantE)
			continue
		}
		msg := strings.ToLower(e.Field + " " + e.Message)
		for _, w := range tc.want {
			if !strings.Contains(msg, strings.ToLower(w)) {
				t.Errorf("%s: the error does not name %q: %+v", tc.name, w, e)
			}
		}
		t.Logf("%s: %d %s %s: %s", tc.name, code, e.Code, e.Field, e.Message)
	}
	if code, l := c.list(t, ""); code != 200 || len(l.Jobs) != 0 {
		t.Errorf("after bad submits GET /v1/jobs: %d %+v", code, l.Jobs)
	}
	if after := tree(t, dir); !mapsEqual(before, after) {
		t.Errorf("bad submits wrote into the jobs dir:\nbefore %v\nafter  %v", before, after)
	}
	if after := tree(t, outside); !mapsEqual(beforeOut, after) {
		t.Errorf("bad submits wrote outside the jobs dir:\nbefore %v\nafter  %v", beforeOut, after)
	}
	srv.stop(t)

	// Without --jobs-dir a file: URI is refused naming the flag.
	bare := startServer(t, "--data", t.TempDir())
	code, _, e := jobsAPI{url: bare.url}.submit(t, fraudJob("file:in.jsonl", "file:out.jsonl"))
	if code != http.StatusBadRequest || e.Code != "job_invalid" || !strings.Contains(e.Message, "--jobs-dir") {
		t.Errorf("file: without --jobs-dir: %d %+v", code, e)
	}
	bare.stop(t)
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// partsOf reads the committed parts of the output at out (OUT.parts/):
// the chunks' indices and every row. A .tmp file there fails the test.
func partsOf(t *testing.T, out, format string) ([]int, []jobOut) {
	t.Helper()
	ents, err := os.ReadDir(out + ".parts")
	if err != nil {
		t.Fatalf("parts of %s: %v", out, err)
	}
	var idx []int
	var rows []jobOut
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("%s.parts holds a temporary: %s", out, e.Name())
		}
		var i int
		if _, err := fmt.Sscanf(e.Name(), "chunk-%06d."+format, &i); err != nil || e.Name() != jobio.PartName(i, format) {
			continue // the runner's own records (scan.json)
		}
		idx = append(idx, i)
		rows = append(rows, readJobOutput(t, filepath.Join(out+".parts", e.Name()), format, false)...)
	}
	return idx, rows
}

// TestJobsCancel cancels a running job: it ends cancelled and
// incomplete, no output is published, the committed parts are kept and
// hold each of their chunks' ids once.
func TestJobsCancel(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	srv := startJobsServer(t, data, dir)
	c := jobsAPI{url: srv.url}
	const n, chunk = 200_000, 100
	writeFraudJSONL(t, filepath.Join(dir, "big.jsonl"), n, nil)
	s := fraudJob("file:big.jsonl", "file:big-out.jsonl")
	s.ChunkRows = chunk
	id := c.mustSubmit(t, s).ID
	c.until(t, id, "running with a chunk done", func(s api.JobStatus) bool { return s.State == "running" && s.ChunksDone >= 1 })
	code, st, e := c.cancel(t, id)
	if code != 200 || st.ID != id {
		t.Fatalf("cancel: %d %+v", code, e)
	}
	st = c.wait(t, id)
	if st.State != "cancelled" || !st.Incomplete || st.ChunksDone >= st.ChunksTotal || st.ChunksTotal != n/chunk {
		t.Fatalf("after cancel: %s incomplete=%v %+v", st.State, st.Incomplete, st.JobCounts)
	}
	t.Logf("cancelled with %d of %d chunks done", st.ChunksDone, st.ChunksTotal)
	if _, err := os.Stat(filepath.Join(dir, "big-out.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a cancelled job published its output: %v", err)
	}
	idx, rows := partsOf(t, filepath.Join(dir, "big-out.jsonl"), "jsonl")
	if len(idx) < st.ChunksDone {
		t.Errorf("%d parts kept, %d chunks were done", len(idx), st.ChunksDone)
	}
	m := byID(t, rows)
	for _, i := range idx {
		for r := i * chunk; r < (i+1)*chunk; r++ {
			if o, ok := m[fraudID(r)]; !ok || o.Score == nil {
				t.Fatalf("part %d lacks row %s: %+v", i, fraudID(r), o)
			}
		}
	}
	if len(m) != len(idx)*chunk {
		t.Errorf("parts hold %d rows, %d chunks of %d", len(m), len(idx), chunk)
	}
	// The job stays cancelled: a second cancel is a conflict, the state
	// does not move.
	if code, _, e := c.cancel(t, id); code != http.StatusConflict || e.Code != "job_conflict" {
		t.Errorf("cancel of a cancelled job: %d %+v", code, e)
	}
	srv.stop(t)
	// After a restart it is still cancelled and is not resumed.
	srv = startJobsServer(t, data, dir)
	if code, again, _ := (jobsAPI{url: srv.url}).status(t, id); code != 200 || again.State != "cancelled" || again.ChunksDone != st.ChunksDone {
		t.Errorf("after restart: %d %s %+v", code, again.State, again.JobCounts)
	}
	srv.stop(t)
}

// kill9 kills the server with SIGKILL and reaps it.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed server was not reaped")
	}
}

// TestJobsResumeAfterKill kills the server with SIGKILL mid-job and
// starts it again on the same --data: the job resumes where it stopped,
// redoes at most one chunk (one chunk in flight), and its output holds
// every input id exactly once with the score /v1 answers.
func TestJobsResumeAfterKill(t *testing.T) {
	for _, format := range []string{"jsonl", "parquet"} {
		t.Run(format, func(t *testing.T) {
			dir, data := t.TempDir(), t.TempDir()
			const n, chunk = 60_000, 100
			in, out := "in."+format, "out."+format
			writeFraudInput(t, filepath.Join(dir, in), n)
			args := []string{"--job-chunks-in-flight", "1"}
			srv := startJobsServer(t, data, dir, args...)
			c := jobsAPI{url: srv.url}
			s := fraudJob("file:"+in, "file:"+out)
			s.ChunkRows = chunk
			id := c.mustSubmit(t, s).ID
			at := c.until(t, id, "20 chunks done", func(s api.JobStatus) bool { return s.ChunksDone >= 20 })
			srv.kill9(t)
			t.Logf("killed with %d of %d chunks recorded", at.ChunksDone, at.ChunksTotal)

			srv = startJobsServer(t, data, dir, args...)
			c.url = srv.url
			st := c.wait(t, id)
			if st.State != "succeeded" || st.RowsDone != n || st.RowsFailed != 0 || st.ChunksDone != n/chunk {
				t.Fatalf("after restart: %s %q %+v", st.State, st.Message, st.JobCounts)
			}
			if st.RowsRedone > chunk {
				t.Errorf("rowsRedone %d > chunkRows %d", st.RowsRedone, chunk)
			}
			t.Logf("rowsRedone %d", st.RowsRedone)
			checkScored(t, readJobOutput(t, filepath.Join(dir, out), format, true), n, onlineScores(t, srv.url, "", n))
			srv.stop(t)
		})
	}
}

// TestJobsCLI drives `sluice job submit|status|list|cancel` as a user
// would.
func TestJobsCLI(t *testing.T) {
	dir := t.TempDir()
	srv := startJobsServer(t, t.TempDir(), dir)
	writeFraudInput(t, filepath.Join(dir, "in.csv"), 2000)
	writeFraudJSONL(t, filepath.Join(dir, "bad.jsonl"), 100, map[int]string{7: `{"id":"r0000007","amount":"x","accountAgeDays":1}`})
	writeFraudJSONL(t, filepath.Join(dir, "big.jsonl"), 200_000, nil)
	run := func(args ...string) (string, error) {
		out, stderr, err := sluice(t, append(args, "--server", srv.url)...)
		return out + stderr, err
	}

	out, err := run("job", "submit", "fraud", "--input", "file:in.csv", "--output", "file:out.jsonl", "--chunk-rows", "500", "--id", "cli-ok", "--watch")
	if err != nil || !strings.Contains(out, "succeeded") || !strings.Contains(out, "cli-ok") {
		t.Fatalf("job submit --watch: %v\n%s", err, out)
	}
	t.Logf("job submit --watch:\n%s", out)
	checkScored(t, readJobOutput(t, filepath.Join(dir, "out.jsonl"), "jsonl", true), 2000, nil)
	if out, err = run("job", "status", "cli-ok"); err != nil || !strings.Contains(out, "succeeded") || !strings.Contains(out, "2,000") || !strings.Contains(out, "fraud@1") {
		t.Errorf("job status: %v\n%s", err, out)
	}
	if out, err = run("job", "status", "cli-ok", "--watch"); err != nil || !strings.Contains(out, "succeeded") {
		t.Errorf("job status --watch of a finished job: %v\n%s", err, out)
	}
	if out, err = run("job", "list"); err != nil || !strings.Contains(out, "cli-ok") {
		t.Errorf("job list: %v\n%s", err, out)
	}
	if out, err = run("job", "list", "--state", "failed"); err != nil || strings.Contains(out, "cli-ok") {
		t.Errorf("job list --state failed: %v\n%s", err, out)
	}
	if out, err = run("job", "list", "--state", "done"); err == nil || !strings.Contains(out, "done") {
		t.Errorf("job list --state done: %v\n%s", err, out)
	}
	if out, err = run("job", "cancel", "cli-ok"); err == nil || !strings.Contains(out, "job_conflict") {
		t.Errorf("job cancel of a succeeded job: %v\n%s", err, out)
	}
	if out, err = run("job", "status", "nope"); err == nil || !strings.Contains(out, "job_not_found") {
		t.Errorf("job status of an unknown job: %v\n%s", err, out)
	}

	// A bad submit: the CLI exits non-zero with the server's reason.
	if out, err = run("job", "submit", "fraud", "--input", "file:missing.jsonl", "--output", "file:o.jsonl"); err == nil || !strings.Contains(out, "missing.jsonl") || !strings.Contains(out, "job_invalid") {
		t.Errorf("job submit of a missing input: %v\n%s", err, out)
	}
	if out, err = run("job", "submit", "fraud", "--output", "file:o.jsonl"); err == nil || !strings.Contains(out, "--input") {
		t.Errorf("job submit without --input: %v\n%s", err, out)
	}
	// A job that fails (one bad row, no errors allowed): --watch exits
	// non-zero and says why.
	out, err = run("job", "submit", "fraud", "--input", "file:bad.jsonl", "--output", "file:bad-out.jsonl", "--id", "cli-bad", "--watch")
	if err == nil || !strings.Contains(out, "failed") || !strings.Contains(out, "r0000007") {
		t.Errorf("job submit --watch of a failing job: %v\n%s", err, out)
	}
	// With --max-error-rate it succeeds.
	out, err = run("job", "submit", "fraud", "--input", "file:bad.jsonl", "--output", "file:bad-ok.jsonl", "--max-error-rate", "0.05", "--watch")
	if err != nil || !strings.Contains(out, "succeeded") {
		t.Errorf("job submit --max-error-rate 0.05 --watch: %v\n%s", err, out)
	}

	// A big job submitted without --watch returns at once; cancel stops it.
	if out, err = run("job", "submit", "fraud", "--input", "file:big.jsonl", "--output", "file:big-out.parquet", "--chunk-rows", "100", "--id", "cli-big"); err != nil || !strings.Contains(out, "cli-big") {
		t.Fatalf("job submit: %v\n%s", err, out)
	}
	c := jobsAPI{url: srv.url}
	c.until(t, "cli-big", "a chunk done", func(s api.JobStatus) bool { return s.ChunksDone >= 1 })
	if out, err = run("job", "cancel", "cli-big"); err != nil {
		t.Errorf("job cancel: %v\n%s", err, out)
	}
	out, _ = run("job", "status", "cli-big", "--watch")
	if !strings.Contains(out, "cancelled") {
		t.Errorf("job status --watch of a cancelled job:\n%s", out)
	}
	if out, err = run("job", "list", "--state", "cancelled"); err != nil || !strings.Contains(out, "cli-big") || strings.Contains(out, "cli-ok") {
		t.Errorf("job list --state cancelled: %v\n%s", err, out)
	}
	srv.stop(t)
}

// TestJobsTenants: a job runs as its submitter; a tenant not allowed on
// the model is refused; another tenant can neither see nor cancel the
// job; an admin sees every job.
func TestJobsTenants(t *testing.T) {
	dir := t.TempDir()
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(tenants, []byte(fmt.Sprintf(`tenants:
  - {name: acme, keys: ["sha256:%s"], models: ["fraud"]}
  - {name: globex, keys: ["sha256:%s"], models: ["iris", "churn"]}
  - {name: ops, keys: ["sha256:%s"], models: ["*"], admin: true}
`, sha("acme-key"), sha("globex-key"), sha("ops-key"))), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startJobsServer(t, t.TempDir(), dir, "--tenants", tenants)
	writeFraudInput(t, filepath.Join(dir, "in.jsonl"), 1500)
	acme, globex, ops, anon := jobsAPI{srv.url, "acme-key"}, jobsAPI{srv.url, "globex-key"}, jobsAPI{srv.url, "ops-key"}, jobsAPI{url: srv.url}

	if code, _, e := anon.submit(t, fraudJob("file:in.jsonl", "file:anon.jsonl")); code != http.StatusUnauthorized {
		t.Errorf("submit without a key: %d %+v", code, e)
	}
	if code, _, e := globex.submit(t, fraudJob("file:in.jsonl", "file:globex.jsonl")); code != http.StatusForbidden || e.Code != "permission_denied" || !strings.Contains(e.Message, "fraud") {
		t.Errorf("globex submits a fraud job: %d %+v", code, e)
	}
	if _, err := os.Stat(filepath.Join(dir, "globex.jsonl.parts")); !os.IsNotExist(err) {
		t.Errorf("a refused submit wrote parts: %v", err)
	}
	st := acme.mustSubmit(t, fraudJob("file:in.jsonl", "file:acme.jsonl"))
	if st.Spec.Tenant != "acme" {
		t.Errorf("the job's tenant is %q", st.Spec.Tenant)
	}
	st = acme.wait(t, st.ID)
	if st.State != "succeeded" || st.RowsDone != 1500 {
		t.Fatalf("acme's job: %s %q %+v", st.State, st.Message, st.JobCounts)
	}
	checkScored(t, readJobOutput(t, filepath.Join(dir, "acme.jsonl"), "jsonl", true), 1500, onlineScores(t, srv.url, "acme-key", 1500))

	if code, _, e := globex.status(t, st.ID); code != http.StatusNotFound || e.Code != "job_not_found" {
		t.Errorf("globex reads acme's job: %d %+v", code, e)
	}
	if code, _, e := globex.cancel(t, st.ID); code != http.StatusNotFound || e.Code != "job_not_found" {
		t.Errorf("globex cancels acme's job: %d %+v", code, e)
	}
	if code, l := globex.list(t, ""); code != 200 || len(l.Jobs) != 0 {
		t.Errorf("globex lists: %d %+v", code, l.Jobs)
	}
	if code, l := acme.list(t, ""); code != 200 || len(l.Jobs) != 1 || l.Jobs[0].ID != st.ID {
		t.Errorf("acme lists: %d %+v", code, l.Jobs)
	}
	if code, got, e := ops.status(t, st.ID); code != 200 || got.Spec.Tenant != "acme" {
		t.Errorf("the admin reads acme's job: %d %+v", code, e)
	}
	if code, l := ops.list(t, ""); code != 200 || len(l.Jobs) != 1 {
		t.Errorf("the admin lists: %d %+v", code, l.Jobs)
	}
	if code, _ := anon.list(t, ""); code != http.StatusUnauthorized {
		t.Errorf("list without a key: %d", code)
	}
	srv.stop(t)
}

// TestS3Jobs runs jobs with s3:// input and output on SeaweedFS (`make
// test-s3`): JSONL, CSV and Parquet scored as /v1 scores them, a missing
// object refused at submit, and a kill -9 + resume with its output in
// the bucket.
func TestS3Jobs(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t, endpoint)
	mc := s3test.Client(t, endpoint)
	ctx := context.Background()
	data, local := t.TempDir(), t.TempDir()
	args := []string{"--artifacts", "s3://" + bucket + "/arts", "--s3-endpoint", endpoint, "--job-chunks-in-flight", "1"}
	srv := startJobsServer(t, data, t.TempDir(), args...)
	c := jobsAPI{url: srv.url}
	put := func(name string, n int) string {
		p := filepath.Join(local, name)
		writeFraudInput(t, p, n)
		if _, err := mc.FPutObject(ctx, bucket, "in/"+name, p, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		return "s3://" + bucket + "/in/" + name
	}
	get := func(key string) string {
		p := filepath.Join(local, strings.ReplaceAll(key, "/", "_"))
		if err := mc.FGetObject(ctx, bucket, key, p, minio.GetObjectOptions{}); err != nil {
			t.Fatalf("s3://%s/%s: %v", bucket, key, err)
		}
		return p
	}
	const n = 2500
	want := onlineScores(t, srv.url, "", n)
	for _, f := range []string{"jsonl", "csv", "parquet"} {
		t.Run(f, func(t *testing.T) {
			in := put("in."+f, n)
			s := fraudJob(in, "s3://"+bucket+"/out/out."+f)
			s.ChunkRows = 1000
			st := c.wait(t, c.mustSubmit(t, s).ID)
			if st.State != "succeeded" || st.RowsDone != n || st.ChunksDone != 3 {
				t.Fatalf("%s %q %+v", st.State, st.Message, st.JobCounts)
			}
			checkScored(t, readJobOutput(t, get("out/out."+f), f, true), n, want)
		})
	}
	code, _, e := c.submit(t, fraudJob("s3://"+bucket+"/in/missing.jsonl", "s3://"+bucket+"/out/x.jsonl"))
	if code != http.StatusBadRequest || e.Code != "job_invalid" || !strings.Contains(e.Message, "missing.jsonl") {
		t.Errorf("missing object: %d %+v", code, e)
	}
	code, _, e = c.submit(t, fraudJob("s3://"+bucket+"/in/in.jsonl", "s3://"+bucket+"/out/out.jsonl"))
	if code != http.StatusBadRequest || e.Code != "job_invalid" || !strings.Contains(e.Message, "out.jsonl") {
		t.Errorf("output object exists: %d %+v", code, e)
	}

	parent := t
	t.Run("kill -9 and resume", func(t *testing.T) {
		const n, chunk = 30_000, 100
		in := put("big.parquet", n)
		s := fraudJob(in, "s3://"+bucket+"/out/big.jsonl")
		s.ChunkRows = chunk
		id := c.mustSubmit(t, s).ID
		c.until(t, id, "10 chunks done", func(s api.JobStatus) bool { return s.ChunksDone >= 10 })
		srv.kill9(t)
		srv = startJobsServer(parent, data, parent.TempDir(), args...) // the parent stops it
		c.url = srv.url
		st := c.wait(t, id)
		if st.State != "succeeded" || st.RowsDone != n || st.RowsRedone > chunk {
			t.Fatalf("after restart: %s %q %+v", st.State, st.Message, st.JobCounts)
		}
		t.Logf("rowsRedone %d", st.RowsRedone)
		checkScored(t, readJobOutput(t, get("out/big.jsonl"), "jsonl", true), n, nil)
	})
	srv.stop(t)
}
