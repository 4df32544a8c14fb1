package oip

// This file is the fast path of tensors into the batch: for any schema
// but a sequence one (float, int, bool and category fields), the values
// of the request's tensors go into the batch's float32 rows without an
// Instance or a member slice per row. Raw tensors (gRPC
// raw_input_contents, REST binary data) are read from their bytes without
// a string per value; tensors of values (REST JSON data, gRPC typed
// contents, BYTES elements however sent) are read from those values. It
// keeps every rule of the instance path by construction rather than by
// imitation:
//
//   - each number is read as the instance path reads it: its literal is
//     the text the instance path's Value holds (a raw element's shortest
//     text, as rawValue gives it; a JSON number as sent; a typed
//     content's shortest text), and the float64 the schema judges is
//     strconv.ParseFloat of that literal, so min/max and integrality
//     decide as they do for /v1 (a FP32 0.1 is 0.1, not 0.100000001…);
//     a FP32 element is read back from its literal only for a field
//     where that can change the row or the verdict (min, max or a
//     preprocessing step: schema.Passthrough), since for any other
//     float32(x) is the element itself;
//   - a string is the instance path's string, and the schema's category
//     values map it (schema.FastRow);
//   - schema.FastRow runs the checks and steps of schema.Row on those
//     values and only says yes or no: a row it refuses is converted into
//     its Instance and given to Row, whose error is the answer, so every
//     message is the instance path's own;
//   - the input hash is built from the same literals and strings, in the
//     canonical JSON records.InputHash writes for the instances these
//     tensors stand for (members sorted by name), so records and
//     idempotency keys do not depend on the encoding a request came in.
//
// A sequence schema, or no schema (the version is not known yet), takes
// the instance path.

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
)

// tensorRows is gateway.Rows over checked tensors: the request's tensors
// (not modified after construction, so Build may run from several
// goroutines), each element's number as the schema reads it, and the
// input hash.
type tensorRows struct {
	ts    []Tensor
	n     int
	xs    []float64          // xs[r*len(ts)+k]: tensor k's element r as a number (BOOL: 0 or 1; BYTES: unused)
	kinds []schema.ValueKind // per tensor: Number, Bool or String
	// f32 marks the raw FP32 tensors, whose xs hold the element's own
	// value, float64(v): Build reads it back from its shortest decimal,
	// as the instance path would, only for a field where the two can
	// differ (not schema.Passthrough).
	f32  []bool
	hash string
}

// direct reports whether the tensors take the fast path with sch.
func direct(sch *schema.Schema) bool { return sch != nil && sch.Columns() }

// hashBufs reuses canonical-JSON buffers (as records.InputHash does).
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// newTensorRows reads checked tensors of n rows ([n] or [n,1] each): one
// pass over the elements that computes each number and the input hash.
func newTensorRows(ts []Tensor, n int) *tensorRows {
	nt := len(ts)
	tr := &tensorRows{ts: ts, n: n, xs: make([]float64, n*nt), kinds: make([]schema.ValueKind, nt), f32: make([]bool, nt)}
	var orderBuf [16]int
	order := orderBuf[:0] // members in the canonical JSON are sorted by name
	if nt <= len(orderBuf) {
		order = orderBuf[:nt]
	} else {
		order = make([]int, nt)
	}
	for k := range ts {
		order[k] = k
		tr.f32[k] = ts[k].Raw != nil && (ts[k].Datatype == FP32 || ts[k].Datatype == FP16 || ts[k].Datatype == BF16)
		switch ts[k].Datatype {
		case BOOL:
			tr.kinds[k] = schema.Bool
		case BYTES:
			tr.kinds[k] = schema.String
		default:
			tr.kinds[k] = schema.Number
		}
	}
	slices.SortStableFunc(order, func(x, y int) int { return strings.Compare(ts[x].Name, ts[y].Name) })
	bp := hashBufs.Get().(*[]byte)
	b := append((*bp)[:0], '[')
	var scratch [32]byte
	for r := 0; r < n; r++ {
		if r > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		for j, k := range order {
			if j > 0 {
				b = append(b, ',')
			}
			t := &ts[k]
			b = append(records.AppendCanonicalString(b, t.Name), ':')
			if t.Raw == nil {
				// A value as the instance path holds it.
				v := &t.Data[r]
				switch v.Kind {
				case schema.Bool:
					if v.Bool {
						tr.xs[r*nt+k] = 1
					}
					b = strconv.AppendBool(b, v.Bool)
				case schema.String:
					b = records.AppendCanonicalString(b, v.Text)
				default:
					x, err := strconv.ParseFloat(v.Text, 64)
					if err != nil {
						x = math.NaN() // refused by FastRow: Row names the error
					}
					tr.xs[r*nt+k] = x
					b = records.AppendCanonicalNumber(b, v.Text)
				}
				continue
			}
			raw := t.Raw
			if t.Datatype == BOOL {
				x := 0.0
				if raw[r] == 1 {
					x = 1
					b = append(b, "true"...)
				} else {
					b = append(b, "false"...)
				}
				tr.xs[r*nt+k] = x
				continue
			}
			// x is the element's own value; for a float32 (FP16, BF16,
			// FP32) Build reads lit's value back where it matters
			// (exactValue).
			x, lit, _ := rawNumber(t.Datatype, raw, int64(r), scratch[:0])
			tr.xs[r*nt+k] = x
			b = records.AppendCanonicalNumber(b, unsafe.String(unsafe.SliceData(lit), len(lit)))
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	tr.hash = records.HashCanonical(b)
	if cap(b) <= 4<<20 {
		*bp = b
		hashBufs.Put(bp)
	}
	return tr
}

// exactValue is what the instance path reads a FP32 element as:
// strconv.ParseFloat of its shortest decimal (a FP32 0.1 is 0.1, not
// 0.100000001…).
func exactValue(v float32) float64 {
	var scratch [32]byte
	lit := strconv.AppendFloat(scratch[:0], float64(v), 'g', -1, 32)
	if integerLiteral(lit) {
		return float64(v) // the literal is v's exact integer value
	}
	return parseLiteral(lit)
}

// integerLiteral reports whether a shortest FP32 literal is a plain
// integer ([-]digits): 'g' writes values from 1e6 up with an exponent, so
// such a literal is below 2^24 and is the element's exact value.
func integerLiteral(lit []byte) bool {
	for i, c := range lit {
		if c < '0' || c > '9' {
			if !(i == 0 && c == '-') {
				return false
			}
		}
	}
	return len(lit) > 0
}

// parseLiteral is strconv.ParseFloat of a literal AppendFloat wrote (NaN
// and infinities included), without copying it into a string.
func parseLiteral(lit []byte) float64 {
	x, _ := strconv.ParseFloat(unsafe.String(unsafe.SliceData(lit), len(lit)), 64)
	return x
}

func (tr *tensorRows) Len() int     { return tr.n }
func (tr *tensorRows) Hash() string { return tr.hash }

// Build writes the rows with sch: straight from the values when sch knows
// every tensor's field and is not a sequence schema, else through the
// instances (a version with another schema answered).
func (tr *tensorRows) Build(sch *schema.Schema, missing func(row []float32)) (runtime.Batch, error) {
	nf := sch.NumFields()
	var fieldBuf [16]int
	fieldOf := fieldBuf[:0]
	if len(tr.ts) <= len(fieldBuf) {
		fieldOf = fieldBuf[:len(tr.ts)]
	} else {
		fieldOf = make([]int, len(tr.ts))
	}
	ok := sch.Columns()
	var exactBuf [16]bool
	exact := exactBuf[:0] // per tensor: read its FP32 elements back from their decimals
	if len(tr.ts) <= len(exactBuf) {
		exact = exactBuf[:len(tr.ts)]
	} else {
		exact = make([]bool, len(tr.ts))
	}
	for k := range tr.ts {
		i, known := sch.FieldIndex(tr.ts[k].Name)
		ok = ok && known
		fieldOf[k] = i
		exact[k] = known && tr.f32[k] && !sch.Passthrough(i)
	}
	if !ok {
		return instanceBuild(sch, tr.Instances(), missing)
	}
	w, nt := sch.Width(), len(tr.ts)
	rows := runtime.Batch{Rows: tr.n, Cols: w, Data: make([]float32, tr.n*w)}
	var cellBuf [16]schema.Cell
	cells := cellBuf[:0]
	if nf <= len(cellBuf) {
		cells = cellBuf[:nf]
	} else {
		cells = make([]schema.Cell, nf)
	}
	for r := 0; r < tr.n; r++ {
		clear(cells)
		for k, i := range fieldOf {
			x := tr.xs[r*nt+k]
			if exact[k] {
				x = exactValue(float32(x))
			}
			cells[i] = schema.Cell{X: x, Kind: tr.kinds[k]}
			if tr.kinds[k] == schema.String {
				cells[i].Text = tr.ts[k].Data[r].Text
			}
		}
		row := rows.Data[r*w : (r+1)*w]
		if !sch.FastRow(cells, row) {
			// Refused (or a case FastRow leaves to Row): Row on this
			// row's instance gives the instance path's own error.
			if err := sch.RowAt(schema.Path{Prefix: "instances", Index: r}, tr.instance(r), row); err != nil {
				return runtime.Batch{}, err
			}
		}
		if missing != nil {
			missing(row)
		}
	}
	return rows, nil
}

// instanceBuild is the gateway's instance path (buildRows) for a schema
// the fast path does not serve.
func instanceBuild(sch *schema.Schema, insts []schema.Instance, missing func(row []float32)) (runtime.Batch, error) {
	return gateway.BuildRows(sch, insts, missing)
}

// instance is row r as the instance path builds it: one member per tensor,
// in tensor order.
func (tr *tensorRows) instance(r int) schema.Instance {
	inst := make(schema.Instance, len(tr.ts))
	for k := range tr.ts {
		t := &tr.ts[k]
		v := schema.Value{}
		if t.Raw != nil {
			v = rawValue(t.Datatype, t.Raw, int64(r))
		} else {
			v = t.Data[r]
		}
		inst[k] = schema.Member{Name: t.Name, Value: v}
	}
	return inst
}

// Instances is every row's instance (sampled record inputs, a version
// with another schema).
func (tr *tensorRows) Instances() []schema.Instance {
	insts := make([]schema.Instance, tr.n)
	for r := range insts {
		insts[r] = tr.instance(r)
	}
	return insts
}
