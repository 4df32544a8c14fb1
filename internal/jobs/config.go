package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// Config builds a Manager and a Runner (the same Config for both in
// `sluice serve`; `sluice job run` builds only a Runner and leaves the
// Manager's fields empty).
type Config struct {
	Store     Store
	Predictor Predictor
	// Objects is where a URI's files live: the jobs dir's LocalStore for
	// file: URIs, an S3Store of the bucket for s3:// ones. Its error names
	// what is missing ("no object store for s3:// URIs: start the server
	// with ...").
	Objects func(jobio.Location) (jobio.ObjectStore, error)
	JobsDir string // where file: URIs resolve ("": file: URIs are refused)
	// Resolve is the deployment's primary version of model (the Manager
	// pins it when a submit names no version).
	Resolve func(model string) (version int, err error)
	Log     *slog.Logger
	Metrics prometheus.Registerer // nil: metrics kept unregistered
	Now     func() time.Time      // nil: time.Now

	// The runner's knobs.
	Runners        int           // jobs Run works on at once (0: none; Run only waits for its context)
	ChunksInFlight int           // chunks of one job scored at once (0: DefaultChunksInFlight, 1)
	Lease          time.Duration // a chunk claim's lease, renewed every third of it (0: 10 s)
	Owner          string        // the runner's name in the store's leases ("": host-pid-random, one per process start)
	Poll           time.Duration // how often Run looks for runnable jobs (0: 1 s)
	CancelPoll     time.Duration // how often a running job's cancel request and counts are read (0: 500 ms)

	// Wake, when set, is called after a submit and a cancel (the Manager
	// calls it: wire it to the Runner's Wake so a new job starts at once).
	Wake func()
}

// Defaults of the runner's knobs.
const (
	DefaultChunksInFlight = 1
	DefaultLease          = 10 * time.Second
	DefaultPoll           = time.Second
	DefaultCancelPoll     = 500 * time.Millisecond
)

func (c Config) withDefaults() Config {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ChunksInFlight <= 0 {
		c.ChunksInFlight = DefaultChunksInFlight
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.CancelPoll <= 0 {
		c.CancelPoll = DefaultCancelPoll
	}
	if c.Owner == "" {
		c.Owner = newOwner()
	}
	return c
}

// newOwner names a runner: the host, the process and a random part (a
// restarted process is another owner; the dead one's leases expire).
func newOwner() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "runner"
	}
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// newID is a job id the server picks: "job-" and 12 random hex digits.
func newID() string {
	var b [6]byte
	rand.Read(b[:])
	return "job-" + hex.EncodeToString(b[:])
}

// metrics of the runner: sluice_job_rows_total{job,outcome},
// sluice_job_chunk_seconds, sluice_job_rows_per_second{job}. A job's
// series are deleted when it ends.
type metrics struct {
	rows  *prometheus.CounterVec
	chunk prometheus.Histogram
	rps   *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_job_rows_total",
			Help: "Rows of batch jobs' chunks this process completed, by job and outcome (ok, failed; redone: rows of chunks scored again after a lost lease or a crash)."},
			[]string{"job", "outcome"}),
		chunk: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_job_chunk_seconds",
			Help:    "Time from a chunk's claim to its completion (read, score, commit, record).",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}),
		rps: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_job_rows_per_second",
			Help: "A running batch job's rows done per second of running time."}, []string{"job"}),
	}
	if reg != nil {
		m.rows = register(reg, m.rows)
		m.chunk = register(reg, m.chunk)
		m.rps = register(reg, m.rps)
	}
	return m
}

// register registers c, or returns the collector registered before under
// its name (a Runner built twice on one registry shares the series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(C); ok {
				return prev
			}
		}
	}
	return c
}

func (m *metrics) forget(job string) {
	for _, o := range []string{"ok", "failed", "redone"} {
		m.rows.DeleteLabelValues(job, o)
	}
	m.rps.DeleteLabelValues(job)
}

// StateCounter is what a Store may offer to count its jobs by state for
// sluice_jobs{state} (without it, List is asked, which counts at most
// 1000 jobs a state).
type StateCounter interface {
	CountByState(ctx context.Context) (map[State]int64, error)
}

// statesCollector is sluice_jobs{state}: the store's jobs by state, read
// at scrape time.
type statesCollector struct {
	store Store
	desc  *prometheus.Desc
}

func newStatesCollector(s Store) *statesCollector {
	return &statesCollector{store: s, desc: prometheus.NewDesc("sluice_jobs", "Batch jobs in the job store, by state.", []string{"state"}, nil)}
}

func (c *statesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *statesCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := countStates(ctx, c.store)
	if err != nil {
		return
	}
	for _, s := range []State{Queued, Running, Succeeded, Failed, Cancelled} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

func countStates(ctx context.Context, s Store) (map[State]int64, error) {
	if sc, ok := s.(StateCounter); ok {
		return sc.CountByState(ctx)
	}
	out := make(map[State]int64, 5)
	for _, st := range []State{Queued, Running, Succeeded, Failed, Cancelled} {
		js, err := s.List(ctx, ListOptions{State: st, Limit: 1000})
		if err != nil {
			return nil, err
		}
		out[st] = int64(len(js))
	}
	return out, nil
}
