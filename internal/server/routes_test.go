package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/cluster"
	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/tenant"
)

// routeTenants: acme calls fraud and iris*, ops is an admin of fraud
// only, root an admin of every model.
func routeTenants(t *testing.T) (set *tenant.Set, acme, ops, root string) {
	t.Helper()
	acme, ops, root = "acme-route-key", "ops-route-key", "root-route-key"
	file := `tenants:
  - name: acme
    keys: ["sha256:` + sha256hex(acme) + `"]
    models: ["fraud", "iris*"]
  - name: ops
    keys: ["sha256:` + sha256hex(ops) + `"]
    models: ["fraud"]
    admin: true
  - name: root
    keys: ["sha256:` + sha256hex(root) + `"]
    models: ["*"]
    admin: true
`
	set, err := tenant.Parse("tenants.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	return set, acme, ops, root
}

// routeCalls are calls to each pattern of the mux: every pattern
// registered must have some (the test fails on a new one without), each
// a method and a path under it.
var routeCalls = map[string][]string{
	"GET /metrics":  {"GET /metrics"},
	"/healthz":      {"GET /healthz"},
	"/readyz":       {"GET /readyz"},
	"/openapi.json": {"GET /openapi.json"},
	"/v1/records":   {"GET /v1/records", "GET /v1/records?model=fraud"},
	"/v1/models":    {"GET /v1/models"},
	"/v1/workers":   {"GET /v1/workers"},
	"/v1/events":    {"GET /v1/events", "GET /v1/events?models=fraud"},
	"/v1/models/": {"GET /v1/models/fraud", "DELETE /v1/models/fraud", "POST /v1/models/fraud:predict", "POST /v1/models/fraud/versions",
		"GET /v1/models/fraud/versions/1", "POST /v1/models/fraud/versions/1:predict", "POST /v1/models/fraud/versions/1:archive",
		"POST /v1/models/fraud/versions/1:load", "GET /v1/models/fraud/versions/1/drift", "GET /v1/models/fraud/stats", "GET /v1/models/fraud/nothing/here"},
	"/v1/deployments": {"GET /v1/deployments"},
	"/v1/deployments/": {"GET /v1/deployments/fraud", "PUT /v1/deployments/fraud", "POST /v1/deployments/fraud:rollback",
		"GET /v1/deployments/fraud/history", "GET /v1/deployments/fraud/rollout", "POST /v1/deployments/fraud/rollout",
		"POST /v1/deployments/fraud/rollout:pause", "GET /v1/deployments/fraud/experiment", "POST /v1/deployments/fraud/experiment:stop"},
	"/v1/jobs":        {"GET /v1/jobs", "POST /v1/jobs", "GET /v1/jobs?state=running"},
	"/v1/jobs/":       {"GET /v1/jobs/job-1", "POST /v1/jobs/job-1:cancel", "GET /v1/jobs/job-1/nothing"},
	"/v1/outcomes":    {"POST /v1/outcomes", "GET /v1/outcomes"},
	"/v1/experiments": {"GET /v1/experiments"},
	"/v1/lab/":        {"GET /v1/lab/report", "GET /v1/lab/report.json"},
	"/v2":             {"GET /v2"},
	"/v2/health/":     {"GET /v2/health/live", "GET /v2/health/ready"},
	"/v2/": {"GET /v2/models/fraud", "GET /v2/models/fraud/ready", "POST /v2/models/fraud/infer", "GET /v2/models/fraud/versions/1",
		"POST /v2/models/fraud/versions/1/infer"},
	"/ui":  {"GET /ui"},
	"/ui/": {"GET /ui/", "GET /ui/app.js", "GET /ui/models/fraud"},
	"/":    {"GET /nothing", "GET /v1/nothing"},
}

// TestEveryRouteNeedsAKey walks every route the server registers with a
// tenants file set: without a key every one answers 401 except the public
// ones (health, readiness, metrics, OIP server metadata, no-route 404s),
// and an admin route answers 403 to a tenant that is no admin (issue 18,
// finding 10: GET /v1/workers needed no key).
func TestEveryRouteNeedsAKey(t *testing.T) {
	set, acme, _, root := routeTenants(t)
	m := telemetry.New(telemetry.NewRegistry(), telemetry.BuildInfo{Version: "test", GoVersion: "go"})
	ts, _, s := newTestServerAll(t, Config{Tenants: set, Metrics: m, Workers: fakeWorkers{}}, examples.FS)
	do := func(call, key string) int {
		method, path, _ := strings.Cut(call, " ")
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	routes := s.Routes()
	if len(routes) < len(routeCalls) {
		t.Errorf("%d routes registered, %d in the test's table: one is gone", len(routes), len(routeCalls))
	}
	for _, rt := range routes {
		calls, ok := routeCalls[rt.Pattern]
		if !ok {
			t.Errorf("route %q (%s) has no calls in routeCalls: add some, and its row in docs/api.md", rt.Pattern, rt.Access)
			continue
		}
		for _, call := range calls {
			got := do(call, "")
			switch rt.Access {
			case Public:
				if got == http.StatusUnauthorized {
					t.Errorf("%s (public) without a key: 401", call)
				}
			case Key, Admin:
				if got != http.StatusUnauthorized {
					t.Errorf("%s (%s) without a key: %d, want 401", call, rt.Access, got)
				}
				if got := do(call, "not-a-key"); got != http.StatusUnauthorized {
					t.Errorf("%s (%s) with a wrong key: %d, want 401", call, rt.Access, got)
				}
			default:
				t.Errorf("route %q: access %q", rt.Pattern, rt.Access)
			}
			if rt.Access == Admin {
				if got := do(call, acme); got != http.StatusForbidden {
					t.Errorf("%s (admin) with a key of no admin: %d, want 403", call, got)
				}
				if got := do(call, root); got != http.StatusOK {
					t.Errorf("%s (admin) with an admin's key: %d, want 200", call, got)
				}
			}
		}
	}
}

// fakeWorkers hosts fraud and churn.
type fakeWorkers struct{}

func (fakeWorkers) Workers() []cluster.WorkerInfo {
	return []cluster.WorkerInfo{{ID: "w1", State: "ready", Versions: []cluster.WorkerVersion{{ID: "fraud@1", State: "ready"}, {ID: "churn@1", State: "ready"}}}}
}

// TestWorkersFilteredToTheCallersModels: GET /v1/workers shows an admin
// the versions and demand of its own models only.
func TestWorkersFilteredToTheCallersModels(t *testing.T) {
	set, _, ops, root := routeTenants(t)
	demand := func() []cluster.Demand {
		return []cluster.Demand{{Version: "fraud@1", Replicas: 1}, {Version: "churn@1", Replicas: 2}}
	}
	ts, _, _ := newTestServerAll(t, Config{Tenants: set, Workers: fakeWorkers{}, Demand: demand}, examples.FS)
	list := func(key string) (versions, demanded []string) {
		req, _ := http.NewRequest("GET", ts.URL+"/v1/workers", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var wl api.WorkerList
		if err := json.NewDecoder(resp.Body).Decode(&wl); err != nil || resp.StatusCode != 200 || len(wl.Workers) != 1 {
			t.Fatalf("GET /v1/workers: %d %v %+v", resp.StatusCode, err, wl)
		}
		for _, v := range wl.Workers[0].Versions {
			versions = append(versions, v.Version)
		}
		for _, d := range wl.Demand {
			demanded = append(demanded, d.Version)
		}
		return versions, demanded
	}
	if v, d := list(ops); strings.Join(v, ",") != "fraud@1" || strings.Join(d, ",") != "fraud@1" {
		t.Errorf("ops (fraud only) sees versions %v, demand %v; want fraud@1 only", v, d)
	}
	if v, d := list(root); len(v) != 2 || len(d) != 2 {
		t.Errorf("root (every model) sees versions %v, demand %v; want both", v, d)
	}
}

// TestGRPCCallsNeedAKey: every model call of the OIP gRPC service needs a
// key with a tenants file; the server's liveness, readiness and metadata
// (as /v2 and /v2/health) do not.
func TestGRPCCallsNeedAKey(t *testing.T) {
	set, acme, _, _ := routeTenants(t)
	_, _, s := newTestServerAll(t, Config{Tenants: set}, examples.FS)
	_, grpcAddr, _ := serveListeners(t, s)
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := pb.NewGRPCInferenceServiceClient(cc)
	ctx := context.Background()
	calls := map[string]func(context.Context) error{
		"ModelInfer": func(ctx context.Context) error {
			_, err := c.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "fraud"})
			return err
		},
		"ModelMetadata": func(ctx context.Context) error {
			_, err := c.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "fraud"})
			return err
		},
		"ModelReady": func(ctx context.Context) error {
			_, err := c.ModelReady(ctx, &pb.ModelReadyRequest{Name: "fraud"})
			return err
		},
	}
	public := map[string]func(context.Context) error{
		"ServerLive": func(ctx context.Context) error {
			_, err := c.ServerLive(ctx, &pb.ServerLiveRequest{})
			return err
		},
		"ServerReady": func(ctx context.Context) error {
			_, err := c.ServerReady(ctx, &pb.ServerReadyRequest{})
			return err
		},
		"ServerMetadata": func(ctx context.Context) error {
			_, err := c.ServerMetadata(ctx, &pb.ServerMetadataRequest{})
			return err
		},
	}
	for _, m := range pb.GRPCInferenceService_ServiceDesc.Methods {
		if calls[m.MethodName] == nil && public[m.MethodName] == nil {
			t.Errorf("gRPC method %s is in neither list of this test", m.MethodName)
		}
	}
	for name, call := range calls {
		if err := call(ctx); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s without a key: %v, want Unauthenticated", name, err)
		}
		kctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+acme)
		if err := call(kctx); status.Code(err) == codes.Unauthenticated {
			t.Errorf("%s with a key: %v", name, err)
		}
	}
	for name, call := range public {
		if err := call(ctx); err != nil {
			t.Errorf("%s without a key: %v", name, err)
		}
	}
}
