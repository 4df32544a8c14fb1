package modelpkg

import (
	"strings"
	"testing"
)

// serving's defaults depend on each other: the queue's default grows to
// hold one request of an explicit maxInstancesPerRequest, and an explicit
// queue smaller than that is refused naming both.
func TestCheckServingDefaults(t *testing.T) {
	for _, c := range []struct {
		name              string
		perRequest, queue int
		wantQueue         int
		problem           string
	}{
		{"both defaults", 0, 0, max(DefaultMaxQueueInstances, DefaultMaxInstancesPerRequest), ""},
		{"the queue grows to a large request", 5 * DefaultMaxQueueInstances, 0, 5 * DefaultMaxQueueInstances, ""},
		{"a small request keeps the default queue", 1, 0, DefaultMaxQueueInstances, ""},
		{"an explicit queue is kept", 10, 20, 20, ""},
		{"a queue smaller than one request", 100, 10, 10, "must be >= serving.maxInstancesPerRequest (100), got 10"},
		{"a negative queue", 10, -1, -1, "must be > 0, got -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &Manifest{Serving: Serving{MaxInstancesPerRequest: c.perRequest, MaxQueueInstances: c.queue}}
			var ps problems
			checkServing(&ps, m)
			if m.Serving.MaxQueueInstances != c.wantQueue {
				t.Errorf("maxQueueInstances %d, want %d", m.Serving.MaxQueueInstances, c.wantQueue)
			}
			var got []string
			for _, p := range ps {
				if p.Path == "serving.maxQueueInstances" {
					got = append(got, p.Message)
				}
			}
			if c.problem == "" && len(got) > 0 || c.problem != "" && (len(got) != 1 || !strings.Contains(got[0], c.problem)) {
				t.Errorf("problems %v, want %q", got, c.problem)
			}
		})
	}
}
