// Package records keeps prediction records (who asked which model version
// what, and how it went) behind the Store interface, writes them off the
// request path (Writer), and owns the idempotency cache that replays
// answers to retried request ids. Its SQLite and PostgreSQL
// implementations are in recordsdb, apart, so that the data plane, which
// writes through a Store, links neither driver; every implementation must
// pass the suite in recordstest. It knows nothing of
// HTTP beyond status codes.
package records

import (
	"context"
	"path"
	"time"
	"unicode/utf8"
)

// Record is one prediction request, as recorded after it was answered.
type Record struct {
	RequestID string
	Tenant    string
	Model     string
	Version   int
	LatencyMs float64
	Outcome   string // "ok" or the error code
	InputHash string // see InputHash
	CreatedAt time.Time
	Attempts  int    // 1, plus one for every retry answered by replay
	Input     []byte // the sampled payload, only for models that opt in; nil otherwise
	// Cached is how many of the request's instances were answered from
	// the version's prediction cache (0: none; model.yaml cache:).
	Cached int
	// Features is the request's enrichment (model.yaml features:), as
	// canonical JSON: per instance its entity, the filled values and
	// where each came from (request, memory, redis, database, default,
	// stale); nil for a model without features.
	Features []byte
	// Outputs is the answer the caller got, per instance its outputs by
	// name (a labelled output as its label), as canonical JSON; nil for a
	// failed call, a model whose logging: sets outputs: false, or an
	// answer over MaxOutputBytes.
	Outputs []byte
	// Saved, when set, is stored beside the record (in the same
	// transaction) so that a retry is answered from the store; an insert
	// with one needs its Row (the Writer assigns rows). List does not
	// return it.
	Saved *Saved
	// Row is the store's row id, set by List: with CreatedAt, the
	// record's place in a listing (Filter.Before).
	Row int64

	// Retryable marks a record whose request id the client chose, so a
	// retry may bump its attempts: the writer remembers its row for that.
	// Not stored.
	Retryable bool
}

// MaxTextBytes bounds each text a record keeps (request id, tenant, model,
// outcome, the saved answer's key): the transports validate what callers
// send far below it (a request id is at most 128 characters, a model name
// 63), and the Writer cuts anything longer, so no caller's text is kept
// beyond it (issue 18, finding 12).
const MaxTextBytes = 256

// MaxOutputBytes bounds a record's Outputs: a larger answer is not kept
// in its record.
const MaxOutputBytes = 64 << 10

// bound cuts r's texts to MaxTextBytes.
func (r *Record) bound() {
	r.RequestID, r.Tenant, r.Model, r.Outcome = clipText(r.RequestID), clipText(r.Tenant), clipText(r.Model), clipText(r.Outcome)
	if r.Saved != nil && len(r.Saved.Key) > MaxTextBytes {
		sv := *r.Saved
		sv.Key = clipText(sv.Key)
		r.Saved = &sv
	}
}

// clipText cuts s to at most MaxTextBytes, at a UTF-8 boundary.
func clipText(s string) string {
	if len(s) <= MaxTextBytes {
		return s
	}
	i := MaxTextBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// Filter selects records for List. Zero fields match everything.
type Filter struct {
	Tenant    string // "" = every tenant (admin); a tenant's view sets it
	RequestID string
	Model     string
	Version   int // 0 = every version
	Outcome   string
	Since     time.Time // records created at or after Since
	Limit     int       // 0 = DefaultLimit; at most MaxLimit
	// Models, when not nil, keeps only records whose model matches one of
	// these globs (path.Match syntax, as in the tenants file): the models
	// a tenant may act on. An empty, non-nil list matches nothing.
	Models []string
	// Before, when set, lists only records after it in List's order
	// (older, or as old with a smaller row): the next page after a
	// listing whose last record was Before.
	Before *Position
	// MaxBytes bounds a listing in bytes as Limit does in records: List
	// stops after the record that takes the records' Bytes past it (so
	// the caller sees that there was more), at least one record. 0:
	// MaxPageBytes.
	MaxBytes int64
}

// MaxPageBytes is the default Filter.MaxBytes: about what a page of
// GET /v1/records may hold (issue 18, finding 12: one page of 10,000
// records answered 543 MB and took the gateway's RSS to 3.37 GB).
const MaxPageBytes = 8 << 20

// Bytes is about what r takes in a listing: its texts (the model twice,
// as "model" and "modelVersion"), its input and the rest's JSON.
func (r *Record) Bytes() int64 {
	return int64(192 + len(r.RequestID) + len(r.Tenant) + 2*len(r.Model) + len(r.Outcome) + len(r.InputHash) + len(r.Input) + len(r.Features) + len(r.Outputs))
}

// MaxBytesOf is f.MaxBytes, or MaxPageBytes when unset.
func (f Filter) MaxBytesOf() int64 {
	if f.MaxBytes > 0 {
		return f.MaxBytes
	}
	return MaxPageBytes
}

// CutBytes returns the records of rs (in List's order) up to and
// including the one whose Bytes take the sum past max: what List returns
// of them under Filter.MaxBytes.
func CutBytes(rs []Record, max int64) []Record {
	var n int64
	for i := range rs {
		if n += rs[i].Bytes(); n > max {
			return rs[:i+1]
		}
	}
	return rs
}

// Position is a record's place in List's order: its CreatedAt and Row.
type Position struct {
	CreatedAt time.Time
	Row       int64
}

// Matches reports whether model is selected by f.Models.
func (f Filter) Matches(model string) bool {
	if f.Models == nil {
		return true
	}
	for _, g := range f.Models {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

// List limits.
const (
	DefaultLimit = 100
	MaxLimit     = 10000
)

// Store keeps prediction records. The Writer writes through it; GET
// /v1/records lists through it.
type Store interface {
	// Write applies ops in order, atomically: all or none. Inserting a
	// row id in use is an error; bumping a record that is not there is
	// not (it may have been dropped or deleted).
	Write(ctx context.Context, ops []Op) error
	// List returns the records f selects, newest first (by CreatedAt,
	// then by row), at most f.Limit of them (DefaultLimit when 0, never
	// more than MaxLimit), stopping after the one whose Bytes take their
	// sum past f.MaxBytesOf().
	List(ctx context.Context, f Filter) ([]Record, error)
	// DeleteBefore deletes records created before t and says how many.
	DeleteBefore(ctx context.Context, t time.Time) (int64, error)
	// MaxRow returns the largest row id in use (0 when empty), so a Writer
	// assigns row ids after it.
	MaxRow(ctx context.Context) (int64, error)
	// Lookup returns the Saved answer stored with tenant's record of requestID
	// (and the record's row) if its window has not ended at now; nil when
	// there is none. It must not wait for writes in progress.
	Lookup(ctx context.Context, tenant, requestID string, now time.Time) (*Found, error)
	// ExpireReplays deletes the replays whose window ended before now (the
	// records stay until DeleteBefore).
	ExpireReplays(ctx context.Context, now time.Time) (int64, error)
}

// RowRanger is implemented by a store that several writers share
// (PostgreSQL: one Writer per gateway): RowBase hands the calling writer a
// range of row ids that no other writer uses, above every row in use; the
// writer assigns ids after it. A store without it has one writer, which
// starts after MaxRow.
type RowRanger interface {
	RowBase(ctx context.Context) (int64, error)
}

// Op is one write of a batch: the insert of Record, or (Bump) adding one
// to the attempts of a stored record.
type Op struct {
	Bump bool
	// Row is, for an insert, the row id to store Record under (0: the store
	// picks one); for a bump, the row to bump (0: the row of Record.Tenant
	// and Record.RequestID).
	Row    int64
	Record Record

	ack chan error // durable mode: the writer sends the batch's result (buffered, 1)
}
