package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// grpcurlPath is the independent gRPC client the OIP tests drive.
func grpcurlPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("SLUICE_GRPCURL")
	if p == "" {
		t.Fatal("SLUICE_GRPCURL is not set: run the tests with `make test`, which builds grpcurl (scripts/install-grpcurl.sh)")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("SLUICE_GRPCURL=%s: %v (build it with scripts/install-grpcurl.sh)", p, err)
	}
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// grpcurl calls method with body; reflection when protoFile is false.
func grpcurl(t *testing.T, bin, addr, method, body string, protoFile bool) (map[string]any, string, error) {
	t.Helper()
	args := []string{"-plaintext", "-d", "@"}
	if protoFile {
		args = append(args, "-import-path", "../../proto", "-proto", "inference/grpc_predict_v2.proto")
	}
	args = append(args, addr, "inference.GRPCInferenceService/"+method)
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(body)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var m map[string]any
	if err == nil {
		if jerr := json.Unmarshal([]byte(out.String()), &m); jerr != nil {
			return nil, errb.String(), fmt.Errorf("grpcurl output %q: %v", out.String(), jerr)
		}
	}
	return m, errb.String() + out.String(), err
}

// either reads a key in proto (snake_case) or JSON (camelCase) form.
func either(m map[string]any, snake, camel string) any {
	if v, ok := m[snake]; ok {
		return v
	}
	return m[camel]
}

// oipCase is one instance: its /v1 JSON, its tensors by field.
type oipCase struct {
	model string
	v1    string
	rest  string // OIP REST body
	grpc  string // ModelInfer JSON (typed contents)
}

// tabularCase builds the three bodies for one instance of a tabular model,
// with each field's datatype from the model's OIP metadata.
func tabularCase(t *testing.T, url, model string, inst map[string]any) oipCase {
	t.Helper()
	resp, err := http.Get(url + "/v2/models/" + model)
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Inputs []struct{ Name, Datatype string }
	}
	json.NewDecoder(resp.Body).Decode(&md)
	resp.Body.Close()
	v1, _ := json.Marshal(map[string]any{"instances": []any{inst}})
	var rest, grpc []string
	names := make([]string, 0, len(inst))
	for k := range inst {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, in := range md.Inputs {
		v, ok := inst[in.Name]
		if !ok {
			continue // an optional field left out
		}
		jv, _ := json.Marshal(v)
		rest = append(rest, fmt.Sprintf(`{"name":%q,"shape":[1],"datatype":%q,"data":[%s]}`, in.Name, in.Datatype, jv))
		contents := map[string]string{"FP32": "fp32_contents", "INT64": "int64_contents", "BOOL": "bool_contents", "BYTES": "bytes_contents"}[in.Datatype]
		if in.Datatype == "BYTES" {
			jv, _ = json.Marshal(base64.StdEncoding.EncodeToString([]byte(v.(string))))
		}
		grpc = append(grpc, fmt.Sprintf(`{"name":%q,"shape":["1"],"datatype":%q,"contents":{%q:[%s]}}`, in.Name, in.Datatype, contents, jv))
	}
	return oipCase{model: model, v1: string(v1),
		rest: `{"inputs":[` + strings.Join(rest, ",") + `]}`,
		grpc: fmt.Sprintf(`{"model_name":%q,"inputs":[%s]}`, model, strings.Join(grpc, ","))}
}

func goldenInstances(t *testing.T, model string) []map[string]any {
	t.Helper()
	var golden []struct {
		Instance map[string]any `json:"instance"`
	}
	b, err := os.ReadFile("../../examples/" + model + "/golden.json")
	if err != nil || json.Unmarshal(b, &golden) != nil {
		t.Fatalf("%s golden.json: %v", model, err)
	}
	out := make([]map[string]any, len(golden))
	for i, g := range golden {
		out[i] = g.Instance
	}
	return out
}

// TestOIPEqualsV1ThroughTheBinary: for every example model, OIP REST, OIP
// gRPC (grpcurl with the .proto file, and through reflection) and /v1
// predict the same values for the same rows.
func TestOIPEqualsV1ThroughTheBinary(t *testing.T) {
	bin := grpcurlPath(t)
	lib := os.Getenv("SLUICE_ONNXRUNTIME_LIB")
	if lib == "" {
		t.Fatal("SLUICE_ONNXRUNTIME_LIB is not set: run the tests with `make test`, which fetches ONNX Runtime (scripts/fetch-onnxruntime.sh)")
	}
	gaddr := freeAddr(t)
	srv := startServer(t, "--data", t.TempDir(), "--models", "../../examples", "--onnxruntime-lib", lib, "--grpc-addr", gaddr)
	var cases []oipCase
	for _, m := range []string{"fraud", "iris", "churn", "mlp"} {
		for _, inst := range goldenInstances(t, m) {
			cases = append(cases, tabularCase(t, srv.url, m, inst))
		}
	}
	// The sequence model: rows of different lengths, right-padded with -1.
	cases = append(cases, oipCase{model: "seq",
		v1:   `{"instances":[{"tokens":[5,17,3]},{"tokens":[9]}]}`,
		rest: `{"inputs":[{"name":"tokens","shape":[2,3],"datatype":"INT64","data":[[5,17,3],[9,-1,-1]]}]}`,
		grpc: `{"model_name":"seq","inputs":[{"name":"tokens","shape":["2","3"],"datatype":"INT64","contents":{"int64_contents":["5","17","3","9","-1","-1"]}}]}`})
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s-%d", c.model, i), func(t *testing.T) {
			a1, err := postRaw(t, srv.url+"/v1/models/"+c.model+":predict", c.v1, nil)
			if err != nil || a1.status != 200 {
				t.Fatalf("/v1: %v %d %s", err, a1.status, a1.body)
			}
			var p1 struct{ Predictions []map[string]float64 }
			json.Unmarshal(a1.body, &p1)
			want := func(name string, row int) float32 { return float32(p1.Predictions[row][name]) }

			a2, err := postRaw(t, srv.url+"/v2/models/"+c.model+"/infer", c.rest, nil)
			if err != nil || a2.status != 200 {
				t.Fatalf("/v2: %v %d %s", err, a2.status, a2.body)
			}
			var p2 struct {
				ModelVersion string `json:"model_version"`
				Outputs      []struct {
					Name string
					Data []float64
				}
			}
			json.Unmarshal(a2.body, &p2)
			if p2.ModelVersion != "1" || len(p2.Outputs) != len(p1.Predictions[0]) {
				t.Fatalf("/v2 answer %s", a2.body)
			}
			for _, o := range p2.Outputs {
				for r, v := range o.Data {
					if float32(v) != want(o.Name, r) {
						t.Errorf("REST %s row %d: %v, /v1 %v", o.Name, r, v, want(o.Name, r))
					}
				}
			}
			for _, protoFile := range []bool{true, false} {
				m, out, err := grpcurl(t, bin, gaddr, "ModelInfer", c.grpc, protoFile)
				if err != nil {
					t.Fatalf("grpcurl ModelInfer (proto file %v): %v\n%s", protoFile, err, out)
				}
				if either(m, "model_version", "modelVersion") != "1" {
					t.Fatalf("grpc answer %v", m)
				}
				for _, o := range m["outputs"].([]any) {
					om := o.(map[string]any)
					data := either(om["contents"].(map[string]any), "fp32_contents", "fp32Contents").([]any)
					for r, v := range data {
						if float32(v.(float64)) != want(om["name"].(string), r) {
							t.Errorf("gRPC %s row %d: %v, /v1 %v", om["name"], r, v, want(om["name"].(string), r))
						}
					}
				}
			}
		})
	}
	// ModelMetadata, with the .proto file and through reflection.
	for _, protoFile := range []bool{true, false} {
		m, out, err := grpcurl(t, bin, gaddr, "ModelMetadata", `{"name":"seq"}`, protoFile)
		if err != nil || m["platform"] != "onnx" || fmt.Sprint(m["versions"]) != "[1]" {
			t.Fatalf("ModelMetadata (proto file %v): %v %v\n%s", protoFile, err, m, out)
		}
	}
	// A bad tensor: INVALID_ARGUMENT naming it.
	_, out, err := grpcurl(t, bin, gaddr, "ModelInfer", `{"model_name":"churn","inputs":[{"name":"plan","shape":["2"],"datatype":"BYTES","contents":{"bytes_contents":["YmFzaWM="]}}]}`, true)
	if err == nil || !strings.Contains(out, "InvalidArgument") || !strings.Contains(out, `input "plan"`) {
		t.Fatalf("bad tensor: %v\n%s", err, out)
	}
	srv.stop(t)
}
