package outcomes

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/abstat"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
)

func TestCheckSpecTable(t *testing.T) {
	good := api.ExperimentSpec{A: 1, B: 2, Split: 50, Metric: "converted"}
	for _, c := range []struct {
		name string
		edit func(*api.ExperimentSpec)
		want string // "" = accepted; else the field, then a part of the message
	}{
		{"good", func(*api.ExperimentSpec) {}, ""},
		{"split 1", func(s *api.ExperimentSpec) { s.Split = 1 }, ""},
		{"split 99", func(s *api.ExperimentSpec) { s.Split = 99 }, ""},
		{"everything set", func(s *api.ExperimentSpec) {
			s.Direction, s.MinEffect, s.Alpha, s.Label = "decrease", 0.02, 0.01, "fraud_label"
		}, ""},
		{"no a", func(s *api.ExperimentSpec) { s.A = 0 }, "experiment.a"},
		{"negative b", func(s *api.ExperimentSpec) { s.B = -2 }, "experiment.b"},
		{"a = b", func(s *api.ExperimentSpec) { s.B = 1 }, "experiment.b: must differ from a"},
		{"split 0", func(s *api.ExperimentSpec) { s.Split = 0 }, "experiment.split"},
		{"split 100", func(s *api.ExperimentSpec) { s.Split = 100 }, "experiment.split"},
		{"no metric", func(s *api.ExperimentSpec) { s.Metric = "" }, "experiment.metric"},
		{"bad label", func(s *api.ExperimentSpec) { s.Label = "9" }, "experiment.label"},
		{"alpha 0.7", func(s *api.ExperimentSpec) { s.Alpha = 0.7 }, "experiment: alpha"},
		{"direction up", func(s *api.ExperimentSpec) { s.Direction = "up" }, "experiment: direction"},
		{"negative minEffect", func(s *api.ExperimentSpec) { s.MinEffect = -0.1 }, "experiment: minEffect"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := good
			c.edit(&s)
			err := CheckSpec(s)
			if c.want == "" {
				if err != nil {
					t.Fatalf("CheckSpec = %v, want accepted", err)
				}
				return
			}
			if err == nil || errs.CodeOf(err) != errs.InvalidArgument || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckSpec = %v, want invalid_argument with %q", err, c.want)
			}
		})
	}
}

// Evaluate (an experiment's figures): the arms picked by version, the
// running minimum carried, the state, the quality only with a label, and
// the statistics those of abstat.Evaluate.
func TestEvaluateExperimentTable(t *testing.T) {
	started := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	now := started.Add(time.Hour)
	spec := api.ExperimentSpec{A: 1, B: 2, Split: 50, Metric: "converted", MinEffect: 0.05}
	v1 := Arm{Version: 1, Units: 5000, N: 5000, Sum: 500, SumSq: 500}
	v2 := Arm{Version: 2, Units: 5000, N: 5000, Sum: 600, SumSq: 600}
	v3 := Arm{Version: 3, Units: 9999, N: 9999, Sum: 1, SumSq: 1}
	want := abstat.Evaluate(abstat.Arm{Units: 5000, N: 5000, Sum: 500, SumSq: 500}, abstat.Arm{Units: 5000, N: 5000, Sum: 600, SumSq: 600},
		abstat.Config{ShareB: 0.5, MinEffect: 0.05}, 1)
	for _, c := range []struct {
		name  string
		e     Experiment
		arms  []Arm
		check func(t *testing.T, out api.Experiment)
	}{
		{"arms by version, in any order, others ignored", Experiment{ID: 7, Model: "fraud", Spec: spec, Started: started, PValue: 1}, []Arm{v3, v2, v1},
			func(t *testing.T, out api.Experiment) {
				if out.A.ID != "fraud@1" || out.B.ID != "fraud@2" || out.A.Units != 5000 || out.B.Outcomes != 5000 || out.B.Mean != 0.12 {
					t.Errorf("arms %+v %+v", out.A, out.B)
				}
				if out.State != "running" || out.Stopped != nil || !out.Refreshed.Equal(now) || out.ID != 7 {
					t.Errorf("state %q stopped %v refreshed %v id %d", out.State, out.Stopped, out.Refreshed, out.ID)
				}
				if out.PValue != want.PValue || out.Lift != want.Lift || out.SeqRelLow != want.SeqRelLow || out.SeqRelHigh != want.SeqRelHigh ||
					out.RelLow != want.RelLow || out.SRMPValue != want.SRMPValue || out.Decision != want.Decision || out.A.Low != want.A.Low {
					t.Errorf("figures differ from abstat.Evaluate's: %+v, want %+v", out, want)
				}
				if out.A.Quality != nil {
					t.Errorf("quality without a label: %v", out.A.Quality)
				}
			}},
		{"the running minimum is carried", Experiment{Model: "fraud", Spec: spec, Started: started, PValue: 1e-6}, []Arm{v1, {Version: 2, Units: 5000, N: 5000, Sum: 500, SumSq: 500}},
			func(t *testing.T, out api.Experiment) {
				if out.PValue != 1e-6 || !out.Significant {
					t.Errorf("p %g significant %v, want the stored 1e-6", out.PValue, out.Significant)
				}
			}},
		{"a stored p above 1 restarts at 1", Experiment{Model: "fraud", Spec: spec, Started: started, PValue: 7}, []Arm{v1, v2},
			func(t *testing.T, out api.Experiment) {
				if out.PValue != want.PValue {
					t.Errorf("p %g, want %g", out.PValue, want.PValue)
				}
			}},
		{"stopped", Experiment{Model: "fraud", Spec: spec, Started: started, Stopped: started.Add(time.Minute), PValue: 1}, []Arm{v1, v2},
			func(t *testing.T, out api.Experiment) {
				if out.State != "stopped" || out.Stopped == nil || !out.Stopped.Equal(started.Add(time.Minute)) {
					t.Errorf("state %q stopped %v", out.State, out.Stopped)
				}
			}},
		{"no outcomes on B yet", Experiment{Model: "fraud", Spec: spec, Started: started, PValue: 1}, []Arm{v1},
			func(t *testing.T, out api.Experiment) {
				if out.Decision != abstat.Running || out.B.Outcomes != 0 || !strings.Contains(strings.Join(out.Notes, ";"), "arm B: no outcomes") {
					t.Errorf("decision %q B %+v notes %q", out.Decision, out.B, out.Notes)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := Evaluate(c.e, c.arms, nil, now)
			if _, err := json.Marshal(out); err != nil {
				t.Fatalf("the figures do not encode: %v", err)
			}
			c.check(t, out)
		})
	}

	// With a label, each arm's quality from its own pairs.
	e := Experiment{Model: "fraud", Spec: spec, Started: started, PValue: 1}
	e.Spec.Label = "fraud_label"
	pairs := []Pair{{1, 0.9, 1}, {1, 0.2, 0}, {1, 0.7, 1}, {1, 0.4, 0}, {2, 0.6, 1}, {2, 0.1, 0}, {2, 0.3, 1}, {2, 0.8, 0}}
	out := Evaluate(e, []Arm{v1, v2}, pairs, now)
	if out.A.Quality["auc"].Value != 1 || out.B.Quality["auc"].Value != 0.5 || out.A.Quality["logLoss"].N != 4 {
		t.Errorf("quality A %+v B %+v", out.A.Quality, out.B.Quality)
	}
}

// quality: which figures a version's pairs give.
func TestQualityTable(t *testing.T) {
	for _, c := range []struct {
		name  string
		pairs []Pair
		want  string // the figures' names, sorted, comma-separated; "" = nil
	}{
		{"a classifier", []Pair{{1, 0.9, 1}, {1, 0.8, 1}, {1, 0.2, 0}, {1, 0.1, 0}}, "auc,logLoss"},
		{"a regressor", []Pair{{1, 10, 12}, {1, 3, 2.5}}, "mae,rmse"},
		{"other versions' pairs ignored", []Pair{{2, 10, 12}, {1, 0.9, 1}, {1, 0.8, 1}, {1, 0.2, 0}, {1, 0.1, 0}}, "auc,logLoss"},
		{"one class: no AUC yet", []Pair{{1, 0.9, 1}, {1, 0.8, 1}}, "logLoss"},
		{"scores that are no probabilities: no log loss", []Pair{{1, 3, 1}, {1, 2, 1}, {1, -1, 0}, {1, -2, 0}}, "auc"},
		{"nothing computable", []Pair{{1, 3, 1}}, ""},
		{"no pairs of the version", []Pair{{2, 0.5, 1}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := quality(c.pairs, 1)
			var names []string
			for k, f := range q {
				names = append(names, k)
				if math.IsNaN(f.Value) || f.N == 0 {
					t.Errorf("%s = %+v", k, f)
				}
			}
			sortStrings(names)
			if got := strings.Join(names, ","); got != c.want || (c.want == "" && q != nil) {
				t.Errorf("quality = %v (%q), want %q", q, got, c.want)
			}
		})
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// armsStore answers Arms with fixed sums and records the query.
type armsStore struct {
	recStore
	arms    []Arm
	queries []Query
}

func (s *armsStore) Arms(_ context.Context, q Query) ([]Arm, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries = append(s.queries, q)
	return s.arms, nil
}

// Compare (a rollout gate's statistics): versions a and b picked from
// the sums, the expected share the observed one (a rollout's split moves
// by step), the direction passed on, prevP carried or restarted.
func TestCompareTable(t *testing.T) {
	since := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	st := &armsStore{arms: []Arm{
		{Version: 4, Units: 9000, N: 9000, Sum: 900, SumSq: 900},
		{Version: 5, Units: 1000, N: 1000, Sum: 130, SumSq: 130},
		{Version: 6, Units: 50, N: 50, Sum: 50, SumSq: 50},
	}}
	l := &Lab{Store: st}
	canary := func(dir string) float64 {
		return abstat.Evaluate(abstat.Arm{Units: 9000, N: 9000, Sum: 900, SumSq: 900}, abstat.Arm{Units: 1000, N: 1000, Sum: 130, SumSq: 130}, abstat.Config{ShareB: 0.1, Direction: dir}, 1).PValue
	}
	for _, c := range []struct {
		name      string
		a, b      int
		direction string
		prevP     float64
		wantP     float64
		share     float64
		srm       bool
	}{
		{"a 10 % canary: its observed share, no mismatch", 4, 5, "", 1, canary(""), 0.1, false},
		{"lower is better", 4, 5, "decrease", 1, canary("decrease"), 0.1, false},
		{"the running minimum carried", 4, 5, "", 1e-4, 1e-4, 0.1, false},
		{"prevP above 1 restarts", 4, 5, "", 3, canary(""), 0.1, false},
		// A candidate with no units yet (its first come after the
		// baseline's) is no mismatch: Decide must not abort on it.
		{"a version without sums: half, no mismatch, nothing to test", 4, 7, "", 1, 1, 0.5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := l.Compare(context.Background(), "fraud", "converted", c.direction, c.a, c.b, since, c.prevP)
			if err != nil {
				t.Fatal(err)
			}
			q := st.queries[len(st.queries)-1]
			if q.Model != "fraud" || q.Name != "converted" || !q.Since.Equal(since) {
				t.Errorf("query %+v", q)
			}
			wantDir := c.direction
			if wantDir == "" {
				wantDir = abstat.Increase
			}
			if r.A.Units != 9000 || r.ShareB != c.share || r.SRM != c.srm || r.Direction != wantDir {
				t.Errorf("A units %d shareB %v SRM %v (p %g) direction %q, want 9000, %v, %v, %q", r.A.Units, r.ShareB, r.SRM, r.SRMPValue, r.Direction, c.share, c.srm, wantDir)
			}
			if r.PValue != c.wantP {
				t.Errorf("p %g, want %g", r.PValue, c.wantP)
			}
		})
	}
}

// expStore is an ExperimentStore over one model's experiments.
type expStore struct {
	mu       sync.Mutex
	latest   *Experiment
	snaps    []Snapshot // newest first
	saved    []Snapshot
	running  []Experiment
	listed   int
	startErr error
}

func (s *expStore) StartExperiment(_ context.Context, e Experiment) (Experiment, error) {
	if s.startErr != nil {
		return Experiment{}, s.startErr
	}
	e.ID = 1
	s.latest = &e
	return e, nil
}
func (s *expStore) LatestExperiment(context.Context, string) (*Experiment, error) {
	if s.latest == nil {
		return nil, nil
	}
	e := *s.latest
	return &e, nil
}
func (s *expStore) RunningExperiments(context.Context) ([]Experiment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listed++
	return s.running, nil
}
func (s *expStore) StopExperiment(context.Context, int64, time.Time) error { return nil }
func (s *expStore) SaveSnapshot(_ context.Context, _ int64, sn Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saved = append(s.saved, sn)
	return nil
}
func (s *expStore) History(_ context.Context, _ int64, limit int) ([]Snapshot, error) {
	return s.snaps[:min(limit, len(s.snaps))], nil
}

// Status: the last refresh, and its history without the refresh itself,
// newest first, at most the number asked; the refusals of Start and Stop.
func TestLabStatusTable(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	spec := api.ExperimentSpec{A: 1, B: 2, Split: 50, Metric: "converted"}
	body := func(at time.Time, units int64) []byte {
		b, _ := json.Marshal(api.Experiment{Refreshed: at, A: api.ExperimentArm{Units: units}, Decision: "running"})
		return b
	}
	es := &expStore{
		latest: &Experiment{ID: 1, Model: "fraud", Spec: spec, Started: t0, PValue: 1, Last: body(t0.Add(3*time.Minute), 30)},
		snaps: []Snapshot{
			{At: t0.Add(3 * time.Minute), Body: body(t0.Add(3*time.Minute), 30)},
			{At: t0.Add(2 * time.Minute), Body: body(t0.Add(2*time.Minute), 20)},
			{At: t0.Add(time.Minute), Body: body(t0.Add(time.Minute), 0)},
			{At: t0, Body: []byte("{not json")}, // skipped
		},
	}
	st := &armsStore{}
	l := &Lab{Store: st, Exps: es, Now: func() time.Time { return t0.Add(time.Hour) }}
	for _, c := range []struct {
		history int
		want    []int64 // units of A, newest first
	}{{0, nil}, {1, []int64{20}}, {2, []int64{20, 0}}, {10, []int64{20, 0}}} {
		out, err := l.Status(context.Background(), "fraud", c.history)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, p := range out.History {
			got = append(got, p.UnitsA)
		}
		if out.A.Units != 30 || len(got) != len(c.want) || (len(got) > 0 && (got[0] != c.want[0] || got[len(got)-1] != c.want[len(c.want)-1])) {
			t.Errorf("history %d: A units %d, history %v, want 30 and %v", c.history, out.A.Units, got, c.want)
		}
	}
	if len(es.saved) != 0 {
		t.Errorf("Status with a stored refresh refreshed again")
	}
	// No stored figures: Status refreshes and stores them.
	es.latest.Last = nil
	if out, err := l.Status(context.Background(), "fraud", 0); err != nil || len(es.saved) != 1 || !out.Refreshed.Equal(t0.Add(time.Hour)) {
		t.Errorf("without figures: %+v, %v, saved %d", out.Refreshed, err, len(es.saved))
	}
	// Stop and Status of a model without one; Start refused.
	none := &Lab{Store: st, Exps: &expStore{}}
	if _, err := none.Status(context.Background(), "churn", 0); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("Status of none: %v, want not_found", err)
	}
	if _, err := none.Stop(context.Background(), "churn"); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("Stop of none: %v, want not_found", err)
	}
	busy := &Lab{Store: st, Exps: &expStore{startErr: ErrRunning}}
	if _, err := busy.Start(context.Background(), "fraud", spec, "ops", "try"); errs.CodeOf(err) != errs.AlreadyExists {
		t.Errorf("Start while one runs: %v, want already_exists", err)
	}
	bad := spec
	bad.Split = 0
	if _, err := busy.Start(context.Background(), "fraud", bad, "ops", "try"); errs.CodeOf(err) != errs.InvalidArgument {
		t.Errorf("Start of a bad spec: %v, want invalid_argument", err)
	}
}

// Lab.Run refreshes every Every (15 s by default) and ends with its context.
func TestLabRunEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		es := &expStore{running: []Experiment{{ID: 1, Model: "fraud", Spec: api.ExperimentSpec{A: 1, B: 2, Split: 50, Metric: "converted"}, PValue: 1}}}
		l := &Lab{Store: &armsStore{}, Exps: es}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		time.Sleep(14 * time.Second)
		synctest.Wait()
		es.mu.Lock()
		n := es.listed
		es.mu.Unlock()
		if n != 0 {
			t.Fatalf("refreshed before 15 s")
		}
		time.Sleep(31 * time.Second) // 45 s in: three refreshes
		synctest.Wait()
		es.mu.Lock()
		n, saved := es.listed, len(es.saved)
		es.mu.Unlock()
		if n != 3 || saved != 3 {
			t.Fatalf("45 s in: %d refreshes, %d snapshots, want 3 each", n, saved)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}
