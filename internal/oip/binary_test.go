package oip

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
)

func le32(xs ...float32) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func le64i(xs ...int64) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

// binBody is a binary request: the JSON header, then the bytes; it
// returns the body and its header length.
func binBody(header string, data ...[]byte) ([]byte, string) {
	b := []byte(header)
	for _, d := range data {
		b = append(b, d...)
	}
	return b, strconv.Itoa(len(header))
}

// TestDecodeBinaryRefusals: every way a binary body can be wrong is a 400
// naming the input (or the header) and the fix.
func TestDecodeBinaryRefusals(t *testing.T) {
	two := `{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]}`
	hdr := func(h string) func([]byte, string) ([]byte, string) {
		return func(b []byte, _ string) ([]byte, string) { return b, h }
	}
	cases := []struct {
		name   string
		header string
		data   [][]byte
		fix    func([]byte, string) ([]byte, string) // changes the body or header value
		want   string
	}{
		{"size below shape × datatype", `{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":4}}]}`, [][]byte{le32(1)}, nil,
			`input "a": binary_data_size is 4, but shape [2] of FP32 needs 8 bytes (2 elements × 4): send exactly that many`},
		{"size above shape × datatype", `{"inputs":[{"name":"a","shape":[1],"datatype":"INT64","parameters":{"binary_data_size":16}}]}`, [][]byte{le64i(1, 2)}, nil,
			`input "a": binary_data_size is 16, but shape [1] of INT64 needs 8 bytes`},
		{"truncated body", two, [][]byte{le32(1)}, nil,
			`input "a": binary_data_size 8 runs past the end of the body: 4 bytes of binary data remain`},
		{"truncated second input", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}},{"name":"b","shape":[2],"datatype":"FP64","parameters":{"binary_data_size":16}}]}`,
			[][]byte{le32(1), le32(1, 2, 3)}, nil, `input "b": binary_data_size 16 runs past the end of the body: 12 bytes of binary data remain`},
		{"header longer than body", two, [][]byte{le32(1, 2)}, hdr("9999"),
			`Inference-Header-Content-Length: 9999 is longer than the body (`},
		{"header not a number", two, [][]byte{le32(1, 2)}, hdr("12a"), `Inference-Header-Content-Length: "12a" is not a byte count`},
		{"header negative", two, [][]byte{le32(1, 2)}, hdr("-5"), `Inference-Header-Content-Length: "-5" is not a byte count`},
		{"header zero", two, [][]byte{le32(1, 2)}, hdr("0"), `Inference-Header-Content-Length: must be at least 1`},
		{"header huge", two, [][]byte{le32(1, 2)}, hdr("99999999999999999999"), `"99999999999999999999" is not a byte count`},
		{"header cuts the JSON", two, [][]byte{le32(1, 2)}, func(b []byte, h string) ([]byte, string) { return b, "20" }, `malformed JSON`},
		{"header takes the bytes", two, [][]byte{le32(1, 2)}, func(b []byte, h string) ([]byte, string) { return b, strconv.Itoa(len(b)) }, `malformed JSON`},
		{"unknown datatype", `{"inputs":[{"name":"a","shape":[2],"datatype":"FP8","parameters":{"binary_data_size":4}}]}`, [][]byte{{0, 0, 0, 0}}, nil,
			`input "a": datatype "FP8" is not supported (use BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, FP16, BF16, FP32, FP64 or BYTES)`},
		{"FP16 sized as 2 bytes an element", `{"inputs":[{"name":"a","shape":[2],"datatype":"FP16","parameters":{"binary_data_size":8}}]}`, [][]byte{{0, 0, 0, 0, 0, 0, 0, 0}}, nil,
			`input "a": binary_data_size is 8, but shape [2] of FP16 needs 4 bytes (2 elements × 2): send exactly that many`},
		{"extra bytes", two, [][]byte{le32(1, 2), {7}}, nil,
			`the body has 1 bytes after the inputs' binary data (9 bytes follow the `},
		{"bytes but no binary input", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]}`, [][]byte{le32(1)}, nil,
			`the body has 4 bytes after the inputs' binary data`},
		{"missing binary_data_size with a short body", `{"inputs":[{"name":"a","shape":[2],"datatype":"FP32"}]}`, [][]byte{le32(1)}, nil,
			`input "a": data is required (or parameters.binary_data_size, with its bytes after the JSON header)`},
		{"both data and binary_data_size", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4}}]}`, [][]byte{le32(1)}, nil,
			`input "a": has both data and binary_data_size`},
		{"negative binary_data_size", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":-4}}]}`, nil, nil,
			`input "a": binary_data_size must be a non-negative integer (bytes)`},
		{"binary_data_size a string", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":"4"}}]}`, [][]byte{le32(1)}, nil,
			`input "a": binary_data_size must be a non-negative integer (bytes)`},
		{"an unknown input parameter is ignored, so the bytes have no size", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_sise":4}}]}`, [][]byte{le32(1)}, nil,
			`input "a": data is required (or parameters.binary_data_size, with its bytes after the JSON header)`},
		{"shared memory input", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"shared_memory_region":"r"}}]}`, [][]byte{le32(1)}, nil,
			`input "a": parameter shared_memory_region: shared memory is not supported; send the tensor's elements in the request`},
		{"mismatched shape", `{"inputs":[{"name":"a","shape":[2,2],"datatype":"FP32","parameters":{"binary_data_size":8}}]}`, [][]byte{le32(1, 2)}, nil,
			`input "a": binary_data_size is 8, but shape [2,2] of FP32 needs 16 bytes`},
		{"no shape", `{"inputs":[{"name":"a","datatype":"FP32","parameters":{"binary_data_size":4}}]}`, [][]byte{le32(1)}, nil,
			`input "a": shape is required`},
		{"bool byte 2", `{"inputs":[{"name":"b","shape":[2],"datatype":"BOOL","parameters":{"binary_data_size":2}}]}`, [][]byte{{1, 2}}, nil,
			`input "b": element 1: BOOL byte 2 is neither 0 nor 1`},
		{"bytes element past its size", `{"inputs":[{"name":"c","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}}]}`, [][]byte{{9, 0, 0, 0, 'U', 'S'}}, nil,
			`input "c": binary data element 0 claims 9 bytes, 2 remain`},
		{"bytes shorter than its elements", `{"inputs":[{"name":"c","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":6}}]}`, [][]byte{{2, 0, 0, 0, 'U', 'S'}}, nil,
			`input "c": binary data ends inside element 1's length prefix`},
		{"bytes left after its elements", `{"inputs":[{"name":"c","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":7}}]}`, [][]byte{{2, 0, 0, 0, 'U', 'S', 'X'}}, nil,
			`input "c": binary data has 1 bytes after its 1 elements`},
		{"binary_data_output not a bool", `{"parameters":{"binary_data_output":1},"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]}`, [][]byte{le32(1)}, nil,
			`parameters.binary_data_output: must be true or false`},
		{"output binary_data not a bool", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}],"outputs":[{"name":"y","parameters":{"binary_data":"yes"}}]}`, [][]byte{le32(1)}, nil,
			`outputs[0]: binary_data must be true or false`},
		{"output unknown parameter", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}],"outputs":[{"name":"y","parameters":{"classification":2}}]}`, [][]byte{le32(1)}, nil,
			`outputs[0]: parameter classification is not supported; ask for the output's values (a model.yaml postprocess: topk answers classes)`},
		{"trailing JSON inside the header", `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]} {}`, [][]byte{le32(1)}, nil,
			`malformed JSON: data after the top-level object`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, h := binBody(c.header, c.data...)
			if c.fix != nil {
				body, h = c.fix(body, h)
			}
			_, err := DecodeBinary(body, h, time.Minute)
			if err == nil {
				t.Fatalf("accepted; want %q", c.want)
			}
			if errs.CodeOf(err) != errs.InvalidArgument {
				t.Fatalf("code %s: %v", errs.CodeOf(err), err)
			}
			if msg := Message(errs.As(err)); !strings.Contains(msg, c.want) {
				t.Fatalf("message %q\nwant it to contain %q", msg, c.want)
			}
		})
	}
}

// TestBinaryDataSizeNeedsHeader: a plain JSON body may not name binary
// data it cannot carry.
func TestBinaryDataSizeNeedsHeader(t *testing.T) {
	_, err := DecodeJSON([]byte(`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]}`), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "binary_data_size needs the Inference-Header-Content-Length header") {
		t.Fatalf("got %v", err)
	}
}

// TestDecodeBinaryMixed: binary and JSON inputs in one body, in order;
// BYTES as length-prefixed elements; the binary ones stay raw.
func TestDecodeBinaryMixed(t *testing.T) {
	hdr := `{"id":"m-1","parameters":{"binary_data_output":true},"inputs":[` +
		`{"name":"amount","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},` +
		`{"name":"accountAgeDays","shape":[2,1],"datatype":"INT64","data":[[91],[2400]]},` +
		`{"name":"country","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":12}},` +
		`{"name":"flag","shape":[2],"datatype":"BOOL","parameters":{"binary_data_size":2}}],` +
		`"outputs":[{"name":"riskScore","parameters":{"binary_data":false}}]}`
	// BYTES: each element a 4-byte length, then its bytes.
	body, h := binBody(hdr, le32(800, 12.5), []byte{2, 0, 0, 0, 'U', 'S', 2, 0, 0, 0, 'G', 'B'}, []byte{1, 0})
	req, err := DecodeBinary(body, h, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if req.ID != "m-1" || !req.BinaryOutput || len(req.OutputBinary) != 1 || req.OutputBinary[0] == nil || *req.OutputBinary[0] {
		t.Fatalf("request %+v", req)
	}
	a, c, f := req.Inputs[0], req.Inputs[2], req.Inputs[3]
	if !bytes.Equal(a.Raw, le32(800, 12.5)) || a.Data != nil || req.Inputs[1].Raw != nil || len(req.Inputs[1].Data) != 2 {
		t.Fatalf("amount %+v age %+v", a, req.Inputs[1])
	}
	if c.Raw != nil || len(c.Data) != 2 || c.Data[0].Text != "US" || c.Data[1].Text != "GB" || !bytes.Equal(f.Raw, []byte{1, 0}) {
		t.Fatalf("country %+v flag %+v", c, f)
	}
	insts, err := Instances(req.Inputs, nil)
	if err != nil || len(insts) != 2 || insts[0][0].Value.Text != "800" || insts[1][0].Value.Text != "12.5" || !insts[0][3].Value.Bool || insts[1][3].Value.Bool {
		t.Fatalf("instances %v %v", insts, err)
	}
}

// TestEncodeBinary: binary outputs carry binary_data_size and follow the
// JSON header in output order; JSON outputs keep their data.
func TestEncodeBinary(t *testing.T) {
	p := &gateway.Prediction{Model: "m", Version: 3, InputSchema: "m-input@1", Outputs: []string{"y0", "y1"},
		Out: runtime.Output{Rows: 2, Cols: 2, Data: []float32{1, 2, 3, float32(math.NaN())}}}
	b, h := EncodeBinary(p, "r-1", []int{1, 0}, []bool{true, false})
	var head struct {
		ModelVersion string `json:"model_version"`
		Outputs      []struct {
			Name       string
			Shape      []int
			Parameters map[string]int
			Data       []float64
		}
	}
	if err := json.Unmarshal(b[:h], &head); err != nil {
		t.Fatalf("header %q: %v", b[:h], err)
	}
	if head.ModelVersion != "3" || len(head.Outputs) != 2 || head.Outputs[0].Name != "y1" || head.Outputs[0].Parameters["binary_data_size"] != 8 ||
		head.Outputs[0].Data != nil || head.Outputs[1].Name != "y0" || len(head.Outputs[1].Data) != 2 || head.Outputs[1].Data[1] != 3 {
		t.Fatalf("header %s", b[:h])
	}
	rest := b[h:]
	if len(rest) != 8 || math.Float32frombits(binary.LittleEndian.Uint32(rest)) != 2 || !math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(rest[4:])))) {
		t.Fatalf("binary data % x", rest)
	}
	if j := EncodeJSON(p, "r-1", []int{1, 0}); !bytes.Contains(j, []byte(`"data":[2,null]`)) {
		t.Fatalf("json %s", j)
	}
}

// directSchema has every field kind and step the fast path takes.
func directSchema(t testing.TB) *schema.Schema {
	f := func(x float64) *float64 { return &x }
	sch, probs := schema.Compile([]schema.Field{
		{Name: "x", Type: schema.TypeFloat, Min: f(-100), Max: f(100)},
		{Name: "n", Type: schema.TypeInt, Min: f(0)},
		{Name: "b", Type: schema.TypeBool, Optional: true},
		{Name: "o", Type: schema.TypeFloat, Optional: true},
		{Name: "d", Type: schema.TypeInt, Default: 7},
		{Name: "z", Type: schema.TypeFloat},
		{Name: "c", Type: schema.TypeCategory, Values: []string{"US", "GB", "DE", "é<&>"}, Optional: true},
		{Name: "k", Type: schema.TypeCategory, Values: []string{"lo", "hi"}, Default: "hi"},
		{Name: "p", Type: schema.TypeFloat, Optional: true}, // passthrough: no min, max or step
	}, []schema.Step{
		{Op: schema.OpLog1p, Field: "n"},
		{Op: schema.OpStandardize, Field: "x", Mean: f(0.3), Std: f(0.7)},
		{Op: schema.OpBucketize, Field: "z", Boundaries: []float64{-1, 0, 0.1, 5}},
		{Op: schema.OpOnehot, Field: "z"},
		{Op: schema.OpClip, Field: "o", Min: f(-1), Max: f(1)},
		{Op: schema.OpOnehot, Field: "c"},
		{Op: schema.OpOrdinal, Field: "k"},
	})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return sch
}

// sameAsInstances checks the fast path against the instance path for the
// tensors ts: the same input hash, and the same rows or the same error.
// It says which it was: refused before either path, built, or refused by
// both with one error.
func sameAsInstances(t *testing.T, ts []Tensor, sch *schema.Schema) string {
	t.Helper()
	n, err := checkInputs(ts, sch)
	if err != nil {
		return "checked"
	}
	tr := newTensorRows(ts, int(n))
	slow := make([]Tensor, len(ts))
	copy(slow, ts)
	insts, err := Instances(slow, sch)
	if err != nil {
		t.Fatalf("instances of checked tensors: %v", err)
	}
	if h := records.InputHash(insts); tr.Hash() != h {
		t.Fatalf("hash %s, instances hash %s\ncanonical %s", tr.Hash(), h, records.CanonicalJSON(insts))
	}
	fast, ferr := tr.Build(sch, nil)
	want, werr := gateway.BuildRows(sch, insts, nil)
	if (ferr == nil) != (werr == nil) || ferr != nil && (ferr.Error() != werr.Error() || errs.As(ferr).Reason != errs.As(werr).Reason) {
		t.Fatalf("fast error %v, instance error %v", ferr, werr)
	}
	if ferr == nil && (fast.Rows != want.Rows || fast.Cols != want.Cols || !sameBits(fast.Data, want.Data)) {
		t.Fatalf("fast rows %v\ninstance rows %v", fast.Data, want.Data)
	}
	if ferr != nil {
		return "refused"
	}
	return "built"
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return false
		}
	}
	return true
}

// TestDirectEqualsInstances: random tensors (every datatype a field takes,
// awkward values among them; raw, as typed contents, as JSON literals;
// categories as BYTES) give the same rows, errors and input hash straight
// as through instances.
func TestDirectEqualsInstances(t *testing.T) {
	sch := directSchema(t)
	rng := rand.New(rand.NewPCG(12, 2))
	awkward := []float64{0, math.Copysign(0, -1), 0.1, -0.1, 1e6, 999999, 123456789, 1e-7, 100, 100.00001, -100, 1 << 53, 1<<53 + 2, -1,
		math.NaN(), math.Inf(1), math.Inf(-1), 0.30000001, 16777217, 3.4e38, 1e300, 2.5, 1e21, 7}
	val := func() float64 {
		switch rng.IntN(4) {
		case 0:
			return awkward[rng.IntN(len(awkward))]
		case 1:
			return float64(rng.IntN(200) - 20)
		case 2:
			return math.Round(rng.NormFloat64()*1000) / 100
		}
		return rng.NormFloat64() * 30
	}
	encode := func(dt string, n int) []byte {
		var b []byte
		for range n {
			x := val()
			switch dt {
			case FP32:
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(x)))
			case FP64:
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
			case INT32:
				b = binary.LittleEndian.AppendUint32(b, uint32(int32(max(min(x, math.MaxInt32), math.MinInt32))))
			case INT64:
				if x != x {
					x = 0
				}
				b = binary.LittleEndian.AppendUint64(b, uint64(int64(max(min(x, 1<<62), -1<<62))))
			case BOOL:
				b = append(b, byte(rng.IntN(2)))
			}
		}
		return b
	}
	// JSON literals as a client writes them (REST data).
	literals := []string{"1", "1.0", "1e2", "-0", "0", "0.1", "0.10000001", "100", "100.00001", "-100.0", "1E-7", "2.5", "1e400", "-1e-400",
		"12345678901234567890", "9007199254740993", "0.30000001", "7", "-3", "1.5e1", "3.0e0"}
	categories := []string{"US", "GB", "DE", "é<&>", "FR", "", "us", "lo", "hi", "\u00e9", `\`, "a\x00b"}
	numeric := []string{FP32, FP64, INT32, INT64}
	seen := map[string]int{}
	for iter := range 4000 {
		n := 1 + rng.IntN(4)
		var ts []Tensor
		for _, name := range []string{"z", "x", "n", "b", "o", "d", "c", "k", "p"} {
			if (name == "b" || name == "o" || name == "d" || name == "c" || name == "k" || name == "p") && rng.IntN(3) == 0 {
				continue // optional and default fields left out
			}
			dt := numeric[rng.IntN(4)]
			switch name {
			case "b":
				dt = BOOL
			case "c", "k":
				dt = BYTES
			}
			if iter%97 == 0 && name == "x" {
				dt = BOOL // a datatype that does not fit: refused by checkInputs
			}
			if iter%89 == 0 && name == "c" {
				dt = FP32 // a number for a category
			}
			shape := []int64{int64(n)}
			if rng.IntN(2) == 0 {
				shape = append(shape, 1)
			}
			if dt == BYTES {
				data := make([]schema.Value, n)
				for i := range data {
					c := categories[rng.IntN(len(categories))]
					if rng.IntN(4) > 0 {
						c = categories[rng.IntN(4)] // mostly a value of c's
					}
					if name == "k" && rng.IntN(4) > 0 {
						c = []string{"lo", "hi"}[rng.IntN(2)]
					}
					data[i] = schema.Value{Kind: schema.String, Text: c}
				}
				ts = append(ts, Tensor{Name: name, Datatype: dt, Shape: shape, Data: data})
				continue
			}
			tn := Tensor{Name: name, Datatype: dt, Shape: shape, Raw: encode(dt, n), RawField: "binary data"}
			switch rng.IntN(3) {
			case 1: // typed contents: the values of the raw elements
				if err := materialize(&tn); err != nil {
					t.Fatal(err)
				}
			case 2: // JSON data
				if dt == BOOL {
					if err := materialize(&tn); err != nil {
						t.Fatal(err)
					}
					break
				}
				tn.Raw, tn.Data = nil, make([]schema.Value, n)
				for i := range tn.Data {
					lit := literals[rng.IntN(len(literals))]
					if (dt == INT32 || dt == INT64) && rng.IntN(4) > 0 {
						lit = strconv.Itoa(rng.IntN(50)) // mostly an integer INT tensors take
					}
					tn.Data[i] = schema.Value{Kind: schema.Number, Text: lit}
				}
			}
			ts = append(ts, tn)
		}
		rng.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
		seen[sameAsInstances(t, ts, sch)]++
	}
	if seen["checked"] < 20 || seen["refused"] < 300 || seen["built"] < 300 {
		t.Fatalf("outcomes %v: the cases do not exercise every path", seen)
	}
	t.Logf("outcomes %v", seen)
}

// TestDirectOtherSchema: rows built for one schema and answered by a
// version with another go through that version's rules (a category
// schema: the instance path; an unknown field: its message).
func TestDirectOtherSchema(t *testing.T) {
	ts := []Tensor{{Name: "x", Datatype: FP32, Shape: []int64{1}, Raw: le32(0.5)}, {Name: "n", Datatype: INT64, Shape: []int64{1}, Raw: le64i(3)},
		{Name: "z", Datatype: FP32, Shape: []int64{1}, Raw: le32(2)}}
	tr := newTensorRows(ts, 1)
	other, _ := schema.Compile([]schema.Field{{Name: "x", Type: schema.TypeFloat}}, nil)
	_, err := tr.Build(other, nil)
	if err == nil || Message(errs.As(err)) != `input "n" row 0: unknown field (expected: x)` {
		t.Fatalf("got %v", err)
	}
	rows, err := tr.Build(directSchema(t), nil)
	if err != nil || rows.Rows != 1 {
		t.Fatalf("rows %+v %v", rows, err)
	}
}

// FuzzBinaryInfer: the binary REST decoder never panics, refuses only
// with invalid_argument, and whatever it accepts converts to instances
// and, for a numeric schema, gives the same rows, errors and input hash
// straight as through instances.
func FuzzBinaryInfer(f *testing.F) {
	seed := func(hdr string, data ...[]byte) {
		b, h := binBody(hdr, data...)
		f.Add(b, h)
	}
	seed(`{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},{"name":"n","shape":[2,1],"datatype":"INT64","parameters":{"binary_data_size":16}},{"name":"z","shape":[2],"datatype":"FP64","parameters":{"binary_data_size":16}}]}`,
		le32(0.5, -3), le64i(4, 0), le64i(int64(math.Float64bits(0.05)), int64(math.Float64bits(7))))
	seed(`{"id":"a","parameters":{"binary_data_output":true,"deadline_ms":20},"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},{"name":"b","shape":[1],"datatype":"BOOL","parameters":{"binary_data_size":1}},{"name":"n","shape":[1],"datatype":"INT32","parameters":{"binary_data_size":4}},{"name":"z","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`,
		[]byte{1}, []byte{5, 0, 0, 0}, le32(float32(math.NaN())))
	seed(`{"inputs":[{"name":"c","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":10}}]}`, []byte{2, 0, 0, 0, 'U', 'S', 0, 0, 0, 0})
	seed(`{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]}`, le32(1), []byte{9})
	f.Add([]byte(`{"inputs":[]}`), "13")
	f.Add([]byte(`{}`), "3")
	sch := directSchema(f)
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		req, err := DecodeBinary(body, header, time.Minute)
		if err != nil {
			if c := errs.CodeOf(err); c != errs.InvalidArgument {
				t.Fatalf("code %s: %v", c, err)
			}
			return
		}
		if direct(sch) {
			sameAsInstances(t, req.Inputs, sch)
		}
		for _, s := range []*schema.Schema{nil, sch} {
			ts := make([]Tensor, len(req.Inputs))
			copy(ts, req.Inputs)
			if _, err := Instances(ts, s); err != nil && errs.CodeOf(err) != errs.InvalidArgument {
				t.Fatalf("instances: %v", err)
			}
		}
	})
}

// TestHeaderLengthBounds: the header is a plain decimal count from 1 to
// the body's length.
func TestHeaderLengthBounds(t *testing.T) {
	for _, c := range []struct {
		h    string
		body int
		ok   bool
	}{{"1", 1, true}, {"10", 10, true}, {"11", 10, false}, {"+1", 10, false}, {" 1", 10, false}, {"1.0", 10, false}, {"0x1", 10, false}, {"", 10, false}, {"007", 10, true}} {
		if _, err := headerLength(c.h, c.body); (err == nil) != c.ok {
			t.Errorf("%q of %d: %v", c.h, c.body, err)
		}
	}
}

// TestAppendEncoders: AppendJSON and AppendBinary write after what the
// buffer holds exactly what EncodeJSON and EncodeBinary write (the header
// length counted from the answer's start), and a warm buffer costs no
// allocation, however many rows (output names without characters to
// escape).
func TestAppendEncoders(t *testing.T) {
	n := 1000
	p := &gateway.Prediction{Model: "m", Version: 3, InputSchema: "m-input@1", Outputs: []string{"y0", "é<1>"},
		Out: runtime.Output{Rows: n, Cols: 2, Data: make([]float32, 2*n)}}
	for i := range p.Out.Data {
		p.Out.Data[i] = float32(i) / 7
	}
	p.Out.Data[5] = float32(math.Inf(1))
	cols, bin := []int{1, 0}, []bool{true, false}
	prefix := []byte("previous answer")
	j := AppendJSON(append([]byte(nil), prefix...), p, "r-1", cols)
	if !bytes.Equal(j[len(prefix):], EncodeJSON(p, "r-1", cols)) || !bytes.HasPrefix(j, prefix) {
		t.Fatalf("AppendJSON differs from EncodeJSON")
	}
	var head struct{ Outputs []struct{ Name string } }
	if err := json.Unmarshal(j[len(prefix):], &head); err != nil || head.Outputs[0].Name != "é<1>" {
		t.Fatalf("%v %+v", err, head)
	}
	b, h := AppendBinary(append([]byte(nil), prefix...), p, "r-1", cols, bin)
	eb, eh := EncodeBinary(p, "r-1", cols, bin)
	if h != eh || !bytes.Equal(b[len(prefix):], eb) {
		t.Fatalf("AppendBinary differs from EncodeBinary (header %d, %d)", h, eh)
	}
	p.Outputs[1] = "y1" // a name to escape goes through encoding/json
	buf := make([]byte, 0, 64<<10)
	if a := testing.AllocsPerRun(20, func() { buf = AppendJSON(buf[:0], p, "r-1", cols) }); a != 0 {
		t.Errorf("AppendJSON into a warm buffer: %v allocations", a)
	}
	if a := testing.AllocsPerRun(20, func() { buf, _ = AppendBinary(buf[:0], p, "r-1", cols, bin) }); a != 0 {
		t.Errorf("AppendBinary into a warm buffer: %v allocations", a)
	}
}

// A FP32 element is judged as its shortest decimal, on the fast path as on
// the instance path, where that can matter: float32(0.1) is 0.1 for a
// field with max 0.1 (its float64 value, 0.10000000149…, is not), while a
// passthrough field takes the element as it is.
func TestRawFP32ReadAsItsDecimal(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	sch, probs := schema.Compile([]schema.Field{{Name: "m", Type: schema.TypeFloat, Max: f(0.1)}, {Name: "p", Type: schema.TypeFloat}}, nil)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	ts := []Tensor{{Name: "m", Datatype: FP32, Shape: []int64{2}, Raw: le32(0.1, 0.25)}, {Name: "p", Datatype: FP32, Shape: []int64{2}, Raw: le32(0.1, 0.1)}}
	_, err := newTensorRows(ts, 2).Build(sch, nil)
	if err == nil || !strings.Contains(err.Error(), "instances[1].m: must be <= 0.1, got 0.25") {
		t.Fatalf("0.25 over max 0.1 in row 1: got %v", err)
	}
	ts[0].Raw = le32(0.1, 0.1)
	rows, err := newTensorRows(ts, 2).Build(sch, nil)
	if err != nil {
		t.Fatalf("FP32 0.1 with max 0.1: %v", err)
	}
	for i, x := range rows.Data {
		if x != float32(0.1) {
			t.Fatalf("row value %d = %v, want float32(0.1)", i, x)
		}
	}
}
