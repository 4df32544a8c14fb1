package autoscale

import (
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	cases := []struct {
		name string
		in   PlanInput
		want PlanResult
		err  string
	}{
		{"the issue's example: 50000/s over 1840/s per replica, 4 workers",
			PlanInput{Peak: 50000, PerReplica: 1840, Workers: 4},
			// 50000 / (1840 × 0.7) = 38.8 → 39; 52 − 13 = 39 → 52, 13 a worker; +39 in a rollout
			PlanResult{TargetUtilisation: 0.7, AtPeak: 39, WithFailure: 52, PerWorker: 13, DuringRollout: 91, FailureCovered: true}, ""},
		{"exact multiple is not rounded up", PlanInput{Peak: 700, PerReplica: 100, Workers: 2},
			PlanResult{TargetUtilisation: 0.7, AtPeak: 10, WithFailure: 20, PerWorker: 10, DuringRollout: 30, FailureCovered: true}, ""},
		{"uneven spread: 3 workers", PlanInput{Peak: 350, PerReplica: 100, Workers: 3},
			// 5 at peak; T=7: 7 − 3 = 4 no; T=8: 8 − 3 = 5 yes
			PlanResult{TargetUtilisation: 0.7, AtPeak: 5, WithFailure: 8, PerWorker: 3, DuringRollout: 13, FailureCovered: true}, ""},
		{"one process: no failure headroom", PlanInput{Peak: 350, PerReplica: 100, Workers: 1},
			PlanResult{TargetUtilisation: 0.7, AtPeak: 5, WithFailure: 5, PerWorker: 5, DuringRollout: 10}, ""},
		{"small peak: one replica, two with a spare worker", PlanInput{Peak: 1, PerReplica: 100, Workers: 8},
			PlanResult{TargetUtilisation: 0.7, AtPeak: 1, WithFailure: 2, PerWorker: 1, DuringRollout: 3, FailureCovered: true}, ""},
		{"another target utilisation", PlanInput{Peak: 500, PerReplica: 100, TargetUtilisation: 0.5, Workers: 0},
			PlanResult{TargetUtilisation: 0.5, AtPeak: 10, WithFailure: 10, PerWorker: 10, DuringRollout: 20}, ""},
		{"no peak", PlanInput{PerReplica: 100}, PlanResult{}, "peak must be > 0"},
		{"no throughput", PlanInput{Peak: 100}, PlanResult{}, "per-replica throughput must be > 0"},
		{"absurd ratio", PlanInput{Peak: 1e12, PerReplica: 1e-3}, PlanResult{}, "more than 10^9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Plan(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Plan(%+v) = %+v, %v; want %+v", c.in, got, err, c.want)
			}
		})
	}
}
