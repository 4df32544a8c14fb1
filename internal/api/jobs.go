package api

import "time"

// JobIO is a batch job's input or output: a URI (file:NAME inside the
// server's --jobs-dir, or s3://BUCKET/KEY) and a format (jsonl, csv,
// parquet).
type JobIO struct {
	URI    string `json:"uri"`
	Format string `json:"format"`
}

// JobSubmit is the body of POST /v1/jobs.
type JobSubmit struct {
	Model        string   `json:"model"`
	Version      int      `json:"version,omitempty"` // 0: the deployment's primary, pinned for the whole job
	Input        JobIO    `json:"input"`
	Output       JobIO    `json:"output"`
	IDField      string   `json:"idField,omitempty"`      // default "id"
	ChunkRows    int      `json:"chunkRows,omitempty"`    // default 1000
	MaxErrorRate *float64 `json:"maxErrorRate,omitempty"` // fraction 0..1 of rows that may fail; default 0
	ID           string   `json:"id,omitempty"`           // optional client-chosen id ([a-z0-9-], ≤ 64); the same submit again returns the job
}

// JobState is a job's state: queued, running, succeeded, failed,
// cancelled.
type JobState string

// JobSpec is what a job runs: the submit with its version resolved (a
// job scores with the version pinned at submit) and its submitter.
type JobSpec struct {
	Model        string  `json:"model"`
	Version      int     `json:"version"`
	VersionID    string  `json:"versionId"` // "fraud@3"
	Input        JobIO   `json:"input"`
	Output       JobIO   `json:"output"`
	IDField      string  `json:"idField"`
	ChunkRows    int     `json:"chunkRows"`
	MaxErrorRate float64 `json:"maxErrorRate"`
	Tenant       string  `json:"tenant"` // the submitter: the job runs with its permissions and quota
}

// JobRowError is one row that failed: its chunk, line (or row number),
// id when it has one, the field to blame and why.
type JobRowError struct {
	Chunk   int    `json:"chunk"`
	Line    int64  `json:"line"`
	ID      string `json:"id,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// JobCounts are a job's progress, summed over its done chunks (a chunk
// redone after a crash counts once, and in rowsRedone).
type JobCounts struct {
	RowsTotal   int64 `json:"rowsTotal"` // known once the input is scanned (0 before)
	RowsDone    int64 `json:"rowsDone"`  // rows of done chunks: scored or failed
	RowsFailed  int64 `json:"rowsFailed"`
	RowsRedone  int64 `json:"rowsRedone"`
	ChunksTotal int   `json:"chunksTotal"`
	ChunksDone  int   `json:"chunksDone"`
}

// Job is a batch job as the store keeps it.
type Job struct {
	ID      string   `json:"id"`
	Spec    JobSpec  `json:"spec"`
	State   JobState `json:"state"`
	Scanned bool     `json:"scanned"` // the input was read once and its chunks recorded
	JobCounts
	Errors          []JobRowError `json:"errors,omitempty"`     // the first ones (at most 20); all are counted in rowsFailed
	Message         string        `json:"message,omitempty"`    // why it failed or was cancelled
	Incomplete      bool          `json:"incomplete,omitempty"` // ended with committed parts not assembled (under OUTPUT.parts/)
	CancelRequested bool          `json:"cancelRequested,omitempty"`
	Created         time.Time     `json:"created"`
	Started         time.Time     `json:"started,omitzero"`
	Finished        time.Time     `json:"finished,omitzero"`
	Updated         time.Time     `json:"updated"`
}

// JobStatus is GET /v1/jobs/{id}: the job with its throughput and ETA.
type JobStatus struct {
	Job
	RowsPerSecond float64 `json:"rowsPerSecond"` // rows done per second of running time
	ETASeconds    float64 `json:"etaSeconds"`    // -1: unknown
}

// JobList is GET /v1/jobs.
type JobList struct {
	Jobs []JobStatus `json:"jobs"`
}
