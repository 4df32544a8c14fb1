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
		{"other fields", []Field{{Name: "t", Type: TypeSequence, MaxLength: 8}, {Name: "x", Type: TypeFloat}}, nil, "input.fields[1].type", "sequence fields only"},
		{"a float first", []Field{{Name: "x", Type: TypeFloat}, {Name: "t", Type: TypeSequence, MaxLength: 8}}, nil, "input.fields[0].type", `sequence fields only ("t" is one; this one is float)`},
		{"two maxLengths", []Field{{Name: "ids", Type: TypeSequence, MaxLength: 8}, {Name: "mask", Type: TypeSequence, MaxLength: 4, Mask: true}}, nil, "input.fields[1].maxLength", `"ids" has maxLength 8, got 4`},
		{"only masks", []Field{{Name: "mask", Type: TypeSequence, MaxLength: 8, Mask: true}}, nil, "input.fields", "masks another sequence field"},
		{"bad dtype", []Field{{Name: "t", Type: TypeSequence, MaxLength: 8, DType: "float32"}}, nil, "input.fields[0].dtype", `unknown dtype "float32" (use int64, the default, or int32`},
		{"dtype on float", []Field{{Name: "x", Type: TypeFloat, DType: "int64"}}, nil, "input.fields[0].dtype", "only sequence fields have a dtype"},
		{"mask on int", []Field{{Name: "x", Type: TypeInt, Mask: true}}, nil, "input.fields[0].mask", "only sequence fields can be a mask"},
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

// TestSequenceFieldsTokens: a schema of input_ids and attention_mask packs
// an instance's two arrays end to end, and refuses arrays of two lengths
// and a mask value other than 0 or 1, naming the field and element.
func TestSequenceFieldsTokens(t *testing.T) {
	s, probs := Compile([]Field{
		{Name: "input_ids", Type: TypeSequence, MaxLength: 4},
		{Name: "attention_mask", Type: TypeSequence, MaxLength: 4, Mask: true, DType: DTypeInt64},
	}, nil)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if fs := s.SequenceFields(); len(fs) != 2 || fs[1].Name != "attention_mask" || !fs[1].Mask {
		t.Fatalf("%+v", fs)
	}
	arr := func(xs ...string) Value { return Value{Kind: Array, Items: xs} }
	inst := func(ids, mask Value) Instance {
		return Instance{{Name: "attention_mask", Value: mask}, {Name: "input_ids", Value: ids}} // any member order
	}
	got, err := s.Tokens("instances[0]", inst(arr("7", "8", "9"), arr("1", "0", "1")))
	if err != nil || !reflect.DeepEqual(got, []int64{7, 8, 9, 1, 0, 1}) {
		t.Fatal(got, err)
	}
	bad := []struct {
		name  string
		inst  Instance
		field string
		msg   string
	}{
		{"lengths", inst(arr("7", "8"), arr("1")), "instances[1].attention_mask", "has 1 mask values but input_ids has 2: the sequence fields of an instance have one length"},
		{"mask 2", inst(arr("7", "8"), arr("1", "2")), "instances[1].attention_mask[1]", "a mask value is 0 or 1, got 2"},
		{"mask fraction", inst(arr("7"), arr("0.5")), "instances[1].attention_mask[0]", "expected a mask value 0 or 1, got 0.5"},
		{"mask missing", Instance{{Name: "input_ids", Value: arr("7")}}, "instances[1].attention_mask", "required field is missing"},
		{"mask too long", inst(arr("1", "2", "3", "4", "5"), arr("1", "1", "1", "1", "1")), "instances[1].input_ids", "has 5 token ids, maxLength is 4"},
		{"unknown", append(inst(arr("7"), arr("1")), Member{Name: "token_type_ids", Value: arr("0")}), "instances[1].token_type_ids", "unknown field (expected: input_ids, attention_mask)"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Tokens("instances[1]", c.inst)
			e, ok := err.(*errs.Error)
			if !ok || e.Field != c.field || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("got %v, want %s: ...%s...", err, c.field, c.msg)
			}
		})
	}
}
