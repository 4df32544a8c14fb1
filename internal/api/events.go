package api

import "time"

// The kinds of GET /v1/events (the SSE "event:" field); each event's
// "data:" is one JSON object of the type named beside it.
const (
	EventKindDeployment = "deployment" // EventDeployment: a model's traffic policy changed (here or on another gateway)
	EventKindRollout    = "rollout"    // EventRollout: a rollout started, stepped, paused, finished
	EventKindVersion    = "version"    // EventVersion: a version's load state changed
	EventKindWorker     = "worker"     // EventWorker: a worker joined, left or changed state
	EventKindAudit      = "audit"      // EventAudit: an audit entry this gateway wrote
	// EventKindReset says the stream could not replay from the caller's
	// Last-Event-ID (older than the server's ring, or from before its
	// start): what the caller shows may be stale, read it again.
	EventKindReset = "reset" // EventReset
)

// EventWeight is one target of an EventDeployment.
type EventWeight struct {
	Version int    `json:"version"`
	Weight  int    `json:"weight"`
	Shadow  bool   `json:"shadow,omitempty"`
	ID      string `json:"id,omitempty"` // "fraud@3"
}

// EventDeployment is the data of a "deployment" event: the policy now in
// force.
type EventDeployment struct {
	Model         string        `json:"model"`
	Policy        int           `json:"policy"` // the policy version
	Weights       []EventWeight `json:"weights"`
	Actor         string        `json:"actor"`
	Reason        string        `json:"reason"`
	Diff          string        `json:"diff,omitempty"`
	At            time.Time     `json:"at"`
	FromElsewhere bool          `json:"fromElsewhere,omitempty"` // adopted from the store: another gateway made it
}

// EventRollout is the data of a "rollout" event.
type EventRollout struct {
	Model     string `json:"model"`
	State     string `json:"state"` // the rollout's phase: canary, paused, promoted, aborted, failed, …
	Step      int    `json:"step"`  // 1-based step of the plan
	Of        int    `json:"of"`    // the plan's steps
	Percent   int    `json:"percent"`
	Candidate int    `json:"candidate"`
	Baseline  int    `json:"baseline"`
	Reason    string `json:"reason,omitempty"`
	Gates     []Gate `json:"gates"`
}

// EventVersion is the data of a "version" event.
type EventVersion struct {
	Model   string `json:"model"`
	Version int    `json:"version"`
	ID      string `json:"id"`    // "fraud@3"
	State   string `json:"state"` // loading, ready, failed, archived, …
	Reason  string `json:"reason,omitempty"`
}

// EventWorker is the data of a "worker" event. State "gone" means the
// worker left the registry (forgotten, or its pod deleted).
type EventWorker struct {
	Worker string `json:"worker"`
	State  string `json:"state"` // ready, down, gone
	Reason string `json:"reason,omitempty"`
}

// EventAudit is the data of an "audit" event: the entry as GET
// /v1/deployments/{model}/history lists it, with its model.
type EventAudit struct {
	Model string `json:"model"`
	Event
}

// EventReset is the data of a "reset" event.
type EventReset struct {
	Reason string `json:"reason"`
}

// ModelStats is GET /v1/models/{name}/stats?window=1h: per version, one
// point per minute of the window (minutes with no request are left out).
type ModelStats struct {
	Model    string         `json:"model"`
	Window   string         `json:"window"` // "1h"
	Step     string         `json:"step"`   // "1m"
	Versions []VersionStats `json:"versions"`
}

// VersionStats is one version's points.
type VersionStats struct {
	Version string      `json:"version"` // "fraud@17"
	Points  []StatPoint `json:"points"`
}

// StatPoint is one minute of one version: the requests that ended in it,
// those that failed, and their latency quantiles (from a bounded sketch,
// within its stated error: docs/api.md).
type StatPoint struct {
	T      time.Time `json:"t"` // the minute's start, UTC
	Count  int64     `json:"count"`
	Errors int64     `json:"errors"`
	P50Ms  float64   `json:"p50Ms"`
	P99Ms  float64   `json:"p99Ms"`
}
