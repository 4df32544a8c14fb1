package modelpkg

import (
	"strings"
	"testing"
)

// A plan's outcome gate (gates.metric, minLift, minSamples, direction):
// what is accepted, what is refused (naming the key), and the defaults.
func TestPlanOutcomeGates(t *testing.T) {
	for _, c := range []struct {
		name, src string
		err       string // "" = accepted
		minLift   float64
		samples   int64
		direction string
	}{
		{"metric only: the defaults", "steps: [10, 100]\ngates: {metric: converted}\n", "", 0, DefaultOutcomeSamples, "increase"},
		{"everything set", "steps: [10, 100]\ngates: {metric: latency_ms, minLift: -0.01, minSamples: 5000, direction: decrease}\n", "", -0.01, 5000, "decrease"},
		{"minLift at its bounds", "steps: [100]\ngates: {metric: m, minLift: 10}\n", "", 10, DefaultOutcomeSamples, "increase"},
		{"minLift without a metric", "steps: [100]\ngates: {minLift: 0.02}\n", "plan.yaml:2: gates.metric: is required", 0, 0, ""},
		{"direction without a metric", "steps: [100]\ngates: {direction: decrease}\n", "gates.metric: is required", 0, 0, ""},
		{"a metric that is no name", "steps: [100]\ngates: {metric: 9lives}\n", "gates.metric: \"9lives\" is not an outcome name", 0, 0, ""},
		{"a metric of 65 characters", "steps: [100]\ngates: {metric: " + strings.Repeat("m", 65) + "}\n", "gates.metric", 0, 0, ""},
		{"minLift below -1", "steps: [100]\ngates: {metric: m, minLift: -1.5}\n", "gates.minLift: must be a relative lift between -1 and 10", 0, 0, ""},
		{"minLift above 10", "steps: [100]\ngates: {metric: m, minLift: 11}\n", "gates.minLift", 0, 0, ""},
		{"negative minSamples", "steps: [100]\ngates: {metric: m, minSamples: -1}\n", "gates.minSamples", 0, 0, ""},
		{"direction up", "steps: [100]\ngates: {metric: m, direction: up}\n", "gates.direction: must be increase or decrease, got \"up\"", 0, 0, ""},
		{"wrapped: the path says release", "release:\n  steps: [100]\n  gates: {metric: m, direction: sideways}\n", "release.gates.direction", 0, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParsePlan("plan.yaml", []byte(c.src))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r.Defaults()
			g := r.Gates
			if g.MinLift == nil || *g.MinLift != c.minLift || g.MinSamples != c.samples || g.Direction != c.direction {
				t.Fatalf("gates after defaults: minLift %v minSamples %d direction %q, want %v %d %q", g.MinLift, g.MinSamples, g.Direction, c.minLift, c.samples, c.direction)
			}
		})
	}
	// Without a metric, Defaults adds no outcome gate.
	r, err := ParsePlan("plan.yaml", []byte("steps: [100]\n"))
	if err != nil {
		t.Fatal(err)
	}
	r.Defaults()
	if r.Gates.Metric != "" || r.Gates.MinLift != nil || r.Gates.MinSamples != 0 || r.Gates.Direction != "" {
		t.Errorf("no metric, yet gates %+v", r.Gates)
	}
}
