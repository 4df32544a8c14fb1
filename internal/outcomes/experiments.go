package outcomes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/abstat"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
)

// Experiment is an A/B experiment on one model: versions A and B split by
// sticky routing key, compared on one outcome metric.
type Experiment struct {
	ID      int64
	Model   string
	Spec    api.ExperimentSpec
	Started time.Time
	Stopped time.Time // zero: running
	Actor   string
	Reason  string
	// PValue is the always-valid p-value's running minimum (1 at the
	// start); Last the figures of the last refresh (api.Experiment JSON,
	// nil before the first).
	PValue float64
	Last   []byte
}

// Running says whether e has not been stopped.
func (e Experiment) Running() bool { return e.Stopped.IsZero() }

// Snapshot is one refresh of an experiment, kept as its history.
type Snapshot struct {
	At     time.Time
	PValue float64
	Body   []byte // api.Experiment JSON
}

// ErrRunning is StartExperiment's error when the model has one running.
var ErrRunning = errors.New("outcomes: the model has an experiment running")

// MaxHistory is how many snapshots an experiment keeps (a day of
// refreshes a minute apart; older ones are deleted as new ones come).
const MaxHistory = 1440

// ExperimentStore keeps experiments and their history (outcomesdb; the
// suite is outcomestest.RunExperiments).
type ExperimentStore interface {
	// StartExperiment stores e (ID assigned) or returns ErrRunning.
	StartExperiment(ctx context.Context, e Experiment) (Experiment, error)
	// LatestExperiment is model's newest experiment, running or not (nil:
	// none).
	LatestExperiment(ctx context.Context, model string) (*Experiment, error)
	// RunningExperiments lists every running experiment.
	RunningExperiments(ctx context.Context) ([]Experiment, error)
	// StopExperiment marks experiment id stopped at at (no error if it
	// was already).
	StopExperiment(ctx context.Context, id int64, at time.Time) error
	// SaveSnapshot stores a refresh: the experiment's PValue and Last,
	// and a history entry (the oldest past MaxHistory deleted).
	SaveSnapshot(ctx context.Context, id int64, s Snapshot) error
	// History returns up to limit snapshots, newest first.
	History(ctx context.Context, id int64, limit int) ([]Snapshot, error)
}

// CheckSpec validates an experiment's spec, naming the field (under
// "experiment.").
func CheckSpec(s api.ExperimentSpec) error {
	f := func(n string) string { return "experiment." + n }
	switch {
	case s.A <= 0:
		return errs.Field(errs.InvalidArgument, f("a"), "is required: the control version's number")
	case s.B <= 0:
		return errs.Field(errs.InvalidArgument, f("b"), "is required: the treatment version's number")
	case s.A == s.B:
		return errs.Field(errs.InvalidArgument, f("b"), "must differ from a (%d): an A/A test compares two versions that behave the same", s.A)
	case s.Split < 1 || s.Split > 99:
		return errs.Field(errs.InvalidArgument, f("split"), "must be the percent of units on b, 1 to 99, got %d", s.Split)
	}
	if err := CheckName(f("metric"), s.Metric); err != nil {
		return err
	}
	if s.Label != "" {
		if err := CheckName(f("label"), s.Label); err != nil {
			return err
		}
	}
	c := abstat.Config{ShareB: float64(s.Split) / 100, Alpha: s.Alpha, MinEffect: s.MinEffect, Direction: s.Direction}
	if err := c.Validate(); err != nil {
		return errs.Field(errs.InvalidArgument, "experiment", "%v", err)
	}
	return nil
}

// qualityPairs bounds the pairs model quality reads per refresh (the
// newest).
const qualityPairs = 200_000

// Evaluate computes e's figures from the arms' sums and, with a label,
// its scored pairs: pure (now is the refresh's time).
func Evaluate(e Experiment, arms []Arm, pairs []Pair, now time.Time) api.Experiment {
	var a, b Arm
	for _, x := range arms {
		switch x.Version {
		case e.Spec.A:
			a = x
		case e.Spec.B:
			b = x
		}
	}
	cfg := abstat.Config{ShareB: float64(e.Spec.Split) / 100, Alpha: e.Spec.Alpha, MinEffect: e.Spec.MinEffect, Direction: e.Spec.Direction}
	prev := e.PValue
	if prev <= 0 || prev > 1 {
		prev = 1
	}
	r := abstat.Evaluate(abstat.Arm{Units: a.Units, N: a.N, Sum: a.Sum, SumSq: a.SumSq}, abstat.Arm{Units: b.Units, N: b.N, Sum: b.Sum, SumSq: b.SumSq}, cfg, prev)
	out := api.Experiment{ID: e.ID, Model: e.Model, State: "running", Spec: e.Spec, Started: e.Started, Actor: e.Actor, Refreshed: now,
		A: arm(e.Model, e.Spec.A, r.A), B: arm(e.Model, e.Spec.B, r.B),
		Lift: r.Lift, LiftLow: r.LiftLow, LiftHigh: r.LiftHigh, RelLift: r.RelLift, RelLow: r.RelLow, RelHigh: r.RelHigh,
		SeqRelLow: r.SeqRelLow, SeqRelHigh: r.SeqRelHigh, PValue: r.PValue, Significant: r.Significant,
		SRMPValue: r.SRMPValue, SRM: r.SRM, Decision: r.Decision, Notes: r.Notes}
	if !e.Running() {
		out.State = "stopped"
		t := e.Stopped
		out.Stopped = &t
	}
	if e.Spec.Label != "" {
		out.A.Quality = quality(pairs, e.Spec.A)
		out.B.Quality = quality(pairs, e.Spec.B)
	}
	return out
}

func arm(model string, v int, s abstat.ArmSummary) api.ExperimentArm {
	return api.ExperimentArm{Version: v, ID: model + "@" + strconv.Itoa(v), Units: s.Units, Outcomes: s.N, Mean: s.Mean, Low: s.Low, High: s.High}
}

// quality is version v's model quality from its scored labels: log loss
// and AUC when every label is 0 or 1 (a classifier), MAE and RMSE
// otherwise; a figure that cannot be computed yet is left out.
func quality(pairs []Pair, v int) map[string]api.QualityFigure {
	var ps []abstat.Pair
	binary := true
	for _, p := range pairs {
		if p.Version == v {
			ps = append(ps, abstat.Pair{Pred: p.Score, Label: p.Label})
			if p.Label != 0 && p.Label != 1 {
				binary = false
			}
		}
	}
	out := map[string]api.QualityFigure{}
	put := func(name string, est abstat.Estimate, err error) {
		if err == nil {
			out[name] = api.QualityFigure{N: est.N, Value: est.Value, Low: est.Low, High: est.High}
		}
	}
	if len(ps) == 0 {
		return nil
	}
	if binary {
		est, err := abstat.LogLoss(ps)
		put("logLoss", est, err)
		est, err = abstat.AUC(ps)
		put("auc", est, err)
	} else {
		est, err := abstat.MAE(ps)
		put("mae", est, err)
		est, err = abstat.RMSE(ps)
		put("rmse", est, err)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ArmMetrics sets an arm's series (telemetry.Metrics implements it).
type ArmMetrics interface {
	ExperimentArm(model, version string, units, outcomes int64, mean float64)
	ExperimentEnded(model string)
}

// Lab runs experiments: start, stop, status, and the refresh loop (Run)
// that app owns.
type Lab struct {
	Store   Store
	Exps    ExperimentStore
	Every   time.Duration // refresh period; 0: 15 s
	Metrics ArmMetrics    // nil: none
	Log     *slog.Logger
	Now     func() time.Time
}

func (l *Lab) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Start stores a new experiment (the caller has set the traffic).
func (l *Lab) Start(ctx context.Context, model string, spec api.ExperimentSpec, actor, reason string) (api.Experiment, error) {
	if err := CheckSpec(spec); err != nil {
		return api.Experiment{}, err
	}
	e, err := l.Exps.StartExperiment(ctx, Experiment{Model: model, Spec: spec, Started: l.now().UTC(), Actor: actor, Reason: reason, PValue: 1})
	if errors.Is(err, ErrRunning) {
		return api.Experiment{}, errs.New(errs.AlreadyExists, "model %s has an experiment running: stop it first (sluice ab stop %s)", model, model)
	}
	if err != nil {
		return api.Experiment{}, errs.Wrap(errs.Unavailable, err, "store the experiment")
	}
	return l.refresh(ctx, e)
}

// Running is model's running experiment (nil: none).
func (l *Lab) Running(ctx context.Context, model string) (*Experiment, error) {
	e, err := l.Exps.LatestExperiment(ctx, model)
	if err != nil || e == nil || !e.Running() {
		return nil, err
	}
	return e, nil
}

// Stop ends model's running experiment with a last refresh.
func (l *Lab) Stop(ctx context.Context, model string) (api.Experiment, error) {
	e, err := l.Exps.LatestExperiment(ctx, model)
	if err != nil {
		return api.Experiment{}, errs.Wrap(errs.Unavailable, err, "read the experiment")
	}
	if e == nil || !e.Running() {
		return api.Experiment{}, errs.New(errs.NotFound, "model %s has no experiment running", model)
	}
	e.Stopped = l.now().UTC()
	if err := l.Exps.StopExperiment(ctx, e.ID, e.Stopped); err != nil {
		return api.Experiment{}, errs.Wrap(errs.Unavailable, err, "stop the experiment")
	}
	if l.Metrics != nil {
		l.Metrics.ExperimentEnded(model)
	}
	return l.refresh(ctx, *e)
}

// List is every running experiment for which allowed(model) holds, at
// its last refresh (refreshed now if it has none), by model name.
func (l *Lab) List(ctx context.Context, allowed func(model string) bool) ([]api.Experiment, error) {
	es, err := l.Exps.RunningExperiments(ctx)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "read the experiments")
	}
	out := []api.Experiment{}
	for _, e := range es {
		if !allowed(e.Model) {
			continue
		}
		var x api.Experiment
		if e.Last == nil || json.Unmarshal(e.Last, &x) != nil {
			if x, err = l.refresh(ctx, e); err != nil {
				return nil, err
			}
		}
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b api.Experiment) int { return strings.Compare(a.Model, b.Model) })
	return out, nil
}

// Status is model's latest experiment at its last refresh, with up to
// history earlier refreshes.
func (l *Lab) Status(ctx context.Context, model string, history int) (api.Experiment, error) {
	e, err := l.Exps.LatestExperiment(ctx, model)
	if err != nil {
		return api.Experiment{}, errs.Wrap(errs.Unavailable, err, "read the experiment")
	}
	if e == nil {
		return api.Experiment{}, errs.New(errs.NotFound, "model %s has no experiment (start one: sluice ab start %s --a V --b V --metric NAME)", model, model)
	}
	var out api.Experiment
	if e.Last == nil || json.Unmarshal(e.Last, &out) != nil {
		if out, err = l.refresh(ctx, *e); err != nil {
			return api.Experiment{}, err
		}
	}
	if history > 0 {
		snaps, err := l.Exps.History(ctx, e.ID, history+1)
		if err != nil {
			return api.Experiment{}, errs.Wrap(errs.Unavailable, err, "read the experiment's history")
		}
		for _, s := range snaps {
			var x api.Experiment
			if json.Unmarshal(s.Body, &x) != nil || x.Refreshed.Equal(out.Refreshed) {
				continue
			}
			out.History = append(out.History, api.ExperimentPoint{At: x.Refreshed, UnitsA: x.A.Units, UnitsB: x.B.Units, MeanA: x.A.Mean, MeanB: x.B.Mean,
				RelLift: x.RelLift, PValue: x.PValue, SRM: x.SRM, Decision: x.Decision})
			if len(out.History) == history {
				break
			}
		}
	}
	return out, nil
}

// Compare evaluates versions a (baseline) and b (candidate) of model on
// metric over predictions made since since, for a rollout's gate: the
// statistics of an experiment, nothing stored (prevP carries the running
// minimum between calls). A rollout's split changes by step, so the
// expected share is the one observed: the sample-ratio check does not
// apply to it.
func (l *Lab) Compare(ctx context.Context, model, metric, direction string, a, b int, since time.Time, prevP float64) (abstat.Result, error) {
	arms, err := l.Store.Arms(ctx, Query{Model: model, Name: metric, Since: since})
	if err != nil {
		return abstat.Result{}, err
	}
	var x, y abstat.Arm
	for _, r := range arms {
		switch r.Version {
		case a:
			x = abstat.Arm{Units: r.Units, N: r.N, Sum: r.Sum, SumSq: r.SumSq}
		case b:
			y = abstat.Arm{Units: r.Units, N: r.N, Sum: r.Sum, SumSq: r.SumSq}
		}
	}
	share := 0.5
	if x.Units > 0 && y.Units > 0 {
		share = float64(y.Units) / float64(x.Units+y.Units)
	}
	if prevP <= 0 || prevP > 1 {
		prevP = 1
	}
	r := abstat.Evaluate(x, y, abstat.Config{ShareB: share, Direction: direction}, prevP)
	// No sample-ratio check for a rollout (its split moves by step, and a
	// candidate's first units come after the baseline's): Decide must not
	// abort on it.
	r.SRM, r.SRMPValue = false, 1
	return r, nil
}

// refresh evaluates e now and stores the snapshot.
func (l *Lab) refresh(ctx context.Context, e Experiment) (api.Experiment, error) {
	q := Query{Model: e.Model, Name: e.Spec.Metric, Since: e.Started, Until: e.Stopped}
	arms, err := l.Store.Arms(ctx, q)
	if err != nil {
		return api.Experiment{}, errs.Wrap(errs.Unavailable, err, "sum the experiment's outcomes")
	}
	var pairs []Pair
	if e.Spec.Label != "" {
		q.Name = e.Spec.Label
		if pairs, err = l.Store.Pairs(ctx, q, qualityPairs); err != nil {
			return api.Experiment{}, errs.Wrap(errs.Unavailable, err, "read the experiment's labels")
		}
	}
	now := l.now().UTC()
	out := Evaluate(e, arms, pairs, now)
	body, _ := json.Marshal(out)
	if err := l.Exps.SaveSnapshot(ctx, e.ID, Snapshot{At: now, PValue: out.PValue, Body: body}); err != nil {
		return api.Experiment{}, errs.Wrap(errs.Unavailable, err, "store the experiment's figures")
	}
	if l.Metrics != nil && e.Running() {
		for _, a := range []api.ExperimentArm{out.A, out.B} {
			l.Metrics.ExperimentArm(e.Model, strconv.Itoa(a.Version), a.Units, a.Outcomes, a.Mean)
		}
	}
	return out, nil
}

// Refresh evaluates every running experiment once.
func (l *Lab) Refresh(ctx context.Context) error {
	es, err := l.Exps.RunningExperiments(ctx)
	if err != nil {
		return err
	}
	var first error
	for _, e := range es {
		if _, err := l.refresh(ctx, e); err != nil && first == nil {
			first = fmt.Errorf("experiment %d on %s: %w", e.ID, e.Model, err)
		}
	}
	return first
}

// Run refreshes every running experiment every Every until ctx ends.
func (l *Lab) Run(ctx context.Context) error {
	every := l.Every
	if every <= 0 {
		every = 15 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, every)
			if err := l.Refresh(rctx); err != nil && l.Log != nil && ctx.Err() == nil {
				l.Log.Warn("experiments: refresh failed", "err", err)
			}
			cancel()
		}
	}
}
