// Package features fills a request's input fields from an entity's stored
// features: an in-process memory tier bounded in bytes per view, then the
// feature stores in order (Redis, then PostgreSQL: redisfeat and pgfeat
// implement Source), inside the enrichment's share of the request's
// deadline, with a circuit breaker per store and a default for every field
// no tier had in time. A database hit fills the earlier stores and memory
// (read-through). It knows no manifest, transport or driver: the gateway
// hands it a View and entities, and it says, per field, where each value
// came from.
package features

import (
	"context"
	"math"
	"strconv"
	"time"
)

// View is what one model version reads from the stores: the view's name
// (the Redis key prefix and the PostgreSQL table), the entity column and
// the fields. Names were validated by modelpkg (identifiers).
type View struct {
	Name      string
	Entity    string   // the entity's column (PostgreSQL)
	EntityInt bool     // the entity is an integer (PostgreSQL bigint)
	Fields    []string // the filled fields, in order
}

// Row is one entity's stored features as a store answers them.
type Row struct {
	// Found: the entity exists in the store (a hash, a table row).
	Found bool
	// Values holds one value per View.Fields; NaN: the store has no value
	// for that field (absent or NULL), which is not the same as 0.
	Values []float64
	// At is when the values were written (Redis _ts, PostgreSQL
	// updated_at); zero: unknown, never stale.
	At time.Time
}

// Source is a feature store. Lookup reads the view's fields of every
// entity in one round trip (a pipeline, one query) and writes out[i] for
// entities[i] (len(out) == len(entities), each Values already sized
// len(v.Fields)). It returns when ctx is done, never later. An error means
// the store did not answer (out is then ignored); an unknown entity is
// Found false, not an error.
type Source interface {
	Lookup(ctx context.Context, v *View, entities []string, out []Row) error
}

// Filler is a store that can be filled with what a later store answered
// (read-through: a database hit is written to Redis).
type Filler interface {
	Fill(ctx context.Context, v *View, entities []string, rows []Row) error
}

// Pinger is a store the breaker can probe while it is open.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Origin says where one filled value came from.
type Origin uint8

// Origins. A stored value older than the view's maxAge is Stale whatever
// tier served it.
const (
	Request  Origin = iota // the caller sent it
	Memory                 // the in-process tier
	Redis                  // the Redis store
	Database               // the PostgreSQL store
	Default                // no tier had it in time: the field's default
	Stale                  // a stored value older than maxAge
)

var originNames = [...]string{"request", "memory", "redis", "database", "default", "stale"}

func (o Origin) String() string {
	if int(o) < len(originNames) {
		return originNames[o]
	}
	return "origin(" + strconv.Itoa(int(o)) + ")"
}

// Result is one entity's filled fields: a value and its origin per
// View.Fields.
type Result struct {
	Values  []float64
	Origins []Origin
}

// Budget is the time enrichment may take: the lesser of timeout and what
// is left of the deadline (none: timeout); never negative.
func Budget(now time.Time, deadline time.Time, hasDeadline bool, timeout time.Duration) time.Duration {
	d := timeout
	if hasDeadline {
		if left := deadline.Sub(now); left < d {
			d = left
		}
	}
	return max(d, 0)
}

// FormatValue is a stored value as a decimal string (Redis's layout and
// the number literal an instance gets).
func FormatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// ParseValue reads a stored decimal string; false when it is not a finite
// number (the field is then absent).
func ParseValue(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}
