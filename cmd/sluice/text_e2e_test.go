package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluiceml/sluice/internal/api"
)

// textRows are internal/runtime/onnx/testdata/text_ref.json: rows of
// input_ids and attention_mask of lengths 1..128 and numpy's class
// probabilities for each row alone (scripts/make_onnx_text_fixture.py).
type textRows struct {
	Labels []string
	Rows   []struct {
		InputIDs      []int64   `json:"input_ids"`
		AttentionMask []int64   `json:"attention_mask"`
		Probs         []float64 `json:"probs"`
	}
}

func readTextRows(t *testing.T) textRows {
	t.Helper()
	var ref textRows
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "runtime", "onnx", "testdata", "text_ref.json"))
	if err != nil || json.Unmarshal(b, &ref) != nil || len(ref.Rows) < 10 || len(ref.Labels) != 3 {
		t.Fatalf("text_ref.json: %v", err)
	}
	return ref
}

// TestMultiInputONNXThroughTheBinary pushes examples/text (an ONNX model
// with two inputs, input_ids and attention_mask, int64 [batch, seq]) to a
// real server with ONNX Runtime and predicts rows of lengths 1..128 that
// no client padded: all in one /v1 request, one request per row at once
// (batched within length buckets, padded by Sluice: ids with padValue,
// the mask with 0), and as OIP REST and gRPC tensors. Every answer equals
// numpy's output for the row alone within 1e-5; bad inputs are 400s
// naming the field.
func TestMultiInputONNXThroughTheBinary(t *testing.T) {
	lib := os.Getenv("SLUICE_ONNXRUNTIME_LIB")
	if lib == "" {
		t.Fatal("SLUICE_ONNXRUNTIME_LIB is not set: run the tests with `make test`, which fetches ONNX Runtime (scripts/fetch-onnxruntime.sh)")
	}
	bin := grpcurlPath(t)
	ref := readTextRows(t)
	gaddr := freeAddr(t)
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir(), "--onnxruntime-lib", lib, "--grpc-addr", gaddr)
	out, stderr, err := sluice(t, "check", "../../examples/text")
	if err != nil || !strings.Contains(out, "2 sequence inputs of one length, 1 to 128 per instance") || !strings.Contains(out, "attention_mask int64 [batch, seq]: mask (0 or 1, padded with 0)") {
		t.Fatalf("check: %v %q %q", err, out, stderr)
	}
	if out, stderr, err := sluice(t, "push", "../../examples/text", "--server", srv.url); err != nil || !strings.Contains(out, "state=ready") {
		t.Fatalf("push: %v %q %q", err, out, stderr)
	}
	url := srv.url + "/v1/models/text:predict"
	inst := func(i int) string {
		b, _ := json.Marshal(map[string]any{"input_ids": ref.Rows[i].InputIDs, "attention_mask": ref.Rows[i].AttentionMask})
		return string(b)
	}
	check := func(what string, i int, got map[string]float64) {
		t.Helper()
		for j, l := range ref.Labels {
			if d := math.Abs(got[l] - ref.Rows[i].Probs[j]); d > 1e-5 || math.IsNaN(got[l]) {
				t.Errorf("%s: row %d (length %d) %s: %v, numpy %v", what, i, len(ref.Rows[i].InputIDs), l, got[l], ref.Rows[i].Probs[j])
			}
		}
	}

	// The model's description names both inputs.
	var v api.Version
	resp, err := http.Get(srv.url + "/v1/models/text/versions/1")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err != nil || v.Input == nil || len(v.Input.Fields) != 2 ||
		!v.Input.Fields[1].Mask || v.Input.Fields[0].DType != "int64" || v.Input.Fields[0].MaxLength != 128 {
		t.Fatalf("version: %v %+v", err, v.Input)
	}

	// All rows in one request.
	var all []string
	for i := range ref.Rows {
		all = append(all, inst(i))
	}
	a, err := postRaw(t, url, `{"instances":[`+strings.Join(all, ",")+`]}`, nil)
	if err != nil || a.status != 200 {
		t.Fatalf("predict all rows: %v %d %s", err, a.status, a.body)
	}
	var p api.PredictResponse
	if err := json.Unmarshal(a.body, &p); err != nil || p.ModelVersion != "text@1" || len(p.Predictions) != len(ref.Rows) {
		t.Fatalf("predict all rows: %s", a.body)
	}
	for i := range ref.Rows {
		check("/v1, one request", i, p.Predictions[i])
	}

	// One request per row, all at once, several times over: they batch.
	var wg sync.WaitGroup
	for k := 0; k < 4; k++ {
		for i := range ref.Rows {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := postRaw(t, url, `{"instances":[`+inst(i)+`]}`, nil)
				if err != nil || a.status != 200 {
					t.Errorf("row %d alone: %v %d %s", i, err, a.status, a.body)
					return
				}
				var p api.PredictResponse
				if err := json.Unmarshal(a.body, &p); err != nil || len(p.Predictions) != 1 {
					t.Errorf("row %d alone: %s", i, a.body)
					return
				}
				check("/v1, a request each", i, p.Predictions[0])
			}()
		}
	}
	wg.Wait()

	// OIP REST and gRPC: one [n,L] tensor per input, rows right-padded
	// with -1 (the protocol's tensors are rectangular; -1 is no value).
	pick := []int{0, 4, 9, 14, len(ref.Rows) - 1}
	longest := 0
	for _, i := range pick {
		longest = max(longest, len(ref.Rows[i].InputIDs))
	}
	tensor := func(get func(i int) []int64) []int64 {
		var flat []int64
		for _, i := range pick {
			r := get(i)
			flat = append(flat, r...)
			for range longest - len(r) {
				flat = append(flat, -1)
			}
		}
		return flat
	}
	ids := tensor(func(i int) []int64 { return ref.Rows[i].InputIDs })
	mask := tensor(func(i int) []int64 { return ref.Rows[i].AttentionMask })
	jsonOf := func(x any) string { b, _ := json.Marshal(x); return string(b) }
	rest := fmt.Sprintf(`{"id":"7","inputs":[{"name":"input_ids","shape":[%d,%d],"datatype":"INT64","data":%s},{"name":"attention_mask","shape":[%d,%d],"datatype":"INT64","data":%s}]}`,
		len(pick), longest, jsonOf(ids), len(pick), longest, jsonOf(mask))
	a, err = postRaw(t, srv.url+"/v2/models/text/infer", rest, nil)
	if err != nil || a.status != 200 {
		t.Fatalf("OIP REST: %v %d %s", err, a.status, a.body)
	}
	var p2 struct {
		Outputs []struct {
			Name string
			Data []float64
		}
	}
	if err := json.Unmarshal(a.body, &p2); err != nil || len(p2.Outputs) != 3 {
		t.Fatalf("OIP REST answer %s", a.body)
	}
	for r, i := range pick {
		got := map[string]float64{}
		for _, o := range p2.Outputs {
			got[o.Name] = o.Data[r]
		}
		check("OIP REST", i, got)
	}
	strs := func(xs []int64) string {
		s := make([]string, len(xs))
		for i, x := range xs {
			s[i] = fmt.Sprintf("%q", fmt.Sprint(x))
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	grpc := fmt.Sprintf(`{"model_name":"text","inputs":[{"name":"input_ids","shape":["%d","%d"],"datatype":"INT64","contents":{"int64_contents":%s}},{"name":"attention_mask","shape":["%d","%d"],"datatype":"INT64","contents":{"int64_contents":%s}}]}`,
		len(pick), longest, strs(ids), len(pick), longest, strs(mask))
	m, gout, err := grpcurl(t, bin, gaddr, "ModelInfer", grpc, true)
	if err != nil {
		t.Fatalf("grpcurl ModelInfer: %v\n%s", err, gout)
	}
	gotRows := make([]map[string]float64, len(pick))
	for r := range gotRows {
		gotRows[r] = map[string]float64{}
	}
	for _, o := range m["outputs"].([]any) {
		om := o.(map[string]any)
		for r, v := range either(om["contents"].(map[string]any), "fp32_contents", "fp32Contents").([]any) {
			gotRows[r][om["name"].(string)] = v.(float64)
		}
	}
	for r, i := range pick {
		check("OIP gRPC", i, gotRows[r])
	}

	// Bad inputs: 400s naming the field.
	bad := []struct{ name, body, field, msg string }{
		{"lengths differ", `{"instances":[{"input_ids":[5,6,7],"attention_mask":[1,1]}]}`, "instances[0].attention_mask", "has 2 mask values but input_ids has 3"},
		{"mask value", `{"instances":[{"input_ids":[5,6],"attention_mask":[1,2]}]}`, "instances[0].attention_mask[1]", "a mask value is 0 or 1, got 2"},
		{"mask missing", `{"instances":[{"input_ids":[5,6]}]}`, "instances[0].attention_mask", "required field is missing"},
		{"token id", `{"instances":[{"input_ids":[5,-6],"attention_mask":[1,1]}]}`, "instances[0].input_ids[1]", "[0, 2^31)"},
	}
	for _, c := range bad {
		a, err := postRaw(t, url, c.body, nil)
		var e api.ErrorBody
		if err != nil || a.status != 400 || json.Unmarshal(a.body, &e) != nil || e.Error.Field != c.field || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %v %d %s; want 400 naming %s: ...%s...", c.name, err, a.status, a.body, c.field, c.msg)
		}
	}
	a, err = postRaw(t, srv.url+"/v2/models/text/infer", `{"inputs":[{"name":"input_ids","shape":[1,2],"datatype":"INT64","data":[5,6]},{"name":"attention_mask","shape":[1,1],"datatype":"INT64","data":[1]}]}`, nil)
	if err != nil || a.status != 400 || !strings.Contains(string(a.body), "has 1 mask values but input_ids has 2") {
		t.Errorf("OIP REST lengths differ: %v %d %s", err, a.status, a.body)
	}
	srv.stop(t)
}
