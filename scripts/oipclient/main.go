//go:build ignore

// The program scripts/test-oip.sh builds against a Go client it generates
// from proto/inference/grpc_predict_v2.proto (package oipclient/inference,
// made in a temporary module: nothing of Sluice's code is linked). It
// calls the server at os.Args[1] as any OIP gRPC client would and exits 1
// on an answer that is not the protocol's. (The build tag keeps it out of
// Sluice's module; the script drops the tag in its copy.)
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	inference "oipclient/inference"
)

func fp32(xs ...float32) []byte {
	b := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "oipclient: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: oipclient HOST:PORT")
	}
	cc, err := grpc.NewClient(os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail("dial: %v", err)
	}
	defer cc.Close()
	c := inference.NewGRPCInferenceServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Wait for readiness, as a deployment's probe would.
	for {
		r, err := c.ServerReady(ctx, &inference.ServerReadyRequest{})
		if err == nil && r.Ready {
			break
		}
		if ctx.Err() != nil {
			fail("never ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r, err := c.ServerLive(ctx, &inference.ServerLiveRequest{}); err != nil || !r.Live {
		fail("ServerLive: %v %v", r, err)
	}
	if r, err := c.ServerMetadata(ctx, &inference.ServerMetadataRequest{}); err != nil || r.Name != "sluice" {
		fail("ServerMetadata: %v %v", r, err)
	}
	if r, err := c.ModelReady(ctx, &inference.ModelReadyRequest{Name: "iris"}); err != nil || !r.Ready {
		fail("ModelReady(iris): %v %v", r, err)
	}
	if r, err := c.ModelReady(ctx, &inference.ModelReadyRequest{Name: "nope"}); err != nil || r.Ready {
		fail("ModelReady(nope): want OK and ready false, got %v %v", r, err)
	}
	md, err := c.ModelMetadata(ctx, &inference.ModelMetadataRequest{Name: "iris"})
	if err != nil || md.Name != "iris" || len(md.Inputs) != 4 || len(md.Outputs) != 3 {
		fail("ModelMetadata(iris): %v %v", md, err)
	}
	if h, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		fail("grpc.health.v1 Check: %v %v", h, err)
	}

	// examples/iris's first golden row and its answer.
	row := []float32{5.1, 3.5, 1.4, 0.2}
	names := []string{"sepalLength", "sepalWidth", "petalLength", "petalWidth"}
	const setosa = 0.9531188
	params := map[string]*inference.InferParameter{
		"priority": {ParameterChoice: &inference.InferParameter_Uint64Param{Uint64Param: 1}},
		"timeout":  {ParameterChoice: &inference.InferParameter_Int64Param{Int64Param: 5000000}},
		"scale":    {ParameterChoice: &inference.InferParameter_DoubleParam{DoubleParam: 0.5}},
	}
	raw := &inference.ModelInferRequest{ModelName: "iris", Id: "1", Parameters: params}
	typed := &inference.ModelInferRequest{ModelName: "iris", Id: "1"}
	for i, n := range names {
		raw.Inputs = append(raw.Inputs, &inference.ModelInferRequest_InferInputTensor{Name: n, Datatype: "FP32", Shape: []int64{1}})
		raw.RawInputContents = append(raw.RawInputContents, fp32(row[i]))
		typed.Inputs = append(typed.Inputs, &inference.ModelInferRequest_InferInputTensor{Name: n, Datatype: "FP32", Shape: []int64{1},
			Contents: &inference.InferTensorContents{Fp32Contents: []float32{row[i]}}})
	}
	r, err := c.ModelInfer(ctx, raw)
	if err != nil || r.Id != "1" || r.ModelVersion != "1" || len(r.RawOutputContents) != 3 || r.Outputs[0].Name != "setosa" {
		fail("ModelInfer raw: %v %v", r, err)
	}
	if v := math.Float32frombits(binary.LittleEndian.Uint32(r.RawOutputContents[0])); math.Abs(float64(v)-setosa) > 1e-6 {
		fail("ModelInfer raw: setosa %v, want %v", v, setosa)
	}
	// The same id again with typed contents: echoed, not a replay.
	r, err = c.ModelInfer(ctx, typed)
	if err != nil || r.Id != "1" || len(r.RawOutputContents) != 0 || len(r.Outputs) != 3 {
		fail("ModelInfer typed: %v %v", r, err)
	}
	if v := r.Outputs[0].Contents.Fp32Contents[0]; math.Abs(float64(v)-setosa) > 1e-6 {
		fail("ModelInfer typed: setosa %v, want %v", v, setosa)
	}
	fmt.Println("oipclient: 9 calls answered as the protocol says")
}
