// Package routing holds the routing snapshot the data plane reads: an
// immutable Table from model name to its deployment's targets (bucket
// ranges for weighted primaries, plus shadows) and the ready versions that
// can be called pinned. The control plane builds a new Table and swaps it
// in atomically; the data plane never waits on the control plane or its
// store.
//
// A request's routing key hashes to one of Buckets buckets. Primary targets
// own contiguous bucket ranges laid out in version order, so the same key
// keeps its version while weights stay, and growing the newest version's
// weight only moves keys onto it, never back.
package routing

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluiceml/sluice/internal/drift"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/serving"
)

// Buckets is the number of hash buckets weights are laid out on (0.01 %).
const Buckets = 10000

// Backend runs a version's work: a serving.Server in this process, or the
// version's replicas on worker processes (internal/cluster). Submit admits
// or refuses at once, then waits for the result or the context's end.
type Backend interface {
	Submit(ctx context.Context, w serving.Work) (serving.Result, error)
}

// Target is one ready version that can take requests.
type Target struct {
	Model   string
	N       int
	ID      string // "fraud@3"
	Spec    *modelpkg.Spec
	Server  Backend
	Digest  string
	Runtime string
	Drift   *drift.Monitor // nil: no drift monitoring
}

// Weighted is one primary target of a policy: a version and its percent.
type Weighted struct {
	Version int
	Weight  int
}

// Range is a half-open bucket range [Lo, Hi) owned by a version.
type Range struct {
	Version int
	Lo, Hi  uint32
}

// Assign lays weights out on the buckets in version order. Weights are
// percents summing to 100; zero-weight targets get no range.
func Assign(ws []Weighted) []Range {
	sorted := append([]Weighted(nil), ws...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Version < sorted[j].Version })
	var out []Range
	var lo uint32
	acc := 0
	for _, w := range sorted {
		if w.Weight <= 0 {
			continue
		}
		acc += w.Weight
		hi := uint32(acc * Buckets / 100)
		if acc >= 100 {
			hi = Buckets
		}
		out = append(out, Range{Version: w.Version, Lo: lo, Hi: hi})
		lo = hi
	}
	return out
}

// Bucket hashes a routing key to a bucket.
func Bucket(key string) uint32 {
	h := fnv.New64a()
	h.Write([]byte(key))
	x := h.Sum64()
	// splitmix64 finalizer: spreads FNV's low bits.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return uint32(x % Buckets)
}

// Route is a primary target with its bucket range.
type Route struct {
	Range
	Target *Target // nil when that version is not ready
}

// Entry is the routing of one model.
type Entry struct {
	Policy   int     // policy version in force (0: none yet)
	Routes   []Route // primary targets by bucket range
	Shadows  []*Target
	Versions map[int]*Target // every ready version, by number
	// NotReady says, for each known version that is not ready, why
	// ("loading", "failed: artifact sha256 mismatch ...").
	NotReady map[int]string
}

// Table is an immutable routing snapshot. Never modify one after Store.
type Table struct {
	Models map[string]*Entry
}

// Pick returns the primary target for a routing key and the shadows that
// take a copy. A primary whose version is not ready hands its buckets to
// the ready primary with the most traffic.
func (t *Table) Pick(model, key string) (*Target, []*Target, error) {
	e, ok := t.Models[model]
	if !ok {
		return nil, nil, errs.New(errs.NotFound, "model %q not found", model)
	}
	b := Bucket(key)
	var fallback *Target
	best := uint32(0)
	for _, r := range e.Routes {
		if r.Target != nil && b >= r.Lo && b < r.Hi {
			return r.Target, e.Shadows, nil
		}
		if r.Target != nil && r.Hi-r.Lo > best {
			fallback, best = r.Target, r.Hi-r.Lo
		}
	}
	if fallback != nil {
		return fallback, e.Shadows, nil
	}
	var why []string
	for n, w := range e.NotReady {
		why = append(why, fmt.Sprintf("%s@%d %s", model, n, w))
	}
	sort.Strings(why)
	msg := "model " + model + " has no ready version"
	if e.Policy > 0 {
		msg = "no version in model " + model + "'s deployment is ready"
	}
	if len(why) > 0 {
		msg += " (" + strings.Join(why, "; ") + ")"
	}
	return nil, nil, &errs.Error{Code: errs.NotReady, Message: msg, RetryAfter: time.Second}
}

// Pinned returns model@n if it is ready: 404 if it does not exist, 503 if
// it is not ready.
func (t *Table) Pinned(model string, n int) (*Target, error) {
	e, ok := t.Models[model]
	if !ok {
		return nil, errs.New(errs.NotFound, "model %q not found", model)
	}
	if tg, ok := e.Versions[n]; ok {
		return tg, nil
	}
	if why, ok := e.NotReady[n]; ok {
		return nil, &errs.Error{Code: errs.NotReady, Message: fmt.Sprintf("%s@%d is not ready (%s)", model, n, why), RetryAfter: time.Second}
	}
	return nil, errs.New(errs.NotFound, "model version %s@%d not found", model, n)
}

// Serving returns the version with the largest share of model's traffic
// (0 if none is routable).
func (t *Table) Serving(model string) int {
	e, ok := t.Models[model]
	if !ok {
		return 0
	}
	best, n := uint32(0), 0
	for _, r := range e.Routes {
		if r.Target != nil && r.Hi-r.Lo > best {
			best, n = r.Hi-r.Lo, r.Version
		}
	}
	return n
}

// Names lists the models in the table.
func (t *Table) Names() []string {
	out := make([]string, 0, len(t.Models))
	for n := range t.Models {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Holder holds the current Table.
type Holder struct{ p atomic.Pointer[Table] }

// Load returns the current snapshot (an empty one before the first Store).
func (h *Holder) Load() *Table {
	if t := h.p.Load(); t != nil {
		return t
	}
	return &Table{Models: map[string]*Entry{}}
}

// Store publishes a new snapshot.
func (h *Holder) Store(t *Table) { h.p.Store(t) }
