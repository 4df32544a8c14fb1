package records

import (
	"encoding/json"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/schema"
)

// refCanonical is the first implementation of the canonical form (strings
// through json.Marshal, numbers through string operations): the faster one
// must produce the same bytes, or stored input hashes would change meaning.
func refCanonical(insts []schema.Instance) string {
	var b strings.Builder
	str := func(s string) { q, _ := json.Marshal(s); b.Write(q) }
	num := func(lit string) {
		s, neg := lit, false
		if strings.HasPrefix(s, "-") {
			neg, s = true, s[1:]
		}
		mant, exp := s, int64(0)
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64)
			if err != nil || e > 1<<40 || e < -(1<<40) {
				b.WriteString(quoted(lit))
				return
			}
			mant, exp = s[:i], e
		}
		intPart, frac := mant, ""
		if i := strings.IndexByte(mant, '.'); i >= 0 {
			intPart, frac = mant[:i], mant[i+1:]
		}
		if intPart == "" || !allDigits(intPart) || !allDigits(frac) || strings.Contains(mant, ".") && frac == "" {
			b.WriteString(quoted(lit))
			return
		}
		digits := intPart + frac
		exp += int64(len(intPart))
		trimmed := strings.TrimLeft(digits, "0")
		exp -= int64(len(digits) - len(trimmed))
		digits = strings.TrimRight(trimmed, "0")
		if digits == "" {
			b.WriteString("0")
			return
		}
		if neg {
			b.WriteByte('-')
		}
		b.WriteByte(digits[0])
		if len(digits) > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		if e := exp - 1; e != 0 {
			b.WriteByte('e')
			b.WriteString(strconv.FormatInt(e, 10))
		}
	}
	b.WriteByte('[')
	for i, inst := range insts {
		if i > 0 {
			b.WriteByte(',')
		}
		ms := append([]schema.Member(nil), inst...)
		sort.SliceStable(ms, func(a, c int) bool { return ms[a].Name < ms[c].Name })
		b.WriteByte('{')
		for j, m := range ms {
			if j > 0 {
				b.WriteByte(',')
			}
			str(m.Name)
			b.WriteByte(':')
			switch m.Value.Kind {
			case schema.Null:
				b.WriteString("null")
			case schema.Number:
				num(m.Value.Text)
			case schema.String:
				str(m.Value.Text)
			case schema.Bool:
				b.WriteString(strconv.FormatBool(m.Value.Bool))
			case schema.Array:
				b.WriteByte('[')
				for k, it := range m.Value.Items {
					if k > 0 {
						b.WriteByte(',')
					}
					num(it)
				}
				b.WriteByte(']')
			default:
				b.WriteString("{}")
			}
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

func TestCanonicalMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	names := []string{"a", "b", "amount", "z", "é", "q\"<", "x&y", "\x01", "b"}
	nums := []string{"0", "-0", "1", "1.0", "10e-1", "1500", "-2.50E+3", "0.000120", "12345678901234567890", "1e999999999999", "1.", ".5", "abc", "-", "007", "3e+2",
		"1.2.3", "1e5.5", "--1", "1e++5", "1e+-5", "e5", "-.5", "1.5e-3", "-0.0e0", "1E+5", "0e", "1e", "+1", "00.00100"}
	strs := []string{"US", "", "a\"b", "<tag>", "naïve", "\xff\xfe", "tab\there", "\u2028"}
	for n := 0; n < 2000; n++ {
		var insts []schema.Instance
		for i := rng.IntN(4); i >= 0; i-- {
			var inst schema.Instance
			for j := rng.IntN(5); j >= 0; j-- {
				var v schema.Value
				switch rng.IntN(6) {
				case 0:
					v = schema.Value{Kind: schema.Null}
				case 1:
					v = schema.Value{Kind: schema.Number, Text: pick(nums)}
				case 2:
					v = schema.Value{Kind: schema.String, Text: pick(strs)}
				case 3:
					v = schema.Value{Kind: schema.Bool, Bool: rng.IntN(2) == 0}
				case 4:
					v = schema.Value{Kind: schema.Array, Items: []string{pick(nums), pick(nums)}}
				default:
					v = schema.Value{Kind: schema.Composite}
				}
				inst = append(inst, schema.Member{Name: pick(names), Value: v})
			}
			insts = append(insts, inst)
		}
		if got, want := string(CanonicalJSON(insts)), refCanonical(insts); got != want {
			t.Fatalf("canonical form changed:\n got %s\nwant %s", got, want)
		}
	}
}

// FuzzCanonicalNumberMatchesReference: every literal, JSON or not, keeps
// the canonical bytes of the first implementation.
func FuzzCanonicalNumberMatchesReference(f *testing.F) {
	for _, s := range []string{"1", "1.0", "-0", "0.015", "1500", "1e400", "1.2.3", "1e++5", ".5", "1.", "-", "abc", "00.00100"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		insts := []schema.Instance{{{Name: "x", Value: schema.Value{Kind: schema.Number, Text: lit}}}}
		if got, want := string(CanonicalJSON(insts)), refCanonical(insts); got != want {
			t.Fatalf("canonical form of %q changed: got %s, want %s", lit, got, want)
		}
	})
}
