package modelpkg

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// GoldenValue is one expected output of one golden example: golden[Example].expect[Output].
type GoldenValue struct {
	Example int
	Output  string
	Value   float64
}

// SetGoldenExpect rewrites expected outputs of golden examples in the
// model.yaml bytes src and returns the new bytes. Only the number of each
// golden[i].expect.<output> named in vals changes: every other byte of the
// file (comments, order, quoting, spacing) stays as it was. The numbers are
// written in the shortest form that reads back as the same float32, the
// precision the runtimes compute in. It refuses a manifest without golden
// examples, an example or output that is not in the file, and an expected
// value written in a form it cannot replace in place (quoted, or an anchor
// or alias). file names the manifest in messages.
func SetGoldenExpect(file string, src []byte, vals []GoldenValue) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a YAML mapping", file)
	}
	golden := mappingValue(doc.Content[0], "golden")
	if golden == nil || golden.Kind != yaml.SequenceNode || len(golden.Content) == 0 {
		return nil, fmt.Errorf("%s: no golden examples to update; add golden: with instances and the outputs to expect (docs/model-yaml.md)", file)
	}
	lines := lineStarts(src)
	type edit struct {
		off, end int
		text     string
	}
	var edits []edit
	for _, v := range vals {
		path := fmt.Sprintf("golden[%d].expect.%s", v.Example, v.Output)
		if v.Example < 0 || v.Example >= len(golden.Content) {
			return nil, fmt.Errorf("%s: %s: the file has %d golden examples", file, path, len(golden.Content))
		}
		expect := mappingValue(golden.Content[v.Example], "expect")
		if expect == nil || expect.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: %s: golden[%d] has no expect: mapping", file, path, v.Example)
		}
		n := mappingValue(expect, v.Output)
		if n == nil {
			return nil, fmt.Errorf("%s: %s: not in the file", file, path)
		}
		if n.Kind != yaml.ScalarNode || n.Style != 0 || n.Anchor != "" || n.Line < 1 || n.Line > len(lines) {
			return nil, fmt.Errorf("%s: %s (line %d): write the expected value as a plain number to update it", file, path, n.Line)
		}
		off, ok := byteOffset(src, lines[n.Line-1], n.Column)
		if !ok || !bytes.HasPrefix(src[off:], []byte(n.Value)) {
			return nil, fmt.Errorf("%s: %s (line %d): cannot find the value %q at line %d, column %d", file, path, n.Line, n.Value, n.Line, n.Column)
		}
		edits = append(edits, edit{off: off, end: off + len(n.Value), text: FormatFloat32(v.Value)})
	}
	// Apply from the end so earlier offsets stay valid.
	sort.Slice(edits, func(i, j int) bool { return edits[i].off > edits[j].off })
	out := append([]byte(nil), src...)
	last := len(out) + 1
	for _, e := range edits {
		if e.end > last {
			return nil, fmt.Errorf("%s: two updates of the same value", file)
		}
		out = append(out[:e.off], append([]byte(e.text), out[e.end:]...)...)
		last = e.off
	}
	return out, nil
}

// FormatFloat32 writes v in the shortest form that reads back as the same
// float32 ("0.8455931").
func FormatFloat32(v float64) string {
	return strconv.FormatFloat(float64(float32(v)), 'g', -1, 32)
}

func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func lineStarts(src []byte) []int {
	starts := []int{0}
	for i, c := range src {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// byteOffset turns yaml.v3's 1-based column (counted in characters) on the
// line starting at byte start into a byte offset.
func byteOffset(src []byte, start, column int) (int, bool) {
	off := start
	for c := 1; c < column; c++ {
		if off >= len(src) || src[off] == '\n' {
			return 0, false
		}
		_, size := utf8.DecodeRune(src[off:])
		off += size
	}
	return off, off <= len(src)
}
