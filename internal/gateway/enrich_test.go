package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/features"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/vstats"
)

// fakeEnricher answers every entity with values 10, 20 from redis, and
// remembers what it was asked.
type fakeEnricher struct{ asked [][]string }

func (f *fakeEnricher) Fields() []string { return []string{"a", "b"} }
func (f *fakeEnricher) Lookup(ctx context.Context, ents []string, out []features.Result) {
	f.asked = append(f.asked, append([]string(nil), ents...))
	for i := range out {
		out[i] = features.Result{Values: []float64{10, 20}, Origins: []features.Origin{features.Redis, features.Redis}}
		if ents[i] == "unknown" {
			out[i] = features.Result{Values: []float64{-1, -2}, Origins: []features.Origin{features.Default, features.Default}}
		}
	}
}

type fakeSet struct{ e Enricher }

func (s fakeSet) Enricher(*modelpkg.Spec) Enricher { return s.e }

func num(s string) schema.Value { return schema.Value{Kind: schema.Number, Text: s} }
func str(s string) schema.Value { return schema.Value{Kind: schema.String, Text: s} }

func TestEnrich(t *testing.T) {
	def := 0.0
	spec := &modelpkg.Spec{Manifest: modelpkg.Manifest{
		Input:    modelpkg.Input{Fields: []schema.Field{{Name: "x", Type: "float"}, {Name: "a", Type: "float"}, {Name: "b", Type: "int"}}},
		Features: &modelpkg.Features{Entity: "card", EntityType: modelpkg.EntityString, View: "v", Fields: []modelpkg.FeatureField{{Name: "a", Default: &def}, {Name: "b", Default: &def}}},
	}}
	fe := &fakeEnricher{}
	g := &Gateway{Features: fakeSet{fe}}
	in := instanceRows{
		{{Name: "card", Value: str("c1")}, {Name: "x", Value: num("1")}},
		{{Name: "card", Value: str("c2")}, {Name: "x", Value: num("2")}, {Name: "a", Value: num("5")}},
		{{Name: "x", Value: num("3")}, {Name: "a", Value: num("1")}, {Name: "b", Value: num("2")}},
		{{Name: "card", Value: str("unknown")}, {Name: "x", Value: num("4")}, {Name: "b", Value: schema.Value{Kind: schema.Null}}},
	}
	rows, e, err := g.enrich(t.Context(), spec, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(fe.asked) != 1 || strings.Join(fe.asked[0], ",") != "c1,c2,unknown" {
		t.Errorf("asked %v, want one lookup of c1,c2,unknown (the third instance sent every field)", fe.asked)
	}
	want := []string{"[redis redis]", "[request redis]", "[request request]", "[default default]"}
	for i, w := range want {
		_, o := e.Sources(i)
		if fmtOrigins(o) != w {
			t.Errorf("instance %d: origins %v, want %s", i, o, w)
		}
	}
	insts := rows.Instances()
	got := func(i int) string {
		var b strings.Builder
		for _, m := range insts[i] {
			b.WriteString(m.Name + "=" + m.Value.Text + " ")
		}
		return strings.TrimSpace(b.String())
	}
	for i, w := range []string{"x=1 a=10 b=20", "x=2 a=5 b=20", "x=3 a=1 b=2", "x=4 a=-1 b=-2"} {
		if got(i) != w {
			t.Errorf("instance %d enriched to %q, want %q (the entity removed, caller values kept, nulls filled)", i, got(i), w)
		}
	}
	if s := string(e.AppendSources(nil)); !strings.HasPrefix(s, `[{"a":"redis","b":"redis"},{"a":"request","b":"redis"}`) {
		t.Errorf("featureSources %s", s)
	}
	// A saved answer (replayed after a restart) keeps the sources.
	dec, err := decodeAnswer(encodeAnswer(&Answer{Prediction: &Prediction{Model: "m", Features: e}}), "id")
	if err != nil || dec.Prediction.Features == nil || string(dec.Prediction.Features.AppendSources(nil)) != string(e.AppendSources(nil)) {
		t.Errorf("saved answer: %v %+v", err, dec)
	}
	if r := string(e.record()); !strings.HasPrefix(r, `[{"entity":"c1","values":{"a":10,"b":20},"sources":{"a":"redis","b":"redis"}}`) {
		t.Errorf("record %s", r)
	}

	for _, c := range []struct {
		name  string
		inst  schema.Instance
		field string
	}{
		{"no entity", schema.Instance{{Name: "x", Value: num("1")}}, "instances[0].card"},
		{"a number for a string entity", schema.Instance{{Name: "card", Value: num("1")}}, "instances[0].card"},
		{"an empty entity", schema.Instance{{Name: "card", Value: str("")}}, "instances[0].card"},
		{"a long entity", schema.Instance{{Name: "card", Value: str(strings.Repeat("x", MaxEntity+1))}}, "instances[0].card"},
	} {
		_, _, err := g.enrich(t.Context(), spec, instanceRows{c.inst})
		if e := errs.As(err); err == nil || e.Code != errs.InvalidArgument || e.Field != c.field {
			t.Errorf("%s: %v, want invalid_argument on %s", c.name, err, c.field)
		}
	}
	// No feature store: the version should not have loaded; the call is
	// refused, not enriched with nothing.
	if _, _, err := (&Gateway{}).enrich(t.Context(), spec, in); errs.As(err).Code != errs.Unavailable {
		t.Errorf("without a feature store: %v", err)
	}
}

func fmtOrigins(o []features.Origin) string {
	s := make([]string, len(o))
	for i, x := range o {
		s[i] = x.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

// A shadow with features of its own enriches the caller's rows itself:
// the shadow's model gets the stored values, not an unknown entity field.
func TestShadowEnriches(t *testing.T) {
	spec, err := modelpkg.Parse("add/model.yaml", []byte(manifest+`features:
  entity: card
  view: v
  fields: [{name: b, default: 0}]
`))
	if err != nil {
		t.Fatal(err)
	}
	fe := &fakeEnricher{}
	g := &Gateway{Features: fakeSet{fe}}
	stats := &vstats.Set{}
	s := NewShadows(stats, discard(), 1, 4, time.Minute)
	defer s.Close()
	tg := &routing.Target{Model: "add", N: 2, ID: "add@2", Spec: spec, Server: &shadowBackend{out: []float32{0.8}}}
	rows := instanceRows{{{Name: "card", Value: str("c1")}, {Name: "a", Value: num("1")}}}
	s.run(shadowJob{target: tg, rows: rows, primary: []float32{0.8}, cols: 1, enrich: g.enrich})
	if sh := stats.Get(tg.ID).Snapshot().Shadow; sh.Errors != 0 || sh.Requests != 1 || len(fe.asked) != 1 {
		t.Errorf("shadow %+v, lookups %v", sh, fe.asked)
	}
	if !sameFeatures(spec.Manifest.Features, spec.Manifest.Features) || sameFeatures(spec.Manifest.Features, nil) {
		t.Error("sameFeatures")
	}
}
