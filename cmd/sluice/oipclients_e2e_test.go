package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/sluiceml/sluice/internal/oip/clienttest"
	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
)

// TestOIPClientsThroughTheBinary replays what tritonclient (http, grpc)
// and the KServe SDK send for each ordinary call (the fixtures of
// internal/oip/testdata/clients, read from the clients' sources) against
// `sluice serve --grpc-addr`, and checks each answer is the one the client
// reads as success; then the standard health service and server
// reflection on the same listener, and a gzip body that inflates past
// --max-body-bytes (a zip bomb) refused with 413 while an honest one is
// served.
func TestOIPClientsThroughTheBinary(t *testing.T) {
	models := t.TempDir()
	copyExample(t, "iris", models)
	copyExample(t, "churn", models)
	gaddr := freeAddr(t)
	srv := startServer(t, "--data", t.TempDir(), "--models", models, "--grpc-addr", gaddr, "--max-body-bytes", "65536")
	cc, err := grpc.NewClient(gaddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	works, all := clienttest.ReplayAll(t, "../../internal/oip/testdata/clients", srv.url, pb.NewGRPCInferenceServiceClient(cc))
	t.Logf("ordinary tritonclient http/grpc and KServe SDK calls that work through the binary: %d of %d", works, all)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, svc := range []string{"", "inference.GRPCInferenceService"} {
		h, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("grpc.health.v1 Check(%q): %v %v", svc, h, err)
		}
	}
	st, err := reflectpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	rr, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rr.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "inference.GRPCInferenceService") || !strings.Contains(got, "grpc.health.v1.Health") {
		t.Errorf("reflection lists %q", got)
	}

	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	send := func(body []byte) (int, string) {
		req, _ := http.NewRequest("POST", srv.url+"/v2/models/churn/infer", bytes.NewReader(body))
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	honest := `{"inputs":[{"name":"tenureMonths","shape":[1],"datatype":"FP32","data":[3]},{"name":"supportTickets","shape":[1],"datatype":"INT64","data":[4]},{"name":"plan","shape":[1],"datatype":"BYTES","data":["basic"]}]}`
	if code, b := send(gz([]byte(honest))); code != 200 || !strings.Contains(b, "churnProbability") {
		t.Errorf("gzip body: %d %s", code, b)
	}
	bomb := gz(append([]byte(`{"inputs":[`), bytes.Repeat([]byte(" "), 64<<20)...)) // 64 MiB of spaces in ~64 KiB
	if len(bomb) > 65536 {
		t.Fatalf("the bomb is %d bytes compressed: it should fit the body bound", len(bomb))
	}
	if code, b := send(bomb); code != 413 || !strings.Contains(b, "decompresses past 65536 bytes") {
		t.Errorf("zip bomb: %d %s", code, b)
	}
}
