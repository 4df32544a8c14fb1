package cluster

import (
	"fmt"
	"slices"
	"testing"
)

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("worker-%d", i+1)
	}
	return out
}

func TestShardSizeAndMembers(t *testing.T) {
	cases := []struct {
		n, k, want int
	}{
		{0, 2, 0}, {1, 2, 1}, {2, 2, 2}, {5, 2, 2}, {5, 0, 1}, {3, 9, 3},
	}
	for _, c := range cases {
		got := Shard("fraud", ids(c.n), c.k)
		if len(got) != c.want {
			t.Errorf("n=%d k=%d: %v", c.n, c.k, got)
		}
		for _, id := range got {
			if !slices.Contains(ids(c.n), id) {
				t.Errorf("n=%d k=%d: %s is not a worker", c.n, c.k, id)
			}
		}
		if len(got) == 2 && got[0] == got[1] {
			t.Errorf("n=%d k=%d: duplicate %v", c.n, c.k, got)
		}
	}
}

// Shards stay put: adding a worker moves a model only onto the new worker,
// and removing a worker that is not in a shard leaves the shard alone.
func TestShardStability(t *testing.T) {
	moved := 0
	for m := 0; m < 1000; m++ {
		model := fmt.Sprintf("model-%d", m)
		before := Shard(model, ids(8), 2)
		after := Shard(model, ids(9), 2)
		for _, id := range after {
			if !slices.Contains(before, id) && id != "worker-9" {
				t.Fatalf("%s: %v → %v: moved onto an old worker", model, before, after)
			}
		}
		if !slices.Equal(before, after) {
			moved++
		}
		// Remove a worker outside the shard.
		var rest []string
		for _, id := range ids(8) {
			if id != before[0] && id != before[1] && len(rest) < 6 {
				rest = append(rest, id)
			}
		}
		rest = append(rest, before...)
		if got := Shard(model, rest, 2); !slices.Equal(got, before) {
			t.Fatalf("%s: removing other workers changed %v to %v", model, before, got)
		}
	}
	// A ninth worker should take about 2/9 of the shard slots.
	if moved < 100 || moved > 350 {
		t.Errorf("%d of 1000 models moved when a 9th worker joined, expected about 2/9 of them", moved)
	}
}

// Models spread: every worker holds some models.
func TestShardSpread(t *testing.T) {
	count := map[string]int{}
	for m := 0; m < 900; m++ {
		for _, id := range Shard(fmt.Sprintf("m%d", m), ids(3), 2) {
			count[id]++
		}
	}
	for _, id := range ids(3) {
		if count[id] < 450 || count[id] > 750 {
			t.Errorf("%s holds %d of 1800 slots, expected about 600", id, count[id])
		}
	}
}
