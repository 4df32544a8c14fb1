package schema

import (
	"math"
	"strconv"
	"testing"
)

// TestFastRowAgreesWithRow: FastRow accepts exactly the rows Row accepts
// and writes the same features; the cells are the numbers Row reads from
// the literals.
func TestFastRowAgreesWithRow(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	sch, probs := Compile([]Field{
		{Name: "x", Type: TypeFloat, Min: f(0), Max: f(0.1)},
		{Name: "n", Type: TypeInt},
		{Name: "b", Type: TypeBool, Optional: true},
		{Name: "d", Type: TypeFloat, Default: 2.5},
	}, []Step{{Op: OpLog1p, Field: "n"}, {Op: OpStandardize, Field: "d", Mean: f(1), Std: f(3)}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	num := func(lit string) (Cell, Value) {
		x, _ := strconv.ParseFloat(lit, 64)
		return Cell{X: x, Kind: Number}, Value{Kind: Number, Text: lit}
	}
	cases := []struct {
		name string
		x, n string // literals ("" leaves the field out)
		b    int    // -1: absent, 0/1, 2: a number in a bool field
		d    string
		ok   bool
	}{
		{"plain", "0.05", "3", 1, "", true},
		{"max is the literal's value", "0.1", "0", -1, "7", true}, // 0.1 as ParseFloat reads it, not float32(0.1)
		{"above max", "0.10000001", "0", -1, "", false},
		{"negative zero is not below min", "-0", "0", -1, "", true},
		{"below min", "-1e-9", "0", -1, "", false},
		{"NaN", "NaN", "0", -1, "", false},
		{"infinity", "0.05", "+Inf", -1, "", false},
		{"int not integral", "0.05", "2.5", -1, "", false},
		{"int past 2^53", "0.05", "1e16", -1, "", false},
		{"log1p limit", "0.05", "-1", -1, "", false},
		{"required missing", "", "1", -1, "", false},
		{"number in a bool field", "0.05", "1", 2, "", false},
		{"default overridden", "0.05", "1", 0, "-4", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cells := make([]Cell, 4)
			var inst Instance
			if c.x != "" {
				var v Value
				cells[0], v = num(c.x)
				inst = append(inst, Member{Name: "x", Value: v})
			}
			var v Value
			cells[1], v = num(c.n)
			inst = append(inst, Member{Name: "n", Value: v})
			switch c.b {
			case 0, 1:
				cells[2] = Cell{X: float64(c.b), Kind: Bool}
				inst = append(inst, Member{Name: "b", Value: Value{Kind: Bool, Bool: c.b == 1}})
			case 2:
				cells[2], v = num("1")
				inst = append(inst, Member{Name: "b", Value: v})
			}
			if c.d != "" {
				cells[3], v = num(c.d)
				inst = append(inst, Member{Name: "d", Value: v})
			}
			fast, slow := make([]float32, sch.Width()), make([]float32, sch.Width())
			got := sch.FastRow(cells, fast)
			err := sch.Row("instances[0]", inst, slow)
			if got != c.ok || (err == nil) != c.ok {
				t.Fatalf("FastRow %v, Row %v; want ok=%v", got, err, c.ok)
			}
			for i := range fast {
				if got && math.Float32bits(fast[i]) != math.Float32bits(slow[i]) && !(fast[i] != fast[i] && slow[i] != slow[i]) {
					t.Fatalf("features %v, Row's %v", fast, slow)
				}
			}
		})
	}
	if !sch.Columns() {
		t.Fatal("a float/int/bool schema has columns")
	}
	seq, _ := Compile([]Field{{Name: "t", Type: TypeSequence, MaxLength: 4}}, nil)
	if seq.Columns() {
		t.Fatal("a sequence schema has no columns")
	}
}

// TestFastRowCategories: category fields (one-hot and ordinal, optional
// and with a default) take strings as Row does.
func TestFastRowCategories(t *testing.T) {
	sch, probs := Compile([]Field{
		{Name: "c", Type: TypeCategory, Values: []string{"US", "GB", "DE"}, Optional: true},
		{Name: "k", Type: TypeCategory, Values: []string{"lo", "hi"}, Default: "hi"},
		{Name: "x", Type: TypeFloat},
	}, []Step{{Op: OpOnehot, Field: "c"}, {Op: OpOrdinal, Field: "k"}, {Op: OpStandardize, Field: "k", Mean: new(0.5), Std: new(2.0)}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	if !sch.Columns() {
		t.Fatal("a category schema has columns")
	}
	str := func(s string) (Cell, Value) { return Cell{Kind: String, Text: s}, Value{Kind: String, Text: s} }
	numCell := func(lit string) (Cell, Value) {
		x, _ := strconv.ParseFloat(lit, 64)
		return Cell{X: x, Kind: Number}, Value{Kind: Number, Text: lit}
	}
	type cv struct {
		c Cell
		v Value
	}
	pair := func(c Cell, v Value) *cv { return &cv{c, v} }
	cases := []struct {
		name    string
		c, k, x *cv // nil: absent
		ok      bool
	}{
		{"both", pair(str("GB")), pair(str("lo")), pair(numCell("1")), true},
		{"optional one-hot absent", nil, pair(str("hi")), pair(numCell("1")), true},
		{"default", pair(str("DE")), nil, pair(numCell("1")), true},
		{"unknown category", pair(str("FR")), nil, pair(numCell("1")), false},
		{"case matters", pair(str("us")), nil, pair(numCell("1")), false},
		{"empty string", pair(str("")), nil, pair(numCell("1")), false},
		{"number in a category field", pair(numCell("0")), nil, pair(numCell("1")), false},
		{"string in a float field", nil, nil, pair(str("1")), false},
		{"bool in a category field", &cv{Cell{X: 1, Kind: Bool}, Value{Kind: Bool, Bool: true}}, nil, pair(numCell("1")), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cells := make([]Cell, 3)
			var inst Instance
			for i, p := range []*cv{c.c, c.k, c.x} {
				if p != nil {
					cells[i] = p.c
					inst = append(inst, Member{Name: []string{"c", "k", "x"}[i], Value: p.v})
				}
			}
			fast, slow := make([]float32, sch.Width()), make([]float32, sch.Width())
			got := sch.FastRow(cells, fast)
			err := sch.Row("instances[0]", inst, slow)
			if got != c.ok || (err == nil) != c.ok {
				t.Fatalf("FastRow %v, Row %v; want ok=%v", got, err, c.ok)
			}
			for i := range fast {
				if got && math.Float32bits(fast[i]) != math.Float32bits(slow[i]) && !(fast[i] != fast[i] && slow[i] != slow[i]) {
					t.Fatalf("features %v, Row's %v", fast, slow)
				}
			}
		})
	}
}

// TestRowAt: RowAt names the instance as Row does with the formatted
// path, and a valid instance costs no allocation.
func TestRowAt(t *testing.T) {
	sch, probs := Compile([]Field{{Name: "x", Type: TypeFloat, Max: new(1.0)}, {Name: "c", Type: TypeCategory, Values: []string{"a", "b"}}},
		[]Step{{Op: OpOnehot, Field: "c"}})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	dst := make([]float32, sch.Width())
	for _, inst := range []Instance{
		{{Name: "x", Value: Value{Kind: Number, Text: "2"}}, {Name: "c", Value: Value{Kind: String, Text: "a"}}},
		{{Name: "c", Value: Value{Kind: String, Text: "z"}}},
		{{Name: "y", Value: Value{Kind: Null}}},
		{{Name: "x", Value: Value{Kind: Number, Text: "0.5"}}},
	} {
		a, b := sch.Row("instances[7]", inst, dst), sch.RowAt(Path{Prefix: "instances", Index: 7}, inst, dst)
		if a == nil || b == nil || a.Error() != b.Error() {
			t.Fatalf("Row %v, RowAt %v", a, b)
		}
	}
	ok := Instance{{Name: "x", Value: Value{Kind: Number, Text: "0.5"}}, {Name: "c", Value: Value{Kind: String, Text: "b"}}}
	if a := testing.AllocsPerRun(50, func() {
		if err := sch.RowAt(Path{Prefix: "instances", Index: 3}, ok, dst); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("RowAt of a valid instance: %v allocations", a)
	}
}
