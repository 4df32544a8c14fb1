package worker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/cluster"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/runtime"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/testwait"
	"github.com/sluiceml/sluice/internal/worker"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// artifacts is a map standing in for the registry's artifact store.
type artifacts map[string][]byte

func (a artifacts) OpenArtifact(_ context.Context, sha string) (io.ReadCloser, int64, error) {
	b, ok := a[sha]
	if !ok {
		return nil, 0, fmt.Errorf("no artifact %s", sha)
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

func linear(t *testing.T, arts artifacts, n int, expect float64) cluster.VersionSpec {
	t.Helper()
	art := []byte(`{"weights":[[1,2]],"bias":[0.5],"link":"identity"}`)
	sum := sha256.Sum256(art)
	sha := hex.EncodeToString(sum[:])
	arts[sha] = art
	y := fmt.Sprintf("name: calc\nruntime: linear\nartifact: model.json\ninput:\n  schema: i@1\n  fields: [{name: x, type: float}, {name: z, type: float}]\noutput:\n  schema: o@1\n  fields: [{name: y}]\ngolden:\n  - instance: {x: 1, z: 1}\n    expect: {y: %v}\n", expect)
	spec, err := modelpkg.Parse("model.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cluster.VersionSpec{Model: "calc", N: n, Manifest: []byte(y), ArtifactSHA: sha, ArtifactBytes: int64(len(art)), Spec: spec}
}

// A real worker process's code against a real control plane, over gRPC on
// loopback: register, load (fetch, verify, golden), serve, refuse, unload.
func TestWorkerAgainstControlPlane(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	arts := artifacts{}
	pool := cluster.New(cluster.Config{Artifacts: arts, Join: testJoin, Known: []string{"w1"}, HeartbeatInterval: 20 * time.Millisecond, Logger: log})
	defer pool.Close()
	w := startWorker(t, pool, worker.Config{ID: "w1", Logger: log})

	sctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	v, tm, err := pool.Start(sctx, linear(t, arts, 1, 3.5))
	if err != nil {
		t.Fatal(err)
	}
	if tm.Load <= 0 {
		t.Errorf("timings %+v", tm)
	}
	res, err := v.Submit(sctx, serving.Work{Rows: runtime.Batch{Rows: 2, Cols: 2, Data: []float32{1, 1, 2, 3}}})
	if err != nil || res.Out.Data[0] != 3.5 || res.Out.Data[1] != 8.5 || res.Attempts != 1 {
		t.Fatalf("predict: %+v %v", res, err)
	}

	// A version whose golden example does not match fails with the reason.
	_, _, err = pool.Start(sctx, linear(t, arts, 2, 99))
	if err == nil || !strings.Contains(err.Error(), "golden example 0 of calc@2") {
		t.Errorf("golden mismatch: %v", err)
	}

	// The status reaches the control plane.
	testwait.UntilNil(t, 10*time.Second, func() error {
		ws := pool.Workers()
		if len(ws) == 1 && ws[0].RSS > 0 && len(ws[0].Versions) >= 1 && ws[0].Versions[0].ID == "calc@1" && ws[0].Versions[0].Batches > 0 {
			return nil
		}
		return fmt.Errorf("workers: %+v", ws)
	})

	// Bad tensors sent straight to the worker name the tensor.
	addr := pool.Workers()[0].Address
	conn := dialWorker(t, w, addr)
	ic := inferencepb.NewGRPCInferenceServiceClient(conn)
	req := &inferencepb.ModelInferRequest{ModelName: "calc", ModelVersion: "1"}
	hop.EncodeBatch(req, runtime.Batch{Rows: 1, Cols: 2, Data: []float32{1, 2}})
	req.RawInputContents[0] = req.RawInputContents[0][:7]
	_, err = ic.ModelInfer(sctx, req)
	if e, _ := hop.FromStatus(err); e.Code != errs.InvalidArgument || !strings.Contains(e.Message, `tensor "rows"`) {
		t.Errorf("short raw contents: %+v", e)
	}
	_, err = ic.ModelInfer(sctx, &inferencepb.ModelInferRequest{ModelName: "calc", ModelVersion: "9"})
	if e, _ := hop.FromStatus(err); e.Code != errs.NotReady {
		t.Errorf("unknown version: %+v", e)
	}

	// The replica pool grows and shrinks; new replicas are checked first.
	wc := workerpb.NewWorkerClient(conn)
	for _, n := range []int32{3, 1} {
		r, err := wc.SetReplicas(sctx, &workerpb.SetReplicasRequest{Model: "calc", Version: 1, Replicas: n})
		if err != nil || r.ReadyReplicas != n {
			t.Fatalf("set replicas %d: %+v %v", n, r, err)
		}
		st, err := wc.Status(sctx, &workerpb.StatusRequest{})
		if err != nil || len(st.Versions) == 0 || st.Versions[0].ReadyReplicas != n {
			t.Fatalf("status after set replicas %d: %+v %v", n, st, err)
		}
		if st.Versions[0].CostBNs <= 0 || st.Versions[0].MaxBatch <= 0 {
			t.Errorf("status carries no cost model: %+v", st.Versions[0])
		}
	}
	if _, err := wc.SetReplicas(sctx, &workerpb.SetReplicasRequest{Model: "calc", Version: 1, Replicas: 0}); err == nil {
		t.Error("0 replicas accepted: unloading is Unload")
	} else if e, _ := hop.FromStatus(err); e.Code != errs.InvalidArgument || e.Field != "replicas" {
		t.Errorf("0 replicas: %+v", e)
	}

	// Unload: the version leaves the worker; calls are refused, not hung.
	if err := v.Close(sctx); err != nil {
		t.Fatal(err)
	}
	_, err = v.Submit(sctx, serving.Work{Rows: runtime.Batch{Rows: 1, Cols: 2, Data: []float32{1, 1}}})
	if errs.CodeOf(err) != errs.NotReady {
		t.Errorf("after unload: %v", err)
	}
}
