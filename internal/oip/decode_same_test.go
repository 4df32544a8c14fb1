package oip

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

// sameErr compares everything a caller can see of two errors.
func sameErr(a, b error) string {
	if (a == nil) != (b == nil) {
		return fmt.Sprintf("error %v, want %v", b, a)
	}
	if a == nil {
		return ""
	}
	ea, eb := errs.As(a), errs.As(b)
	if ea.Code != eb.Code || ea.Field != eb.Field || ea.Message != eb.Message || ea.Reason != eb.Reason || a.Error() != b.Error() || Message(ea) != Message(eb) {
		return fmt.Sprintf("error %+v, want %+v", *eb, *ea)
	}
	if (ea.Err == nil) != (eb.Err == nil) || ea.Err != nil && ea.Err.Error() != eb.Err.Error() {
		return fmt.Sprintf("cause %v, want %v", eb.Err, ea.Err)
	}
	return ""
}

// seedCorpus adds the committed corpus of a fuzz target whose first
// argument is a []byte body (later arguments are left out).
func seedCorpus(f *testing.F, name string) {
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", name, "*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "[]byte(") {
			continue
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		f.Add([]byte(s))
	}
}

// oipSameCases are bodies that reach every rule of the token decoder.
var oipSameCases = []string{
	`{"model_name":"m","model_version":"1","inputs":[]}`, `{"model_name":1}`, `{"model_name":"a","model_name":"b"}`, `{"model_version":[]}`,
	`{"parameters":{"timeout":5,"priority":1,"sequence_id":"s","sequence_start":true,"x":null}}`, `{"parameters":{"timeout":-5}}`,
	`{"parameters":{"priority":1.5}}`, `{"parameters":{"sluice_priority":"batch","idempotency_key":"k"}}`, `{"parameters":{"idempotency_key":""}}`,
	`{"inputs":[{"name":"a","datatype":"UINT8","shape":[2],"data":[1,256]}]}`, `{"inputs":[{"name":"a","datatype":"FP16","shape":[1],"data":[1e9]}]}`,
	`{"inputs":[{"name":"a","datatype":"INT8","shape":[1],"data":[1],"parameters":{"binary_data":false,"x":1}}]}`,
	`{"inputs":[{"name":"a","datatype":"INT8","shape":[1],"data":[1],"parameters":{"shared_memory_region":"r"}}]}`,
	`{"inputs":[],"outputs":[{"name":"y","parameters":{"classification":2}}]}`, `{"inputs":[],"outputs":[{"name":"y","parameters":{"x":2,"binary_data":true}}]}`,
	``, ` `, `{`, `}`, `[]`, `"x"`, `12x`, `nul`, `notjson`, `{}`, `{} x`, `{}{}`, "{}\n\t ", `{"inputs":[]}`, `{"inputs":[]} x`,
	`{"inputs":{}}`, `{"inputs":1}`, `{"inputs":[1]}`, `{"inputs":[[]]}`, `{"inputs":[],"inputs":[]}`, `{"x":1}`, `{"inputs":[],"x":1}`,
	`{"id":"a","inputs":[]}`, `{"id":1,"inputs":[]}`, `{"id":"","inputs":[]}`, `{"id":"a b","inputs":[]}`, `{"id":"a","id":"b"}`, `{"id":[1]}`,
	`{"id":"` + strings.Repeat("i", 129) + `"}`, `{"id":"\u00e9"}`, `{"id":"a\nb"}`, `{"id":nul}`,
	`{"parameters":{}}`, `{"parameters":[]}`, `{"parameters":1}`, `{"parameters":{"deadline_ms":50}}`, `{"parameters":{"deadline_ms":"50"}}`,
	`{"parameters":{"deadline_ms":0}}`, `{"parameters":{"deadline_ms":-1}}`, `{"parameters":{"deadline_ms":0.0001}}`, `{"parameters":{"deadline_ms":1e9}}`,
	`{"parameters":{"deadline_ms":1e999}}`, `{"parameters":{"deadline_ms":null}}`, `{"parameters":{"deadline_ms":2.5,"deadline_ms":3}}`,
	`{"parameters":{"deadline_ms":[1]}}`, `{"parameters":{"deadline_ms":{}}}`, `{"parameters":{"routing_key":"k"}}`, `{"parameters":{"routing_key":""}}`,
	`{"parameters":{"routing_key":1}}`, `{"parameters":{"routing_key":"` + strings.Repeat("é", 257) + `"}}`, `{"parameters":{"x":1}}`,
	`{"parameters":{"binary_data_output":true}}`, `{"parameters":{"binary_data_output":1}}`, `{"parameters":{"binary_data_output":null}}`,
	`{"parameters":{"a":1,}}`, `{"parameters":{"deadline_ms":1 "routing_key":"k"}}`, `{"parameters":{1:1}}`, `{"parameters":{"deadline_ms"}}`,
	`{"parameters":{"deadline_ms":5},"parameters":{}}`, `{"parameters":{"deadline_ms":5,"routing_key":"k","binary_data_output":false},"inputs":[]}`,
	`{"parameters":{"deadline_ms":5,"routing_key":"k","binary_data_output":false,"binary_data_output":true}}`,
	`{"inputs":[{}]}`, `{"inputs":[{"name":"a"}]}`, `{"inputs":[{"name":""}]}`, `{"inputs":[{"name":1}]}`, `{"inputs":[{"name":"a","name":"b"}]}`,
	`{"inputs":[{"datatype":"FP32","datatype":"FP64"}]}`, `{"inputs":[{"name":"a","datatype":"FP32"}]}`, `{"inputs":[{"name":"a","datatype":1}]}`,
	`{"inputs":[{"datatype":1}]}`, `{"inputs":[{"name":"a","datatype":"FP32","shape":[1]}]}`, `{"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1]}]}`,
	`{"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1],"x":1}]}`, `{"inputs":[{"x":1}]}`, `{"inputs":[{"name":"a","x":1}]}`,
	`{"inputs":[{"name":"a","shape":1}]}`, `{"inputs":[{"name":"a","shape":[-1]}]}`, `{"inputs":[{"name":"a","shape":[1.5]}]}`, `{"inputs":[{"name":"a","shape":["1"]}]}`,
	`{"inputs":[{"name":"a","shape":[[1]]}]}`, `{"inputs":[{"name":"a","shape":[1,2,3,4,5,6,7,8,9]}]}`, `{"inputs":[{"name":"a","shape":[1,2,3,4,5,6,7,8,-9]}]}`,
	`{"inputs":[{"name":"a","shape":[1,2,3,4,5,6,7,8]}]}`, `{"inputs":[{"name":"a","shape":[1e2]}]}`, `{"inputs":[{"name":"a","shape":[-0]}]}`,
	`{"inputs":[{"name":"a","shape":[99999999999999999999]}]}`, `{"inputs":[{"name":"a","shape":[1,]}]}`, `{"inputs":[{"name":"a","shape":[1}]}`,
	`{"inputs":[{"name":"a","shape":[]}]}`, `{"inputs":[{"shape":[1],"shape":[2]}]}`, `{"inputs":[{"name":"a","shape":[1],"shape":[2]}]}`,
	`{"inputs":[{"name":"a","data":1}]}`, `{"inputs":[{"name":"a","data":[null]}]}`, `{"inputs":[{"name":"a","data":[{}]}]}`, `{"inputs":[{"name":"a","data":[1,{}]}]}`,
	`{"inputs":[{"name":"a","data":[[1,2],[3]]}]}`, `{"inputs":[{"name":"a","data":[1,[2,[3,[true,"x"]]]]}]}`, `{"inputs":[{"name":"a","data":[1,]}]}`,
	`{"inputs":[{"name":"a","data":[1 2]}]}`, `{"inputs":[{"name":"a","data":[1}]}`, `{"inputs":[{"name":"a","data":[1`, `{"inputs":[{"name":"a","data":[01]}]}`,
	`{"inputs":[{"name":"a","data":[-]}]}`, `{"inputs":[{"name":"a","data":[1.]}]}`, `{"inputs":[{"name":"a","data":[1e]}]}`, `{"inputs":[{"name":"a","data":[NaN]}]}`,
	`{"inputs":[{"name":"a","data":[tru]}]}`, `{"inputs":[{"name":"a","data":["x\u00e9\ud83d\ude00\ud800 \"\\\/\b\f\n\r\t"]}]}`, `{"inputs":[{"name":"a","data":["\x"]}]}`,
	"{\"inputs\":[{\"name\":\"a\",\"data\":[\"\xff\xfe\"]}]}", "{\"inputs\":[{\"name\":\"\xc3\"}]}", `{"inputs":[{"name":"a","data":[],"data":[]}]}`,
	`{"inputs":[{"name":"a","data":[` + strings.Repeat("[", 31) + `1` + strings.Repeat("]", 31) + `]}]}`,
	`{"inputs":[{"name":"a","data":[` + strings.Repeat("[", 32) + `1` + strings.Repeat("]", 32) + `]}]}`,
	`{"inputs":[{"name":"a","data":[` + strings.Repeat("[", 40) + `]}]}`,
	`{"inputs":[{"name":"a","parameters":{}}]}`, `{"inputs":[{"name":"a","parameters":{"x":1}}]}`, `{"inputs":[{"parameters":{"x":1}}]}`,
	`{"inputs":[{"name":"a","parameters":{"binary_data_size":4}}]}`, `{"inputs":[{"name":"a","parameters":{"binary_data_size":-4}}]}`,
	`{"inputs":[{"name":"a","parameters":{"binary_data_size":"4"}}]}`, `{"inputs":[{"name":"a","parameters":{"binary_data_size":4.0}}]}`,
	`{"inputs":[{"name":"a","parameters":{"binary_data_size":4,"binary_data_size":4}}]}`, `{"inputs":[{"name":"a","parameters":{"binary_data_size":[4]}}]}`,
	`{"inputs":[{"name":"a","parameters":[]}]}`, `{"inputs":[{"name":"a","parameters":{},"parameters":{}}]}`,
	`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]}`,
	`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4},"data":[1]}]}`,
	`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4}}]}`,
	`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32"}]}`, `{"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[1]}]}`,
	`{"inputs":[{"name":"a","shape":[1],"datatype":"FP16","data":[1]}]}`, `{"inputs":[{"name":"a","shape":[1],"datatype":"INT32","data":[1.5]}]}`,
	`{"inputs":[{"name":"a","shape":[1],"datatype":"INT32","data":[3000000000]}]}`, `{"inputs":[{"name":"a","shape":[1],"datatype":"BOOL","data":[1]}]}`,
	`{"inputs":[{"name":"a","shape":[1],"datatype":"BYTES","data":[1]}]}`, `{"inputs":[{"name":"a","shape":[1],"datatype":"FP64","data":["x"]}]}`,
	`{"inputs":[{"name":"a","shape":[-1],"datatype":"FP64","data":[]}]}`, `{"inputs":[{"name":"a","shape":[2,3],"datatype":"INT64","data":[[1,2,3],[4,-1,-1]]}]}`,
	`{"inputs":[{"name":"a","shape":[3037000500,3037000500],"datatype":"FP32","data":[]}]}`, `{"inputs":[{"name":"a","shape":[1],"datatype":"","data":[1]}]}`,
	`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]},{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]}`,
	`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]},{"shape":[1]}]}`, `{"inputs":[{"name":"` + strings.Repeat("n", 300) + `","x":1}]}`,
	`{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[]}`, `{"outputs":[{}]}`, `{"outputs":[1]}`, `{"outputs":{}}`,
	`{"outputs":[{"name":"y"}]}`, `{"outputs":[{"name":""}]}`, `{"outputs":[{"name":1}]}`, `{"outputs":[{"name":"y","name":"z"}]}`, `{"outputs":[{"x":1}]}`,
	`{"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`, `{"outputs":[{"name":"y","parameters":{"binary_data":1}}]}`,
	`{"outputs":[{"name":"y","parameters":{"classification":2}}]}`, `{"outputs":[{"name":"y","parameters":{"binary_data":true,"binary_data":false}}]}`,
	`{"outputs":[{"name":"y","parameters":1}]}`, `{"outputs":[{"name":"y","parameters":{}, "parameters":{}}]}`, `{"outputs":[{"name":"y"},{"name":"y"}],"inputs":[]}`,
	`{"outputs":[{"name":"y"}`, `{"outputs":[{"name":"y"]}`, `{"outputs":[],"outputs":[]}`, `{"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]}` + "\x00",
	"{\"inputs\" :\n [ {\"name\" : \"a\" , \"shape\":[ 1 ],\r\n\"datatype\":\"FP32\",\"data\":[ 2.5 ] } ] }  \n",
	`{"inputs":[{"name":"a","data":['x']}]}`, `{"inputs"}`, `{"inputs":}`, `{"inputs":[{"name":"a"`, `{"inputs":[{"name":"a",`, `{"inputs":[{"name"`,
}

// FuzzOIPDecodeSame: the scanner decoder (decodeJSON) and the token
// decoder (decodeJSONTokens) give identical requests or identical errors
// on every body, as a plain JSON body and as a binary request's header.
func FuzzOIPDecodeSame(f *testing.F) {
	for _, s := range oipSameCases {
		f.Add([]byte(s))
	}
	for _, s := range decodeJSONSeeds {
		f.Add([]byte(s))
	}
	seedCorpus(f, "FuzzDecodeJSON")
	seedCorpus(f, "FuzzBinaryInfer")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, binary := range []bool{false, true} {
			ref, refErr := decodeJSONTokens(body, time.Minute, binary)
			got, gotErr := decodeJSON(body, time.Minute, binary)
			if d := sameErr(refErr, gotErr); d != "" {
				t.Fatalf("binary %v: %q: %s", binary, body, d)
			}
			if !reflect.DeepEqual(ref, got) {
				t.Fatalf("binary %v: %q: decoded %+v, want %+v", binary, body, got, ref)
			}
		}
	})
}

// TestOIPDecodeSameLarge: a 1,000-row body of four tensors decodes the
// same both ways.
func TestOIPDecodeSameLarge(t *testing.T) {
	body := largeOIPBody(1000)
	ref, refErr := decodeJSONTokens(body, time.Minute, false)
	got, gotErr := decodeJSON(body, time.Minute, false)
	if refErr != nil || gotErr != nil || !reflect.DeepEqual(ref, got) || len(got.Inputs) != 4 || len(got.Inputs[3].Data) != 1000 {
		t.Fatalf("1,000 rows: %v, %v", refErr, gotErr)
	}
}

// largeOIPBody is n rows of four tensors (FP32, INT64, INT64, BYTES).
func largeOIPBody(n int) []byte {
	cols := make([][]byte, 4)
	for i := range n {
		for j := range cols {
			if i > 0 {
				cols[j] = append(cols[j], ',')
			}
		}
		cols[0] = strconv.AppendFloat(cols[0], float64(i%2000)+float64(i%100)/100, 'g', -1, 64)
		cols[1] = strconv.AppendInt(cols[1], int64(i*13%3000), 10)
		cols[2] = strconv.AppendInt(cols[2], int64(i%6), 10)
		cols[3] = strconv.AppendQuote(cols[3], []string{"US", "GB", "DE"}[i%3])
	}
	names := []string{"amount", "accountAgeDays", "declines5m", "country"}
	dts := []string{"FP32", "INT64", "INT64", "BYTES"}
	b := []byte(`{"id":"r1","parameters":{"deadline_ms":50},"inputs":[`)
	for j := range cols {
		if j > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"name":%q,"shape":[%d],"datatype":%q,"data":[%s]}`, names[j], n, dts[j], cols[j])
	}
	return append(b, `],"outputs":[{"name":"riskScore"}]}`...)
}

func BenchmarkOIPDecode(b *testing.B) {
	for _, n := range []int{1, 1000} {
		body := largeOIPBody(n)
		for _, dec := range []struct {
			name string
			fn   func([]byte, time.Duration, bool) (*Request, error)
		}{{"tokens", decodeJSONTokens}, {"scan", decodeJSON}} {
			b.Run("rows="+strconv.Itoa(n)+"/"+dec.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := dec.fn(body, time.Minute, false); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
