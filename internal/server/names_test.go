package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/records"
)

// TestHugeModelNameIsNeverRecorded: a model name no model can have — a
// 900 KB gRPC model_name, a 40 KB OIP REST path — is refused with
// invalid_argument before the call is recorded (issue 18, finding 12:
// every such call kept its name in records.db, even on 403), on every
// transport.
func TestHugeModelNameIsNeverRecorded(t *testing.T) {
	url, c, store := recordedServer(t)
	ctx := context.Background()
	huge := strings.Repeat("m", 900<<10)
	iris := func(name string) *pb.ModelInferRequest {
		req := &pb.ModelInferRequest{ModelName: name, Id: "huge-1"}
		for j, f := range irisFields {
			req.Inputs = append(req.Inputs, &in{Name: f, Datatype: "FP32", Shape: []int64{3}})
			req.RawInputContents = append(req.RawInputContents, irisColumn(j))
		}
		return req
	}
	for _, name := range []string{huge, "Iris", strings.Repeat("a", 64), ""} {
		_, err := c.ModelInfer(ctx, iris(name))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "model_name") {
			t.Errorf("model_name of %d bytes: %v, want InvalidArgument naming model_name", len(name), err)
		}
		if len(status.Convert(err).Message()) > 1024 {
			t.Errorf("the refusal quotes %d bytes of the name", len(status.Convert(err).Message()))
		}
		_, err = c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: name})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("ModelMetadata of a %d-byte name: %v", len(name), err)
		}
	}
	long := strings.Repeat("m", 40<<10)
	for _, u := range []string{url + "/v2/models/" + long + "/infer", url + "/v1/models/" + long + ":predict"} {
		resp, err := http.Post(u, "application/json", strings.NewReader(`{"inputs":[],"instances":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || len(b) > 1024 {
			t.Errorf("%.30s… (40 KB name): %d, %d bytes %.100s", u, resp.StatusCode, len(b), b)
		}
	}
	// A good call is recorded (the records are on), and it is the only one.
	if _, err := c.ModelInfer(ctx, iris("iris")); err != nil {
		t.Fatal(err)
	}
	rs, err := store.List(ctx, records.Filter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Model != "iris" {
		var names []int
		for _, r := range rs {
			names = append(names, len(r.Model))
		}
		t.Fatalf("records: %d (model name lengths %v), want iris's only", len(rs), names)
	}
}

// TestRecordTextIsBounded: the writer cuts every text of a record to
// records.MaxTextBytes whatever a transport handed it.
func TestRecordTextIsBounded(t *testing.T) {
	_, _, store := recordedServer(t)
	w := records.NewWriter(store, records.Config{Durable: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	long := strings.Repeat("é", 1000)
	if err := w.Commit(ctx, records.Record{RequestID: long, Tenant: long, Model: long, Outcome: long, Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	rs, err := store.List(ctx, records.Filter{Limit: 10})
	if err != nil || len(rs) != 1 {
		t.Fatalf("%d records, %v", len(rs), err)
	}
	for _, s := range []string{rs[0].RequestID, rs[0].Tenant, rs[0].Model, rs[0].Outcome} {
		if len(s) > records.MaxTextBytes || !strings.HasPrefix(long, s) {
			t.Errorf("kept %d bytes (%.20q…), want at most %d, cut at a character", len(s), s, records.MaxTextBytes)
		}
	}
}
