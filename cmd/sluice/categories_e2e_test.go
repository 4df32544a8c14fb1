package main

import (
	"bytes"
	"encoding/base64"
	le "encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/testwait"
)

// TestOIPCategoriesThroughTheBinary: the fraud example (a category field)
// through the real server: /v1 JSON, OIP REST JSON, OIP REST binary (the
// category as BYTES with length prefixes) and gRPC typed contents
// (grpcurl, bytes_contents) give the same predictions and one input hash
// in the four records; an unknown category is refused over REST binary
// with the message naming the input and row.
func TestOIPCategoriesThroughTheBinary(t *testing.T) {
	bin := grpcurlPath(t)
	models := t.TempDir()
	copyExample(t, "fraud", models)
	gaddr := freeAddr(t)
	srv := startServer(t, "--data", t.TempDir(), "--models", models, "--grpc-addr", gaddr)

	type row struct {
		amount        float32
		age, declines int64
		country       string
	}
	rows := []row{{800, 91, 3, "US"}, {12.5, 2400, 0, "GB"}, {250.25, 10, 1, "DE"}}
	f32 := func(x float32) string { return strconv.FormatFloat(float64(x), 'g', -1, 32) }

	// /v1.
	var insts []string
	for _, r := range rows {
		insts = append(insts, fmt.Sprintf(`{"amount":%s,"accountAgeDays":%d,"declines5m":%d,"country":%q}`, f32(r.amount), r.age, r.declines, r.country))
	}
	a1, err := postRaw(t, srv.url+"/v1/models/fraud:predict", `{"instances":[`+strings.Join(insts, ",")+`]}`, map[string]string{"X-Request-Id": "cat-v1"})
	if err != nil || a1.status != 200 {
		t.Fatalf("/v1: %v %d %s", err, a1.status, a1.body)
	}
	var p1 struct{ Predictions []struct{ RiskScore float64 } }
	if err := json.Unmarshal(a1.body, &p1); err != nil || len(p1.Predictions) != len(rows) {
		t.Fatalf("/v1 answer %s: %v", a1.body, err)
	}
	want := make([]float32, len(rows))
	for i, p := range p1.Predictions {
		want[i] = float32(p.RiskScore)
	}

	// The tensors, as JSON data, as bytes and as grpcurl's typed contents.
	var am, ag, dc, co []string
	var bAm, bAg, bDc, bCo []byte
	var gCo []string
	for _, r := range rows {
		am, ag, dc, co = append(am, f32(r.amount)), append(ag, strconv.FormatInt(r.age, 10)), append(dc, strconv.FormatInt(r.declines, 10)), append(co, strconv.Quote(r.country))
		bAm = le.LittleEndian.AppendUint32(bAm, math.Float32bits(r.amount))
		bAg = le.LittleEndian.AppendUint64(bAg, uint64(r.age))
		bDc = le.LittleEndian.AppendUint64(bDc, uint64(r.declines))
		bCo = le.LittleEndian.AppendUint32(bCo, uint32(len(r.country)))
		bCo = append(bCo, r.country...)
		gCo = append(gCo, strconv.Quote(base64.StdEncoding.EncodeToString([]byte(r.country))))
	}
	n := len(rows)
	restJSON := fmt.Sprintf(`{"inputs":[{"name":"amount","shape":[%d],"datatype":"FP32","data":[%s]},{"name":"accountAgeDays","shape":[%d],"datatype":"INT64","data":[%s]},`+
		`{"name":"declines5m","shape":[%d],"datatype":"INT64","data":[%s]},{"name":"country","shape":[%d],"datatype":"BYTES","data":[%s]}]}`,
		n, strings.Join(am, ","), n, strings.Join(ag, ","), n, strings.Join(dc, ","), n, strings.Join(co, ","))
	oipScores := func(what string, b []byte) []float32 {
		var p struct {
			Outputs []struct {
				Name string
				Data []float64
			}
		}
		if err := json.Unmarshal(b, &p); err != nil || len(p.Outputs) != 1 || p.Outputs[0].Name != "riskScore" {
			t.Fatalf("%s answer %s: %v", what, b, err)
		}
		out := make([]float32, len(p.Outputs[0].Data))
		for i, x := range p.Outputs[0].Data {
			out[i] = float32(x)
		}
		return out
	}
	got := map[string][]float32{}
	a2, err := postRaw(t, srv.url+"/v2/models/fraud/infer", restJSON, map[string]string{"X-Request-Id": "cat-rest"})
	if err != nil || a2.status != 200 {
		t.Fatalf("REST JSON: %v %d %s", err, a2.status, a2.body)
	}
	got["rest"] = oipScores("REST JSON", a2.body)

	sendBinary := func(cols [][]byte, id string) (int, []byte) {
		var hdr []string
		for k, name := range []string{"amount", "accountAgeDays", "declines5m", "country"} {
			hdr = append(hdr, fmt.Sprintf(`{"name":%q,"shape":[%d],"datatype":%q,"parameters":{"binary_data_size":%d}}`, name, n, []string{"FP32", "INT64", "INT64", "BYTES"}[k], len(cols[k])))
		}
		h := `{"inputs":[` + strings.Join(hdr, ",") + `]}`
		req, _ := http.NewRequest(http.MethodPost, srv.url+"/v2/models/fraud/infer", bytes.NewReader(append([]byte(h), bytes.Join(cols, nil)...)))
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(len(h)))
		req.Header.Set("X-Request-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	st, b := sendBinary([][]byte{bAm, bAg, bDc, bCo}, "cat-bin")
	if st != 200 {
		t.Fatalf("REST binary: %d %s", st, b)
	}
	got["binary"] = oipScores("REST binary", b)

	m, out, err := grpcurl(t, bin, gaddr, "ModelInfer", fmt.Sprintf(`{"model_name":"fraud","id":"cat-grpc","parameters":{"idempotency_key":{"string_param":"cat-grpc"}},"inputs":[`+
		`{"name":"amount","shape":["%d"],"datatype":"FP32","contents":{"fp32_contents":[%s]}},`+
		`{"name":"accountAgeDays","shape":["%d"],"datatype":"INT64","contents":{"int64_contents":[%s]}},`+
		`{"name":"declines5m","shape":["%d"],"datatype":"INT64","contents":{"int64_contents":[%s]}},`+
		`{"name":"country","shape":["%d"],"datatype":"BYTES","contents":{"bytes_contents":[%s]}}]}`,
		n, strings.Join(am, ","), n, strings.Join(ag, ","), n, strings.Join(dc, ","), n, strings.Join(gCo, ",")), true)
	if err != nil {
		t.Fatalf("grpcurl: %v\n%s", err, out)
	}
	outs, _ := m["outputs"].([]any)
	if len(outs) != 1 {
		t.Fatalf("gRPC answer %v", m)
	}
	contents, _ := outs[0].(map[string]any)["contents"].(map[string]any)
	vals, _ := either(contents, "fp32_contents", "fp32Contents").([]any)
	for _, v := range vals {
		x, _ := v.(float64)
		got["grpc"] = append(got["grpc"], float32(x))
	}
	for tr, s := range got {
		if len(s) != len(want) {
			t.Fatalf("%s: %v, /v1 %v", tr, s, want)
		}
		for i := range want {
			if math.Float32bits(s[i]) != math.Float32bits(want[i]) {
				t.Errorf("%s row %d: %v, /v1 %v", tr, i, s[i], want[i])
			}
		}
	}

	// One input hash in the four records (written asynchronously).
	var hashes map[string]string
	testwait.Until(t, 10*time.Second, func() bool {
		hashes = map[string]string{}
		for _, r := range listRecords(t, srv.url, "model=fraud&limit=100", "") {
			hashes[r.RequestID] = r.InputHash
		}
		return len(hashes) >= 4
	})
	h := hashes["cat-v1"]
	if h == "" || hashes["cat-rest"] != h || hashes["cat-bin"] != h || hashes["cat-grpc"] != h {
		t.Fatalf("input hashes %v: want one for the four encodings", hashes)
	}

	// An unknown category in row 1, as bytes: 400 naming the input and row.
	bad := le.LittleEndian.AppendUint32(nil, 2)
	bad = append(bad, "US"...)
	bad = le.LittleEndian.AppendUint32(bad, 2)
	bad = append(bad, "FR"...)
	bad = le.LittleEndian.AppendUint32(bad, 2)
	bad = append(bad, "DE"...)
	st, b = sendBinary([][]byte{bAm, bAg, bDc, bad}, "cat-bad")
	if st != 400 || !strings.Contains(string(b), `input \"country\" row 1: unknown category \"FR\" (expected one of US, GB, DE)`) {
		t.Fatalf("unknown category: %d %s", st, b)
	}
	srv.stop(t)
}
