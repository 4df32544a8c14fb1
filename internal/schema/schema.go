package schema

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/sluiceml/sluice/internal/errs"
)

var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MaxFields bounds the number of input fields of one schema.
const MaxFields = 4096

type opKind int

const (
	opStandardize opKind = iota
	opLog1p
	opClip
	opBucketize
	opOnehot
	opOrdinal
)

type op struct {
	kind   opKind
	a, b   float64 // standardize: mean, std; clip: min, max
	bounds []float64
}

type field struct {
	Field
	kind       int // one of kFloat...
	cats       map[string]int
	hasDefault bool
	def        float64
	ops        []op
	offset     int // first feature column
	width      int // 1, or the one-hot width
}

const (
	kFloat = iota
	kInt
	kBool
	kCategory
	kSequence
)

// Schema is a compiled, immutable input contract. Safe for concurrent use.
type Schema struct {
	fields   []field
	index    map[string]int
	width    int
	features []string
	known    string // "a, b, c" for messages
	seq      bool   // the one field is a sequence: instances become token rows
}

func knownNames(fields []Field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

func (f *field) featureNames() []string {
	name := f.Name
	for _, o := range f.ops {
		switch o.kind {
		case opStandardize:
			name = "standardize(" + name + ")"
		case opLog1p:
			name = "log1p(" + name + ")"
		case opClip:
			name = "clip(" + name + ")"
		case opBucketize:
			name = "bucketize(" + name + ")"
		case opOrdinal:
			name = "ordinal(" + name + ")"
		case opOnehot:
			out := make([]string, f.width)
			for j := range out {
				if f.kind == kCategory && len(f.ops) == 1 {
					out[j] = f.Name + "=" + f.Values[j]
				} else {
					out[j] = fmt.Sprintf("%s=%d", name, j)
				}
			}
			return out
		}
	}
	return []string{name}
}

// Width is the number of features a row has after preprocessing (0 for a
// sequence schema).
func (s *Schema) Width() int { return s.width }

// Sequence reports whether the schema is made of sequence fields, and the
// first one's name and maxLength (every sequence field of a schema has
// that maxLength). Such a schema's instances are read with Tokens, not Row.
func (s *Schema) Sequence() (name string, maxLength int, ok bool) {
	if !s.seq {
		return "", 0, false
	}
	return s.fields[0].Name, s.fields[0].MaxLength, true
}

// SequenceFields returns a sequence schema's fields in order: one model
// input each ([batch, seq], its DType, Mask). nil for any other schema.
func (s *Schema) SequenceFields() []Field {
	if !s.seq {
		return nil
	}
	return s.Fields()
}

// Tokens validates an instance of a sequence schema and returns its token
// row: every sequence field's values, in field order, end to end. Each
// field holds 1..maxLength integers in [0, 2^31) (a mask field: 0 or 1),
// and all of an instance's fields have one length, so the row's length is
// that length times the number of fields. path prefixes field names in
// errors ("instances[3]"), and an element's error names its index
// ("instances[3].tokens[5]").
func (s *Schema) Tokens(path string, inst Instance) ([]int64, error) {
	if !s.seq {
		return nil, errs.New(errs.Internal, "schema: Tokens on a schema without a sequence field")
	}
	var valBuf [4]*Value
	vals := valBuf[:0]
	if len(s.fields) <= len(valBuf) {
		vals = valBuf[:len(s.fields)]
	} else {
		vals = make([]*Value, len(s.fields))
	}
	for i := range inst {
		m := &inst[i]
		j, ok := s.index[m.Name]
		if !ok {
			e := errs.Field(errs.InvalidArgument, path+"."+errs.Clip(m.Name), "unknown field (expected: %s)", s.known)
			e.Reason = ReasonUnknown
			return nil, e
		}
		if vals[j] != nil {
			return nil, fieldErr(path+"."+m.Name, viol(ReasonDuplicate, "duplicate field"))
		}
		vals[j] = &m.Value
	}
	var out []int64
	length := 0
	for j := range s.fields {
		f := &s.fields[j]
		fp := path + "." + f.Name
		val := vals[j]
		what, one, many := "token ids (integers in [0, 2^31))", "token id", "token ids"
		if f.Mask {
			what, one, many = "mask values (0 or 1)", "mask value", "mask values"
		}
		switch {
		case val == nil:
			return nil, fieldErr(fp, viol(ReasonMissing, "required field is missing"))
		case val.Kind == Null:
			return nil, fieldErr(fp, viol(ReasonNull, "null is not allowed for a required field"))
		case val.Kind != Array:
			return nil, fieldErr(fp, viol(ReasonType, "expected an array of %s, got %s", what, kindName(*val)))
		case len(val.Items) == 0:
			return nil, fieldErr(fp, viol(ReasonRange, "must hold at least 1 %s, got an empty array", one))
		case len(val.Items) > f.MaxLength:
			return nil, fieldErr(fp, viol(ReasonRange, "has %d %s, maxLength is %d", len(val.Items), many, f.MaxLength))
		case j > 0 && len(val.Items) != length:
			return nil, fieldErr(fp, viol(ReasonRange, "has %d %s but %s has %d: the sequence fields of an instance have one length", len(val.Items), many, s.fields[0].Name, length))
		}
		if j == 0 {
			length = len(val.Items)
			out = make([]int64, 0, length*len(s.fields))
		}
		for i, lit := range val.Items {
			x, err := strconv.ParseInt(lit, 10, 64)
			if err != nil {
				// Not a plain integer literal: 1.0 and 1e2 are accepted when
				// they are exact integers; anything else is refused.
				fl, ferr := strconv.ParseFloat(lit, 64)
				if ferr != nil || fl != math.Trunc(fl) || math.Abs(fl) > 1<<53 {
					if f.Mask {
						return nil, fieldErr(fmt.Sprintf("%s[%d]", fp, i), viol(ReasonInteger, "expected a mask value 0 or 1, got %s", lit))
					}
					return nil, fieldErr(fmt.Sprintf("%s[%d]", fp, i), viol(ReasonInteger, "expected an integer token id in [0, 2^31), got %s", lit))
				}
				x = int64(fl)
			}
			switch {
			case f.Mask && x != 0 && x != 1:
				return nil, fieldErr(fmt.Sprintf("%s[%d]", fp, i), viol(ReasonRange, "a mask value is 0 or 1, got %s", lit))
			case x < 0 || x >= 1<<31:
				return nil, fieldErr(fmt.Sprintf("%s[%d]", fp, i), viol(ReasonRange, "token id must be in [0, 2^31), got %s", lit))
			}
			out = append(out, x)
		}
	}
	return out, nil
}

// Features names the feature columns in order, e.g. "log1p(amount)", "country=US".
func (s *Schema) Features() []string { return append([]string(nil), s.features...) }

// FeatureColumn says where one feature column of a preprocessed row comes from.
type FeatureColumn struct {
	// Field is the input field the column is computed from.
	Field string
	// Level is set on a one-hot column: the category value it stands for
	// (a category field's values), or the bucket's index (after bucketize).
	Level string
}

// FeatureColumns describes every feature column in order (len Width()): the
// field it comes from and, one-hot, its level. A sequence schema has none.
func (s *Schema) FeatureColumns() []FeatureColumn {
	if s.seq {
		return nil
	}
	out := make([]FeatureColumn, 0, s.width)
	for i := range s.fields {
		f := &s.fields[i]
		if n := len(f.ops); n == 0 || f.ops[n-1].kind != opOnehot {
			out = append(out, FeatureColumn{Field: f.Name})
			continue
		}
		bucketed := false
		for _, o := range f.ops {
			if o.kind == opBucketize {
				bucketed = true
			}
		}
		for j := 0; j < f.width; j++ {
			c := FeatureColumn{Field: f.Name, Level: strconv.Itoa(j)}
			if f.kind == kCategory && !bucketed && j < len(f.Values) {
				c.Level = f.Values[j]
			}
			out = append(out, c)
		}
	}
	return out
}

// Fields returns the declared fields in order.
func (s *Schema) Fields() []Field {
	out := make([]Field, len(s.fields))
	for i, f := range s.fields {
		out[i] = f.Field
	}
	return out
}

// NumFields is len(Fields()) without the copy.
func (s *Schema) NumFields() int { return len(s.fields) }

// Field is Fields()[i] without the copy.
func (s *Schema) Field(i int) Field { return s.fields[i].Field }

// Missing calls fn with the name of every field that is missing (NaN) in a
// preprocessed row: absent optional fields without a default.
func (s *Schema) Missing(row []float32, fn func(field string)) {
	if s.seq {
		return
	}
	for i := range s.fields {
		f := &s.fields[i]
		if v := row[f.offset]; v != v {
			fn(f.Name)
		}
	}
}

// FieldName returns the declared field a field path ("instances[3].amount")
// names, or "" if it names none.
func (s *Schema) FieldName(path string) string {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return ""
	}
	name := path[i+1:]
	if j := strings.IndexByte(name, '['); j >= 0 {
		name = name[:j] // an array element: "instances[0].tokens[5]"
	}
	if _, ok := s.index[name]; ok {
		return name
	}
	return ""
}

// ValueKind says what a decoded input value is.
type ValueKind uint8

// Value kinds.
const (
	Null ValueKind = iota
	Number
	String
	Bool
	Composite // an object, or an array that is not all numbers: never valid for a field
	Array     // an array of numbers (a sequence field's token ids)
)

// Value is one decoded input value. Numbers keep their literal text so that
// overflow and integrality are judged on what the client sent.
type Value struct {
	Kind  ValueKind
	Text  string // Number: the literal; String: the string
	Bool  bool
	Items []string // Array: the numbers' literals
}

// Member is one name/value pair of an instance, in the order sent.
type Member struct {
	Name  string
	Value Value
}

// Instance is one decoded instance object.
type Instance []Member

// Row validates inst and writes its preprocessed features into dst, which
// must have Width() elements. path prefixes field names in errors
// ("instances[3]"). Any problem is an *errs.Error naming the field.
func (s *Schema) Row(path string, inst Instance, dst []float32) error {
	return s.RowAt(Path{Prefix: path, Index: -1}, inst, dst)
}

// RowAt is Row with the path given as a Path, formatted only for an error
// (a batch of instances costs no path string per row).
func (s *Schema) RowAt(at Path, inst Instance, dst []float32) error {
	if s.seq {
		return errs.New(errs.Internal, "schema: Row on a sequence schema; use Tokens")
	}
	if len(dst) != s.width {
		return errs.New(errs.Internal, "schema: row buffer has %d columns, want %d", len(dst), s.width)
	}
	var seenBuf [64]bool
	seen := seenBuf[:0]
	if len(s.fields) <= len(seenBuf) {
		seen = seenBuf[:len(s.fields)]
	} else {
		seen = make([]bool, len(s.fields))
	}
	var rawBuf [64]float64
	raw := rawBuf[:0]
	if len(s.fields) <= len(rawBuf) {
		raw = rawBuf[:len(s.fields)]
	} else {
		raw = make([]float64, len(s.fields))
	}
	for j, m := range inst {
		// Clients usually send the fields in the schema's order: the j-th
		// member is then the j-th field, found without hashing its name.
		i := j
		if j >= len(s.fields) || s.fields[j].Name != m.Name {
			var ok bool
			if i, ok = s.index[m.Name]; !ok {
				e := errs.Field(errs.InvalidArgument, at.String()+"."+errs.Clip(m.Name), "unknown field (expected: %s)", s.known)
				e.Reason = ReasonUnknown
				return e
			}
		}
		if seen[i] {
			return fieldErr(at.String()+"."+m.Name, viol(ReasonDuplicate, "duplicate field"))
		}
		seen[i] = true
		f := &s.fields[i]
		if m.Value.Kind == Null {
			if !f.Optional && !f.hasDefault {
				return fieldErr(at.String()+"."+m.Name, viol(ReasonNull, "null is not allowed for a required field"))
			}
			seen[i] = false
			continue
		}
		v, err := f.parse(m.Value)
		if err != nil {
			return fieldErr(at.String()+"."+m.Name, err)
		}
		raw[i] = v
	}
	for i := range s.fields {
		f := &s.fields[i]
		if !seen[i] {
			switch {
			case f.hasDefault:
				raw[i] = f.def
			case f.Optional:
				raw[i] = math.NaN()
			default:
				return fieldErr(at.String()+"."+f.Name, viol(ReasonMissing, "required field is missing"))
			}
		}
		if err := f.apply(raw[i], dst[f.offset:f.offset+f.width]); err != nil {
			return fieldErr(at.String()+"."+f.Name, err)
		}
	}
	return nil
}

// violation is a field-level problem with a reason for metrics.
type violation struct{ reason, msg string }

func (v *violation) Error() string { return v.msg }

func viol(reason, format string, args ...any) error {
	return &violation{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// fieldErr turns a field problem into an *errs.Error with its reason.
func fieldErr(field string, err error) error {
	e := errs.Field(errs.InvalidArgument, field, "%s", err.Error())
	if v, ok := err.(*violation); ok {
		e.Reason = v.reason
	}
	return e
}

// Violation reasons (errs.Error.Reason) set by Row.
const (
	ReasonMissing   = "missing"
	ReasonNull      = "null"
	ReasonType      = "type"
	ReasonRange     = "range"
	ReasonCategory  = "category"
	ReasonInteger   = "integer"
	ReasonOverflow  = "overflow"
	ReasonUnknown   = "unknown_field"
	ReasonDuplicate = "duplicate"
	ReasonOther     = "other"
)

// parse checks one value against the field's type and bounds and returns it
// as a number (category: its index).
func (f *field) parse(v Value) (float64, error) {
	switch f.kind {
	case kFloat, kInt:
		if v.Kind != Number {
			return 0, viol(ReasonType, "expected a number (%s), got %s", f.Type, kindName(v))
		}
		x, err := strconv.ParseFloat(v.Text, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && (math.IsInf(x, 0)) {
				return 0, viol(ReasonOverflow, "number %s overflows float64", errs.Clip(v.Text))
			}
			return 0, viol(ReasonType, "invalid number %q", errs.Clip(v.Text))
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, viol(ReasonType, "NaN and infinities are not allowed")
		}
		if f.kind == kInt {
			if x != math.Trunc(x) {
				return 0, viol(ReasonInteger, "expected an integer, got %s", errs.Clip(v.Text))
			}
			if math.Abs(x) > 1<<53 {
				return 0, viol(ReasonOverflow, "integer %s is outside the exact range ±2^53", errs.Clip(v.Text))
			}
		}
		if f.Min != nil && x < *f.Min {
			return 0, viol(ReasonRange, "must be >= %v, got %s", *f.Min, errs.Clip(v.Text))
		}
		if f.Max != nil && x > *f.Max {
			return 0, viol(ReasonRange, "must be <= %v, got %s", *f.Max, errs.Clip(v.Text))
		}
		return x, nil
	case kBool:
		if v.Kind != Bool {
			return 0, viol(ReasonType, "expected true or false, got %s", kindName(v))
		}
		if v.Bool {
			return 1, nil
		}
		return 0, nil
	case kCategory:
		if v.Kind != String {
			return 0, viol(ReasonType, "expected a string (one of %s), got %s", strings.Join(f.Values, ", "), kindName(v))
		}
		i, ok := f.cats[v.Text]
		if !ok {
			return 0, viol(ReasonCategory, "unknown category %q (expected one of %s)", errs.Clip(v.Text), strings.Join(f.Values, ", "))
		}
		return float64(i), nil
	}
	return 0, fmt.Errorf("unsupported type")
}

func kindName(v Value) string {
	switch v.Kind {
	case Null:
		return "null"
	case Number:
		return "a number"
	case String:
		return "a string"
	case Bool:
		return "a boolean"
	case Array:
		return "an array"
	}
	return "an object or array"
}

// apply runs the field's steps on x and writes its feature column(s).
// A missing value (NaN) stays missing through every step.
func (f *field) apply(x float64, dst []float32) error {
	for _, o := range f.ops {
		if math.IsNaN(x) {
			break
		}
		switch o.kind {
		case opStandardize:
			x = (x - o.a) / o.b
		case opLog1p:
			if x <= -1 {
				return viol(ReasonRange, "log1p needs a value > -1, got %v", x)
			}
			x = math.Log1p(x)
		case opClip:
			x = math.Min(math.Max(x, o.a), o.b)
		case opBucketize:
			x = float64(sort.Search(len(o.bounds), func(i int) bool { return o.bounds[i] > x }))
		case opOrdinal:
		case opOnehot:
			for j := range dst {
				dst[j] = 0
			}
			dst[int(x)] = 1
			return nil
		}
	}
	if math.IsNaN(x) {
		for j := range dst {
			dst[j] = float32(math.NaN())
		}
		return nil
	}
	y := float32(x)
	if math.IsInf(float64(y), 0) {
		return viol(ReasonOverflow, "value %v overflows float32 after preprocessing", x)
	}
	dst[0] = y
	return nil
}

// valueOf converts a YAML-decoded scalar (golden examples, defaults) into a Value.
func valueOf(x any) (Value, error) {
	switch v := x.(type) {
	case nil:
		return Value{Kind: Null}, nil
	case bool:
		return Value{Kind: Bool, Bool: v}, nil
	case string:
		return Value{Kind: String, Text: v}, nil
	case int:
		return Value{Kind: Number, Text: strconv.Itoa(v)}, nil
	case int64:
		return Value{Kind: Number, Text: strconv.FormatInt(v, 10)}, nil
	case uint64:
		return Value{Kind: Number, Text: strconv.FormatUint(v, 10)}, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Value{}, fmt.Errorf("NaN and infinities are not allowed")
		}
		return Value{Kind: Number, Text: strconv.FormatFloat(v, 'g', -1, 64)}, nil
	case []any:
		arr := Value{Kind: Array, Items: make([]string, 0, len(v))}
		for _, e := range v {
			ev, err := valueOf(e)
			if err != nil {
				return Value{}, err
			}
			if ev.Kind != Number {
				return Value{Kind: Composite}, nil
			}
			arr.Items = append(arr.Items, ev.Text)
		}
		return arr, nil
	}
	return Value{Kind: Composite}, nil
}

// InstanceOf converts a YAML-decoded mapping (a golden example's instance)
// into an Instance, in key order.
func InstanceOf(keys []string, vals map[string]any) (Instance, error) {
	inst := make(Instance, 0, len(keys))
	for _, k := range keys {
		v, err := valueOf(vals[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		inst = append(inst, Member{Name: k, Value: v})
	}
	return inst, nil
}

// Columns reports whether the schema's rows are built from one value per
// field (float, int, bool and category fields: any schema but a sequence
// one), so that a transport holding its values as columns (OIP tensors)
// may build rows with FastRow instead of an Instance per row.
func (s *Schema) Columns() bool { return !s.seq }

// Passthrough reports whether field i's number reaches the row as
// float32(x) and is judged by nothing but being finite (and integral, for
// an int field): a float or int field without min, max or preprocessing.
// For such a field any float64 that rounds to the same float32 gives the
// same row and the same verdict, so a float32 element need not be read
// back from its shortest decimal (the OIP raw path uses it).
func (s *Schema) Passthrough(i int) bool {
	f := &s.fields[i]
	return (f.kind == kFloat || f.kind == kInt) && f.Min == nil && f.Max == nil && len(f.ops) == 0
}

// FieldIndex is the position of a declared field in Fields (false: none).
func (s *Schema) FieldIndex(name string) (int, bool) {
	i, ok := s.index[name]
	return i, ok
}

// Cell is one field's value in a row for FastRow: a number (float and int
// fields; X is what its literal reads as with strconv.ParseFloat, NaN if
// it does not read), a boolean (X is 0 or 1), a string (category fields;
// Text), or absent.
type Cell struct {
	X    float64
	Kind ValueKind // Number, Bool, String, or Null: absent
	Text string    // String: the value
}

// FastRow writes the preprocessed features of one row whose field i has
// the value cells[i] into dst, running the checks and steps Row runs on
// the instance those cells stand for (type, NaN and infinities,
// integrality, the ±2^53 range, min/max, a category's values, the steps'
// own limits). It
// reports false, leaving dst undefined, whenever Row would refuse that
// instance: the caller then calls Row on it for the error, so that every
// message stays Row's. A row FastRow accepts is the row Row writes.
func (s *Schema) FastRow(cells []Cell, dst []float32) bool {
	if s.seq || len(cells) != len(s.fields) || len(dst) != s.width {
		return false
	}
	for i := range s.fields {
		f := &s.fields[i]
		c := cells[i]
		var x float64
		switch c.Kind {
		case Null:
			switch {
			case f.hasDefault:
				x = f.def
			case f.Optional:
				x = math.NaN()
			default:
				return false
			}
		case Number:
			if f.kind != kFloat && f.kind != kInt {
				return false
			}
			x = c.X
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
			if f.kind == kInt && (x != math.Trunc(x) || math.Abs(x) > 1<<53) {
				return false
			}
			if f.Min != nil && x < *f.Min || f.Max != nil && x > *f.Max {
				return false
			}
		case Bool:
			if f.kind != kBool || (c.X != 0 && c.X != 1) {
				return false
			}
			x = c.X
		case String:
			if f.kind != kCategory {
				return false
			}
			j, ok := f.cats[c.Text]
			if !ok {
				return false
			}
			x = float64(j)
		default:
			return false
		}
		if f.apply(x, dst[f.offset:f.offset+f.width]) != nil {
			return false
		}
	}
	return true
}
