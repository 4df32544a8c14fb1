// Package outcomestest is the conformance suite of outcomes.Store: every
// implementation passes Run from its own tests.
package outcomestest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/outcomes"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Run runs the suite; open returns a new, empty store per subtest and
// closes it in t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) outcomes.Store) {
	ctx := context.Background()
	joins := []outcomes.Join{
		{RequestID: "r1", Tenant: "acme", Model: "fraud", Version: 1, Policy: 3, Unit: outcomes.Unit("u1"), Created: t0, Scores: []float32{0.25, 0.75}},
		{RequestID: "r2", Tenant: "acme", Model: "fraud", Version: 2, Policy: 3, Unit: outcomes.Unit("u2"), Created: t0.Add(time.Second)},
		{RequestID: "r3", Tenant: "acme", Model: "fraud", Version: 2, Policy: 3, Unit: outcomes.Unit("u2"), Created: t0.Add(2 * time.Second)},
		{RequestID: "r4", Tenant: "beta", Model: "churn", Version: 1, Policy: 1, Unit: outcomes.Unit("u9"), Created: t0.Add(time.Hour)},
	}
	setup := func(t *testing.T) outcomes.Store {
		s := open(t)
		if err := s.WriteJoins(ctx, joins); err != nil {
			t.Fatalf("WriteJoins: %v", err)
		}
		return s
	}

	t.Run("Joins", func(t *testing.T) {
		s := setup(t)
		// Writing a join again leaves the first.
		again := joins[0]
		again.Version = 9
		if err := s.WriteJoins(ctx, []outcomes.Join{again}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Joins(ctx, []string{"r1", "r4", "nope"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("Joins = %+v, want r1 and r4", got)
		}
		for _, j := range got {
			want := joins[0]
			if j.RequestID == "r4" {
				want = joins[3]
			}
			if !reflect.DeepEqual(j, want) {
				t.Errorf("join %s = %+v, want %+v", j.RequestID, j, want)
			}
		}
		many := make([]string, 1200)
		for i := range many {
			many[i] = fmt.Sprint("x", i)
		}
		many[1100] = "r2"
		got, err = s.Joins(ctx, many)
		if err != nil || len(got) != 1 || got[0].RequestID != "r2" {
			t.Fatalf("Joins of 1,200 ids = %+v, %v; want r2", got, err)
		}
	})

	t.Run("PutOnce", func(t *testing.T) {
		s := setup(t)
		o := func(id string, inst int, name string, v float64) outcomes.Outcome {
			return outcomes.Outcome{RequestID: id, Instance: inst, Name: name, Value: v, At: t0.Add(time.Minute), Model: "fraud", Version: 1, Unit: "u", Created: t0, Score: math.NaN()}
		}
		fresh, err := s.Put(ctx, []outcomes.Outcome{o("r1", 0, "click", 1), o("r1", 1, "click", 0), o("r1", 0, "buy", 5), o("r1", 0, "click", 7)})
		if err != nil {
			t.Fatal(err)
		}
		if want := []bool{true, true, true, false}; !reflect.DeepEqual(fresh, want) {
			t.Fatalf("Put fresh = %v, want %v", fresh, want)
		}
		fresh, err = s.Put(ctx, []outcomes.Outcome{o("r1", 0, "click", 3), o("r2", 0, "click", 1)})
		if err != nil {
			t.Fatal(err)
		}
		if want := []bool{false, true}; !reflect.DeepEqual(fresh, want) {
			t.Fatalf("second Put fresh = %v, want %v", fresh, want)
		}
		arms, err := s.Arms(ctx, outcomes.Query{Model: "fraud", Name: "click", Since: t0})
		if err != nil {
			t.Fatal(err)
		}
		// r1's click stays 1 (the first), r1#1 is 0, r2's (stored as v1 here) 1.
		if len(arms) == 0 || arms[0].Version != 1 || arms[0].N != 3 || arms[0].Sum != 2 || arms[0].SumSq != 2 {
			t.Fatalf("Arms = %+v, want v1 n=3 sum=2", arms)
		}
	})

	t.Run("Arms", func(t *testing.T) {
		s := setup(t)
		put := []outcomes.Outcome{
			{RequestID: "r1", Instance: 0, Name: "converted", Value: 1, At: t0, Model: "fraud", Version: 1, Unit: joins[0].Unit, Created: joins[0].Created, Score: 0.25},
			{RequestID: "r2", Instance: 0, Name: "converted", Value: 0, At: t0, Model: "fraud", Version: 2, Unit: joins[1].Unit, Created: joins[1].Created, Score: math.NaN()},
			{RequestID: "r3", Instance: 0, Name: "converted", Value: 3, At: t0, Model: "fraud", Version: 2, Unit: joins[2].Unit, Created: joins[2].Created, Score: 0.5},
			{RequestID: "r3", Instance: 0, Name: "revenue", Value: 10, At: t0, Model: "fraud", Version: 2, Unit: joins[2].Unit, Created: joins[2].Created, Score: 0.5},
			{RequestID: "r4", Instance: 0, Name: "converted", Value: 1, At: t0, Model: "churn", Version: 1, Unit: joins[3].Unit, Created: joins[3].Created, Score: math.NaN()},
		}
		if _, err := s.Put(ctx, put); err != nil {
			t.Fatal(err)
		}
		arms, err := s.Arms(ctx, outcomes.Query{Model: "fraud", Name: "converted", Since: t0})
		if err != nil {
			t.Fatal(err)
		}
		want := []outcomes.Arm{{Version: 1, Units: 1, N: 1, Sum: 1, SumSq: 1}, {Version: 2, Units: 1, N: 2, Sum: 3, SumSq: 9}}
		if !reflect.DeepEqual(arms, want) {
			t.Fatalf("Arms = %+v, want %+v", arms, want)
		}
		arms, err = s.Arms(ctx, outcomes.Query{Model: "fraud", Name: "converted", Since: t0.Add(time.Second), Until: t0.Add(2 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if want := []outcomes.Arm{{Version: 2, Units: 1, N: 1, Sum: 0, SumSq: 0}}; !reflect.DeepEqual(arms, want) {
			t.Fatalf("Arms in [1s, 2s) = %+v, want %+v", arms, want)
		}
		pairs, err := s.Pairs(ctx, outcomes.Query{Model: "fraud", Name: "converted", Since: t0}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if want := []outcomes.Pair{{Version: 2, Score: 0.5, Label: 3}, {Version: 1, Score: 0.25, Label: 1}}; !reflect.DeepEqual(pairs, want) {
			t.Fatalf("Pairs = %+v, want %+v", pairs, want)
		}
	})

	t.Run("DeleteBefore", func(t *testing.T) {
		s := setup(t)
		if _, err := s.Put(ctx, []outcomes.Outcome{{RequestID: "r1", Name: "c", Value: 1, At: t0, Model: "fraud", Version: 1, Created: t0, Score: math.NaN()}}); err != nil {
			t.Fatal(err)
		}
		n, err := s.DeleteBefore(ctx, t0.Add(30*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if n != 4 {
			t.Errorf("DeleteBefore deleted %d, want 4 (3 joins, 1 outcome)", n)
		}
		got, _ := s.Joins(ctx, []string{"r1", "r4"})
		if len(got) != 1 || got[0].RequestID != "r4" {
			t.Fatalf("after retention Joins = %+v, want r4 only", got)
		}
	})
}

// RunExperiments runs the suite of outcomes.ExperimentStore.
func RunExperiments(t *testing.T, open func(t *testing.T) outcomes.ExperimentStore) {
	ctx := context.Background()
	spec := api.ExperimentSpec{A: 1, B: 2, Split: 50, Metric: "converted", MinEffect: 0.01}
	t.Run("OneRunningPerModel", func(t *testing.T) {
		s := open(t)
		e, err := s.StartExperiment(ctx, outcomes.Experiment{Model: "fraud", Spec: spec, Started: t0, Actor: "ops", Reason: "try", PValue: 1})
		if err != nil || e.ID == 0 {
			t.Fatalf("StartExperiment = %+v, %v", e, err)
		}
		if _, err := s.StartExperiment(ctx, outcomes.Experiment{Model: "fraud", Spec: spec, Started: t0, PValue: 1}); !errors.Is(err, outcomes.ErrRunning) {
			t.Fatalf("a second running experiment: %v, want ErrRunning", err)
		}
		other, err := s.StartExperiment(ctx, outcomes.Experiment{Model: "churn", Spec: spec, Started: t0, PValue: 1})
		if err != nil || other.ID == e.ID {
			t.Fatalf("another model's: %+v, %v", other, err)
		}
		run, err := s.RunningExperiments(ctx)
		if err != nil || len(run) != 2 {
			t.Fatalf("RunningExperiments = %+v, %v", run, err)
		}
		got, err := s.LatestExperiment(ctx, "fraud")
		if err != nil || got == nil || !reflect.DeepEqual(*got, e) {
			t.Fatalf("LatestExperiment = %+v, %v; want %+v", got, err, e)
		}
		if err := s.StopExperiment(ctx, e.ID, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		got, _ = s.LatestExperiment(ctx, "fraud")
		if got.Running() || !got.Stopped.Equal(t0.Add(time.Hour)) {
			t.Fatalf("after stop: %+v", got)
		}
		again, err := s.StartExperiment(ctx, outcomes.Experiment{Model: "fraud", Spec: spec, Started: t0.Add(2 * time.Hour), PValue: 1})
		if err != nil || again.ID == e.ID {
			t.Fatalf("a new experiment after stop: %+v, %v", again, err)
		}
		if got, _ = s.LatestExperiment(ctx, "fraud"); got.ID != again.ID {
			t.Fatalf("latest = %d, want %d", got.ID, again.ID)
		}
		if got, err = s.LatestExperiment(ctx, "none"); got != nil || err != nil {
			t.Fatalf("LatestExperiment(none) = %+v, %v", got, err)
		}
	})
	t.Run("History", func(t *testing.T) {
		s := open(t)
		e, err := s.StartExperiment(ctx, outcomes.Experiment{Model: "fraud", Spec: spec, Started: t0, PValue: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range outcomes.MaxHistory + 5 {
			if err := s.SaveSnapshot(ctx, e.ID, outcomes.Snapshot{At: t0.Add(time.Duration(i) * time.Minute), PValue: 1 / float64(i+1), Body: []byte(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := s.LatestExperiment(ctx, "fraud")
		last := outcomes.MaxHistory + 4
		if got.PValue != 1/float64(last+1) || string(got.Last) != fmt.Sprintf(`{"n":%d}`, last) {
			t.Fatalf("after the snapshots: pvalue %v last %s", got.PValue, got.Last)
		}
		h, err := s.History(ctx, e.ID, 3)
		if err != nil || len(h) != 3 || string(h[0].Body) != fmt.Sprintf(`{"n":%d}`, last) || !h[2].At.Equal(t0.Add(time.Duration(last-2)*time.Minute)) {
			t.Fatalf("History(3) = %+v, %v", h, err)
		}
		all, _ := s.History(ctx, e.ID, 10*outcomes.MaxHistory)
		if len(all) != outcomes.MaxHistory {
			t.Fatalf("history keeps %d snapshots, want MaxHistory %d", len(all), outcomes.MaxHistory)
		}
	})
}
