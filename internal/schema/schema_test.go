package schema

import (
	"math"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
)

func f64(v float64) *float64 { return &v }

func num(s string) Value   { return Value{Kind: Number, Text: s} }
func str(s string) Value   { return Value{Kind: String, Text: s} }
func boolean(b bool) Value { return Value{Kind: Bool, Bool: b} }

func TestPreprocessing(t *testing.T) {
	fields := []Field{
		{Name: "a", Type: TypeFloat},
		{Name: "b", Type: TypeFloat},
		{Name: "c", Type: TypeFloat},
		{Name: "d", Type: TypeFloat, Optional: true},
		{Name: "e", Type: TypeCategory, Values: []string{"x", "y", "z"}},
		{Name: "f", Type: TypeCategory, Values: []string{"lo", "hi"}},
		{Name: "g", Type: TypeBool},
		{Name: "h", Type: TypeInt, Default: 7},
		{Name: "k", Type: TypeFloat},
	}
	steps := []Step{
		{Op: OpStandardize, Field: "a", Mean: f64(10), Std: f64(2)},
		{Op: OpLog1p, Field: "b"},
		{Op: OpClip, Field: "c", Min: f64(0), Max: f64(1)},
		{Op: OpLog1p, Field: "d"},
		{Op: OpOnehot, Field: "e"},
		{Op: OpOrdinal, Field: "f"},
		{Op: OpBucketize, Field: "k", Boundaries: []float64{0, 10, 100}},
		{Op: OpOnehot, Field: "k"},
	}
	s, probs := Compile(fields, steps)
	if probs != nil {
		t.Fatal(probs)
	}
	wantNames := "standardize(a),log1p(b),clip(c),log1p(d),e=x,e=y,e=z,ordinal(f),g,h,bucketize(k)=0,bucketize(k)=1,bucketize(k)=2,bucketize(k)=3"
	if got := strings.Join(s.Features(), ","); got != wantNames {
		t.Fatalf("features\n got %s\nwant %s", got, wantNames)
	}
	row := make([]float32, s.Width())
	inst := Instance{{"a", num("14")}, {"b", num("0")}, {"c", num("5")}, {"e", str("y")}, {"f", str("hi")}, {"g", boolean(true)}, {"k", num("10")}}
	if err := s.Row("i", inst, row); err != nil {
		t.Fatal(err)
	}
	want := []float32{2, 0, 1, float32(math.NaN()), 0, 1, 0, 1, 1, 7, 0, 0, 1, 0}
	for i := range want {
		if !(row[i] == want[i] || (want[i] != want[i] && row[i] != row[i])) {
			t.Errorf("feature %d (%s) = %v, want %v", i, s.Features()[i], row[i], want[i])
		}
	}
	// log1p matches float32(math.Log1p(x)), as the trainers compute it.
	inst[1] = Member{"b", num("800")}
	if err := s.Row("i", inst, row); err != nil || row[1] != float32(math.Log1p(800)) {
		t.Errorf("log1p(800) = %v, %v", row[1], err)
	}
}

func TestRowErrors(t *testing.T) {
	s, probs := Compile([]Field{
		{Name: "amount", Type: TypeFloat, Min: f64(0), Max: f64(1e6)},
		{Name: "n", Type: TypeInt},
		{Name: "c", Type: TypeCategory, Values: []string{"US"}, Optional: true},
		{Name: "big", Type: TypeFloat, Optional: true},
		{Name: "neg", Type: TypeFloat, Optional: true},
	}, []Step{{Op: OpOnehot, Field: "c"}, {Op: OpLog1p, Field: "neg"}})
	if probs != nil {
		t.Fatal(probs)
	}
	ok := Instance{{"amount", num("1")}, {"n", num("2")}}
	with := func(m ...Member) Instance { return append(append(Instance{}, ok...), m...) }
	cases := []struct {
		name  string
		inst  Instance
		field string
		msg   string
	}{
		{"unknown field", with(Member{"x", num("1")}), "i.x", "unknown field"},
		{"duplicate", with(Member{"n", num("3")}), "i.n", "duplicate field"},
		{"missing", Instance{{"amount", num("1")}}, "i.n", "required field is missing"},
		{"null required", Instance{{"amount", Value{Kind: Null}}, {"n", num("1")}}, "i.amount", "null is not allowed"},
		{"string for float", Instance{{"amount", str("1")}, {"n", num("1")}}, "i.amount", "expected a number"},
		{"1.5 for int", Instance{{"amount", num("1")}, {"n", num("1.5")}}, "i.n", "expected an integer"},
		{"int too big", Instance{{"amount", num("1")}, {"n", num("1e300")}}, "i.n", "outside the exact range"},
		{"overflow", Instance{{"amount", num("1e999")}, {"n", num("1")}}, "i.amount", "overflows float64"},
		{"below min", Instance{{"amount", num("-0.5")}, {"n", num("1")}}, "i.amount", "must be >= 0"},
		{"above max", Instance{{"amount", num("2e6")}, {"n", num("1")}}, "i.amount", "must be <= 1e+06"},
		{"unknown category", with(Member{"c", str("FR")}), "i.c", `unknown category "FR"`},
		{"bool for category", with(Member{"c", boolean(true)}), "i.c", "expected a string"},
		{"float32 overflow", with(Member{"big", num("1e300")}), "i.big", "overflows float32"},
		{"log1p domain", with(Member{"neg", num("-2")}), "i.neg", "log1p needs a value > -1"},
	}
	row := make([]float32, s.Width())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.Row("i", c.inst, row)
			e := errs.As(err)
			if err == nil || e.Code != errs.InvalidArgument || e.Field != c.field || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("got %v (field %q), want field %q containing %q", err, e.Field, c.field, c.msg)
			}
		})
	}
	// Optional category absent: all one-hot columns missing.
	if err := s.Row("i", ok, row); err != nil || row[2] == row[2] {
		t.Errorf("absent optional category: %v %v", row, err)
	}
}

func TestCompileProblems(t *testing.T) {
	cases := []struct {
		name   string
		fields []Field
		steps  []Step
		want   string
	}{
		{"no fields", nil, nil, "input.fields: must declare at least one field"},
		{"bad name", []Field{{Name: "1x", Type: TypeFloat}}, nil, "input.fields[0].name"},
		{"dup name", []Field{{Name: "x", Type: TypeFloat}, {Name: "x", Type: TypeFloat}}, nil, `input.fields[1].name: duplicate field "x"`},
		{"category without values", []Field{{Name: "c", Type: TypeCategory}}, []Step{{Op: OpOrdinal, Field: "c"}}, "needs its list of values"},
		{"min on bool", []Field{{Name: "b", Type: TypeBool, Min: f64(0)}}, nil, "min/max apply to float and int fields only"},
		{"default of wrong type", []Field{{Name: "n", Type: TypeInt, Default: "x"}}, nil, "input.fields[0].default: expected a number"},
		{"onehot on numeric", []Field{{Name: "x", Type: TypeFloat}}, []Step{{Op: OpOnehot, Field: "x"}}, "onehot needs a category field or a bucketized value"},
		{"log1p on category", []Field{{Name: "c", Type: TypeCategory, Values: []string{"a"}}}, []Step{{Op: OpLog1p, Field: "c"}}, "log1p needs a numeric value"},
		{"step after onehot", []Field{{Name: "c", Type: TypeCategory, Values: []string{"a"}}}, []Step{{Op: OpOnehot, Field: "c"}, {Op: OpOrdinal, Field: "c"}}, "onehot must be its last step"},
		{"clip without bounds", []Field{{Name: "x", Type: TypeFloat}}, []Step{{Op: OpClip, Field: "x"}}, "clip needs min, max or both"},
		{"NaN boundary", []Field{{Name: "x", Type: TypeFloat}}, []Step{{Op: OpBucketize, Field: "x", Boundaries: []float64{math.NaN()}}}, "preprocess[0].boundaries[0]: must be a finite number"},
		{"NaN mean", []Field{{Name: "x", Type: TypeFloat}}, []Step{{Op: OpStandardize, Field: "x", Mean: f64(math.NaN()), Std: f64(1)}}, "preprocess[0].mean"},
		{"param of another op", []Field{{Name: "x", Type: TypeFloat}}, []Step{{Op: OpLog1p, Field: "x", Mean: f64(1)}}, "mean/std belong to standardize only"},
		{"unknown op", []Field{{Name: "x", Type: TypeFloat}}, []Step{{Op: "sqrt", Field: "x"}}, `unknown op "sqrt"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, probs := Compile(c.fields, c.steps)
			var all []string
			for _, p := range probs {
				all = append(all, p.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), c.want) {
				t.Fatalf("problems %q, want one containing %q", all, c.want)
			}
		})
	}
}
