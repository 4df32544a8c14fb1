package hosting

import (
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/runtime"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
)

func parseSpec(t *testing.T, fields string) *modelpkg.Spec {
	t.Helper()
	y := "name: m\nruntime: linear\nartifact: a.bin\ninput:\n  schema: i@1\n  fields:\n    - " + fields +
		"\noutput:\n  schema: o@1\n  fields: [{name: score}]\n"
	spec, err := modelpkg.Parse("model.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestCheckShapeSequence(t *testing.T) {
	seq := parseSpec(t, "{name: tokens, type: sequence, maxLength: 8}")
	tab := parseSpec(t, "{name: x, type: float}")
	cases := []struct {
		spec *modelpkg.Spec
		info runtime.Info
		want string // "" ok
	}{
		{seq, runtime.Info{Outputs: 1, Sequence: true}, ""},
		{seq, runtime.Info{Inputs: 30, Outputs: 1, Detail: "float model"}, `input field "tokens" is a sequence of token ids but the model does not read token ids`},
		{seq, runtime.Info{Outputs: 1}, "does not read token ids"},
		{seq, runtime.Info{Outputs: 2, Sequence: true}, "the model produces 2 output columns"},
		{tab, runtime.Info{Outputs: 1, Sequence: true}, "the model reads token ids but no input field has type sequence"},
		{tab, runtime.Info{Inputs: 1, Outputs: 1}, ""},
		{tab, runtime.Info{Inputs: 2, Outputs: 1}, "the model reads 2 features but the schema produces 1"},
	}
	for i, c := range cases {
		err := CheckShape(c.spec, c.info)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("case %d: got %v, want %q", i, err, c.want)
		}
	}
	rs := RuntimeSpec("m@1", seq)
	if !rs.Sequence || rs.PadValue != 0 || rs.Features != 0 {
		t.Errorf("runtime spec %+v", rs)
	}
}
