package server

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/schema"
)

// decodeBoth runs the token decoder (the reference) and the scanner on body.
func decodeBoth(body []byte) (ref, got *predictBody, refErr, gotErr error) {
	ref, refErr = decodePredictTokens(body, time.Minute)
	refErr = schema.LocateJSON(body, refErr)
	got, gotErr = decodePredict(body, time.Minute)
	return
}

// sameErr compares everything a caller can see of two errors.
func sameErr(a, b error) string {
	if (a == nil) != (b == nil) {
		return fmt.Sprintf("error %v, want %v", b, a)
	}
	if a == nil {
		return ""
	}
	ea, eb := errs.As(a), errs.As(b)
	if ea.Code != eb.Code || ea.Field != eb.Field || ea.Message != eb.Message || ea.Reason != eb.Reason || a.Error() != b.Error() {
		return fmt.Sprintf("error %+v, want %+v", *eb, *ea)
	}
	if (ea.Err == nil) != (eb.Err == nil) || ea.Err != nil && ea.Err.Error() != eb.Err.Error() {
		return fmt.Sprintf("cause %v, want %v", eb.Err, ea.Err)
	}
	return ""
}

// seedCorpus adds the committed corpus of another fuzz target.
func seedCorpus(f *testing.F, name string) {
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", name, "*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], "[]byte(") {
			continue
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		f.Add([]byte(s))
	}
}

// sameCases are bodies that reach every rule of the token decoder.
var sameCases = []string{
	``, ` `, `{`, `}`, `[`, `]`, `"x"`, `12x`, `nul`, `notjson`, `{}`, `{} x`, `{}{}`, "{}\n\t ",
	`{"instances":[]}`, `{"instances":[{}]}`, `{"instances":[{},{}]}`, `{"instances":{}}`, `{"instances":1}`,
	`{"instances":[1]}`, `{"instances":[[1]]}`, `{"instances":[{"a":1,"a":2}]}`, `{"instances":[{"a":{}}]}`,
	`{"instances":[{"a":[]}]}`, `{"instances":[{"a":[1,2.5,-3e2]}]}`, `{"instances":[{"a":[1,[2]]}]}`,
	`{"instances":[{"a":[1,{}]}]}`, `{"instances":[{"a":[null]}]}`, `{"instances":[{"a":[true]}]}`, `{"instances":[{"a":["x"]}]}`,
	`{"instances":[{"a":[1 2]}]}`, `{"instances":[{"a":[1,]}]}`, `{"instances":[{"a":[,1]}]}`, `{"instances":[{"a":[1`,
	`{"instances":[{"a":01}]}`, `{"instances":[{"a":-}]}`, `{"instances":[{"a":-x}]}`, `{"instances":[{"a":1.}]}`, `{"instances":[{"a":1.e5}]}`,
	`{"instances":[{"a":1e}]}`, `{"instances":[{"a":1e+}]}`, `{"instances":[{"a":1E-7}]}`, `{"instances":[{"a":-0.0e0}]}`, `{"instances":[{"a":1e400}]}`,
	`{"instances":[{"a":NaN}]}`, `{"instances":[{"a":Infinity}]}`, `{"instances":[{"a":-Infinity}]}`, `{"instances":[{"a":tru}]}`, `{"instances":[{"a":trux}]}`,
	`{"instances":[{"a":truex}]}`, `{"instances":[{"a":fals}]}`, `{"instances":[{"a":nulL}]}`, `{"instances":[{"a":true,"b":false,"c":null}]}`,
	`{"instances":[{"a":"x\u00e9\ud83d\ude00\ud800 \"\\\/\b\f\n\r\t"}]}`, `{"instances":[{"a":"\x"}]}`, `{"instances":[{"a":"\u12g4"}]}`,
	"{\"instances\":[{\"a\":\"\x01\"}]}", "{\"instances\":[{\"a\":\"\xff\xfe\"}]}", "{\"instances\":[{\"\xc3\":1}]}", "{\"instances\":[{\"a\":\xff}]}",
	`{"instances":[{"a":"abc`, `{"instances":[{"a":"abc\`, `{"instances":[{"a":"\u12`, `{"instances":[{"a" 1}]}`, `{"instances":[{"a"::1}]}`,
	`{"instances":[{1:1}]}`, `{"instances":[{,}]}`, `{"instances":[{"a":1,}]}`, `{"instances":[{"a":1]}]}`, `{"instances":[{"a":1}}`, `{"instances":[{"a":1}]`,
	`{"instances":[{"a":1}],}`, `{"instances":[{"a":1}],"x":1}`, `{"instances":[],"instances":[]}`, `{"x":1}`, `{"deadlineMs":1}`,
	`{"instances":[],"deadlineMs":"1"}`, `{"instances":[],"deadlineMs":0}`, `{"instances":[],"deadlineMs":-1}`, `{"instances":[],"deadlineMs":0.0001}`,
	`{"instances":[],"deadlineMs":1e9}`, `{"instances":[],"deadlineMs":1e999}`, `{"instances":[],"deadlineMs":2.5}`, `{"instances":[],"deadlineMs":[1]}`,
	`{"instances":[],"routingKey":""}`, `{"instances":[],"routingKey":"k"}`, `{"instances":[],"routingKey":1}`, `{"instances":[],"routingKey":{"a":1}}`,
	`{"instances":[],"deadlineMs":1,"deadlineMs":2}`, "{\"instances\" :\n [ {\"a\" : 1 } ,\r\n{\"b\":\"c\"} ] }  \n", `{"instances":[{"a":1}]} x`,
	`{"instances":[{"a":1}]}]`, "{\"instances\":[\n  {\"amount\": NaN}]}", `{"instances":[{"a":"` + strings.Repeat("é", 100) + `":1}]}`,
	`{"` + strings.Repeat("k", 300) + `":1}`, `{"instances":[{"` + strings.Repeat("k", 300) + `":[1,x]}]}`, `{"instances":[{"a":1,"b":2,"a":3}]}`,
	`{"instances":[{"a":1,"b":2},{"a":1,"a":2}]}`, `{"instances":[{"a":1,"b":2},{"b":1,"b":2}]}`, `{"instances":[{"a":1,"b":2},{"a":1,"b":2,"a":3}]}`,
	`{"instances":[{"a":1,"b":2},{"a":1},{"a":1,"a":2}]}`, `{"instances":[{"a":1,"b":2},{"b":2,"a":1,"b":3}]}`, `{"instances":[{"a":1},{"a":1,"b":2,"b":3}]}`,
	`{"instances":[{"a":'x'}]}`, `{"instances":[{"a":"x"'}]}`, `{"instances":[{"a":1}` + "\x00", `{"instances"}`, `{"instances":}`,
}

// FuzzDecodeSame: the scanner and the token decoder give identical results
// or identical errors on every body.
func FuzzDecodeSame(f *testing.F) {
	for _, s := range sameCases {
		f.Add([]byte(s))
	}
	seedCorpus(f, "FuzzDecodePredict")
	if b, err := os.ReadFile("../../bench/fraud-payload.json"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ref, got, refErr, gotErr := decodeBoth(body)
		if d := sameErr(refErr, gotErr); d != "" {
			t.Fatalf("%q: %s", body, d)
		}
		if !reflect.DeepEqual(ref, got) {
			t.Fatalf("%q: decoded %+v, want %+v", body, got, ref)
		}
	})
}

// scanFraudBody is a predict body of n fraud rows.
func scanFraudBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"instances":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"amount":%d.%02d,"accountAgeDays":%d,"declines5m":%d,"country":"%s"}`, 10+i*37%5000, i%100, i%3650, i%7, []string{"US", "GB", "DE"}[i%3])
	}
	b.WriteString(`],"deadlineMs":50}`)
	return b.Bytes()
}

// wideBody is a predict body of n rows of cols float fields f0, f1, ….
func wideBody(n, cols int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"instances":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		for j := range cols {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"f%d":%d.%03d`, j, (i*31+j*7)%100, (i*j)%1000)
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func TestDecodeSameLarge(t *testing.T) {
	wide := wideBody(1000, 30)
	ref, got, refErr, gotErr := decodeBoth(wide)
	if refErr != nil || gotErr != nil || !reflect.DeepEqual(ref, got) || len(got.Instances) != 1000 {
		t.Fatalf("1,000 rows of 30 fields: %v, %v", refErr, gotErr)
	}
	body := scanFraudBody(1000)
	ref, got, refErr, gotErr = decodeBoth(body)
	if refErr != nil || gotErr != nil || !reflect.DeepEqual(ref, got) || len(got.Instances) != 1000 {
		t.Fatalf("1,000 rows: %v, %v", refErr, gotErr)
	}
}

func BenchmarkDecodePredict(b *testing.B) {
	one, err := os.ReadFile("../../bench/fraud-payload.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, body := range []struct {
		name string
		b    []byte
	}{{"rows=1", one}, {"rows=1000", scanFraudBody(1000)}, {"rows=1000x30", wideBody(1000, 30)}} {
		for _, dec := range []struct {
			name string
			fn   func([]byte, time.Duration) (*predictBody, error)
		}{{"tokens", decodePredictTokens}, {"scan", decodePredictScan}} {
			b.Run(body.name+"/"+dec.name, func(b *testing.B) {
				b.SetBytes(int64(len(body.b)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := dec.fn(body.b, time.Minute); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
