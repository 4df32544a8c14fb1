package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/examples"
	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/records/recordsdb"
	"github.com/sluiceml/sluice/internal/server/oipgrpc"
)

// recordedServer serves the examples over HTTP and OIP gRPC with durable
// prediction records in a real SQLite store.
func recordedServer(t *testing.T) (string, pb.GRPCInferenceServiceClient, records.Store) {
	t.Helper()
	store, err := recordsdb.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := records.NewWriter(store, records.Config{Durable: true, FlushEvery: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; store.Close() })
	ts, _, s := newTestServerAll(t, Config{Records: w}, examples.FS)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := oipgrpc.New(oipgrpc.Config{Version: "test"}, s.Gateway(), s)
	go gs.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs.Stop(ctx)
	})
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return ts.URL, pb.NewGRPCInferenceServiceClient(cc), store
}

// binaryRequest is an OIP REST binary body: the JSON header, then data.
func binaryRequest(t *testing.T, url, header string, hdrs map[string]string, data ...[]byte) result {
	t.Helper()
	body := []byte(header)
	for _, d := range data {
		body = append(body, d...)
	}
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
	for k, v := range hdrs {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// irisRows are three iris instances, each value a float32 whose shortest
// text is the literal /v1 sends.
var irisRows = [][4]float32{{5.1, 3.5, 1.4, 0.2}, {6.7, 3.0, 5.2, 2.3}, {5.9, 3.0, 4.2, 1.5}}

var irisFields = []string{"sepalLength", "sepalWidth", "petalLength", "petalWidth"}

func irisColumn(j int) []byte {
	var b []byte
	for _, r := range irisRows {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(r[j]))
	}
	return b
}

// irisBinaryHeader is the JSON header of a binary request for irisRows.
func irisBinaryHeader(extra string) string {
	var ins []string
	for _, f := range irisFields {
		ins = append(ins, `{"name":"`+f+`","shape":[3],"datatype":"FP32","parameters":{"binary_data_size":12}}`)
	}
	return `{` + extra + `"inputs":[` + strings.Join(ins, ",") + `]}`
}

// binaryOutputs reads a binary answer: the JSON header's outputs and each
// binary output's float32 elements.
func binaryOutputs(t *testing.T, r result) (map[string][]float32, oipOut) {
	t.Helper()
	h, err := strconv.Atoi(r.header.Get("Inference-Header-Content-Length"))
	if err != nil || h > len(r.body) || r.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("binary answer: header %q, %d bytes, Content-Type %q", r.header.Get("Inference-Header-Content-Length"), len(r.body), r.header.Get("Content-Type"))
	}
	var head struct {
		oipOut
		Outputs []struct {
			Name       string           `json:"name"`
			Shape      []int            `json:"shape"`
			Parameters map[string]int64 `json:"parameters"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(r.body[:h], &head); err != nil {
		t.Fatalf("header %q: %v", r.body[:h], err)
	}
	out := map[string][]float32{}
	rest := r.body[h:]
	for _, o := range head.Outputs {
		k := int(o.Parameters["binary_data_size"])
		if k > len(rest) || k != 4*o.Shape[0] {
			t.Fatalf("output %s: binary_data_size %d of %d bytes left", o.Name, k, len(rest))
		}
		for i := 0; i < k; i += 4 {
			out[o.Name] = append(out[o.Name], math.Float32frombits(binary.LittleEndian.Uint32(rest[i:])))
		}
		rest = rest[k:]
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes after the outputs", len(rest))
	}
	return out, head.oipOut
}

// TestBinaryEqualsJSON: the same rows through /v1 JSON, OIP REST JSON,
// OIP REST binary and OIP gRPC raw contents give the same predictions to
// the bit and the same input hash in their prediction records; a retry
// of one request id over another encoding is a replay (same idempotency
// key), not a conflict.
func TestBinaryEqualsJSON(t *testing.T) {
	url, c, store := recordedServer(t)
	ctx := context.Background()
	// Predictions per transport: output name → one value per row.
	got := map[string]map[string][]float32{}

	var v1 strings.Builder
	v1.WriteString(`{"instances":[`)
	for i, r := range irisRows {
		if i > 0 {
			v1.WriteString(",")
		}
		v1.WriteString("{")
		for j, f := range irisFields {
			if j > 0 {
				v1.WriteString(",")
			}
			v1.WriteString(`"` + f + `":` + strconv.FormatFloat(float64(r[j]), 'g', -1, 32))
		}
		v1.WriteString("}")
	}
	v1.WriteString("]}")
	r := post(t, url+"/v1/models/iris:predict", "application/json", v1.String(), map[string]string{"X-Request-Id": "eq-v1"})
	if r.status != 200 {
		t.Fatalf("/v1: %d %s", r.status, r.body)
	}
	var p1 struct{ Predictions []map[string]float64 }
	json.Unmarshal(r.body, &p1)
	got["v1"] = map[string][]float32{}
	for _, p := range p1.Predictions {
		for k, v := range p {
			got["v1"][k] = append(got["v1"][k], float32(v))
		}
	}

	var ins []string
	for j, f := range irisFields {
		var d []string
		for _, r := range irisRows {
			d = append(d, strconv.FormatFloat(float64(r[j]), 'g', -1, 32))
		}
		ins = append(ins, `{"name":"`+f+`","shape":[3],"datatype":"FP32","data":[`+strings.Join(d, ",")+`]}`)
	}
	r = post(t, url+"/v2/models/iris/infer", "application/json", `{"inputs":[`+strings.Join(ins, ",")+`]}`, map[string]string{"X-Request-Id": "eq-rest"})
	if r.status != 200 {
		t.Fatalf("REST JSON: %d %s", r.status, r.body)
	}
	var p2 oipOut
	json.Unmarshal(r.body, &p2)
	got["rest"] = map[string][]float32{}
	for _, o := range p2.Outputs {
		for _, v := range o.Data {
			got["rest"][o.Name] = append(got["rest"][o.Name], float32(v))
		}
	}

	cols := [][]byte{irisColumn(0), irisColumn(1), irisColumn(2), irisColumn(3)}
	r = binaryRequest(t, url+"/v2/models/iris/infer", irisBinaryHeader(`"parameters":{"binary_data_output":true},`), map[string]string{"X-Request-Id": "eq-bin"}, cols...)
	if r.status != 200 {
		t.Fatalf("REST binary: %d %s", r.status, r.body)
	}
	var head oipOut
	got["binary"], head = binaryOutputs(t, r)
	if head.ModelName != "iris" || head.ModelVersion != "1" || r.header.Get("X-Model-Version") != "iris@1" || head.ID != "eq-bin" {
		t.Fatalf("binary answer names %q %q %q %q", head.ModelName, head.ModelVersion, r.header.Get("X-Model-Version"), head.ID)
	}

	req := &pb.ModelInferRequest{ModelName: "iris", RawInputContents: cols}
	for _, f := range irisFields {
		req.Inputs = append(req.Inputs, &in{Name: f, Datatype: "FP32", Shape: []int64{3}})
	}
	resp, err := c.ModelInfer(metadata.AppendToOutgoingContext(ctx, "x-request-id", "eq-grpc"), req)
	if err != nil {
		t.Fatal(err)
	}
	got["grpc"] = map[string][]float32{}
	for k, o := range resp.Outputs {
		raw := resp.RawOutputContents[k]
		for i := 0; i < len(raw); i += 4 {
			got["grpc"][o.Name] = append(got["grpc"][o.Name], math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
		}
	}

	want := got["v1"]
	if len(want) != 3 || len(want["setosa"]) != 3 {
		t.Fatalf("/v1 predictions %v", want)
	}
	for tr, p := range got {
		for name, vs := range want {
			if len(p[name]) != len(vs) {
				t.Fatalf("%s: output %s %v, /v1 %v", tr, name, p[name], vs)
			}
			for i := range vs {
				if math.Float32bits(p[name][i]) != math.Float32bits(vs[i]) {
					t.Errorf("%s: output %s row %d is %v, /v1 %v", tr, name, i, p[name][i], vs[i])
				}
			}
		}
	}

	// Records: one per request, one input hash for all four.
	var hash string
	for _, id := range []string{"eq-v1", "eq-rest", "eq-bin", "eq-grpc"} {
		recs, err := store.List(ctx, records.Filter{RequestID: id})
		if err != nil || len(recs) != 1 {
			t.Fatalf("records of %s: %v %v", id, recs, err)
		}
		if recs[0].InputHash == "" || hash != "" && recs[0].InputHash != hash {
			t.Errorf("%s: input hash %q, the others %q", id, recs[0].InputHash, hash)
		}
		hash = recs[0].InputHash
	}

	// A retry of the /v1 request over REST binary and gRPC raw replays it.
	r = binaryRequest(t, url+"/v2/models/iris/infer", irisBinaryHeader(""), map[string]string{"X-Request-Id": "eq-v1"}, cols...)
	if r.status != 200 || r.header.Get("Idempotent-Replay") != "true" || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("binary retry of eq-v1: %d %v %s", r.status, r.header, r.body)
	}
	var hdr metadata.MD
	if _, err := c.ModelInfer(metadata.AppendToOutgoingContext(ctx, "x-request-id", "eq-v1"), req, grpc.Header(&hdr)); err != nil || len(hdr.Get("idempotent-replay")) == 0 {
		t.Fatalf("gRPC retry of eq-v1: %v %v", hdr, err)
	}
	recs, err := store.List(ctx, records.Filter{RequestID: "eq-v1"})
	if err != nil || len(recs) != 1 || recs[0].Attempts != 3 {
		t.Fatalf("eq-v1 after two retries: %+v %v", recs, err)
	}
}

// TestBinaryRefusals: a binary body's errors reach the client as OIP error
// bodies with the status of the error table, and values sent as bytes
// meet the schema's rules with the messages JSON gets.
func TestBinaryRefusals(t *testing.T) {
	url, c, _ := recordedServer(t)
	cols := func(mod func(j int, b []byte)) [][]byte {
		var out [][]byte
		for j := range irisFields {
			b := irisColumn(j)
			if mod != nil {
				mod(j, b)
			}
			out = append(out, b)
		}
		return out
	}
	put := func(col, row int, v float32) func(int, []byte) {
		return func(j int, b []byte) {
			if j == col {
				binary.LittleEndian.PutUint32(b[4*row:], math.Float32bits(v))
			}
		}
	}
	for _, tc := range []struct {
		name   string
		header string
		data   [][]byte
		status int
		want   string
	}{
		{"above max", irisBinaryHeader(""), cols(put(0, 1, 25)), 400, `input "sepalLength" row 1: must be <= 20, got 25`},
		{"below min", irisBinaryHeader(""), cols(put(3, 2, -0.5)), 400, `input "petalWidth" row 2: must be >= 0, got -0.5`},
		{"NaN", irisBinaryHeader(""), cols(put(2, 0, float32(math.NaN()))), 400, `input "petalLength" row 0: NaN and infinities are not allowed`},
		{"infinity", irisBinaryHeader(""), cols(put(2, 0, float32(math.Inf(1)))), 400, `input "petalLength" row 0: NaN and infinities are not allowed`},
		{"truncated", irisBinaryHeader(""), cols(nil)[:3], 400, `input "petalWidth": binary_data_size 12 runs past the end of the body: 0 bytes`},
		{"extra bytes", irisBinaryHeader(""), append(cols(nil), []byte{0}), 400, `the body has 1 bytes after the inputs' binary data`},
		{"wrong datatype for the field", strings.Replace(irisBinaryHeader(""), `"datatype":"FP32","parameters":{"binary_data_size":12}`, `"datatype":"BOOL","parameters":{"binary_data_size":3}`, 1),
			append([][]byte{{1, 0, 1}}, cols(nil)[1:]...), 400, `input "sepalLength": datatype BOOL does not fit field type float (use FP32)`},
		{"unknown output", strings.Replace(irisBinaryHeader(""), `]}`, `],"outputs":[{"name":"petals","parameters":{"binary_data":true}}]}`, 1), cols(nil), 400, `output "petals": unknown output`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := binaryRequest(t, url+"/v2/models/iris/infer", tc.header, nil, tc.data...)
			var eb struct{ Error string }
			if err := json.Unmarshal(r.body, &eb); err != nil || r.status != tc.status || !strings.Contains(eb.Error, tc.want) {
				t.Fatalf("%d %s\nwant %d containing %q", r.status, r.body, tc.status, tc.want)
			}
		})
	}
	// The same rule over gRPC raw contents, straight into rows.
	req := &pb.ModelInferRequest{ModelName: "iris", RawInputContents: cols(put(0, 1, 25))}
	for _, f := range irisFields {
		req.Inputs = append(req.Inputs, &in{Name: f, Datatype: "FP32", Shape: []int64{3}})
	}
	_, err := c.ModelInfer(context.Background(), req)
	if st := status.Convert(err); !strings.Contains(st.Message(), `input "sepalLength" row 1: must be <= 20, got 25`) {
		t.Fatalf("gRPC raw above max: %v", err)
	}
	// Content-Type and body size.
	hreq, _ := http.NewRequest(http.MethodPost, url+"/v2/models/iris/infer", strings.NewReader("{}"))
	hreq.Header.Set("Content-Type", "text/plain")
	hreq.Header.Set("Inference-Header-Content-Length", "2")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain binary body: %d", resp.StatusCode)
	}
	big := make([]byte, 2<<20)
	r := binaryRequest(t, url+"/v2/models/iris/infer", irisBinaryHeader(""), nil, big)
	if r.status != http.StatusRequestEntityTooLarge || !bytes.Contains(r.body, []byte("--max-body-bytes")) {
		t.Fatalf("2 MiB binary body: %d %s", r.status, r.body)
	}
}

// TestBinaryMixedOutputs: per-output binary_data overrides
// binary_data_output; the fraud example (a category field) takes binary
// BYTES through the instance path.
func TestBinaryMixedOutputs(t *testing.T) {
	url, _, _ := recordedServer(t)
	var country []byte
	for _, s := range []string{"US", "GB"} {
		country = binary.LittleEndian.AppendUint32(country, uint32(len(s)))
		country = append(country, s...)
	}
	hdr := `{"id":"mix","parameters":{"binary_data_output":true},"inputs":[` +
		`{"name":"amount","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},` +
		`{"name":"accountAgeDays","shape":[2],"datatype":"INT64","data":[91,2400]},` +
		`{"name":"country","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":` + strconv.Itoa(len(country)) + `}}],` +
		`"outputs":[{"name":"riskScore","parameters":{"binary_data":false}}]}`
	amount := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, math.Float32bits(800)), math.Float32bits(12.5))
	r := binaryRequest(t, url+"/v2/models/fraud/versions/1/infer", hdr, nil, amount, country)
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || r.header.Get("X-Model-Version") != "fraud@1" {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
	v1 := post(t, url+"/v1/models/fraud:predict", "application/json", `{"instances":[{"amount":800,"accountAgeDays":91,"country":"US"},{"amount":12.5,"accountAgeDays":2400,"country":"GB"}]}`, nil)
	var p1 struct{ Predictions []map[string]float64 }
	json.Unmarshal(v1.body, &p1)
	var p2 oipOut
	if err := json.Unmarshal(r.body, &p2); err != nil || len(p2.Outputs) != 1 || len(p2.Outputs[0].Data) != 2 {
		t.Fatalf("answer %s: %v", r.body, err)
	}
	for i, v := range p2.Outputs[0].Data {
		if float32(v) != float32(p1.Predictions[i]["riskScore"]) {
			t.Errorf("row %d: %v, /v1 %v", i, v, p1.Predictions[i]["riskScore"])
		}
	}
	// binary_data_output alone: every output binary.
	hdr = strings.Replace(hdr, `,"outputs":[{"name":"riskScore","parameters":{"binary_data":false}}]`, ``, 1)
	hdr = strings.Replace(hdr, `"id":"mix"`, `"id":"mix-2"`, 1)
	r = binaryRequest(t, url+"/v2/models/fraud/infer", hdr, nil, amount, country)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	outs, head := binaryOutputs(t, r)
	if head.ID != "mix-2" || len(outs["riskScore"]) != 2 || outs["riskScore"][1] != float32(p1.Predictions[1]["riskScore"]) {
		t.Fatalf("binary outputs %v %+v", outs, head)
	}
}
