package modelpkg

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluiceml/sluice/internal/strictyaml"
)

// Release is a rollout plan (model.yaml release:, or sent with `sluice
// deploy`): optional shadow phase, canary steps with a bake time each, the
// gates that judge every step, and what to do when a gate fails.
type Release struct {
	Shadow     *ShadowPlan `yaml:"shadow,omitempty" json:"shadow,omitempty"`
	Steps      []int       `yaml:"steps,omitempty" json:"steps,omitempty"`           // canary percents, increasing, ending at 100
	Bake       Duration    `yaml:"bake,omitempty" json:"bake,omitempty"`             // time at each step before the next
	MinSamples int         `yaml:"minSamples,omitempty" json:"minSamples,omitempty"` // requests per side before a gate may pass
	Gates      Gates       `yaml:"gates,omitempty" json:"gates,omitempty"`
	OnFail     string      `yaml:"onFail,omitempty" json:"onFail,omitempty"`     // rollback (default) | pause
	KeepWarm   Duration    `yaml:"keepWarm,omitempty" json:"keepWarm,omitempty"` // baseline kept loaded after promotion
}

// ShadowPlan runs the candidate on copies of requests before any canary.
type ShadowPlan struct {
	Requests int `yaml:"requests" json:"requests"` // comparisons to collect before judging
}

// Gates compare the candidate with the baseline over a step's window.
type Gates struct {
	MaxErrorRate    *float64  `yaml:"maxErrorRate,omitempty" json:"maxErrorRate,omitempty"`       // candidate 5xx rate above the baseline's (default 0.01)
	MaxP99Ratio     *float64  `yaml:"maxP99Ratio,omitempty" json:"maxP99Ratio,omitempty"`         // candidate p99 / baseline p99 (default 2)
	P99Slack        *Duration `yaml:"p99Slack,omitempty" json:"p99Slack,omitempty"`               // a p99 within this of the baseline's passes whatever the ratio (default 5ms)
	MaxDisagreement *float64  `yaml:"maxDisagreement,omitempty" json:"maxDisagreement,omitempty"` // shadow label flips / rows (default 0.05)
	// Metric gates the rollout on an outcome (POST /v1/outcomes name):
	// the candidate is rolled back when it is significantly worse than
	// the baseline on it (always-valid test), and promoted only when its
	// relative improvement is known to be above MinLift with MinSamples
	// outcomes on each side ("": no outcome gate).
	Metric     string   `yaml:"metric,omitempty" json:"metric,omitempty"`
	MinLift    *float64 `yaml:"minLift,omitempty" json:"minLift,omitempty"`       // relative: 0 = significantly better, -0.01 = at most 1 % worse (default 0)
	MinSamples int64    `yaml:"minSamples,omitempty" json:"minSamples,omitempty"` // outcomes on each side before a promotion (default 1000)
	Direction  string   `yaml:"direction,omitempty" json:"direction,omitempty"`   // increase (default) or decrease: which way is better
}

// DefaultOutcomeSamples is gates.minSamples when a metric is set.
const DefaultOutcomeSamples = 1000

// Release defaults.
const (
	DefaultMinSamples      = 100
	DefaultMaxErrorRate    = 0.01
	DefaultMaxP99Ratio     = 2.0
	DefaultMaxDisagreement = 0.05
	DefaultP99Slack        = 5 * time.Millisecond
	DefaultKeepWarm        = 15 * time.Minute
)

// Immediate is the plan used when none is given: 100 % as soon as ready.
func Immediate() Release { r := Release{Steps: []int{100}}; r.Defaults(); return r }

// Defaults fills unset fields.
func (r *Release) Defaults() {
	if len(r.Steps) == 0 {
		r.Steps = []int{100}
	}
	if r.MinSamples == 0 {
		r.MinSamples = DefaultMinSamples
	}
	set := func(p **float64, v float64) {
		if *p == nil {
			*p = &v
		}
	}
	set(&r.Gates.MaxErrorRate, DefaultMaxErrorRate)
	set(&r.Gates.MaxP99Ratio, DefaultMaxP99Ratio)
	set(&r.Gates.MaxDisagreement, DefaultMaxDisagreement)
	if r.Gates.P99Slack == nil {
		r.Gates.P99Slack = &Duration{Duration: DefaultP99Slack}
	}
	if r.OnFail == "" {
		r.OnFail = "rollback"
	}
	if r.Gates.Metric != "" {
		set(&r.Gates.MinLift, 0)
		if r.Gates.MinSamples == 0 {
			r.Gates.MinSamples = DefaultOutcomeSamples
		}
		if r.Gates.Direction == "" {
			r.Gates.Direction = "increase"
		}
	}
	if r.KeepWarm.Duration == 0 {
		r.KeepWarm.Duration = DefaultKeepWarm
	}
}

// Check lists the plan's problems, each with its key path under prefix.
func (r *Release) Check(prefix string) []Problem {
	var probs []Problem
	add := func(p, format string, args ...any) {
		probs = append(probs, Problem{Path: prefix + p, Message: fmt.Sprintf(format, args...)})
	}
	for i, s := range r.Steps {
		if s <= 0 || s > 100 {
			add(fmt.Sprintf(".steps[%d]", i), "must be a percent between 1 and 100, got %d", s)
		}
		if i > 0 && s <= r.Steps[i-1] {
			add(fmt.Sprintf(".steps[%d]", i), "steps must increase, got %d after %d", s, r.Steps[i-1])
		}
	}
	if n := len(r.Steps); n > 0 && r.Steps[n-1] != 100 {
		add(".steps", "must end at 100 (promotion), got %d", r.Steps[n-1])
	}
	if r.Shadow != nil && (r.Shadow.Requests < 1 || r.Shadow.Requests > 10_000_000) {
		add(".shadow.requests", "must be between 1 and 10000000, got %d", r.Shadow.Requests)
	}
	if g := r.Gates; g.Metric != "" || g.MinLift != nil || g.MinSamples != 0 || g.Direction != "" {
		if g.Metric == "" {
			add(".gates.metric", "is required with minLift, minSamples or direction: the outcome name the gate compares")
		} else if !validMetric(g.Metric) {
			add(".gates.metric", "%q is not an outcome name (a letter, then letters, digits, '_', '.', '-'; at most 64)", g.Metric)
		}
		if g.MinLift != nil && (*g.MinLift < -1 || *g.MinLift > 10) {
			add(".gates.minLift", "must be a relative lift between -1 and 10 (0.02 = 2 %% better), got %v", *g.MinLift)
		}
		if g.MinSamples < 0 || g.MinSamples > 1_000_000_000 {
			add(".gates.minSamples", "must be between 1 and 1000000000 outcomes per side, got %d", g.MinSamples)
		}
		if g.Direction != "" && g.Direction != "increase" && g.Direction != "decrease" {
			add(".gates.direction", "must be increase or decrease, got %q", g.Direction)
		}
	}
	if r.Bake.Duration < 0 || r.Bake.Duration > 24*time.Hour {
		add(".bake", "must be between 0 and 24h, got %s", r.Bake)
	}
	if r.MinSamples < 0 {
		add(".minSamples", "must be >= 0, got %d", r.MinSamples)
	}
	for name, g := range map[string]*float64{".gates.maxErrorRate": r.Gates.MaxErrorRate, ".gates.maxDisagreement": r.Gates.MaxDisagreement} {
		if g != nil && !(*g >= 0 && *g <= 1) {
			add(name, "must be a fraction between 0 and 1, got %v", *g)
		}
	}
	if g := r.Gates.P99Slack; g != nil && g.Duration < 0 {
		add(".gates.p99Slack", "must be >= 0, got %s", g)
	}
	if g := r.Gates.MaxP99Ratio; g != nil && !(*g >= 1 && *g < 1000) {
		add(".gates.maxP99Ratio", "must be >= 1, got %v", *g)
	}
	switch r.OnFail {
	case "", "rollback", "pause":
	default:
		add(".onFail", "must be rollback or pause, got %q", r.OnFail)
	}
	if r.KeepWarm.Duration < 0 {
		add(".keepWarm", "must be >= 0, got %s", r.KeepWarm)
	}
	return probs
}

// ParsePlan decodes a release plan file (`sluice deploy --plan FILE`):
// YAML written like model.yaml's release: (its keys at the top, or under
// one top-level release: key), or the same as JSON, which is YAML too.
// Decoding is strict and every problem names the file, line and key path.
// Defaults are not filled in: the server does that.
func ParsePlan(file string, data []byte) (*Release, error) {
	if len(data) > MaxManifestBytes {
		return nil, &Error{File: file, Problems: []Problem{{Message: fmt.Sprintf("is %d bytes, the limit is %d", len(data), MaxManifestBytes)}}}
	}
	var top yaml.Node
	wrapped := false
	if yaml.Unmarshal(data, &top) == nil && len(top.Content) == 1 {
		m := top.Content[0]
		wrapped = m.Kind == yaml.MappingNode && len(m.Content) == 2 && m.Content[0].Value == "release"
	}
	var r Release
	var idx strictyaml.Index
	var err error
	prefix := ""
	if wrapped {
		var w struct {
			Release Release `yaml:"release"`
		}
		idx, err = strictyaml.Decode(file, data, &w)
		r, prefix = w.Release, "release"
	} else {
		idx, err = strictyaml.Decode(file, data, &r)
	}
	if err != nil {
		return nil, err
	}
	if probs := r.Check(prefix); len(probs) > 0 {
		for i := range probs {
			probs[i].Path = strings.TrimPrefix(probs[i].Path, ".")
			probs[i].Line = idx.Line(probs[i].Path)
		}
		return nil, &Error{File: file, Problems: probs}
	}
	return &r, nil
}

// validMetric says whether name is an outcome name (outcomes.CheckName's
// rule).
func validMetric(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'))) {
			return false
		}
	}
	return true
}
