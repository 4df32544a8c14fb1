package outcomes

import (
	"context"

	"github.com/sluiceml/sluice/internal/api"
	"math"
	"strings"
	"testing"
	"time"
)

// memStore is a hand-written Store over maps.
type memStore struct {
	joins []Join
	put   map[[3]string]Outcome
}

func (m *memStore) WriteJoins(_ context.Context, js []Join) error {
	m.joins = append(m.joins, js...)
	return nil
}
func (m *memStore) Joins(_ context.Context, ids []string) ([]Join, error) {
	var out []Join
	for _, j := range m.joins {
		for _, id := range ids {
			if j.RequestID == id {
				out = append(out, j)
			}
		}
	}
	return out, nil
}
func (m *memStore) Put(_ context.Context, os []Outcome) ([]bool, error) {
	fresh := make([]bool, len(os))
	for i, o := range os {
		k := [3]string{o.RequestID, string(rune('0' + o.Instance)), o.Name}
		if _, ok := m.put[k]; !ok {
			m.put[k] = o
			fresh[i] = true
		}
	}
	return fresh, nil
}
func (m *memStore) Arms(context.Context, Query) ([]Arm, error)        { return nil, nil }
func (m *memStore) Pairs(context.Context, Query, int) ([]Pair, error) { return nil, nil }
func (m *memStore) DeleteBefore(context.Context, time.Time) (int64, error) {
	return 0, nil
}

func TestCheck(t *testing.T) {
	ok := Posted{RequestID: "r1", Name: "converted", Value: 1}
	for _, tc := range []struct {
		name  string
		edit  func(p *Posted)
		field string
	}{
		{"no request id", func(p *Posted) { p.RequestID = "" }, "outcomes[0].requestId"},
		{"long request id", func(p *Posted) { p.RequestID = strings.Repeat("a", 129) }, "outcomes[0].requestId"},
		{"negative instance", func(p *Posted) { p.Instance = -1 }, "outcomes[0].instance"},
		{"no name", func(p *Posted) { p.Name = "" }, "outcomes[0].name"},
		{"bad name", func(p *Posted) { p.Name = "9lives" }, "outcomes[0].name"},
		{"name with space", func(p *Posted) { p.Name = "a b" }, "outcomes[0].name"},
		{"NaN", func(p *Posted) { p.Value = math.NaN() }, "outcomes[0].value"},
		{"Inf", func(p *Posted) { p.Value = math.Inf(1) }, "outcomes[0].value"},
	} {
		p := ok
		tc.edit(&p)
		err := Check([]Posted{p})
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: Check = %v, want an error naming %s", tc.name, err, tc.field)
		}
	}
	if err := Check([]Posted{ok}); err != nil {
		t.Errorf("Check(good) = %v", err)
	}
	if err := Check(nil); err == nil {
		t.Error("Check(empty batch) = nil")
	}
	if err := Check(make([]Posted, MaxBatch+1)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("Check(too many) = %v", err)
	}
}

type counts map[string]int

func (c counts) Outcomes(model, version, result string, n int) { c[model+"@"+version+" "+result] += n }

func TestPost(t *testing.T) {
	st := &memStore{put: map[[3]string]Outcome{}}
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	st.WriteJoins(context.Background(), []Join{
		{RequestID: "a", Tenant: "acme", Model: "fraud", Version: 2, Unit: "u1", Created: at, Scores: []float32{0.9, 0.1}},
		{RequestID: "b", Tenant: "beta", Model: "secret", Version: 1, Unit: "u2", Created: at},
		// An id two tenants used: the caller's model wins.
		{RequestID: "c", Tenant: "beta", Model: "secret", Version: 1, Unit: "u3", Created: at},
		{RequestID: "c", Tenant: "acme", Model: "fraud", Version: 3, Unit: "u4", Created: at},
	})
	m := counts{}
	s := &Service{Store: st, Metrics: m, Now: func() time.Time { return at.Add(time.Hour) }}
	allowed := func(model string) bool { return model == "fraud" }
	res, err := s.Post(context.Background(), allowed, []Posted{
		{RequestID: "a", Name: "converted", Value: 1},
		{RequestID: "a", Instance: 1, Name: "converted", Value: 0},
		{RequestID: "a", Name: "converted", Value: 1}, // the same again: a duplicate
		{RequestID: "b", Name: "converted", Value: 1}, // a model the caller may not use: unknown
		{RequestID: "zz", Name: "converted", Value: 1},
		{RequestID: "c", Name: "converted", Value: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 3 || res.Duplicates != 1 || res.Unknown != 2 || strings.Join(res.UnknownIDs, ",") != "b,zz" {
		t.Fatalf("Post = %+v, want 3 accepted, 1 duplicate, unknown b and zz", res)
	}
	if o := st.put[[3]string{"c", "0", "converted"}]; o.Version != 3 || o.Unit != "u4" {
		t.Errorf("c joined to %+v, want fraud@3", o)
	}
	if o := st.put[[3]string{"a", "1", "converted"}]; o.Score != 0.1 && float32(o.Score) != 0.1 {
		t.Errorf("a#1 score = %v, want 0.1", o.Score)
	}
	if o := st.put[[3]string{"a", "0", "converted"}]; !o.At.Equal(at.Add(time.Hour)) || !o.Created.Equal(at) {
		t.Errorf("a#0 at %v created %v", o.At, o.Created)
	}
	want := counts{"fraud@2 accepted": 2, "fraud@2 duplicate": 1, "fraud@3 accepted": 1, "@ unknown": 2}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("metric %s = %d, want %d (all: %v)", k, m[k], v, m)
		}
	}
}

func TestJoinerBounded(t *testing.T) {
	st := &memStore{put: map[[3]string]Outcome{}}
	w := NewJoiner(st, JoinerConfig{Buffer: 3, BatchSize: 2})
	for i := range 5 {
		w.Add(Join{RequestID: string(rune('a' + i))})
	}
	if w.Dropped() != 2 {
		t.Fatalf("dropped %d, want 2 past the buffer of 3", w.Dropped())
	}
	w.Flush(context.Background())
	if len(st.joins) != 3 || w.Written() != 3 {
		t.Fatalf("wrote %d joins, want 3", len(st.joins))
	}
}

// TestEvaluateSplit: the goal row "broken split (60/40 for 50/50 at 10k
// units): flagged", and a 50/50 split of the same size not flagged.
func TestEvaluateSplit(t *testing.T) {
	e := Experiment{ID: 1, Model: "fraud", Spec: apiSpec(), PValue: 1}
	for _, tc := range []struct {
		ua, ub int64
		srm    bool
	}{{6000, 4000, true}, {5030, 4970, false}} {
		arms := []Arm{{Version: 1, Units: tc.ua, N: tc.ua, Sum: float64(tc.ua) / 10, SumSq: float64(tc.ua) / 10}, {Version: 2, Units: tc.ub, N: tc.ub, Sum: float64(tc.ub) / 10, SumSq: float64(tc.ub) / 10}}
		got := Evaluate(e, arms, nil, time.Unix(0, 0))
		if got.SRM != tc.srm {
			t.Errorf("units %d/%d: srm %v (p %v), want %v", tc.ua, tc.ub, got.SRM, got.SRMPValue, tc.srm)
		}
		t.Logf("units %d/%d: SRM p = %.3g, flagged %v", tc.ua, tc.ub, got.SRMPValue, got.SRM)
	}
}

func apiSpec() api.ExperimentSpec {
	return api.ExperimentSpec{A: 1, B: 2, Split: 50, Metric: "converted"}
}
