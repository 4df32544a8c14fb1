package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// postOIP posts a JSON body without parsing the answer.
func postOIP(t *testing.T, url, body string) result {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type oipOut struct {
	ModelName    string `json:"model_name"`
	ModelVersion string `json:"model_version"`
	ID           string `json:"id"`
	Outputs      []struct {
		Name     string    `json:"name"`
		Datatype string    `json:"datatype"`
		Shape    []int     `json:"shape"`
		Data     []float64 `json:"data"`
	} `json:"outputs"`
}

// TestOIPRESTEqualsV1: the same rows through /v1 and /v2 give the same
// predictions, for every built-in example.
func TestOIPRESTEqualsV1(t *testing.T) {
	ts := newTestServer(t, Config{})
	cases := []struct{ model, v1, v2 string }{
		{"fraud", `{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"},{"amount":12.5,"accountAgeDays":2400,"declines5m":0,"country":"GB"}]}`,
			`{"inputs":[{"name":"amount","shape":[2],"datatype":"FP32","data":[800.0,12.5]},{"name":"accountAgeDays","shape":[2,1],"datatype":"INT64","data":[[91],[2400]]},` +
				`{"name":"declines5m","shape":[2],"datatype":"INT32","data":[3,0]},{"name":"country","shape":[2],"datatype":"BYTES","data":["US","GB"]}]}`},
		{"fraud", `{"instances":[{"amount":250,"accountAgeDays":10}]}`, // optional fields' tensors left out
			`{"inputs":[{"name":"amount","shape":[1],"datatype":"FP64","data":[250]},{"name":"accountAgeDays","shape":[1],"datatype":"INT32","data":[10]}]}`},
		{"iris", `{"instances":[{"sepalLength":5.1,"sepalWidth":3.5,"petalLength":1.4,"petalWidth":0.2}]}`,
			`{"inputs":[{"name":"sepalLength","shape":[1],"datatype":"FP64","data":[5.1]},{"name":"sepalWidth","shape":[1],"datatype":"FP32","data":[3.5]},{"name":"petalLength","shape":[1],"datatype":"FP32","data":[1.4]},{"name":"petalWidth","shape":[1],"datatype":"FP32","data":[0.2]}]}`},
		{"churn", `{"instances":[{"tenureMonths":3,"supportTickets":4,"plan":"basic"},{"tenureMonths":30,"supportTickets":0,"plan":"team"}]}`,
			`{"id":"c-1","inputs":[{"name":"tenureMonths","shape":[2],"datatype":"FP32","data":[3,30]},{"name":"supportTickets","shape":[2],"datatype":"INT64","data":[4,0]},{"name":"plan","shape":[2],"datatype":"BYTES","data":["basic","team"]}]}`},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			r1 := post(t, ts.URL+"/v1/models/"+c.model+":predict", "application/json", c.v1, nil)
			r2 := postOIP(t, ts.URL+"/v2/models/"+c.model+"/infer", c.v2)
			if r1.status != 200 || r2.status != 200 {
				t.Fatalf("/v1 %d %s, /v2 %d %s", r1.status, r1.body, r2.status, r2.body)
			}
			var p1 struct{ Predictions []map[string]float64 }
			var p2 oipOut
			json.Unmarshal(r1.body, &p1)
			if err := json.Unmarshal(r2.body, &p2); err != nil {
				t.Fatal(err)
			}
			if p2.ModelName != c.model || p2.ModelVersion != "1" || r2.header.Get("X-Model-Version") != c.model+"@1" {
				t.Fatalf("names %s %s %s", p2.ModelName, p2.ModelVersion, r2.header.Get("X-Model-Version"))
			}
			for _, o := range p2.Outputs {
				if o.Datatype != "FP32" || len(o.Shape) != 1 || o.Shape[0] != len(p1.Predictions) {
					t.Fatalf("output %+v", o)
				}
				for i, v := range o.Data {
					if v != p1.Predictions[i][o.Name] {
						t.Errorf("%s row %d: /v2 %v, /v1 %v", o.Name, i, v, p1.Predictions[i][o.Name])
					}
				}
			}
		})
	}
}

func TestOIPRESTRejects(t *testing.T) {
	ts := newTestServer(t, Config{MaxBodyBytes: 64 << 10})
	ok := `{"name":"tenureMonths","shape":[1],"datatype":"FP32","data":[3]},{"name":"supportTickets","shape":[1],"datatype":"INT64","data":[4]}`
	plan := `{"name":"plan","shape":[1],"datatype":"BYTES","data":["basic"]}`
	in := func(ts ...string) string { return `{"inputs":[` + strings.Join(ts, ",") + `]}` }
	cases := []struct {
		name, path, body string
		status           int
		want             string // in the message
	}{
		{"wrong shape", "churn", in(ok, `{"name":"plan","shape":[2],"datatype":"BYTES","data":["basic"]}`), 400, `input "plan": shape [2] holds 2 elements but 1 were sent`},
		{"wrong datatype", "churn", in(ok, `{"name":"plan","shape":[1],"datatype":"INT64","data":[1]}`), 400, `input "plan": datatype INT64 does not fit field type category`},
		{"data not of the datatype", "churn", in(ok, `{"name":"plan","shape":[1],"datatype":"BYTES","data":[1]}`), 400, `input "plan": element 0: expected a string`},
		{"int with a fraction", "churn", in(`{"name":"tenureMonths","shape":[1],"datatype":"FP32","data":[3]},{"name":"supportTickets","shape":[1],"datatype":"INT64","data":[1.5]}`, plan), 400, `input "supportTickets": element 0: 1.5 is not an integer`},
		{"unknown tensor", "churn", in(ok, plan, `{"name":"age","shape":[1],"datatype":"FP32","data":[1]}`), 400, `input "age": unknown input tensor`},
		{"missing tensor", "churn", in(ok), 400, `input "plan": required input tensor is missing`},
		{"duplicate tensor", "churn", in(ok, plan, plan), 400, `input "plan": duplicate input tensor`},
		{"mixed row counts", "churn", in(ok, `{"name":"plan","shape":[2],"datatype":"BYTES","data":["basic","pro"]}`), 400, `input "plan": has 2 rows but input "tenureMonths" has 1`},
		{"rank 3", "churn", in(ok, `{"name":"plan","shape":[1,1,1],"datatype":"BYTES","data":["basic"]}`), 400, `input "plan": shape [1,1,1]`},
		{"schema per row", "churn", in(`{"name":"tenureMonths","shape":[2],"datatype":"FP32","data":[3,-1]},{"name":"supportTickets","shape":[2],"datatype":"INT64","data":[4,4]}`, `{"name":"plan","shape":[2],"datatype":"BYTES","data":["basic","gold"]}`), 400, `input "tenureMonths" row 1: must be >= 0`},
		{"unknown category", "churn", in(ok, `{"name":"plan","shape":[1],"datatype":"BYTES","data":["gold"]}`), 400, `input "plan" row 0: unknown category "gold"`},
		{"unknown key", "churn", `{"inputs":[` + ok + `,` + plan + `],"foo":1}`, 400, `foo: unknown key`},
		{"unknown tensor key", "churn", in(ok, `{"name":"plan","shape":[1],"datatype":"BYTES","data":["basic"],"extra":1}`), 400, `input "plan": unknown key "extra"`},
		{"unknown datatype", "churn", in(ok, `{"name":"plan","shape":[1],"datatype":"FP8","data":["basic"]}`), 400, `input "plan": datatype "FP8" is not supported`},
		{"an unknown parameter is ignored", "churn", `{"parameters":{"x":1,"sequence_id":7},"inputs":[` + ok + `,` + plan + `]}`, 200, ``},
		{"model_name of another model", "churn", `{"model_name":"fraud","inputs":[` + ok + `,` + plan + `]}`, 400, `model_name: "fraud" differs from the model of the path, "churn"`},
		{"unknown output", "churn", `{"inputs":[` + ok + `,` + plan + `],"outputs":[{"name":"nope"}]}`, 400, `output "nope": unknown output`},
		{"no inputs", "churn", `{"id":"x"}`, 400, `inputs: is required`},
		{"unknown model", "nope", in(ok), 404, `model "nope" not found`},
		{"too large", "churn", `{"inputs":[` + ok + `,` + plan + `]` + strings.Repeat(" ", 70<<10) + `}`, 413, `--max-body-bytes`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := postOIP(t, ts.URL+"/v2/models/"+c.path+"/infer", c.body)
			var eb struct{ Error string }
			if err := json.Unmarshal(r.body, &eb); err != nil {
				t.Fatalf("body %s", r.body)
			}
			if r.status != c.status || !strings.Contains(eb.Error, c.want) {
				t.Fatalf("got %d %q, want %d containing %q", r.status, eb.Error, c.status, c.want)
			}
		})
	}
}

func TestOIPRESTMetadataAndReplay(t *testing.T) {
	ts := newTestServer(t, Config{Version: "test"})
	if st, b := get(t, ts.URL+"/v2"); st != 200 || string(b) != `{"name":"sluice","version":"test","extensions":["binary_tensor_data"]}`+"\n" {
		t.Fatalf("/v2: %d %s", st, b)
	}
	for _, p := range []string{"/v2/health/live", "/v2/health/ready", "/v2/models/fraud/ready", "/v2/models/fraud/versions/1/ready"} {
		if st, b := get(t, ts.URL+p); st != 200 || !bytes.Contains(b, []byte(`true`)) {
			t.Fatalf("%s: %d %s", p, st, b)
		}
	}
	st, b := get(t, ts.URL+"/v2/models/fraud")
	want := `{"name":"fraud","versions":["1"],"platform":"xgboost","inputs":[{"name":"amount","datatype":"FP32","shape":[-1]},{"name":"accountAgeDays","datatype":"INT64","shape":[-1]},` +
		`{"name":"declines5m","datatype":"INT64","shape":[-1]},{"name":"country","datatype":"BYTES","shape":[-1]}],"outputs":[{"name":"riskScore","datatype":"FP32","shape":[-1]}]}` + "\n"
	if st != 200 || string(b) != want {
		t.Fatalf("metadata: %d\n%s\nwant\n%s", st, b, want)
	}
	if st, _ := get(t, ts.URL+"/v2/models/fraud/versions/9"); st != 404 {
		t.Fatalf("unknown version: %d", st)
	}
	// The body's id is echoed, never an idempotency key: the same id
	// with other rows is another request.
	byID := `{"id":"1","inputs":[{"name":"amount","shape":[1],"datatype":"FP32","data":[800]},{"name":"accountAgeDays","shape":[1],"datatype":"INT64","data":[91]}]}`
	one := postOIP(t, ts.URL+"/v2/models/fraud/versions/1/infer", byID)
	two := postOIP(t, ts.URL+"/v2/models/fraud/versions/1/infer", strings.Replace(byID, "800", "801", 1))
	if one.status != 200 || two.status != 200 || two.header.Get("Idempotent-Replay") != "" || !bytes.Contains(two.body, []byte(`"id":"1"`)) || one.header.Get("X-Request-Id") == "1" {
		t.Fatalf("id reused: %d %s / %d %s", one.status, one.body, two.status, two.body)
	}
	body := `{"id":"oip-1","parameters":{"idempotency_key":"oip-1"},"inputs":[{"name":"amount","shape":[1],"datatype":"FP32","data":[800]},{"name":"accountAgeDays","shape":[1],"datatype":"INT64","data":[91]}]}`
	first := postOIP(t, ts.URL+"/v2/models/fraud/versions/1/infer", body)
	again := postOIP(t, ts.URL+"/v2/models/fraud/versions/1/infer", body)
	if first.status != 200 || !bytes.Equal(first.body, again.body) || again.header.Get("Idempotent-Replay") != "true" || first.header.Get("X-Request-Id") != "oip-1" {
		t.Fatalf("replay: %d %s / %s %q", first.status, first.body, again.body, again.header.Get("Idempotent-Replay"))
	}
	if !bytes.Contains(first.body, []byte(`"id":"oip-1"`)) || !bytes.Contains(first.body, []byte(`"model_version":"1"`)) {
		t.Fatalf("body %s", first.body)
	}
	conflict := postOIP(t, ts.URL+"/v2/models/fraud/versions/1/infer", strings.Replace(body, "800", "801", 1))
	if conflict.status != 409 {
		t.Fatalf("conflict: %d %s", conflict.status, conflict.body)
	}
}
