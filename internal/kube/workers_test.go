package kube

import (
	"strings"
	"testing"
	"time"
)

const mib = 1 << 20

func TestNeed(t *testing.T) {
	shape := Shape{WorkerMemory: 1024 * mib}
	cases := []struct {
		name   string
		demand []Demand
		want   int
		why    string
	}{
		{"nothing", nil, 0, "no demand"},
		{"copies bind", []Demand{{Version: "a@1", Replicas: 2, Copies: 2, ReplicaMemory: 10 * mib}}, 2, "a@1: 2 copies"},
		{"many small replicas fit two workers", []Demand{{Version: "a@1", Replicas: 7, Copies: 2, ReplicaMemory: 10 * mib}}, 2, "a@1"},
		{"one copy per worker", []Demand{
			{Version: "a@1", Replicas: 2, Copies: 2, ReplicaMemory: 600 * mib},
			{Version: "b@1", Replicas: 2, Copies: 2, ReplicaMemory: 600 * mib}}, 4, "memory: 4 copies of 2400 MiB"},
		{"packed two per worker", []Demand{
			{Version: "a@1", Replicas: 2, Copies: 2, ReplicaMemory: 400 * mib},
			{Version: "b@1", Replicas: 2, Copies: 2, ReplicaMemory: 400 * mib},
			{Version: "c@1", Replicas: 2, Copies: 2, ReplicaMemory: 400 * mib}}, 4, "memory: 6 copies"},
		{"replicas of a copy add up", []Demand{{Version: "a@1", Replicas: 6, Copies: 2, ReplicaMemory: 300 * mib}}, 2, "a@1"},
		{"a copy bigger than a worker", []Demand{{Version: "a@1", Replicas: 1, Copies: 1, ReplicaMemory: 2048 * mib}}, 1, "a@1"},
		{"cold version asks nothing", []Demand{{Version: "a@1"}}, 0, "no demand"},
		{"unknown memory", []Demand{{Version: "a@1", Replicas: 4, Copies: 1}}, 1, "a@1"},
		{"a cold version loaded on demand holds one copy", []Demand{{Version: "a@1", Replicas: 1, Copies: 0, ReplicaMemory: mib}}, 1, "a@1: 1 copies"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why := Need(shape, c.demand)
			if got != c.want || !strings.Contains(why, c.why) {
				t.Errorf("Need = %d (%s), want %d (%s)", got, why, c.want, c.why)
			}
		})
	}
}

func TestDesiredWorkers(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	shape := Shape{MinWorkers: 2, MaxWorkers: 5, WorkerMemory: 1024 * mib, Cooldown: time.Minute}
	reps := func(n int) []Demand {
		return []Demand{{Version: "a@1", Replicas: n, Copies: n, ReplicaMemory: mib}}
	}
	type step struct {
		at      time.Duration
		demand  []Demand
		current int
		want    int
		why     string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"up at once, to the need", []step{{0, reps(4), 2, 4, "up:"}}},
		{"clamped to max", []step{{0, reps(9), 2, 5, "clamped to 2..5"}}},
		{"held at min", []step{{0, reps(0), 2, 2, "holding"}}},
		{"below min is raised", []step{{0, reps(0), 1, 2, "bounds"}}},
		{"above max is lowered", []step{{0, reps(1), 7, 5, "bounds"}}},
		{"no demand holds", []step{{0, nil, 3, 3, "no demand"}}},
		{"down after a cooldown, one at a time", []step{
			{0, reps(2), 4, 4, "waiting for the cooldown"},
			{30 * time.Second, reps(2), 4, 4, "waiting"},
			{61 * time.Second, reps(2), 4, 3, "down by one"},
			{90 * time.Second, reps(2), 3, 3, "waiting"},
			{122 * time.Second, reps(2), 3, 2, "down by one"},
			{200 * time.Second, reps(2), 2, 2, "holding"},
		}},
		{"a rise resets the cooldown", []step{
			{0, reps(2), 4, 4, "waiting"},
			{50 * time.Second, reps(4), 4, 4, "holding"},
			{70 * time.Second, reps(2), 4, 4, "waiting"},
			{131 * time.Second, reps(2), 4, 3, "down by one"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var st WorkerState
			for i, s := range c.steps {
				var d WorkerDecision
				d, st = DesiredWorkers(shape, s.demand, s.current, st, t0.Add(s.at))
				if d.Workers != s.want || !strings.Contains(d.Reason, s.why) {
					t.Fatalf("step %d: %d workers (%s), want %d (%s)", i, d.Workers, d.Reason, s.want, s.why)
				}
			}
		})
	}
}
