// Package scaffold writes a starting model.yaml for a model artifact from
// what the artifact says about itself: its runtime (told apart by content),
// its input features (names and types when the artifact has them, else
// numbered), its outputs (from the objective or the output tensor) and one
// golden example on an all-zero instance whose expected outputs are left at
// 0 for the caller to compute by running the model (see
// hosting.UpdateGolden). It reads artifacts; it does not load models, write
// files or touch the registry.
package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluiceml/sluice/internal/runtime/linear"
	"github.com/sluiceml/sluice/internal/runtime/onnx"
	"github.com/sluiceml/sluice/internal/runtime/sklearn"
	"github.com/sluiceml/sluice/internal/runtime/xgboost"
)

// Field is one input field of the scaffold.
type Field struct {
	Name      string
	Type      string   // float, int, bool, category, sequence
	MaxLength int      // sequence only
	DType     string   // sequence only: "int32" when the input is (int64 is the default)
	Mask      bool     // sequence only: an attention mask (0 or 1, padded with 0)
	Values    []string // category only: its values, in the order of the codes the model reads
	// Encode is the preprocessing step that turns a category field into
	// what the model reads: "ordinal" (its code) or "" for none.
	Encode string
	Note   string // a comment for the line, e.g. the artifact's own name
	// Default and Optional as model.yaml has them (an exported
	// scikit-learn pipeline's SimpleImputer statistic, an OrdinalEncoder
	// that learnt a missing category).
	Default  any
	Optional bool
	// Steps are the field's preprocessing steps the artifact declares (an
	// exported scikit-learn pipeline), written after Encode's.
	Steps []Step
	// Source is the name the artifact gives the field (set by YAML when
	// it makes Name a valid field name).
	Source string
}

// Step is one preprocessing step: op and the parameters it has.
type Step struct {
	Op                  string
	Mean, Std, Min, Max *float64
}

// Golden is an example the artifact carries with its producer's own
// outputs (scikit-learn's, for an exported pipeline): the instance's
// values by field, in field order, and the outputs in output order.
type Golden struct {
	Instance  []Value
	Expect    []float64
	Tolerance float64
	// Post are the expected outputs of the postprocess: steps (a number
	// or a label), by output name.
	Post []Value
}

// Value is one field's value in a golden instance.
type Value struct {
	Field string
	Value any // float64, int64, bool or string
}

// Model is what an artifact says about itself.
type Model struct {
	Runtime string
	Detail  string // one line for the header comment
	Fields  []Field
	Outputs []string
	// Tolerance for the generated golden example: the runtime's float
	// precision across machines.
	Tolerance string
	// Golden are examples whose outputs the artifact knows (nil: one
	// all-zero example, its outputs computed by running the artifact).
	Golden []Golden
	// GoldenRows names the file Golden's rows came from (sluice init
	// --rows): their outputs are computed by running the artifact.
	GoldenRows string
	// Postprocess are model.yaml's postprocess: steps the artifact
	// declares (an exported CalibratedClassifierCV's), as the exporter
	// wrote them.
	Postprocess []map[string]any
}

// Describe tells the runtime of an artifact (runtimeName "" to detect it by
// content: xgboost JSON/UBJSON, linear JSON, ONNX) and what it reads and
// produces.
func Describe(file string, data []byte, runtimeName string) (*Model, error) {
	tries := []struct {
		name string
		fn   func([]byte) (*Model, error)
	}{{"xgboost", fromXGBoost}, {"sklearn", fromSklearn}, {"linear", fromLinear}, {"onnx", fromONNX}}
	var msgs []string
	for _, t := range tries {
		if runtimeName != "" && runtimeName != t.name {
			continue
		}
		m, err := t.fn(data)
		if err == nil {
			return m, nil
		}
		msgs = append(msgs, fmt.Sprintf("%s: %v", t.name, err))
	}
	if runtimeName != "" && len(msgs) == 0 {
		return nil, fmt.Errorf("%s: sluice init knows runtimes xgboost, sklearn, linear and onnx, not %q; write model.yaml by hand (docs/model-yaml.md)", file, runtimeName)
	}
	if runtimeName != "" {
		return nil, fmt.Errorf("%s: not an artifact of runtime %s: %s", file, runtimeName, strings.Join(msgs, "; "))
	}
	return nil, fmt.Errorf("%s: not an artifact sluice init can read (XGBoost JSON or UBJSON from Booster.save_model, a scikit-learn export from sluice export-sklearn, a linear-runtime JSON, or ONNX): %s", file, strings.Join(msgs, "; "))
}

func fromXGBoost(data []byte) (*Model, error) {
	d, err := xgboost.Describe(data)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "xgboost: "))
	}
	m := &Model{Runtime: "xgboost", Tolerance: "1e-6",
		Detail: fmt.Sprintf("XGBoost %s, objective %s, %d features", d.Booster, d.Objective, d.NumFeature)}
	names := d.FeatureNames
	if len(names) == 0 {
		names = make([]string, d.NumFeature)
		for i := range names {
			names[i] = "f" + strconv.Itoa(i) // XGBoost's own name for unnamed features
		}
	}
	for i, n := range names {
		f := Field{Name: n, Type: "float"}
		if i < len(d.FeatureTypes) {
			switch d.FeatureTypes[i] {
			case "int":
				f.Type = "int"
			case "i":
				f.Type = "bool"
				f.Note = "XGBoost feature type i (indicator)"
			case "c":
				// The model reads the code of a category: its index in
				// the training frame's .cat.categories. XGBoost 3.1 and
				// later save the names; before, the codes stand in for
				// them until the caller names them (--categories).
				n := 1
				if i < len(d.Categories) {
					n = max(n, d.Categories[i])
				}
				f.Type, f.Encode = "category", "ordinal"
				if i < len(d.CategoryNames) && len(d.CategoryNames[i]) >= n {
					f.Values = d.CategoryNames[i]
					f.Note = "XGBoost feature type c: the training frame's categories, saved in the artifact, in code order"
					break
				}
				for c := range n {
					f.Values = append(f.Values, strconv.Itoa(c))
				}
				f.Note = fmt.Sprintf("XGBoost feature type c: the model reads category codes 0..%d; the artifact does not name them: replace the values with list(df[%q].cat.categories), in order (or sluice init --categories %s=a,b,...)", n-1, f.Name, FieldName(f.Name, "f"+strconv.Itoa(i)))
			}
		}
		m.Fields = append(m.Fields, f)
	}
	switch o := d.Objective; {
	case o == "multi:softprob":
		for c := range d.NumClass {
			m.Outputs = append(m.Outputs, "class"+strconv.Itoa(c))
		}
	case o == "multi:softmax":
		m.Outputs = []string{"class"}
	case d.NumTarget > 1:
		prefix := "target"
		switch o {
		case "reg:quantileerror":
			prefix = "quantile" // one per quantile_alpha, in its order
		case "binary:logistic", "reg:logistic":
			prefix = "probability" // multi-label: one per label
		}
		for k := range d.NumTarget {
			m.Outputs = append(m.Outputs, prefix+strconv.Itoa(k))
		}
	case o == "binary:logistic" || o == "reg:logistic":
		m.Outputs = []string{"probability"}
	case o == "binary:logitraw":
		m.Outputs = []string{"margin"}
	case o == "binary:hinge":
		m.Outputs = []string{"label"}
	case strings.HasPrefix(o, "rank:"):
		m.Outputs = []string{"score"}
	case o == "survival:cox":
		m.Outputs = []string{"hazardRatio"}
	case o == "survival:aft":
		m.Outputs = []string{"survivalTime"}
	default:
		m.Outputs = []string{"prediction"}
	}
	if len(m.Outputs) != d.Outputs {
		return nil, fmt.Errorf("objective %s: %d outputs named for %d columns", d.Objective, len(m.Outputs), d.Outputs)
	}
	return m, nil
}

// GroupDummies turns each run of two or more consecutive int or bool
// fields named PREFIX_LEVEL (the columns pandas.get_dummies makes of a
// categorical column) into one category field PREFIX with the levels as
// its values, in the artifact's order, and an onehot step, which expands
// it back into those columns in that order. A prefix is tried at every
// '_' of the run's first name, the one that groups the most fields kept
// (a level may hold '_' too). Float fields are never grouped: dummies are
// 0/1 integers or booleans.
func GroupDummies(fields []Field) []Field {
	dummy := func(f Field) bool {
		return (f.Type == "int" || f.Type == "bool") && f.Encode == "" && len(f.Steps) == 0
	}
	var out []Field
	for i := 0; i < len(fields); {
		best, bestPrefix := 1, ""
		if dummy(fields[i]) {
			name := fields[i].Name
			for k := strings.Index(name, "_"); k > 0 && k < len(name)-1; {
				prefix := name[:k+1]
				j := i
				for j < len(fields) && dummy(fields[j]) && strings.HasPrefix(fields[j].Name, prefix) && len(fields[j].Name) > len(prefix) {
					j++
				}
				if j-i >= best {
					best, bestPrefix = j-i, prefix
				}
				next := strings.Index(name[k+1:], "_")
				if next < 0 {
					break
				}
				k += next + 1
			}
		}
		if best < 2 {
			out = append(out, fields[i])
			i++
			continue
		}
		f := Field{Name: strings.TrimSuffix(bestPrefix, "_"), Type: "category", Encode: "onehot"}
		var cols []string
		for _, d := range fields[i : i+best] {
			f.Values = append(f.Values, strings.TrimPrefix(d.Name, bestPrefix))
			cols = append(cols, d.Name)
		}
		f.Note = fmt.Sprintf("the artifact's columns %s, read as pandas.get_dummies of one column: onehot makes them again, in values order (a value must be one of them; if they are not dummies, list them as separate int fields)", strings.Join(cols, ", "))
		out = append(out, f)
		i += best
	}
	return out
}

// SetValues names the categories of category field name (the artifact's
// name for it or its field name) in the order of the codes the model
// reads. There must be at least as many as the model's splits use.
func (m *Model) SetValues(name string, values []string) error {
	for i := range m.Fields {
		f := &m.Fields[i]
		if f.Name != name && FieldName(f.Name, "f"+strconv.Itoa(i)) != name {
			continue
		}
		if f.Type != "category" {
			return fmt.Errorf("--categories %s: the field is %s, not a categorical feature of the artifact", name, f.Type)
		}
		if len(values) < len(f.Values) {
			return fmt.Errorf("--categories %s: %d values given, but the model's splits use category codes 0..%d: list every category of the training frame, in the order of df[%q].cat.categories", name, len(values), len(f.Values)-1, f.Name)
		}
		seen := map[string]bool{}
		for _, v := range values {
			if v == "" || seen[v] {
				return fmt.Errorf("--categories %s: values must be distinct and non-empty, got %q", name, strings.Join(values, ","))
			}
			seen[v] = true
		}
		f.Values = values
		f.Note = "XGBoost feature type c: the model reads the index of the value in values (its category code)"
		return nil
	}
	var cats []string
	for i, f := range m.Fields {
		if f.Type == "category" {
			cats = append(cats, FieldName(f.Name, "f"+strconv.Itoa(i)))
		}
	}
	if len(cats) == 0 {
		return fmt.Errorf("--categories %s: the artifact has no categorical feature", name)
	}
	return fmt.Errorf("--categories %s: no such categorical feature (the artifact's are %s)", name, strings.Join(cats, ", "))
}

// fromSklearn reads an artifact of sluice export-sklearn: the fields and
// steps of the pipeline, the outputs, and the rows it was given with
// scikit-learn's own outputs as golden examples.
func fromSklearn(data []byte) (*Model, error) {
	d, err := sklearn.Describe(data)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "sklearn: "))
	}
	m := &Model{Runtime: "sklearn", Tolerance: "1e-6", Outputs: d.Outputs, Detail: "scikit-learn " + d.Detail}
	if d.Input == nil {
		for i := range d.NFeatures {
			n := "x" + strconv.Itoa(i)
			if d.FeatureNames != nil {
				n = d.FeatureNames[i]
			}
			m.Fields = append(m.Fields, Field{Name: n, Type: "float"})
		}
		return m, nil
	}
	idx := map[string]int{}
	for _, f := range d.Input.Fields {
		idx[f.Name] = len(m.Fields)
		fl := Field{Name: f.Name, Type: f.Type, Values: f.Values, Default: f.Default, Optional: f.Optional}
		if f.Source != "" && f.Source != f.Name {
			fl.Note = fmt.Sprintf("the training frame's column %q", f.Source)
		}
		if c, ok := f.Default.(float64); ok && f.Type == "int" && c == float64(int64(c)) {
			fl.Default = int64(c)
		}
		m.Fields = append(m.Fields, fl)
	}
	for i, st := range d.Input.Preprocess {
		j, ok := idx[st.Field]
		if !ok {
			return nil, fmt.Errorf("input.preprocess[%d].field: %q is not one of input.fields", i, st.Field)
		}
		m.Fields[j].Steps = append(m.Fields[j].Steps, Step{Op: st.Op, Mean: st.Mean, Std: st.Std, Min: st.Min, Max: st.Max})
	}
	if len(d.Input.Dropped) > 0 {
		m.Detail += fmt.Sprintf("; the pipeline drops the columns %s, so they are no fields", strings.Join(d.Input.Dropped, ", "))
	}
	m.Postprocess = d.Postprocess
	for _, ex := range d.Examples {
		g := Golden{Expect: ex.Outputs, Tolerance: max(ex.Tolerance, ex.PostTolerance)}
		for _, name := range slices.Sorted(maps.Keys(ex.Post)) {
			g.Post = append(g.Post, Value{Field: name, Value: ex.Post[name]})
		}
		for _, f := range m.Fields {
			v, ok := ex.Instance[f.Name]
			if !ok {
				continue // absent: the field's default, or missing
			}
			if x, isNum := v.(float64); isNum && (f.Type == "int") && x == float64(int64(x)) {
				v = int64(x)
			}
			g.Instance = append(g.Instance, Value{Field: f.Name, Value: v})
		}
		m.Golden = append(m.Golden, g)
	}
	return m, nil
}

func fromLinear(data []byte) (*Model, error) {
	if len(bytes.TrimSpace(data)) == 0 || bytes.TrimSpace(data)[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	lm, err := linear.Decode(data)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "linear: "))
	}
	info := lm.Info()
	m := &Model{Runtime: "linear", Tolerance: "1e-6", Detail: fmt.Sprintf("linear model, %s", info.Detail)}
	for i := range info.Inputs {
		m.Fields = append(m.Fields, Field{Name: "x" + strconv.Itoa(i), Type: "float"})
	}
	if info.Outputs == 1 {
		m.Outputs = []string{"prediction"}
	} else {
		for i := range info.Outputs {
			m.Outputs = append(m.Outputs, "y"+strconv.Itoa(i))
		}
	}
	return m, nil
}

// defaultMaxLength is the maxLength written for a sequence input: ONNX
// declares the sequence axis dynamic, so the artifact cannot say it.
const defaultMaxLength = 128

func fromONNX(data []byte) (*Model, error) {
	mi, err := onnx.ReadModelInfo(data)
	if err != nil {
		return nil, err
	}
	c, err := onnx.CheckContract(mi, 0, 0)
	if err != nil {
		return nil, err
	}
	m := &Model{Runtime: "onnx", Tolerance: "1e-5",
		Detail: fmt.Sprintf("ONNX (%s, opset %d): input %q %s %s, output %q %s %s", mi.Producer, mi.Opset,
			c.Input.Name, c.Input.TypeString(), c.Input.ShapeString(), c.Output.Name, c.Output.TypeString(), c.Output.ShapeString())}
	in := FieldName(c.Input.Name, "input")
	if c.Sequence && len(c.Inputs) > 1 {
		// One sequence field per input, named as it (the runtime binds them
		// by name); an input whose name says mask is the attention mask.
		m.Detail = fmt.Sprintf("ONNX (%s, opset %d): %d inputs, output %q %s %s", mi.Producer, mi.Opset, len(c.Inputs), c.Output.Name, c.Output.TypeString(), c.Output.ShapeString())
		for i, t := range c.Inputs {
			f := Field{Name: t.Name, Type: "sequence", MaxLength: defaultMaxLength, Mask: strings.Contains(strings.ToLower(t.Name), "mask")}
			if t.ElemType == 6 {
				f.DType = "int32"
			}
			switch {
			case i == 0:
				f.Note = fmt.Sprintf("input %q %s %s; set maxLength to the longest sequence the model takes (the artifact does not say; %d written), the same on every sequence field", t.Name, t.TypeString(), t.ShapeString(), defaultMaxLength)
			case f.Mask:
				f.Note = fmt.Sprintf("input %q %s %s: an attention mask (0 or 1), padded with 0", t.Name, t.TypeString(), t.ShapeString())
			default:
				f.Note = fmt.Sprintf("input %q %s %s, padded with serving.padValue; add mask: true if it is a mask", t.Name, t.TypeString(), t.ShapeString())
			}
			m.Fields = append(m.Fields, f)
		}
	} else if c.Sequence {
		m.Fields = []Field{{Name: in, Type: "sequence", MaxLength: defaultMaxLength,
			Note: fmt.Sprintf("token ids; set maxLength to the longest sequence the model takes (the artifact does not say; %d written)", defaultMaxLength)}}
	} else if len(mi.FeatureNames) == c.Features {
		// The model's metadata property feature_names names the columns.
		for _, n := range mi.FeatureNames {
			m.Fields = append(m.Fields, Field{Name: n, Type: "float"})
		}
	} else {
		for i := range c.Features {
			m.Fields = append(m.Fields, Field{Name: in + "_" + strconv.Itoa(i), Type: "float"})
		}
		m.Fields[0].Note = fmt.Sprintf("column %d of input tensor %q; the model does not name its columns (metadata property feature_names): rename them", 0, c.Input.Name)
	}
	out := FieldName(c.Output.Name, "output")
	if c.Outputs == 1 {
		m.Outputs = []string{out}
	} else {
		for i := range c.Outputs {
			m.Outputs = append(m.Outputs, out+"_"+strconv.Itoa(i))
		}
	}
	return m, nil
}

var nonField = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// FieldName turns an artifact's name for a column into a valid field name
// (letters, digits and '_', not starting with a digit); fallback when
// nothing is left.
func FieldName(s, fallback string) string {
	n := strings.Trim(nonField.ReplaceAllString(s, "_"), "_")
	if n == "" {
		n = fallback
	}
	if n[0] >= '0' && n[0] <= '9' {
		n = "_" + n
	}
	return n
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// ModelName turns s (a folder or file name) into a valid model name, or
// "model".
func ModelName(s string) string {
	n := strings.Trim(nonName.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(n) > 63 {
		n = strings.Trim(n[:63], "-")
	}
	if n == "" {
		return "model"
	}
	return n
}

// YAML renders model.yaml for m. With golden, one golden example on an
// all-zero instance expects 0 for every output: the caller computes the
// real values by running the artifact (hosting.UpdateGolden).
func YAML(name, artifact, source string, m *Model, golden bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by `sluice init %s` from what the artifact says about itself:\n", source)
	fmt.Fprintf(&b, "# %s.\n", m.Detail)
	b.WriteString(`# Check every line before publishing: rename fields, add bounds (min, max),
# mark the fields that may be absent (optional: true), declare preprocessing,
# and set the serving limits (docs/model-yaml.md).
`)
	fmt.Fprintf(&b, "name: %s\nruntime: %s\nartifact: %s\n", name, m.Runtime, quote(artifact))
	fmt.Fprintf(&b, "input:\n  schema: %s-input@1\n  fields:                # order = the feature order the model reads\n", name)
	seen := map[string]int{}
	for i, f := range m.Fields {
		n := FieldName(f.Name, "f"+strconv.Itoa(i))
		if k := seen[n]; k > 0 {
			n = n + "_" + strconv.Itoa(k+1)
		}
		seen[n]++
		if m.Fields[i].Source == "" {
			m.Fields[i].Source = f.Name
		}
		m.Fields[i].Name = n
		note := f.Note
		if n != f.Name {
			note = strings.TrimSuffix(fmt.Sprintf("the artifact calls it %q; %s", f.Name, note), "; ")
		}
		line := fmt.Sprintf("    - {name: %s, type: %s", n, f.Type)
		if f.DType != "" {
			line += ", dtype: " + f.DType
		}
		if f.MaxLength > 0 {
			line += fmt.Sprintf(", maxLength: %d", f.MaxLength)
		}
		if f.Mask {
			line += ", mask: true"
		}
		if len(f.Values) > 0 {
			q := make([]string, len(f.Values))
			for k, v := range f.Values {
				q[k] = strconv.Quote(v)
			}
			line += ", values: [" + strings.Join(q, ", ") + "]"
		}
		if f.Optional {
			line += ", optional: true"
		}
		if f.Default != nil {
			line += ", default: " + scalar(f.Default)
		}
		line += "}"
		if note != "" {
			line += "   # " + note
		}
		b.WriteString(line + "\n")
	}
	var steps []string
	for _, f := range m.Fields {
		if f.Encode != "" {
			steps = append(steps, fmt.Sprintf("  - {op: %s, field: %s}\n", f.Encode, f.Name))
		}
		for _, st := range f.Steps {
			line := fmt.Sprintf("  - {op: %s, field: %s", st.Op, f.Name)
			for _, p := range []struct {
				k string
				v *float64
			}{{"mean", st.Mean}, {"std", st.Std}, {"min", st.Min}, {"max", st.Max}} {
				if p.v != nil {
					line += fmt.Sprintf(", %s: %s", p.k, strconv.FormatFloat(*p.v, 'g', -1, 64))
				}
			}
			steps = append(steps, line+"}\n")
		}
	}
	if len(steps) > 0 {
		b.WriteString("preprocess:\n" + strings.Join(steps, ""))
	}
	fmt.Fprintf(&b, "output:\n  schema: %s-output@1\n  fields:\n", name)
	for _, o := range m.Outputs {
		fmt.Fprintf(&b, "    - {name: %s}\n", o)
	}
	if len(m.Postprocess) > 0 {
		b.WriteString("postprocess:\n")
		for _, st := range m.Postprocess {
			b.WriteString("  - " + flowMap(st) + "\n")
		}
	}
	if !golden {
		return []byte(b.String())
	}
	if m.Golden != nil {
		writeGolden(&b, m)
		return []byte(b.String())
	}
	b.WriteString(`golden:
  # Computed by running this artifact on an all-zero instance when this file
  # was written: it proves the model loads and answers as it does today.
  # Add examples whose outputs you know from training, then run
  # sluice check --update-golden DIR only if you trust the artifact.
  - instance: {`)
	for i, f := range m.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		switch f.Type {
		case "bool":
			fmt.Fprintf(&b, "%s: false", f.Name)
		case "sequence":
			if f.Mask {
				fmt.Fprintf(&b, "%s: [1]", f.Name)
			} else {
				fmt.Fprintf(&b, "%s: [0]", f.Name)
			}
		case "category":
			fmt.Fprintf(&b, "%s: %s", f.Name, strconv.Quote(f.Values[0]))
		default:
			fmt.Fprintf(&b, "%s: 0", f.Name)
		}
	}
	b.WriteString("}\n    expect: {")
	for i, o := range m.Outputs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: 0", o)
	}
	fmt.Fprintf(&b, "}\n    tolerance: %s\n", m.Tolerance)
	return []byte(b.String())
}

// writeGolden writes the artifact's own examples.
func writeGolden(b *strings.Builder, m *Model) {
	if m.GoldenRows != "" {
		fmt.Fprintf(b, `golden:
  # The first rows of %s, with what this artifact answered for them when
  # this file was written: a load that answers otherwise fails.
`, m.GoldenRows)
	} else {
		b.WriteString(`golden:
  # Rows the exporter was given, with the outputs the artifact's producer
  # (scikit-learn) computed for them: a load that answers otherwise fails.
`)
	}
	for _, g := range m.Golden {
		b.WriteString("  - instance: {")
		for i, v := range g.Instance {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, "%s: %s", fieldOf(m, v.Field), scalar(v.Value))
		}
		b.WriteString("}\n    expect: {")
		for i, o := range m.Outputs {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, "%s: %s", o, strconv.FormatFloat(g.Expect[i], 'g', -1, 64))
		}
		for _, v := range g.Post {
			fmt.Fprintf(b, ", %s: %s", v.Field, scalar(v.Value))
		}
		tol := m.Tolerance
		if g.Tolerance > 0 {
			tol = strconv.FormatFloat(g.Tolerance, 'g', -1, 64)
		}
		fmt.Fprintf(b, "}\n    tolerance: %s\n", tol)
	}
}

// stepKeys is the order a postprocess step's keys are written in; keys
// not listed follow, sorted.
var stepKeys = []string{"op", "output", "as", "method", "a", "b", "threshold", "labels", "thresholdAs", "x", "y"}

// flowMap writes a step (decoded JSON: strings, numbers, lists of them)
// as a YAML flow map.
func flowMap(st map[string]any) string {
	keys := slices.Clone(stepKeys)
	for _, k := range slices.Sorted(maps.Keys(st)) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var parts []string
	for _, k := range keys {
		v, ok := st[k]
		if !ok {
			continue
		}
		if x, isStr := v.(string); isStr && plainScalar.MatchString(x) && !yamlWord[strings.ToLower(x)] {
			parts = append(parts, k+": "+x) // op, output and method names
			continue
		}
		parts = append(parts, k+": "+flowValue(v))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// yamlWord are the plain scalars YAML 1.1 reads as something else than
// a string.
var yamlWord = map[string]bool{"yes": true, "no": true, "y": true, "n": true, "true": true, "false": true, "on": true, "off": true, "null": true, "~": true}

func flowValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []any:
		items := make([]string, len(x))
		for i, e := range x {
			items[i] = flowValue(e)
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	return scalar(v)
}

// fieldOf is the field name YAML gave the field the artifact calls name.
func fieldOf(m *Model, name string) string {
	for _, f := range m.Fields {
		if f.Source == name {
			return f.Name
		}
	}
	return name
}

// scalar writes a value as a YAML flow scalar: strings quoted, numbers
// in their shortest form.
func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	}
	return fmt.Sprint(v)
}

var plainScalar = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

func quote(s string) string {
	if plainScalar.MatchString(s) {
		return s
	}
	return strconv.Quote(s)
}
