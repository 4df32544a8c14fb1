package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/testwait"
)

// cachedPackage is writePackage with cache: in its model.yaml.
func cachedPackage(t *testing.T, dir string, w []float64, expect float64) string {
	t.Helper()
	writePackage(t, dir, w, expect)
	f, err := os.OpenFile(filepath.Join(dir, "model.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("cache: {ttl: 10m, maxBytes: 1MiB}\n"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// calcRows is a /v1 body of rows x = lo..hi-1, z = 1.
func calcRows(lo, hi int) string {
	var b strings.Builder
	b.WriteString(`{"instances":[`)
	for i := lo; i < hi; i++ {
		if i > lo {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"x":%d,"z":1}`, i)
	}
	b.WriteString("]}")
	return b.String()
}

// TestPredictionCache runs a model with cache: through the real binary:
// repeated rows hit, another tenant's same row misses, another version
// misses, a partial hit computes only its misses (the metrics say so),
// X-Cache on /v1, OIP REST and gRPC, and the records say what was cached.
func TestPredictionCache(t *testing.T) {
	data, models, pkgs := t.TempDir(), t.TempDir(), t.TempDir()
	cachedPackage(t, filepath.Join(models, "calc"), []float64{1, 2}, 3.5)
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	os.WriteFile(tenants, []byte(fmt.Sprintf(`tenants:
  - {name: acme, keys: ["sha256:%s"], models: ["*"]}
  - {name: globex, keys: ["sha256:%s"], models: ["*"]}
  - {name: ops, keys: ["sha256:%s"], models: ["*"], admin: true}
`, sha("acme-key"), sha("globex-key"), sha("ops-key"))), 0o644)
	gaddr := freeAddr(t)
	srv := startServer(t, "--data", data, "--models", models, "--tenants", tenants, "--grpc-addr", gaddr)
	defer srv.stop(t)

	v1 := srv.url + "/v1/models/calc:predict"
	post := func(url, key, body string, want string) rawAnswer {
		t.Helper()
		a, err := postRaw(t, url, body, map[string]string{"Authorization": "Bearer " + key})
		if err != nil || a.status != 200 {
			t.Fatalf("POST %s: %v %d %s", url, err, a.status, a.body)
		}
		if got := a.header.Get("X-Cache"); got != want {
			t.Fatalf("POST %s %s: X-Cache %q, want %q", url, body[:min(len(body), 60)], got, want)
		}
		return a
	}
	metric := func(series string) float64 {
		t.Helper()
		v, _ := metricSample(t, srv.url, series)
		return v
	}
	hits := func(version string) float64 {
		return metric(`sluice_cache_requests_total{model="calc",result="hit",version="` + version + `"}`)
	}
	misses := func(version string) float64 {
		return metric(`sluice_cache_requests_total{model="calc",result="miss",version="` + version + `"}`)
	}
	// Rows computed by the model (in this process; with workers the
	// batches run there and the gateway has no such series).
	batched := func() (float64, bool) {
		return metricSample(t, srv.url, `sluice_batch_size_sum{model="calc",version="1"}`)
	}

	// 10 rows: computed. The same 10: answered from the cache.
	post(v1, "acme-key", calcRows(0, 10), "miss")
	a := post(v1, "acme-key", calcRows(0, 10), "hit")
	var p api.PredictResponse
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Predictions) != 10 || p.Predictions[3]["y"] != 3+2+0.5 {
		t.Fatalf("cached answer: %s", a.body)
	}
	b0, inProcess := batched()
	// 20 rows, 10 of them cached: only 10 computed, answers in order.
	a = post(v1, "acme-key", calcRows(0, 20), "partial")
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatal(err)
	}
	for i, pr := range p.Predictions {
		if pr["y"] != float64(i)+2.5 {
			t.Fatalf("partial answer row %d: %v", i, pr)
		}
	}
	if h, m := hits("1"), misses("1"); h != 20 || m != 20 {
		t.Fatalf("after the partial hit: %v hits, %v misses, want 20 and 20", h, m)
	}
	if b1, _ := batched(); inProcess && b1-b0 != 10 {
		t.Fatalf("the partial hit computed %v rows, want 10", b1-b0)
	}
	// hit + miss is every instance served.
	if n := metric(`sluice_instances_total{code="2xx",model="calc",version="1"}`); n != hits("1")+misses("1") {
		t.Fatalf("instances %v, hits + misses %v", n, hits("1")+misses("1"))
	}
	// Another tenant, the same rows: a miss (never acme's entry).
	post(v1, "globex-key", calcRows(0, 10), "miss")
	if m := misses("1"); m != 30 {
		t.Fatalf("globex's rows: %v misses, want 30", m)
	}

	// OIP REST: the same row as /v1 is the same entry (the key is the
	// row the model receives).
	rest := `{"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1,2]},{"name":"z","datatype":"FP32","shape":[2],"data":[1,1]}]}`
	post(srv.url+"/v2/models/calc/infer", "acme-key", rest, "hit")
	rest2 := `{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[500]},{"name":"z","datatype":"FP32","shape":[1],"data":[1]}]}`
	post(srv.url+"/v2/models/calc/infer", "acme-key", rest2, "miss")

	// OIP gRPC: header x-cache and the response parameter cache.
	conn, err := grpc.NewClient(gaddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer acme-key"), 10*time.Second)
	defer cancel()
	req := &inferencepb.ModelInferRequest{ModelName: "calc", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{500}}},
		{Name: "z", Datatype: "FP32", Shape: []int64{1}, Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{1}}},
	}}
	var hdr metadata.MD
	resp, err := inferencepb.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, req, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get("x-cache"); len(got) != 1 || got[0] != "hit" || resp.Parameters["cache"].GetStringParam() != "hit" {
		t.Fatalf("gRPC: x-cache %v, parameter %v", got, resp.Parameters["cache"])
	}

	// The CLI shows X-Cache (on stderr; stdout is the answer).
	cli := exec.Command(binary, "predict", "calc", `{"x":1,"z":1}`, "--server", srv.url)
	cli.Env = append(os.Environ(), "SLUICE_API_KEY=acme-key")
	var out, errb strings.Builder
	cli.Stdout, cli.Stderr = &out, &errb
	if err := cli.Run(); err != nil || !strings.Contains(errb.String(), "X-Cache: hit") || !strings.Contains(out.String(), `"y":3.5`) {
		t.Fatalf("sluice predict: %v stdout %q stderr %q", err, out.String(), errb.String())
	}

	// A new version: the same rows miss there.
	push := exec.Command(binary, "push", cachedPackage(t, filepath.Join(pkgs, "v2"), []float64{1, 3}, 4.5), "--server", srv.url)
	push.Env = append(os.Environ(), "SLUICE_API_KEY=ops-key")
	if o, err := push.CombinedOutput(); err != nil || !strings.Contains(string(o), "calc@2") {
		t.Fatalf("push v2: %v %s", err, o)
	}
	v2 := srv.url + "/v1/models/calc/versions/2:predict"
	post(v2, "acme-key", calcRows(0, 10), "miss")
	post(v2, "acme-key", calcRows(0, 10), "hit")
	if _, ok := metricSample(t, srv.url, `sluice_cache_entries{model="calc",version="2"}`); !ok {
		t.Fatal("no sluice_cache_entries series of calc@2")
	}
	if b, _ := metricSample(t, srv.url, `sluice_cache_bytes{model="calc",version="1"}`); b <= 0 || b > 1<<20 {
		t.Fatalf("sluice_cache_bytes of calc@1: %v", b)
	}

	// Records: a hit writes its record too, with the instances cached.
	testwait.Until(t, 10*time.Second, func() bool {
		return len(listRecords(t, srv.url, "model=calc&limit=100", "ops-key")) >= 10 // every answer above
	})
	var cached []int
	for _, r := range listRecords(t, srv.url, "model=calc&tenant=acme&limit=100", "ops-key") {
		if r.Version == 1 && r.Outcome == "ok" {
			cached = append(cached, r.Cached)
		}
	}
	// Newest first: CLI (1 of 1), gRPC (1), REST miss (0), REST hit (2),
	// partial (10), hit (10), miss (0).
	if fmt.Sprint(cached) != "[1 1 0 2 10 10 0]" {
		t.Fatalf("records' cached instances: %v", cached)
	}

	// Archived: the version's cache is dropped.
	arch := exec.Command(binary, "archive", "calc@2", "--server", srv.url)
	arch.Env = append(os.Environ(), "SLUICE_API_KEY=ops-key")
	if o, err := arch.CombinedOutput(); err != nil {
		t.Fatalf("archive calc@2: %v %s", err, o)
	}
	if _, ok := metricSample(t, srv.url, `sluice_cache_entries{model="calc",version="2"}`); ok {
		t.Fatal("calc@2's cache is still there after its archive")
	}
}
