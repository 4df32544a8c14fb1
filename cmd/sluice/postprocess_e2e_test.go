package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/testwait"
)

// postprocessPackage is a linear model (score = x) whose postprocess:
// calibrates the score (Platt: probability = 1/(1+exp(-score))), labels it
// with a threshold (and answers the threshold), and maps the label to a
// business code. Its golden example expects the post-processed outputs.
const postprocessYAML = `name: risk
runtime: linear
artifact: model.json
input:
  schema: risk-input@1
  fields: [{name: x, type: float}]
output:
  schema: risk-output@1
  fields: [{name: score}]
postprocess:
  - {op: calibrate, output: score, as: probability, method: platt, a: -1, b: 0}
  - {op: threshold, output: probability, as: label, threshold: 0.5, labels: [ok, fraud], thresholdAs: threshold}
  - {op: map, output: label, as: action, values: {ok: APPROVE, fraud: REVIEW}}
golden:
  - instance: {x: 2}
    expect: {score: 2, probability: 0.880797, label: fraud, threshold: 0.5, action: REVIEW}
    tolerance: 1e-6
`

// TestPostprocessThroughTheBinary: a version with postprocess: (Platt
// calibration, a threshold to a label, a map to a code) answers the
// post-processed outputs on /v1 (labels by name), OIP REST and OIP gRPC
// (labels as BYTES tensors), and its saved answer replays them after a
// restart; with --workers 2 as in process (the gateway post-processes the
// model's FP32 outputs after the hop). A bad step is refused by check
// with its line.
func TestPostprocessThroughTheBinary(t *testing.T) {
	pkg := filepath.Join(t.TempDir(), "risk")
	mkdir(t, pkg)
	writeFile(t, filepath.Join(pkg, "model.json"), []byte(`{"weights": [[1]], "bias": [0], "link": "identity"}`))
	writeFile(t, filepath.Join(pkg, "model.yaml"), []byte(postprocessYAML))
	if out, stderr, err := sluice(t, "check", pkg); err != nil || !strings.Contains(out, "output    risk-output@1: score, probability, label, threshold, action") {
		t.Fatalf("check: %v\n%s%s", err, out, stderr)
	}

	// A threshold on a label, at its line.
	badPkg := filepath.Join(t.TempDir(), "bad")
	mkdir(t, badPkg)
	writeFile(t, filepath.Join(badPkg, "model.json"), []byte(`{"weights": [[1]], "bias": [0], "link": "identity"}`))
	writeFile(t, filepath.Join(badPkg, "model.yaml"), []byte(strings.Replace(postprocessYAML, "{op: map, output: label, as: action, values: {ok: APPROVE, fraud: REVIEW}}", "{op: round, output: label, digits: 1}", 1)))
	if _, stderr, err := sluice(t, "check", badPkg); err == nil || !strings.Contains(stderr, `model.yaml:13: postprocess[2].output: "label" holds labels, not numbers (round needs a number)`) {
		t.Fatalf("check of a bad step: %v %s", err, stderr)
	}

	modes := [][]string{nil, {"--workers", "2"}}
	var answers [][]byte
	for _, mode := range modes {
		data := t.TempDir()
		gaddr := freeAddr(t)
		args := append([]string{"--data", data, "--models", t.TempDir(), "--grpc-addr", gaddr}, mode...)
		srv := startServer(t, args...)
		if out, stderr, err := sluice(t, "push", pkg, "--server", srv.url); err != nil || !strings.Contains(out, "state=ready") {
			t.Fatalf("push %v: %v\n%s%s", mode, err, out, stderr)
		}
		// /v1: numbers, and the labels by name.
		body := `{"instances":[{"x":2},{"x":-1}]}`
		a, err := postRaw(t, srv.url+"/v1/models/risk:predict", body, map[string]string{"X-Request-Id": "pp-1"})
		if err != nil || a.status != 200 {
			t.Fatalf("/v1 %v: %v %d %s", mode, err, a.status, a.body)
		}
		answers = append(answers, a.body)
		var p api.PredictResponse
		if err := json.Unmarshal(a.body, &p); err != nil || len(p.Predictions) != 2 || len(p.Labels) != 2 {
			t.Fatalf("/v1 %v: %v %s", mode, err, a.body)
		}
		want := []map[string]float64{
			{"score": 2, "probability": float64(float32(0.880797)), "label": 1, "threshold": 0.5, "action": 0},
			{"score": -1, "probability": float64(float32(0.26894143)), "label": 0, "threshold": 0.5, "action": 1},
		}
		wantLabels := [][2]string{{"fraud", "REVIEW"}, {"ok", "APPROVE"}}
		for i := range want {
			for k, w := range want[i] {
				if g := p.Predictions[i][k]; float32(g) != float32(w) && !(k == "probability" && abs(g-w) < 1e-6) {
					t.Errorf("/v1 %v instance %d %s = %v, want %v", mode, i, k, g, w)
				}
			}
			if l, c := p.Labels[i]["label"], p.Labels[i]["action"]; l == nil || c == nil || *l != wantLabels[i][0] || *c != wantLabels[i][1] {
				t.Errorf("/v1 %v instance %d labels %s", mode, i, a.body)
			}
		}
		// OIP REST: the label and the code are BYTES tensors.
		r, err := postRaw(t, srv.url+"/v2/models/risk/infer", `{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[2,-1]}]}`, nil)
		if err != nil || r.status != 200 {
			t.Fatalf("OIP REST %v: %v %d %s", mode, err, r.status, r.body)
		}
		var o struct {
			Outputs []struct {
				Name, Datatype string
				Data           []any
			}
		}
		if err := json.Unmarshal(r.body, &o); err != nil || len(o.Outputs) != 5 {
			t.Fatalf("OIP REST %v: %v %s", mode, err, r.body)
		}
		for _, t2 := range o.Outputs {
			switch t2.Name {
			case "label":
				if t2.Datatype != "BYTES" || t2.Data[0] != "fraud" || t2.Data[1] != "ok" {
					t.Errorf("OIP REST %v label: %s", mode, r.body)
				}
			case "action":
				if t2.Datatype != "BYTES" || t2.Data[0] != "REVIEW" || t2.Data[1] != "APPROVE" {
					t.Errorf("OIP REST %v action: %s", mode, r.body)
				}
			case "threshold":
				if t2.Datatype != "FP32" || t2.Data[0] != 0.5 {
					t.Errorf("OIP REST %v threshold: %s", mode, r.body)
				}
			}
		}
		// OIP gRPC: BYTES tensors in bytes_contents (base64 in grpcurl's JSON).
		if bin := os.Getenv("SLUICE_GRPCURL"); bin != "" {
			m, out, err := grpcurl(t, bin, gaddr, "ModelInfer", `{"model_name":"risk","inputs":[{"name":"x","shape":["2"],"datatype":"FP32","contents":{"fp32_contents":[2,-1]}}]}`, true)
			if err != nil {
				t.Fatalf("grpcurl %v: %v\n%s", mode, err, out)
			}
			found := false
			for _, x := range m["outputs"].([]any) {
				om := x.(map[string]any)
				if om["name"] != "label" {
					continue
				}
				found = true
				bs := either(om["contents"].(map[string]any), "bytes_contents", "bytesContents").([]any)
				if om["datatype"] != "BYTES" || len(bs) != 2 || bs[0] != "ZnJhdWQ=" || bs[1] != "b2s=" { // base64 of fraud, ok
					t.Errorf("gRPC %v label: %v", mode, om)
				}
			}
			if !found {
				t.Errorf("gRPC %v: no label output in %v", mode, m)
			}
		} else {
			t.Log("SLUICE_GRPCURL is not set: the gRPC transport is not driven here (make test sets it)")
		}
		// The record's saved answer: a retry after a restart replays the
		// post-processed outputs and labels.
		testwait.Until(t, 30*time.Second, func() bool { return len(listRecords(t, srv.url, "model=risk", "")) >= 1 })
		srv.stop(t)
		srv = startServer(t, append([]string{"--data", data, "--models", t.TempDir()}, mode...)...)
		re, err := postRaw(t, srv.url+"/v1/models/risk:predict", body, map[string]string{"X-Request-Id": "pp-1"})
		if err != nil || re.status != 200 || !bytes.Equal(re.body, a.body) || re.header.Get("Idempotent-Replay") != "true" {
			t.Errorf("replay after a restart %v: %v %d %q\n%s\nvs\n%s", mode, err, re.status, re.header.Get("Idempotent-Replay"), re.body, a.body)
		}
		srv.stop(t)
	}
	if !bytes.Equal(answers[0], answers[1]) {
		t.Errorf("in process and --workers 2 answer differently:\n%s\n%s", answers[0], answers[1])
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
