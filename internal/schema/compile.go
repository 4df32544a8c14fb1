package schema

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// problems collects what Compile finds, in the order it finds it.
type problems []Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Compile checks field declarations and preprocessing steps and builds a
// Schema. It reports every problem it finds, each with its key path.
// Fields first (compileField): with a problem there, the steps are not
// looked at. Then each step in order against the state its field is in
// (encoding.attach), then the feature layout (Schema.layout).
func Compile(fields []Field, steps []Step) (*Schema, []Problem) {
	var ps problems
	if len(fields) == 0 {
		ps.add("input.fields", "must declare at least one field")
	}
	if len(fields) > MaxFields {
		ps.add("input.fields", "has %d fields, at most %d are allowed", len(fields), MaxFields)
		return nil, ps
	}
	s := &Schema{index: map[string]int{}}
	for i, f := range fields {
		_, dup := s.index[f.Name]
		cf := compileField(&ps, fmt.Sprintf("input.fields[%d]", i), f, dup)
		s.index[f.Name] = len(s.fields)
		s.fields = append(s.fields, cf)
	}
	if len(ps) > 0 {
		return nil, ps
	}
	enc := newEncoding(s.fields)
	for i, st := range steps {
		enc.attach(&ps, fmt.Sprintf("preprocess[%d]", i), st, s, fields)
	}
	if slices.ContainsFunc(s.fields, func(f field) bool { return f.kind == kSequence }) {
		checkSequences(&ps, s.fields)
		if len(ps) > 0 {
			return nil, ps
		}
		s.seq = true
		s.known = knownNames(fields)
		return s, nil
	}
	s.layout(&ps, enc.encoded)
	if len(ps) > 0 {
		return nil, ps
	}
	s.known = knownNames(fields)
	return s, nil
}

// checkSequences checks a schema whose first field is a sequence: every
// field is a sequence (one model input each, all [batch, seq] with one
// length per instance), with one maxLength, and a mask field masks
// another one.
func checkSequences(ps *problems, fields []field) {
	first := fields[slices.IndexFunc(fields, func(f field) bool { return f.kind == kSequence })].Field
	masks := 0
	for i, f := range fields {
		p := fmt.Sprintf("input.fields[%d]", i)
		if f.kind != kSequence {
			ps.add(p+".type", "a schema with a sequence field has sequence fields only (%q is one; this one is %s): a model's inputs are all token rows or all features", first.Name, f.Type)
			continue
		}
		if f.MaxLength != first.MaxLength {
			ps.add(p+".maxLength", "the sequence fields of a schema share one length per instance: %q has maxLength %d, got %d", first.Name, first.MaxLength, f.MaxLength)
		}
		if f.Mask {
			masks++
		}
	}
	if masks == len(fields) {
		ps.add("input.fields", "every sequence field is a mask: a mask field masks another sequence field (the token ids)")
	}
}

// compileField checks one field's declaration (at key path p; dup: an
// earlier field has its name) and
// compiles its type, category values and default.
func compileField(ps *problems, p string, f Field, dup bool) field {
	switch {
	case f.Name == "":
		ps.add(p+".name", "is required")
	case !fieldName.MatchString(f.Name):
		ps.add(p+".name", "%q is not a valid field name (letters, digits and _; not starting with a digit)", f.Name)
	case dup:
		ps.add(p+".name", "duplicate field %q", f.Name)
	}
	cf := field{Field: f}
	compileType(ps, p, &cf)
	checkAttributes(ps, p, f)
	if f.Default != nil && cf.kind != kSequence {
		cf.hasDefault = true
		v, err := valueOf(f.Default)
		if err == nil {
			cf.def, err = cf.parse(v)
		}
		if err != nil {
			ps.add(p+".default", "%s", strings.TrimPrefix(err.Error(), ": "))
		}
	}
	return cf
}

// compileType sets cf's kind from its declared type, with what that type
// requires: a category's values (each once), a sequence's maxLength, and
// a sequence being required.
func compileType(ps *problems, p string, cf *field) {
	f := cf.Field
	switch f.Type {
	case TypeFloat:
		cf.kind = kFloat
	case TypeInt:
		cf.kind = kInt
	case TypeBool:
		cf.kind = kBool
	case TypeCategory:
		cf.kind = kCategory
		if len(f.Values) == 0 {
			ps.add(p+".values", "a category field needs its list of values")
		}
		cf.cats = make(map[string]int, len(f.Values))
		for j, v := range f.Values {
			if _, dup := cf.cats[v]; dup {
				ps.add(fmt.Sprintf("%s.values[%d]", p, j), "duplicate value %q", v)
			}
			cf.cats[v] = j
		}
	case TypeSequence:
		cf.kind = kSequence
		if f.MaxLength < 1 || f.MaxLength > MaxSequenceLength {
			ps.add(p+".maxLength", "a sequence field needs maxLength between 1 and %d, got %d", MaxSequenceLength, f.MaxLength)
		}
		switch f.DType {
		case "", DTypeInt64, DTypeInt32:
		default:
			ps.add(p+".dtype", "unknown dtype %q (use int64, the default, or int32: the element type of the model's input tensor)", f.DType)
		}
		if f.Optional || f.Default != nil {
			ps.add(p, "a sequence field is required: optional and default do not apply")
		}
	case "":
		ps.add(p+".type", "is required (float, int, bool, category or sequence)")
	default:
		ps.add(p+".type", "unknown type %q (use float, int, bool, category or sequence)", f.Type)
	}
}

// checkAttributes refuses attributes the field's type does not have
// (maxLength, values, min/max) and min/max that are not finite or in
// order.
func checkAttributes(ps *problems, p string, f Field) {
	if f.Type != TypeSequence && f.MaxLength != 0 {
		ps.add(p+".maxLength", "only sequence fields have maxLength")
	}
	if f.Type != TypeSequence && f.DType != "" {
		ps.add(p+".dtype", "only sequence fields have a dtype (the others are read as float32 features)")
	}
	if f.Type != TypeSequence && f.Mask {
		ps.add(p+".mask", "only sequence fields can be a mask")
	}
	if f.Type != TypeCategory && len(f.Values) > 0 {
		ps.add(p+".values", "only category fields have values")
	}
	if (f.Min != nil || f.Max != nil) && (f.Type == TypeBool || f.Type == TypeCategory || f.Type == TypeSequence) {
		ps.add(p, "min/max apply to float and int fields only")
	}
	if f.Min != nil && f.Max != nil && *f.Min > *f.Max {
		ps.add(p+".max", "must be >= min (%v), got %v", *f.Min, *f.Max)
	}
	for _, b := range []*float64{f.Min, f.Max} {
		if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
			ps.add(p, "min/max must be finite")
		}
	}
}

// encoding is the state of each field's value as the steps apply, in
// order: what the next step may do to it.
type encoding struct {
	levels  []int  // > 0: the value is a category index with that many levels
	encoded []bool // a category field is encoded (ordinal or onehot)
	closed  []bool // one-hot encoded: no step may follow
}

func newEncoding(fields []field) *encoding {
	e := &encoding{levels: make([]int, len(fields)), encoded: make([]bool, len(fields)), closed: make([]bool, len(fields))}
	for i := range fields {
		if fields[i].kind == kCategory {
			e.levels[i] = len(fields[i].Values)
		}
	}
	return e
}

// attach checks step st (at key path p) against its field's state and,
// when it applies, appends its op to the field and moves the state on.
func (e *encoding) attach(ps *problems, p string, st Step, s *Schema, fields []Field) {
	fi, ok := s.index[st.Field]
	switch {
	case st.Field == "":
		ps.add(p+".field", "is required")
		return
	case !ok:
		ps.add(p+".field", "unknown field %q (input fields: %s)", st.Field, knownNames(fields))
		return
	}
	f := &s.fields[fi]
	switch {
	case f.kind == kSequence:
		ps.add(p+".field", "%q is a sequence field; preprocessing steps do not apply to token ids", st.Field)
		return
	case e.closed[fi]:
		ps.add(p, "field %q is already one-hot encoded; onehot must be its last step", st.Field)
		return
	}
	o, ok := compileOp(ps, p, st)
	if !ok || !e.apply(ps, p, st, fi, f) {
		return
	}
	if st.Op != OpStandardize && (st.Mean != nil || st.Std != nil) {
		ps.add(p, "mean/std belong to standardize only")
	}
	if st.Op != OpClip && (st.Min != nil || st.Max != nil) {
		ps.add(p, "min/max belong to clip only")
	}
	if st.Op != OpBucketize && len(st.Boundaries) > 0 {
		ps.add(p, "boundaries belong to bucketize only")
	}
	f.ops = append(f.ops, o)
}

// compileOp checks a step's own parameters and builds its op; false for
// a missing or unknown op.
func compileOp(ps *problems, p string, st Step) (op, bool) {
	var o op
	switch st.Op {
	case OpStandardize:
		o.kind = opStandardize
		if st.Mean == nil || math.IsNaN(*st.Mean) || math.IsInf(*st.Mean, 0) {
			ps.add(p+".mean", "is required for standardize and must be a finite number")
		}
		if st.Std == nil || !(*st.Std > 0) || math.IsInf(*st.Std, 0) {
			ps.add(p+".std", "is required for standardize and must be a finite number > 0")
		}
		if st.Mean != nil && st.Std != nil {
			o.a, o.b = *st.Mean, *st.Std
		}
	case OpLog1p:
		o.kind = opLog1p
	case OpClip:
		o.kind = opClip
		o.a, o.b = math.Inf(-1), math.Inf(1)
		if st.Min == nil && st.Max == nil {
			ps.add(p, "clip needs min, max or both")
		}
		if st.Min != nil {
			o.a = *st.Min
		}
		if st.Max != nil {
			o.b = *st.Max
		}
		if math.IsNaN(o.a) || math.IsNaN(o.b) {
			ps.add(p, "clip bounds must be numbers, not NaN")
		} else if o.a > o.b {
			ps.add(p+".max", "must be >= min (%v), got %v", o.a, o.b)
		}
	case OpBucketize:
		o.kind = opBucketize
		if len(st.Boundaries) == 0 {
			ps.add(p+".boundaries", "is required for bucketize (a strictly increasing list)")
		}
		for j, b := range st.Boundaries {
			if math.IsNaN(b) || math.IsInf(b, 0) {
				ps.add(fmt.Sprintf("%s.boundaries[%d]", p, j), "must be a finite number, got %v", b)
			}
		}
		for j := 1; j < len(st.Boundaries); j++ {
			if !(st.Boundaries[j] > st.Boundaries[j-1]) {
				ps.add(fmt.Sprintf("%s.boundaries[%d]", p, j), "boundaries must be strictly increasing, got %v after %v", st.Boundaries[j], st.Boundaries[j-1])
			}
		}
		o.bounds = st.Boundaries
	case OpOnehot:
		o.kind = opOnehot
	case OpOrdinal:
		o.kind = opOrdinal
	case "":
		ps.add(p+".op", "is required (standardize, log1p, clip, bucketize, onehot or ordinal)")
		return o, false
	default:
		ps.add(p+".op", "unknown op %q (use standardize, log1p, clip, bucketize, onehot or ordinal)", st.Op)
		return o, false
	}
	return o, true
}

// apply is the decision of what step st does to field fi (f) in its
// current state, and whether it may: a numeric op needs a numeric value
// (not a category not yet encoded) and leaves one (bucketize: a category
// index of len(boundaries)+1 levels); onehot needs a category index and
// closes the field at that width; ordinal encodes a category field once.
func (e *encoding) apply(ps *problems, p string, st Step, fi int, f *field) bool {
	switch st.Op {
	case OpStandardize, OpLog1p, OpClip, OpBucketize:
		if f.kind == kCategory && !e.encoded[fi] {
			ps.add(p+".op", "%s needs a numeric value; %q is a category (encode it with ordinal first, or use onehot)", st.Op, st.Field)
			return false
		}
		e.levels[fi] = 0
		if st.Op == OpBucketize {
			e.levels[fi] = len(st.Boundaries) + 1
		}
	case OpOnehot:
		if e.levels[fi] == 0 {
			ps.add(p+".field", "onehot needs a category field or a bucketized value; %q is numeric", st.Field)
			return false
		}
		f.width = e.levels[fi]
		e.closed[fi] = true
		e.encoded[fi] = true
	case OpOrdinal:
		if f.kind != kCategory {
			ps.add(p+".field", "ordinal applies to category fields; %q is %s", st.Field, f.Type)
			return false
		}
		if e.encoded[fi] {
			ps.add(p, "field %q is already encoded", st.Field)
			return false
		}
		e.encoded[fi] = true
	}
	return true
}

// layout places each field's features after the previous field's (one
// column, or its one-hot width) and names them; a category field left
// unencoded is a problem.
func (s *Schema) layout(ps *problems, encoded []bool) {
	for i := range s.fields {
		f := &s.fields[i]
		if f.kind == kCategory && !encoded[i] {
			ps.add(fmt.Sprintf("input.fields[%d]", i), "category field %q must be encoded: add {op: onehot, field: %s} or {op: ordinal, field: %s} to preprocess", f.Name, f.Name, f.Name)
		}
		if f.width == 0 {
			f.width = 1
		}
		f.offset = s.width
		s.width += f.width
		s.features = append(s.features, f.featureNames()...)
	}
}
