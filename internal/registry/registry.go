// Package registry owns Sluice's metadata and artifacts: immutable model
// versions and their load state (Versions), artifact bytes named by SHA-256
// (Artifacts), deployment policies and rollout state (Deployments) and the
// audit log (AuditLog). Store composes them for the control plane. It is
// the only package that touches the metadata store and artifact storage;
// the embedded implementation is SQLite (modernc.org/sqlite, pure Go, no
// cgo) over a content-addressed folder (Dir); internal/registry/s3 keeps
// the artifacts in an S3-compatible object store instead
// (Options.Artifacts). Every implementation must pass the suites in
// registrytest.
package registry

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sluiceml/sluice/internal/modelpkg"
)

// State is a version's load state.
type State string

// Version states: published → loading → validating → ready | failed;
// any of them → archived (unloaded by hand, record kept) or deleted (its
// model was deleted: archived and hidden from listings). A failed, archived
// or deleted version is loaded again only when published again or loaded
// by an explicit call.
const (
	Published  State = "published"
	Loading    State = "loading"
	Validating State = "validating"
	Ready      State = "ready"
	Failed     State = "failed"
	Archived   State = "archived"
	Deleted    State = "deleted"
)

// Version is one immutable model version.
type Version struct {
	Model         string
	N             int
	Digest        string
	ArtifactSHA   string
	ArtifactBytes int64
	Runtime       string
	InputSchema   string
	OutputSchema  string
	Manifest      []byte // model.yaml as published
	CreatedAt     time.Time

	// Load state, last recorded.
	State    State
	Reason   string
	Timings  Timings
	StatedAt time.Time
}

// Timings of the last load.
type Timings struct {
	Load   time.Duration
	Golden time.Duration
	Warmup time.Duration
}

// ID is "model@N".
func (v Version) ID() string { return fmt.Sprintf("%s@%d", v.Model, v.N) }

// Versions is the catalogue of model versions. A version never changes once
// published, except for its load state.
type Versions interface {
	// Publish stores the package (its artifact and extra files too) as the
	// next version of its model, numbered from 1. Publishing content
	// identical to an existing version returns that version and
	// created=false, and stores its artifacts again if they were lost or
	// corrupted.
	Publish(ctx context.Context, p *modelpkg.Package) (v Version, created bool, err error)
	// Get returns model@n; NotFound if there is none.
	Get(ctx context.Context, model string, n int) (Version, error)
	// List returns every version of every model, by model then version.
	List(ctx context.Context) ([]Version, error)
	// SetState records a version's load state.
	SetState(ctx context.Context, model string, n int, st State, reason string, t Timings) error
	// File returns a version's extra file (e.g. "drift.reference"),
	// verified against its hash; nil, nil when the version has none.
	File(ctx context.Context, model string, n int, name string) ([]byte, error)
}

// Artifacts holds immutable bytes named by their SHA-256 (64 lowercase hex
// digits).
type Artifacts interface {
	// Open returns a reader of the artifact and its size in bytes. The
	// reader verifies the hash as it reaches the end: instead of io.EOF it
	// returns an error saying "artifact sha256 mismatch" and naming the
	// hash when the content is not what sha names. A missing artifact is an
	// error that names the hash and wraps fs.ErrNotExist.
	Open(ctx context.Context, sha string) (io.ReadCloser, int64, error)
	// Put stores the content of r under sha unless an intact copy is there
	// already (a corrupted one is replaced). Content that does not hash to
	// sha is refused and nothing is stored.
	Put(ctx context.Context, sha string, r io.Reader) error
	// Delete removes the artifact sha; deleting one that is not there is
	// not an error. The caller makes sure nothing uses it (Publish deletes
	// what a failed publish stored).
	Delete(ctx context.Context, sha string) error
}

// Deployments keeps each model's deployment policies and rollout state.
type Deployments interface {
	// SetPolicy stores the next policy version of p.Model (p.Version is
	// assigned, from 1) and its audit event atomically. If expect >= 0 and
	// the current policy version differs, nothing is written and
	// AlreadyExists (409) is returned.
	SetPolicy(ctx context.Context, p Policy, expect int) (Policy, error)
	// Policies returns the policy history of model, oldest first (all
	// models, by model then version, when model is "").
	Policies(ctx context.Context, model string) ([]Policy, error)
	// Current returns the policy in force of every model (its latest),
	// by model.
	Current(ctx context.Context) ([]Policy, error)
	// PolicyPage returns at most limit policies of model with a policy
	// version above after, oldest first.
	PolicyPage(ctx context.Context, model string, after, limit int) ([]Policy, error)
	// PolicyAt returns the policy of model in force at t; NotFound if none.
	PolicyAt(ctx context.Context, model string, t time.Time) (Policy, error)
	// SaveRollout stores the latest rollout state of model (an opaque
	// document owned by the control plane), replacing the previous one.
	SaveRollout(ctx context.Context, model string, state []byte) error
	// Rollouts returns the stored rollout state of every model.
	Rollouts(ctx context.Context) (map[string][]byte, error)
}

// AuditLog is the append-only record of who changed what. Policy changes
// are logged by Deployments.SetPolicy itself.
type AuditLog interface {
	// Audit records an event that is not a policy change (rollout actions).
	Audit(ctx context.Context, e Event) error
	// Events returns the audit events of model, oldest first, each with
	// its Seq.
	Events(ctx context.Context, model string) ([]Event, error)
	// EventPage returns at most limit (< 0: every) events of model whose
	// Seq is above after, oldest first.
	EventPage(ctx context.Context, model string, after int64, limit int) ([]Event, error)
}

// Changes is implemented by a store that several gateways share
// (PostgreSQL): WatchChanges calls changed, never concurrently, whenever
// another writer may have changed versions, deployments or rollouts, and
// once at start, until ctx ends. A gateway then reads the store again and
// rebuilds its routing snapshot (control.Controller.Follow).
type Changes interface {
	WatchChanges(ctx context.Context, changed func()) error
}

// Store is everything the control plane reads and writes.
type Store interface {
	Versions
	Artifacts
	Deployments
	AuditLog
}
