package cluster

import (
	"time"
	"unicode/utf8"

	"github.com/sluiceml/sluice/internal/workerpb"
)

// This file is what the pool believes of a worker's report. A worker's
// credential (auth.go) says who is talking, not that what it says is
// sane: a buggy or compromised worker can still report anything. So a
// report is clamped before the pool reads it (clampWorker, clampVersion),
// its counters only grow within a session and by a bounded step (advance),
// and its entries speak only of versions the pool placed on that worker
// (applyStatusLocked drops the others without a slot or a map entry:
// they only add to the worker's foreign memory). Whatever a worker says
// can change placement and routing on that worker alone: its memory
// budget is the one it registered with, a copy it calls failed or stops
// listing is placed again (elsewhere, or there once it lists it again),
// and no figure it sends makes GET /v1/workers fail.

// Bounds of what a report may say. Each is far above anything a real
// worker reports and low enough that sums and conversions cannot overflow.
const (
	// maxReportedVersions is how many entries of one report are read; the
	// rest are ignored (a worker holds the versions the pool placed on
	// it, far fewer).
	maxReportedVersions = 4096
	// maxMemory bounds every byte figure (1 PiB).
	maxMemory = int64(1) << 50
	// maxQueued bounds a version's queued instances on one worker.
	maxQueued = int64(1) << 31
	// maxReplicas bounds ready and restarting replicas (a Load asks for at most 64).
	maxReplicas = 1 << 10
	// maxInflight bounds a version's batches in flight on one worker.
	maxInflight = 1 << 16
	// maxCost bounds a fitted cost model's terms.
	maxCost = int64(time.Hour)
	// maxBatch bounds a reported largest batch.
	maxBatch = 1 << 20
	// maxText bounds each text field of a report (build, budget source,
	// a version's reason), in bytes.
	maxText = 512
	// maxClockSkew is how far a worker's start time may be from now.
	maxClockSkew = 10 * 365 * 24 * time.Hour
)

// Per-beat growth bounds of a version's counters: a report that says more
// counts this much (the rest waits for the next beats, so a real burst is
// counted late, never lost while the counter keeps growing).
const (
	maxCrashStep   = 64
	maxExpiredStep = 10_000
	maxBatchesStep = 1 << 20
	maxRowsStep    = 1 << 30
)

// counts are a version's cumulative counters on one worker process, as
// the pool believes them.
type counts struct{ crashes, expired, batches, rows int64 }

// advance is a counter's new value: the report when it grew by at most
// step; prev+step when it grew more; prev when it shrank (within a
// session counters only grow: a drop is a lie or a bug, and taking it
// would count the regrowth again).
func advance(prev, reported, step int64) int64 {
	switch {
	case reported <= prev:
		return prev
	case reported-prev > step:
		return prev + step
	}
	return reported
}

// advanceCounts applies advance to each counter.
func advanceCounts(prev, reported counts) counts {
	return counts{
		crashes: advance(prev.crashes, reported.crashes, maxCrashStep),
		expired: advance(prev.expired, reported.expired, maxExpiredStep),
		batches: advance(prev.batches, reported.batches, maxBatchesStep),
		rows:    advance(prev.rows, reported.rows, maxRowsStep),
	}
}

// clampInt returns x within [lo, hi].
func clampInt[T int32 | int64](x, lo, hi T) T { return min(max(x, lo), hi) }

// clampText cuts s to at most n bytes, at a character boundary.
func clampText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// clampWorker bounds a report's worker-wide figures in place: byte
// figures in [0, maxMemory], texts to maxText, a start time more than
// maxClockSkew from now dropped (0: unknown).
func clampWorker(st *workerpb.WorkerStatus, now time.Time) {
	st.RssBytes = clampInt(st.RssBytes, 0, maxMemory)
	st.CacheBytes = clampInt(st.CacheBytes, 0, maxMemory)
	st.MemoryBudgetBytes = clampInt(st.MemoryBudgetBytes, 0, maxMemory)
	st.Build = clampText(st.Build, maxText)
	st.MemoryBudgetSource = clampText(st.MemoryBudgetSource, maxText)
	if ms := st.StartedUnixMs; ms < now.Add(-maxClockSkew).UnixMilli() || ms > now.Add(maxClockSkew).UnixMilli() {
		st.StartedUnixMs = 0
	}
}

// states are the states a worker reports a version in.
var states = map[string]bool{"loading": true, "ready": true, "failed": true, "unloading": true}

// clampVersion bounds one entry's figures in place (its counters are
// clamped at 0 here and made monotonic by advance): a state that is none
// of loading, ready, failed, unloading becomes "unknown" (nothing reads
// it as readiness).
func clampVersion(vs *workerpb.VersionStatus) {
	if !states[vs.State] {
		vs.State = "unknown"
	}
	vs.Reason = clampText(vs.Reason, maxText)
	vs.ReadyReplicas = clampInt(vs.ReadyReplicas, 0, maxReplicas)
	vs.RestartingReplicas = clampInt(vs.RestartingReplicas, 0, maxReplicas)
	vs.QueuedInstances = clampInt(vs.QueuedInstances, 0, maxQueued)
	vs.InflightBatches = clampInt(vs.InflightBatches, 0, maxInflight)
	vs.Batches = max(vs.Batches, 0)
	vs.Rows = max(vs.Rows, 0)
	vs.Crashes = max(vs.Crashes, 0)
	vs.ExpiredInQueue = max(vs.ExpiredInQueue, 0)
	vs.MemoryBytes = clampInt(vs.MemoryBytes, 0, maxMemory)
	vs.ReplicaMemoryBytes = clampInt(vs.ReplicaMemoryBytes, 0, maxMemory)
	vs.CostANs = clampInt(vs.CostANs, 0, maxCost)
	vs.CostBNs = clampInt(vs.CostBNs, 0, maxCost)
	vs.MaxBatch = clampInt(vs.MaxBatch, 0, maxBatch)
}

// clampDuration bounds a duration a worker reports (a load's phases) in
// [0, maxCost].
func clampDuration(ns int64) time.Duration { return time.Duration(clampInt(ns, 0, maxCost)) }
