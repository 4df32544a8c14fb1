// Package clienttest replays what the official Open Inference Protocol
// clients send (tritonclient http and grpc, the KServe SDK), kept as
// fixtures in internal/oip/testdata/clients by
// scripts/make_oip_client_fixtures.py from the clients' sources, against
// a running server, and checks each answer is the one that client reads
// as success. internal/server's tests replay them against the handlers,
// cmd/sluice's e2e against the real binary. Imported by tests only.
package clienttest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
)

// Fixture is one file of internal/oip/testdata/clients (written by
// scripts/make_oip_client_fixtures.py from the clients' sources): the
// request an official client sends for one call and what it expects.
type Fixture struct {
	Name, Client, Call, Source, Transport, Note string
	Request                                     struct {
		Method, Path string
		Headers      map[string]string
		Body         string
		BodyBase64   string `json:"body_base64"`
		RPC          string
		Message      json.RawMessage
	}
	Expect struct {
		Status    int
		Code      string
		JSON      map[string]any
		Outputs   map[string][]float64
		Binary    *bool
		Raw       *bool
		Tolerance float64
	}
}

// Load reads every fixture of dir (internal/oip/testdata/clients), in
// file order.
func Load(t testing.TB, dir string) []Fixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	var out []Fixture
	for _, p := range files {
		var f Fixture
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &f)
		}
		if err != nil || f.Source == "" || f.Client == "" || f.Name == "" {
			t.Fatalf("%s: %v (every fixture names its client, call and source)", p, err)
		}
		out = append(out, f)
	}
	return out
}

// Replay sends f to the server (baseURL for REST, c for gRPC) and fails t
// unless the answer is the one the client reads as success.
func Replay(t *testing.T, f *Fixture, baseURL string, c pb.GRPCInferenceServiceClient) {
	switch f.Transport {
	case "rest":
		replayREST(t, baseURL, f)
	case "grpc":
		replayGRPC(t, c, f)
	default:
		t.Fatalf("transport %q", f.Transport)
	}
}

// ReplayAll replays every fixture of dir in order, each a subtest, and
// returns how many worked and how many there are.
func ReplayAll(t *testing.T, dir, baseURL string, c pb.GRPCInferenceServiceClient) (works, all int) {
	fs := Load(t, dir)
	for i := range fs {
		f := &fs[i]
		if t.Run(f.Name, func(t *testing.T) { Replay(t, f, baseURL, c) }) {
			works++
		}
	}
	return works, len(fs)
}

func replayREST(t *testing.T, url string, f *Fixture) {
	body := []byte(f.Request.Body)
	if f.Request.BodyBase64 != "" {
		var err error
		if body, err = base64.StdEncoding.DecodeString(f.Request.BodyBase64); err != nil {
			t.Fatal(err)
		}
	}
	if hl, ok := f.Request.Headers["Inference-Header-Content-Length"]; ok && f.Request.Headers["Content-Encoding"] == "" {
		n, err := strconv.Atoi(hl)
		if err != nil || n > len(body) || !json.Valid(body[:n]) {
			t.Fatalf("fixture: Inference-Header-Content-Length %s is not the JSON header's length", hl)
		}
	}
	var resp *http.Response
	var rb []byte
	for try := 1; ; try++ {
		req, err := http.NewRequest(f.Request.Method, url+f.Request.Path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range f.Request.Headers {
			req.Header.Set(k, v)
		}
		if resp, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		rb, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		// A refusal of a busy machine (the examples' deadlines are
		// 50ms) is retried as the clients retry it, a few times.
		if try == 3 || f.Expect.Status != 200 || resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusGatewayTimeout {
			break
		}
		t.Logf("try %d: %d %s", try, resp.StatusCode, rb)
	}
	if resp.StatusCode != f.Expect.Status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, f.Expect.Status, rb)
	}
	head := rb
	hl := resp.Header.Get("Inference-Header-Content-Length")
	if f.Expect.Binary != nil && *f.Expect.Binary != (hl != "") {
		t.Fatalf("Inference-Header-Content-Length %q, want binary %v", hl, *f.Expect.Binary)
	}
	if hl != "" {
		n, err := strconv.Atoi(hl)
		if err != nil || n > len(rb) {
			t.Fatalf("Inference-Header-Content-Length %q of %d bytes", hl, len(rb))
		}
		head = rb[:n]
	}
	if f.Expect.JSON == nil && f.Expect.Outputs == nil {
		return
	}
	var got map[string]any
	if err := json.Unmarshal(head, &got); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, head)
	}
	if msg := subset(f.Expect.JSON, got); msg != "" {
		t.Fatalf("%s\n%s", msg, head)
	}
	if f.Expect.Outputs == nil {
		return
	}
	// As tritonclient's InferResult.as_numpy and KServe's
	// InferResponse.from_bytes read it: binary_data_size bytes in output
	// order after the header, else data.
	vals := map[string][]float64{}
	tail := rb[len(head):]
	outs, _ := got["outputs"].([]any)
	for _, o := range outs {
		om := o.(map[string]any)
		name := om["name"].(string)
		if ps, ok := om["parameters"].(map[string]any); ok && ps["binary_data_size"] != nil {
			k := int(ps["binary_data_size"].(float64))
			if k > len(tail) || om["datatype"] != "FP32" {
				t.Fatalf("output %s: %d bytes of %s, %d left", name, k, om["datatype"], len(tail))
			}
			vals[name] = fp32Values(tail[:k])
			tail = tail[k:]
			continue
		}
		for _, x := range om["data"].([]any) {
			vals[name] = append(vals[name], x.(float64))
		}
	}
	checkOutputs(t, f, vals)
}

func replayGRPC(t *testing.T, c pb.GRPCInferenceServiceClient, f *Fixture) {
	ctx := context.Background()
	var req proto.Message
	var call func() (proto.Message, error)
	switch f.Request.RPC {
	case "ServerLive":
		r := &pb.ServerLiveRequest{}
		req, call = r, func() (proto.Message, error) { return c.ServerLive(ctx, r) }
	case "ServerReady":
		r := &pb.ServerReadyRequest{}
		req, call = r, func() (proto.Message, error) { return c.ServerReady(ctx, r) }
	case "ModelReady":
		r := &pb.ModelReadyRequest{}
		req, call = r, func() (proto.Message, error) { return c.ModelReady(ctx, r) }
	case "ModelMetadata":
		r := &pb.ModelMetadataRequest{}
		req, call = r, func() (proto.Message, error) { return c.ModelMetadata(ctx, r) }
	case "ModelInfer":
		r := &pb.ModelInferRequest{}
		req, call = r, func() (proto.Message, error) { return c.ModelInfer(ctx, r) }
	default:
		t.Fatalf("rpc %q", f.Request.RPC)
	}
	if err := protojson.Unmarshal(f.Request.Message, req); err != nil {
		t.Fatalf("fixture message: %v", err)
	}
	resp, err := call()
	for try := 1; try < 3 && f.Expect.Code == "OK" && (status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded); try++ {
		t.Logf("try %d: %v", try, err) // a busy machine's refusal, retried as clients do
		resp, err = call()
	}
	if code := status.Code(err).String(); code != f.Expect.Code {
		t.Fatalf("code %s (%v), want %s", code, err, f.Expect.Code)
	}
	if err != nil {
		return
	}
	jb, _ := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(resp)
	var got map[string]any
	_ = json.Unmarshal(jb, &got)
	if msg := subset(f.Expect.JSON, got); msg != "" {
		t.Fatalf("%s\n%s", msg, jb)
	}
	ir, ok := resp.(*pb.ModelInferResponse)
	if !ok {
		return
	}
	if f.Expect.Raw != nil && *f.Expect.Raw != (len(ir.RawOutputContents) > 0) {
		t.Fatalf("raw_output_contents %d entries, want raw %v (tritonclient reads raw outputs only)", len(ir.RawOutputContents), *f.Expect.Raw)
	}
	vals := map[string][]float64{}
	for i, o := range ir.Outputs {
		if i < len(ir.RawOutputContents) {
			vals[o.Name] = fp32Values(ir.RawOutputContents[i])
			continue
		}
		for _, x := range o.GetContents().GetFp32Contents() {
			vals[o.Name] = append(vals[o.Name], float64(x))
		}
	}
	checkOutputs(t, f, vals)
}

func fp32Values(b []byte) []float64 {
	out := make([]float64, len(b)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out
}

// checkOutputs compares the outputs answered with the expected ones (the
// examples' golden values): the same names, values within the tolerance
// (default 1e-6).
func checkOutputs(t *testing.T, f *Fixture, got map[string][]float64) {
	t.Helper()
	tol := f.Expect.Tolerance
	if tol == 0 {
		tol = 1e-6
	}
	if len(got) != len(f.Expect.Outputs) {
		t.Fatalf("outputs %v, want %v", got, f.Expect.Outputs)
	}
	for name, want := range f.Expect.Outputs {
		g := got[name]
		if len(g) != len(want) {
			t.Fatalf("output %s: %v, want %v", name, g, want)
		}
		for i := range want {
			if math.Abs(g[i]-want[i]) > tol {
				t.Fatalf("output %s[%d]: %v, want %v", name, i, g[i], want[i])
			}
		}
	}
}

// subset reports how want is not contained in got: every key of an
// object with a value contained in got's, arrays of the same length
// element by element ({} matches any object), scalars equal.
func subset(want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return "expected an object"
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok {
				return "missing " + k
			}
			if msg := subset(v, gv); msg != "" {
				return k + ": " + msg
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return "expected an array of " + strconv.Itoa(len(w))
		}
		for i := range w {
			if msg := subset(w[i], g[i]); msg != "" {
				return "[" + strconv.Itoa(i) + "]: " + msg
			}
		}
		return ""
	case nil:
		return ""
	}
	if !reflect.DeepEqual(want, got) {
		b, _ := json.Marshal(got)
		return "got " + strings.TrimSpace(string(b))
	}
	return ""
}
