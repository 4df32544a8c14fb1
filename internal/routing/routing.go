// Package routing holds the routing snapshot the data plane reads: an
// immutable Table from model name to the version that serves it and the
// versions that can be called pinned. The control plane builds a new Table
// and swaps it in atomically; the data plane never waits on the control
// plane or its store.
package routing

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/serving"
)

// Target is one ready version that can take requests.
type Target struct {
	Model   string
	N       int
	ID      string // "fraud@3"
	Spec    *modelpkg.Spec
	Server  *serving.Server
	Digest  string
	Runtime string
}

// Entry is the routing of one model.
type Entry struct {
	Serving  *Target         // nil: the model has no ready version
	Versions map[int]*Target // every ready version, by number
	// NotReady says, for each known version that is not ready, why
	// ("loading", "failed: artifact sha256 mismatch ...").
	NotReady map[int]string
}

// Table is an immutable routing snapshot. Never modify one after Publish.
type Table struct {
	Models map[string]*Entry
}

// Pick returns the version that serves model.
func (t *Table) Pick(model string) (*Target, error) {
	e, ok := t.Models[model]
	if !ok {
		return nil, errs.New(errs.NotFound, "model %q not found", model)
	}
	if e.Serving == nil {
		var why []string
		for n, w := range e.NotReady {
			why = append(why, fmt.Sprintf("%s@%d %s", model, n, w))
		}
		sort.Strings(why)
		return nil, &errs.Error{Code: errs.NotReady, Message: "model " + model + " has no ready version (" + strings.Join(why, "; ") + ")", RetryAfter: time.Second}
	}
	return e.Serving, nil
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
