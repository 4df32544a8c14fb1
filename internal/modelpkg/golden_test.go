package modelpkg

import (
	"fmt"
	"strings"
	"testing"
)

func TestSetGoldenExpect(t *testing.T) {
	src := `# a comment that must survive
name: m   # trailing comment
golden:
  - instance: {a: 1}
    expect: {p: 0.5, q: 7}     # flow style
    tolerance: 1e-6
  - instance:
      a: 2
    expect:
      p:   0.25   # block style, odd spacing
      q: "3"
`
	out, err := SetGoldenExpect("model.yaml", []byte(src), []GoldenValue{
		{Example: 0, Output: "p", Value: 0.8455931},
		{Example: 0, Output: "q", Value: 1e-5},
		{Example: 1, Output: "p", Value: 0.125},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("{p: 0.5, q: 7}", "{p: 0.8455931, q: 1e-05}", "p:   0.25", "p:   0.125").Replace(src)
	if string(out) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}

	for _, c := range []struct {
		name, src string
		vals      []GoldenValue
		want      string
	}{
		{"no golden", "name: m\n", []GoldenValue{{0, "p", 1}}, "no golden examples to update"},
		{"empty golden", "name: m\ngolden: []\n", []GoldenValue{{0, "p", 1}}, "no golden examples to update"},
		{"quoted", src, []GoldenValue{{1, "q", 1}}, "golden[1].expect.q (line 11): write the expected value as a plain number"},
		{"unknown output", src, []GoldenValue{{1, "r", 1}}, "golden[1].expect.r: not in the file"},
		{"unknown example", src, []GoldenValue{{2, "p", 1}}, "the file has 2 golden examples"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := SetGoldenExpect("model.yaml", []byte(c.src), c.vals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestParsePlan(t *testing.T) {
	for _, c := range []struct {
		name, src string
		steps     []int
		bake      string
		err       string
	}{
		{"yaml", "# canary\nsteps: [5, 50, 100]\nbake: 30s\ngates: {maxErrorRate: 0.02}\n", []int{5, 50, 100}, "30s", ""},
		{"release: wrapper", "release:\n  steps: [10, 100]\n  bake: 1m\n", []int{10, 100}, "1m0s", ""},
		{"json", `{"steps": [1, 100], "bake": "2s", "onFail": "pause"}`, []int{1, 100}, "2s", ""},
		{"bad step", "steps: [50, 10]\nbake: 30s\n", nil, "", "plan.yaml:1: steps[1]: steps must increase, got 10 after 50"},
		{"unknown key", "steps: [100]\nbak: 30s\n", nil, "", "plan.yaml:2: bak"},
		{"bare duration", "steps: [100]\nbake: 30\n", nil, "", "bake"},
		{"bad wrapped", "release:\n  steps: [10, 90]\n", nil, "", "plan.yaml:2: release.steps: must end at 100"},
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
			if fmt.Sprint(r.Steps) != fmt.Sprint(c.steps) || r.Bake.String() != c.bake {
				t.Fatalf("got %+v", r)
			}
		})
	}
}
