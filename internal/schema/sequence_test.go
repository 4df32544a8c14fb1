package schema

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
)

func seqSchema(t *testing.T) *Schema {
	t.Helper()
	s, probs := Compile([]Field{{Name: "tokens", Type: TypeSequence, MaxLength: 4}}, nil)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return s
}

func TestSequenceCompileProblems(t *testing.T) {
	cases := []struct {
		name   string
		fields []Field
		steps  []Step
		path   string
		msg    string
	}{
		{"no maxLength", []Field{{Name: "t", Type: TypeSequence}}, nil, "input.fields[0].maxLength", "between 1 and"},
		{"huge maxLength", []Field{{Name: "t", Type: TypeSequence, MaxLength: MaxSequenceLength + 1}}, nil, "input.fields[0].maxLength", "between 1 and"},
		{"other fields", []Field{{Name: "t", Type: TypeSequence, MaxLength: 8}, {Name: "x", Type: TypeFloat}}, nil, "input.fields[0].type", "only field"},
		{"optional", []Field{{Name: "t", Type: TypeSequence, MaxLength: 8, Optional: true}}, nil, "input.fields[0]", "required"},
		{"min", []Field{{Name: "t", Type: TypeSequence, MaxLength: 8, Min: f64(0)}}, nil, "input.fields[0]", "min/max"},
		{"maxLength on float", []Field{{Name: "x", Type: TypeFloat, MaxLength: 8}}, nil, "input.fields[0].maxLength", "only sequence"},
		{"preprocess", []Field{{Name: "t", Type: TypeSequence, MaxLength: 8}}, []Step{{Op: OpLog1p, Field: "t"}}, "preprocess[0].field", "do not apply"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, probs := Compile(c.fields, c.steps)
			if s != nil {
				t.Fatal("compiled")
			}
			for _, p := range probs {
				if p.Path == c.path && strings.Contains(p.Message, c.msg) {
					return
				}
			}
			t.Fatalf("want %s: ...%s..., got %v", c.path, c.msg, probs)
		})
	}
}

func TestSequenceTokens(t *testing.T) {
	s := seqSchema(t)
	if name, max, ok := s.Sequence(); !ok || name != "tokens" || max != 4 || s.Width() != 0 {
		t.Fatal(name, max, ok, s.Width())
	}
	arr := func(xs ...string) Instance { return Instance{{Name: "tokens", Value: Value{Kind: Array, Items: xs}}} }
	got, err := s.Tokens("instances[0]", arr("1", "0", "2147483647", "5.0"))
	if err != nil || !reflect.DeepEqual(got, []int64{1, 0, 2147483647, 5}) {
		t.Fatal(got, err)
	}
	bad := []struct {
		name  string
		inst  Instance
		field string
		msg   string
	}{
		{"empty", arr(), "instances[2].tokens", "at least 1"},
		{"too long", arr("1", "2", "3", "4", "5"), "instances[2].tokens", "maxLength is 4"},
		{"fraction", arr("1", "2.5"), "instances[2].tokens[1]", "expected an integer"},
		{"negative", arr("-1"), "instances[2].tokens[0]", "[0, 2^31)"},
		{"too big", arr("2147483648"), "instances[2].tokens[0]", "[0, 2^31)"},
		{"huge", arr("1e400"), "instances[2].tokens[0]", "expected an integer"},
		{"number", Instance{{Name: "tokens", Value: num("3")}}, "instances[2].tokens", "expected an array"},
		{"missing", Instance{}, "instances[2].tokens", "missing"},
		{"null", Instance{{Name: "tokens", Value: Value{Kind: Null}}}, "instances[2].tokens", "null"},
		{"unknown", Instance{{Name: "x", Value: num("3")}}, "instances[2].x", "unknown field"},
		{"duplicate", append(arr("1"), arr("2")...), "instances[2].tokens", "duplicate"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Tokens("instances[2]", c.inst)
			e := errs.As(err)
			if err == nil || e.Code != errs.InvalidArgument || e.Field != c.field || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("got %v (field %q), want %s: ...%s...", err, e.Field, c.field, c.msg)
			}
		})
	}
	if err := s.Row("instances[0]", arr("1"), nil); errs.CodeOf(err) != errs.Internal {
		t.Fatal(err)
	}
	// A numeric field given an array is a type error naming the field.
	ns, _ := Compile([]Field{{Name: "x", Type: TypeFloat}}, nil)
	err = ns.Row("instances[0]", Instance{{Name: "x", Value: Value{Kind: Array, Items: []string{"1"}}}}, make([]float32, 1))
	if e := errs.As(err); err == nil || e.Field != "instances[0].x" || !strings.Contains(e.Message, "got an array") {
		t.Fatal(err)
	}
}

func TestReadInstanceArrays(t *testing.T) {
	inst, err := DecodeInstance([]byte(`{"tokens": [1, 2.5, 3e2], "x": 1}`), "instances[0]")
	if err != nil {
		t.Fatal(err)
	}
	if v := inst[0].Value; v.Kind != Array || !reflect.DeepEqual(v.Items, []string{"1", "2.5", "3e2"}) {
		t.Fatalf("%+v", v)
	}
	if inst, err := DecodeInstance([]byte(`{"tokens": []}`), "i"); err != nil || inst[0].Value.Kind != Array || len(inst[0].Value.Items) != 0 {
		t.Fatal(inst, err)
	}
	bad := []struct{ in, field, msg string }{
		{`{"tokens": [1, "a"]}`, "instances[2].tokens[1]", "got a string"},
		{`{"tokens": [1, true]}`, "instances[2].tokens[1]", "got a boolean"},
		{`{"tokens": [null]}`, "instances[2].tokens[0]", "got null"},
		{`{"tokens": [1, [2]]}`, "instances[2].tokens[1]", "nested arrays"},
		{`{"tokens": [{"a": 1}]}`, "instances[2].tokens[0]", "nested arrays"},
		{`{"tokens": {"a": 1}}`, "instances[2].tokens", "nested objects"},
		{`{"tokens": [1, 2`, "instances[2].tokens[2]", "malformed JSON"},
	}
	for _, c := range bad {
		_, err := DecodeInstance([]byte(c.in), "instances[2]")
		e := errs.As(err)
		if err == nil || e.Code != errs.InvalidArgument || e.Field != c.field || !strings.Contains(e.Error(), c.msg) {
			t.Errorf("%s: got %v (field %q), want %s: ...%s...", c.in, err, e.Field, c.field, c.msg)
		}
	}
}

func TestInstanceOfArray(t *testing.T) {
	inst, err := InstanceOf([]string{"tokens"}, map[string]any{"tokens": []any{1, 2, 3}})
	if err != nil || inst[0].Value.Kind != Array || !reflect.DeepEqual(inst[0].Value.Items, []string{"1", "2", "3"}) {
		t.Fatal(inst, err)
	}
	inst, _ = InstanceOf([]string{"tokens"}, map[string]any{"tokens": []any{"a"}})
	if inst[0].Value.Kind != Composite {
		t.Fatal(inst)
	}
}
