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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/testwait"
)

// copyExample copies an example package into dir.
func copyExample(t *testing.T, name, dir string) {
	t.Helper()
	src := filepath.Join("../../examples", name)
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOIPBinaryThroughTheBinary: the OIP REST binary tensor extension
// through the real server, driven by net/http: FP32 inputs as bytes,
// binary outputs, the same predictions as /v1 and as gRPC raw contents
// (grpcurl), one input hash in the three records, and a truncated body
// refused with a message naming the input.
func TestOIPBinaryThroughTheBinary(t *testing.T) {
	bin := grpcurlPath(t)
	models := t.TempDir()
	copyExample(t, "iris", models)
	gaddr := freeAddr(t)
	srv := startServer(t, "--data", t.TempDir(), "--models", models, "--grpc-addr", gaddr)

	rows := [][4]float32{{5.1, 3.5, 1.4, 0.2}, {6.6, 3.0, 4.4, 1.4}}
	fields := []string{"sepalLength", "sepalWidth", "petalLength", "petalWidth"}
	var header []string
	cols := make([][]byte, 4)
	for j, f := range fields {
		header = append(header, fmt.Sprintf(`{"name":%q,"shape":[2,1],"datatype":"FP32","parameters":{"binary_data_size":8}}`, f))
		for _, r := range rows {
			cols[j] = le.LittleEndian.AppendUint32(cols[j], math.Float32bits(r[j]))
		}
	}
	hdr := `{"id":"bin-1","parameters":{"binary_data_output":true},"inputs":[` + strings.Join(header, ",") + `]}`
	send := func(body []byte, hl int, id string) (int, http.Header, []byte) {
		req, _ := http.NewRequest(http.MethodPost, srv.url+"/v2/models/iris/infer", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(hl))
		req.Header.Set("X-Request-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	body := append([]byte(hdr), bytes.Join(cols, nil)...)
	st, h, b := send(body, len(hdr), "e2e-bin")
	if st != 200 || h.Get("Content-Type") != "application/octet-stream" || h.Get("X-Model-Version") != "iris@1" {
		t.Fatalf("binary infer: %d %v %s", st, h, b)
	}
	hl, err := strconv.Atoi(h.Get("Inference-Header-Content-Length"))
	if err != nil || hl > len(b) {
		t.Fatalf("Inference-Header-Content-Length %q of %d bytes", h.Get("Inference-Header-Content-Length"), len(b))
	}
	var head struct {
		ModelName    string `json:"model_name"`
		ModelVersion string `json:"model_version"`
		ID           string `json:"id"`
		Outputs      []struct {
			Name       string
			Shape      []int
			Parameters map[string]int
		}
	}
	if err := json.Unmarshal(b[:hl], &head); err != nil || head.ModelName != "iris" || head.ModelVersion != "1" || head.ID != "bin-1" || len(head.Outputs) != 3 {
		t.Fatalf("header %s: %v", b[:hl], err)
	}
	binOut := map[string][]byte{}
	rest := b[hl:]
	for _, o := range head.Outputs {
		k := o.Parameters["binary_data_size"]
		if k != 8 || len(rest) < k {
			t.Fatalf("output %s: binary_data_size %d, %d bytes left", o.Name, k, len(rest))
		}
		binOut[o.Name], rest = rest[:k], rest[k:]
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes after the outputs", len(rest))
	}

	// /v1, the same rows.
	var insts []string
	for _, r := range rows {
		var kv []string
		for j, f := range fields {
			kv = append(kv, fmt.Sprintf("%q:%s", f, strconv.FormatFloat(float64(r[j]), 'g', -1, 32)))
		}
		insts = append(insts, "{"+strings.Join(kv, ",")+"}")
	}
	a1, err := postRaw(t, srv.url+"/v1/models/iris:predict", `{"instances":[`+strings.Join(insts, ",")+`]}`, map[string]string{"X-Request-Id": "e2e-v1"})
	if err != nil || a1.status != 200 {
		t.Fatalf("/v1: %v %d %s", err, a1.status, a1.body)
	}
	var p1 struct{ Predictions []map[string]float64 }
	json.Unmarshal(a1.body, &p1)
	for name, raw := range binOut {
		for i := range rows {
			if v := math.Float32frombits(le.LittleEndian.Uint32(raw[4*i:])); v != float32(p1.Predictions[i][name]) {
				t.Errorf("binary %s row %d: %v, /v1 %v", name, i, v, p1.Predictions[i][name])
			}
		}
	}

	// gRPC raw contents (grpcurl: bytes fields as base64): the same bytes out.
	var gin, graw []string
	for j, f := range fields {
		gin = append(gin, fmt.Sprintf(`{"name":%q,"shape":["2"],"datatype":"FP32"}`, f))
		graw = append(graw, strconv.Quote(base64.StdEncoding.EncodeToString(cols[j])))
	}
	m, out, err := grpcurl(t, bin, gaddr, "ModelInfer", `{"model_name":"iris","id":"e2e-grpc","parameters":{"idempotency_key":{"string_param":"e2e-grpc"}},"inputs":[`+strings.Join(gin, ",")+`],"raw_input_contents":[`+strings.Join(graw, ",")+`]}`, true)
	if err != nil {
		t.Fatalf("grpcurl: %v\n%s", err, out)
	}
	outs, _ := m["outputs"].([]any)
	raws, _ := either(m, "raw_output_contents", "rawOutputContents").([]any)
	if len(outs) != 3 || len(raws) != 3 {
		t.Fatalf("gRPC answer %v", m)
	}
	for k, o := range outs {
		name := o.(map[string]any)["name"].(string)
		got, _ := base64.StdEncoding.DecodeString(raws[k].(string))
		if !bytes.Equal(got, binOut[name]) {
			t.Errorf("gRPC raw %s: % x, REST binary % x", name, got, binOut[name])
		}
	}

	// One input hash in the three records (written asynchronously).
	var hashes map[string]string
	testwait.Until(t, 10*time.Second, func() bool {
		hashes = map[string]string{}
		for _, r := range listRecords(t, srv.url, "model=iris&limit=100", "") {
			hashes[r.RequestID] = r.InputHash
		}
		return len(hashes) >= 3
	})
	if hashes["e2e-bin"] == "" || hashes["e2e-bin"] != hashes["e2e-v1"] || hashes["e2e-bin"] != hashes["e2e-grpc"] {
		t.Fatalf("input hashes %v: want one for the three encodings", hashes)
	}

	// A truncated body: 400 naming the input and what remains.
	st, _, b = send(body[:len(body)-3], len(hdr), "e2e-short")
	if st != 400 || !strings.Contains(string(b), `input \"petalWidth\": binary_data_size 8 runs past the end of the body: 5 bytes`) {
		t.Fatalf("truncated: %d %s", st, b)
	}
	// A header length past the body.
	st, _, b = send(body, len(body)+1, "e2e-long")
	if st != 400 || !strings.Contains(string(b), "Inference-Header-Content-Length") {
		t.Fatalf("header past the body: %d %s", st, b)
	}
	srv.stop(t)
}
