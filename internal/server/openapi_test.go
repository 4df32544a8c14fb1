package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/docs"
	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/apispec"
	"github.com/sluiceml/sluice/internal/drift"
	"github.com/sluiceml/sluice/internal/oip"
	"github.com/sluiceml/sluice/internal/telemetry"
)

// loadSpec is docs/openapi.yaml, loaded and validated by kin-openapi
// (OpenAPI 3.1, JSON Schema 2020-12).
func loadSpec(t *testing.T) *apispec.Spec {
	t.Helper()
	s, err := apispec.Load()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOpenAPIValid: docs/openapi.yaml is valid OpenAPI 3.1, and GET
// /openapi.json answers the same document as JSON.
func TestOpenAPIValid(t *testing.T) {
	spec := loadSpec(t)
	if !spec.Doc.IsOpenAPI31OrLater() {
		t.Errorf("docs/openapi.yaml is OpenAPI %s, want 3.1", spec.Doc.OpenAPI)
	}
	ts := newTestServer(t, Config{})
	resp, err := http.Get(ts.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	want, err := yamlToJSON(docs.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	var got, exp any
	if json.Unmarshal(b, &got) != nil || json.Unmarshal(want, &exp) != nil || !reflect.DeepEqual(got, exp) {
		t.Fatalf("GET /openapi.json is not docs/openapi.yaml as JSON")
	}
	if _, err := apispec.Parse(b); err != nil {
		t.Fatalf("the served JSON does not load: %v", err)
	}
}

// TestOpenAPICoversEveryRoute: every route the server registers under
// /v1 and /v2 (and the others the description lists) has its paths in
// docs/openapi.yaml, every call of routeCalls that reaches a handler is
// an operation there, and every operation there is served (a call to it
// is no "no route" answer) and answers as described.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	spec := loadSpec(t)
	m := telemetry.New(telemetry.NewRegistry(), telemetry.BuildInfo{Version: "test", GoVersion: "go"})
	ts, _, s := newTestServerAll(t, Config{Metrics: m, Workers: fakeWorkers{}}, examples.FS)
	do := func(method, p string) (*http.Request, *http.Response, []byte) {
		var body io.Reader
		ct := "application/json"
		switch {
		case strings.HasSuffix(p, "/versions"):
			ct, body = "application/gzip", strings.NewReader("not a package")
		case method == "POST" || method == "PUT":
			body = strings.NewReader(`{}`)
		}
		req, _ := http.NewRequest(method, ts.URL+p, body)
		if body != nil {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return req, resp, b
	}
	ops := spec.Operations()
	// Every route registered has operations under it.
	for _, rt := range s.Routes() {
		pattern := rt.Pattern
		if _, p, ok := strings.Cut(pattern, " "); ok {
			pattern = p
		}
		if pattern == "/" {
			continue // the catch-all: its answer is "no route"
		}
		covered := false
		for _, o := range ops {
			if o.Path == pattern || (strings.HasSuffix(pattern, "/") && strings.HasPrefix(o.Path, pattern)) {
				covered = true
			}
		}
		if !covered && (strings.HasPrefix(pattern, "/v1") || strings.HasPrefix(pattern, "/v2")) {
			t.Errorf("route %q is served but no path of docs/openapi.yaml is under it: %s", rt.Pattern, apispec.Fix)
		}
	}
	// Every call the route tests make that reaches a handler is described
	// and answers as described.
	for _, calls := range routeCalls {
		for _, call := range calls {
			method, p, _ := strings.Cut(call, " ")
			req, resp, b := do(method, p)
			if err := spec.Check(req, resp.StatusCode, resp.Header, b); err != nil {
				t.Error(err)
			}
		}
	}
	// Every operation is served.
	for _, o := range ops {
		p := fill(t, o)
		req, resp, b := do(o.Method, p)
		if apispec.NoRoute(resp.StatusCode, b) {
			t.Errorf("docs/openapi.yaml has %s %s but the server does not serve it (%s %s answered %d %s): remove it, or serve it",
				o.Method, o.Path, o.Method, p, resp.StatusCode, bytes.TrimSpace(b))
			continue
		}
		if err := spec.Check(req, resp.StatusCode, resp.Header, b); err != nil {
			t.Error(err)
		}
	}
}

// fill is o's path with each parameter its example.
func fill(t *testing.T, o apispec.Operation) string {
	p := o.Path
	params := append(o.Item.Parameters, o.Op.Parameters...)
	for _, pr := range params {
		if pr.Value == nil || pr.Value.In != "path" {
			continue
		}
		ex := pr.Value.Example
		if ex == nil {
			t.Errorf("%s %s: path parameter %s has no example: add one in docs/openapi.yaml", o.Method, o.Path, pr.Value.Name)
			continue
		}
		p = strings.ReplaceAll(p, "{"+pr.Value.Name+"}", strings.TrimSpace(jsonString(ex)))
	}
	return p
}

func jsonString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// goTypes are the Go types docs/openapi.yaml's schemas name in
// x-go-type: the wire types of internal/api and the few bodies other
// packages encode.
var goTypes = []any{
	api.ErrorBody{}, api.ErrorDetail{}, api.PredictResponse{}, api.Field{}, api.Input{}, api.Enrichment{}, api.Output{},
	api.Timings{}, api.Serving{}, api.Version{}, api.VersionSummary{}, api.Model{}, api.InvalidPackage{}, api.ModelList{}, api.DeploymentList{}, api.ExperimentList{},
	api.PublishResponse{}, api.Readiness{}, api.Target{}, api.Deployment{}, api.SetTraffic{}, api.Policy{}, api.Event{},
	api.History{}, api.StartRollout{}, api.Gate{}, api.Rollout{}, api.RolloutAction{}, api.ShadowReport{}, api.Record{},
	api.Records{}, api.Change{}, api.DeletedModel{}, api.JobIO{}, api.JobSubmit{}, api.JobSpec{}, api.JobRowError{},
	api.JobStatus{}, api.JobList{}, api.OutcomeBatch{}, api.Outcome{}, api.OutcomeResult{}, api.ExperimentSpec{}, api.QualityFigure{}, api.ExperimentArm{}, api.ExperimentPoint{}, api.Experiment{}, api.WorkerList{}, api.WorkerDemand{}, api.Worker{}, api.WorkerVersion{},
	api.ModelStats{}, api.VersionStats{}, api.StatPoint{}, api.EventWeight{}, api.EventDeployment{}, api.EventRollout{},
	api.EventVersion{}, api.EventWorker{}, api.EventAudit{}, api.EventReset{},
	drift.Report{}, drift.Drift{}, oip.Metadata{}, oip.TensorMeta{}, serverMetadata{},
}

// handWritten are component schemas of bodies no Go type describes:
// encoded or decoded by hand.
var handWritten = map[string]string{
	"ModelName":        "a string",
	"PredictRequest":   "decoded by hand, strictly (decode.go)",
	"OIPParameters":    "a map of the protocol",
	"OIPInferRequest":  "decoded by hand (internal/oip rest.go)",
	"OIPInferResponse": "encoded by hand (internal/oip binary.go)",
}

func goName(t reflect.Type) string { return path.Base(t.PkgPath()) + "." + t.Name() }

// TestOpenAPISchemasMatchGoTypes: each schema of docs/openapi.yaml that
// documents a Go type has exactly that type's json fields, required
// where they are always written, typed as encoding/json writes them; so
// a field added to internal/api without its schema fails here.
func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	spec := loadSpec(t)
	types := map[string]reflect.Type{}
	for _, v := range goTypes {
		rt := reflect.TypeOf(v)
		types[goName(rt)] = rt
	}
	used := map[string]bool{}
	names := spec.GoTypes()
	var schemas []string
	for name := range spec.Doc.Components.Schemas {
		schemas = append(schemas, name)
	}
	sort.Strings(schemas)
	for _, name := range schemas {
		g, ok := names[name]
		if !ok {
			if handWritten[name] == "" {
				t.Errorf("components.schemas.%s names no Go type: add x-go-type (and the type to goTypes in %s), or list it in handWritten", name, "internal/server/openapi_test.go")
			}
			continue
		}
		rt, ok := types[g]
		if !ok {
			t.Errorf("components.schemas.%s: x-go-type %s is not in goTypes (internal/server/openapi_test.go): add it", name, g)
			continue
		}
		used[g] = true
		for _, p := range spec.CheckGoType(name, rt, goName) {
			t.Error(p)
		}
	}
	for g := range types {
		if !used[g] {
			t.Errorf("Go type %s is in goTypes but no schema of docs/openapi.yaml names it (x-go-type)", g)
		}
	}
}
