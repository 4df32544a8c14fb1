package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/autoscale"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/testwait"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// A fenced worker takes no traffic, heartbeats do not bring it back, and
// the version it held is placed on another worker; Unfence lets it back
// and Forget drops it (a deleted pod). Fencing is never charged as a
// crash.
func TestFenceUnfenceForget(t *testing.T) {
	p := newTestPool(Config{ShardSize: 2, HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	a, b, c := startFake(t, "a"), startFake(t, "b"), startFake(t, "c")
	// c is not ready yet (its pod): fenced before it registers.
	p.Fence("c", "pod not ready")
	a.register(t, p, 1)
	b.register(t, p, 2)
	c.register(t, p, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	v, _, err := p.Start(ctx, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	holders := func() map[string]bool {
		out := map[string]bool{}
		for _, cd := range p.candidates(v, nil) {
			out[cd.w.id] = true
		}
		return out
	}
	testwait.Until(t, 10*time.Second, func() bool { h := holders(); return len(h) == 2 && h["a"] && h["b"] })
	if c.loads.Load() != 0 {
		t.Fatalf("fenced worker c got %d loads", c.loads.Load())
	}
	state := func(id string) string {
		for _, w := range p.Workers() {
			if w.ID == id {
				return w.State + ": " + w.Reason
			}
		}
		return "absent"
	}
	if s := state("c"); s != "down: pod not ready" {
		t.Fatalf("c is %q", s)
	}
	// c's pod becomes ready; a's pod terminates.
	p.Unfence("c")
	p.Fence("a", "pod terminating")
	if _, err := p.testBeat(t.Context(), &workerpb.WorkerStatus{Id: "a", Address: a.addr, Pid: 1}); err != nil {
		t.Fatal(err)
	}
	if s := state("a"); s != "down: pod terminating" {
		t.Errorf("a heartbeat revived a fenced worker: %q", s)
	}
	testwait.Until(t, 10*time.Second, func() bool { h := holders(); return len(h) == 2 && h["b"] && h["c"] })
	for i := range 20 {
		if _, err := v.Submit(t.Context(), rows(1)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	before := a.calls.Load()
	for range 20 {
		_, _ = v.Submit(t.Context(), rows(1))
	}
	if a.calls.Load() != before {
		t.Errorf("fenced worker a answered %d calls", a.calls.Load()-before)
	}
	if v.quarantined != "" {
		t.Errorf("fencing quarantined the version: %s", v.quarantined)
	}
	p.Forget("a")
	if s := state("a"); s != "absent" {
		t.Errorf("after Forget a is %q", s)
	}
	p.Unfence("a") // a no-op for an unknown worker
}

// Demand: a version's copies and replicas, the autoscaler's figure when it
// has one (up to maxReplicas, never below its decided count).
func TestDemand(t *testing.T) {
	p := newTestPool(Config{HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	startFake(t, "a").register(t, p, 1)
	startFake(t, "b").register(t, p, 2)
	y := "name: m\nruntime: linear\nartifact: a.json\ninput:\n  schema: i@1\n  fields: [{name: x, type: float}, {name: z, type: float}]\noutput:\n  schema: o@1\n  fields: [{name: y}]\nplacement: {maxReplicas: 6}\n"
	spec, err := modelpkg.Parse("model.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := p.Start(t.Context(), VersionSpec{Model: "m", N: 1, Manifest: []byte(y), ArtifactSHA: "00", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	per := p.replicaMemoryLocked(v)
	p.mu.Unlock()
	cases := []struct {
		name    string
		desired map[string]autoscale.Status
		want    Demand
	}{
		{"fixed replicas: one per copy", nil, Demand{Version: "m@1", Replicas: 2, Copies: 2, ReplicaMemory: per}},
		{"autoscaled", map[string]autoscale.Status{"m@1": {Decision: autoscale.Decision{Replicas: 5, Raw: 3}}},
			Demand{Version: "m@1", Replicas: 5, Copies: 2, ReplicaMemory: per}},
		{"capped by the budget: the unclamped figure, up to maxReplicas", map[string]autoscale.Status{"m@1": {Decision: autoscale.Decision{Replicas: 3, Raw: 9}}},
			Demand{Version: "m@1", Replicas: 6, Copies: 2, ReplicaMemory: per}},
		{"raw below the decision", map[string]autoscale.Status{"m@1": {Decision: autoscale.Decision{Replicas: 4, Raw: 2}}},
			Demand{Version: "m@1", Replicas: 4, Copies: 2, ReplicaMemory: per}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := p.Demand(c.desired)
			if len(got) != 1 || got[0] != c.want {
				t.Errorf("Demand = %+v, want [%+v]", got, c.want)
			}
		})
	}
}
