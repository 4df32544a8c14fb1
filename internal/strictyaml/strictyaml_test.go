package strictyaml

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Delay Duration `yaml:"delay,omitempty"`
	N     int      `yaml:"n,omitempty"`
}

type config struct {
	Name    string           `yaml:"name"`
	Serving inner            `yaml:"serving,omitempty"`
	List    []inner          `yaml:"list,omitempty"`
	Byname  map[string]inner `yaml:"byname,omitempty"`
}

func TestDecode(t *testing.T) {
	var c config
	idx, err := Decode("c.yaml", []byte("name: x\nserving:\n  delay: 50ms\n  n: 3\nlist:\n  - {n: 1}\n  - delay: 2s\nbyname:\n  a: {n: 7}\n"), &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "x" || c.Serving.Delay.Duration != 50*time.Millisecond || c.Serving.N != 3 || len(c.List) != 2 || c.List[1].Delay.Duration != 2*time.Second || c.Byname["a"].N != 7 {
		t.Errorf("decoded %+v", c)
	}
	for path, line := range map[string]int{"name": 1, "serving.delay": 3, "serving.n": 4, "list[1].delay": 7, "byname.a": 9, "byname.a.n": 9,
		"serving.nosuch": 2, "list[5]": 5, "": 0, "nosuch": 0} {
		if got := idx.Line(path); got != line {
			t.Errorf("Line(%q) = %d, want %d", path, got, line)
		}
	}
}

// Every problem names the file, the line and the key path.
func TestDecodeRefuses(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string // each a problem line, in order
	}{
		{"unknown key", "name: x\nservng: {n: 1}\n",
			[]string{`c.yaml:2: servng: unknown key "servng" (allowed here: name, serving, list, byname)`}},
		{"nested unknown keys, all of them", "serving:\n  dealy: 5ms\nlist:\n  - {m: 1}\n",
			[]string{`c.yaml:2: serving.dealy: unknown key "dealy" (allowed here: delay, n)`, `c.yaml:4: list[0].m: unknown key "m" (allowed here: delay, n)`}},
		{"wrong type on a shared line", "list:\n  - {delay: 1s, n: lots}\n",
			[]string{`c.yaml:2: list[0].n: cannot unmarshal str ` + "`lots`" + ` into int`}},
		{"duration as a number", "serving: {delay: 5}\n",
			[]string{`c.yaml:1: serving.delay: expected a duration string like "50ms", got 5`}},
		{"bad duration", "serving:\n  delay: soon\n",
			[]string{`c.yaml:2: serving.delay: invalid duration "soon" (use forms like "50ms", "2s")`}},
		{"alias", "name: &a x\nbyname: {b: *a}\n",
			[]string{`c.yaml:2: byname.b: YAML aliases are not supported`}},
		{"empty", "", []string{`c.yaml: is empty`}},
		{"syntax", "name: [\n", []string{`c.yaml:`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c config
			_, err := Decode("c.yaml", []byte(tc.yaml), &c)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v (%T), want *Error", err, err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d problems:\n%s\nwant %d", len(lines), err, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("problem %d:\n got  %s\n want %s…", i, lines[i], w)
				}
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(Duration{1500 * time.Millisecond})
	if err != nil || string(b) != `"1.5s"` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"250ms"`), &d); err != nil || d.Duration != 250*time.Millisecond {
		t.Errorf("Unmarshal \"250ms\" = %v, %v", d, err)
	}
	for _, bad := range []string{`250`, `"soon"`, `null`, `""`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("Unmarshal %s accepted", bad)
		}
	}
	if !(Duration{}).IsZero() || (Duration{time.Second}).IsZero() {
		t.Error("IsZero")
	}
}
