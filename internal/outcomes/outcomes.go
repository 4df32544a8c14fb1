// Package outcomes joins what happened after a prediction (a click, a
// conversion, a chargeback, a label) to the prediction that was answered:
// the Join each answered request leaves (its version, deployment policy
// and routing unit, written off the request path by the Joiner), the
// outcomes posted later against it (Service.Post: validated, joined,
// stored once per request id, instance and name), and per-version sums of
// them (Store.Arms) that experiments and rollout gates read. It holds no
// statistics (internal/abstat) and no driver: the SQLite and PostgreSQL
// stores are outcomes/outcomesdb, and every Store passes outcomestest.
package outcomes

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

// Join is what an answered prediction leaves for its outcomes to join:
// the version, policy and routing unit that served it, and per instance
// its last output column (the score model-quality metrics read).
type Join struct {
	RequestID string
	Tenant    string
	Model     string
	Version   int
	Policy    int    // the deployment's policy version in force (0: none)
	Unit      string // the routing key's digest (Unit), never the key itself
	Created   time.Time
	Scores    []float32 // per instance, output column 0; nil when none
}

// Outcome is one posted outcome, as stored: joined to its prediction.
type Outcome struct {
	RequestID string
	Instance  int
	Name      string
	Value     float64
	At        time.Time // when it happened (the caller's, else when posted)
	// From the join:
	Model   string
	Version int
	Policy  int
	Unit    string
	Created time.Time // the prediction's time
	Score   float64   // the instance's score (NaN: none)
}

// Arm is one version's sums over a window: units (distinct routing units
// answered), outcomes of one name, their sum and sum of squares.
type Arm struct {
	Version int
	Units   int64
	N       int64
	Sum     float64
	SumSq   float64
}

// Query selects the predictions and outcomes an experiment counts.
type Query struct {
	Model string
	Name  string    // the outcome's name
	Since time.Time // predictions made at or after Since
	Until time.Time // and before Until (zero: no end)
}

// Pair is one scored instance and its label, for model-quality metrics.
type Pair struct {
	Version int
	Score   float64
	Label   float64
}

// Store keeps joins and outcomes. Implementations: outcomesdb (SQLite,
// PostgreSQL); every one passes outcomestest.Run.
type Store interface {
	// WriteJoins stores joins; one already stored (request id, tenant)
	// is left as it is.
	WriteJoins(ctx context.Context, js []Join) error
	// Joins returns the stored joins of these request ids (any tenant;
	// several when tenants reused an id).
	Joins(ctx context.Context, ids []string) ([]Join, error)
	// Put stores outcomes, each at most once per (request id, instance,
	// name): it returns, per outcome, whether it was new.
	Put(ctx context.Context, os []Outcome) ([]bool, error)
	// Arms sums q's units and outcomes per version, in version order.
	Arms(ctx context.Context, q Query) ([]Arm, error)
	// Pairs returns up to limit scored outcomes of q (the newest).
	Pairs(ctx context.Context, q Query, limit int) ([]Pair, error)
	// DeleteBefore deletes joins and outcomes of predictions made before t.
	DeleteBefore(ctx context.Context, t time.Time) (int64, error)
}

// Unit is the digest of a routing key stored as a join's unit: FNV-64a,
// hex. The key may be a user id; its digest is enough to count units.
func Unit(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return fmt.Sprintf("%016x", h.Sum64())
}

// Limits of a posted batch.
const (
	MaxBatch      = 10000     // outcomes per POST
	MaxBodyBytes  = 4 << 20   // bytes per POST
	MaxNameLen    = 64        // an outcome's name
	MaxRequestID  = 128       // as the predict API's
	MaxInstance   = 1_000_000 // an instance index
	maxUnknownIDs = 10        // unknown ids named in a result
)

// Posted is one outcome as a caller sent it.
type Posted struct {
	RequestID string
	Instance  int
	Name      string
	Value     float64
	At        time.Time // zero: now
}

// Result is what Post did with a batch.
type Result struct {
	Accepted   int      // stored now
	Duplicates int      // stored before (same request id, instance, name)
	Unknown    int      // no prediction of a model the caller may use has this id (unknown, expired or not yet written)
	UnknownIDs []string // the first few of them
}

// CheckName validates an outcome or metric name: 1..64 of [a-z0-9_.-],
// starting with a letter.
func CheckName(field, name string) error {
	if name == "" {
		return errs.Field(errs.InvalidArgument, field, "a name is required (letters, digits, '_', '.', '-'; e.g. \"converted\")")
	}
	if len(name) > MaxNameLen {
		return errs.Field(errs.InvalidArgument, field, "%q is longer than %d characters", errs.Clip(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'))
		if !ok {
			return errs.Field(errs.InvalidArgument, field, "%q is not a name: letters, digits, '_', '.', '-', starting with a letter", errs.Clip(name))
		}
	}
	return nil
}

// Check validates a batch, naming the field of the first problem.
func Check(ps []Posted) error {
	if len(ps) == 0 {
		return errs.Field(errs.InvalidArgument, "outcomes", "at least one outcome is required")
	}
	if len(ps) > MaxBatch {
		return errs.Field(errs.InvalidArgument, "outcomes", "%d outcomes; a batch holds at most %d: post several", len(ps), MaxBatch)
	}
	for i, p := range ps {
		f := func(s string) string { return "outcomes[" + strconv.Itoa(i) + "]." + s }
		if p.RequestID == "" || len(p.RequestID) > MaxRequestID {
			return errs.Field(errs.InvalidArgument, f("requestId"), "must be the request id of a prediction (1 to %d characters: the X-Request-Id or requestId of its answer)", MaxRequestID)
		}
		if p.Instance < 0 || p.Instance > MaxInstance {
			return errs.Field(errs.InvalidArgument, f("instance"), "must be an instance index, 0 to %d, got %d", MaxInstance, p.Instance)
		}
		if err := CheckName(f("name"), p.Name); err != nil {
			return err
		}
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			return errs.Field(errs.InvalidArgument, f("value"), "must be a finite number (1 or 0 for a conversion)")
		}
	}
	return nil
}

// Counter counts what Post did (telemetry.Metrics implements it; nil:
// uncounted).
type Counter interface {
	Outcomes(model, version, result string, n int)
}

// Service posts outcomes through a Store.
type Service struct {
	Store   Store
	Metrics Counter
	Now     func() time.Time // nil: time.Now
}

// Post joins and stores ps (checked by Check) for a caller that may use
// the models allowed says yes to: an outcome whose prediction is unknown,
// expired, not yet written or of a model the caller may not use is
// counted Unknown and not stored.
func (s *Service) Post(ctx context.Context, allowed func(model string) bool, ps []Posted) (Result, error) {
	if err := Check(ps); err != nil {
		return Result{}, err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ids := make([]string, 0, len(ps))
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		if !seen[p.RequestID] {
			seen[p.RequestID] = true
			ids = append(ids, p.RequestID)
		}
	}
	js, err := s.Store.Joins(ctx, ids)
	if err != nil {
		return Result{}, errs.Wrap(errs.Unavailable, err, "outcomes: read the predictions of the batch")
	}
	// An id two tenants used: the first join of a model the caller may
	// use; none such, the id is unknown to this caller.
	byID := make(map[string]*Join, len(js))
	for i := range js {
		j := &js[i]
		if byID[j.RequestID] == nil && allowed(j.Model) {
			byID[j.RequestID] = j
		}
	}
	var res Result
	put := make([]Outcome, 0, len(ps))
	t := now().UTC()
	for _, p := range ps {
		j := byID[p.RequestID]
		if j == nil {
			res.Unknown++
			if len(res.UnknownIDs) < maxUnknownIDs {
				res.UnknownIDs = append(res.UnknownIDs, p.RequestID)
			}
			continue
		}
		at := p.At
		if at.IsZero() {
			at = t
		}
		score := math.NaN()
		if p.Instance < len(j.Scores) {
			score = float64(j.Scores[p.Instance])
		}
		put = append(put, Outcome{RequestID: p.RequestID, Instance: p.Instance, Name: p.Name, Value: p.Value, At: at.UTC(),
			Model: j.Model, Version: j.Version, Policy: j.Policy, Unit: j.Unit, Created: j.Created, Score: score})
	}
	if s.Metrics != nil && res.Unknown > 0 {
		s.Metrics.Outcomes("", "", "unknown", res.Unknown)
	}
	if len(put) == 0 {
		return res, nil
	}
	fresh, err := s.Store.Put(ctx, put)
	if err != nil {
		return Result{}, errs.Wrap(errs.Unavailable, err, "outcomes: store the batch")
	}
	type mv struct {
		model   string
		version int
		new     bool
	}
	counts := map[mv]int{}
	for i, o := range put {
		if fresh[i] {
			res.Accepted++
		} else {
			res.Duplicates++
		}
		counts[mv{o.Model, o.Version, fresh[i]}]++
	}
	if s.Metrics != nil {
		for k, n := range counts {
			r := "duplicate"
			if k.new {
				r = "accepted"
			}
			s.Metrics.Outcomes(k.model, strconv.Itoa(k.version), r, n)
		}
	}
	return res, nil
}

// String is a's figures, for logs and messages.
func (a Arm) String() string {
	return fmt.Sprintf("v%d units=%d n=%d sum=%g", a.Version, a.Units, a.N, a.Sum)
}
