package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/registry"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	_ "github.com/sluiceml/sluice/internal/runtime/xgboost"
)

// newTestServer serves the built-in examples from a fresh data directory.
func newTestServer(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	ts, _ := newTestServerFS(t, cfg, examples.FS)
	return ts
}

// newTestServerFS serves the packages in fsys and returns the controller too.
func newTestServerFS(t *testing.T, cfg Config, fsys fs.FS) (*httptest.Server, *control.Controller) {
	t.Helper()
	ts, ctl, _ := newTestServerAll(t, cfg, fsys)
	return ts, ctl
}

// newTestServerAll is newTestServerFS that returns the *Server too.
func newTestServerAll(t testing.TB, cfg Config, fsys fs.FS) (*httptest.Server, *control.Controller, *Server) {
	t.Helper()
	return newTestServerCtl(t, cfg, control.Config{DeleteQuiet: control.DefaultDeleteQuiet}, fsys)
}

// newTestServerCtl is newTestServerAll with the controller built from ccfg
// (its Store and Logger are set here).
func newTestServerCtl(t testing.TB, cfg Config, ccfg control.Config, fsys fs.FS) (*httptest.Server, *control.Controller, *Server) {
	t.Helper()
	store, err := registry.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ccfg.Store, ccfg.Logger = store, log
	ctl := control.New(ccfg)
	ctx := context.Background()
	if err := ctl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.PublishFS(ctx, fsys, ".", "models"); err != nil {
		t.Fatal(err)
	}
	ctl.MarkStarted()
	for _, v := range ctl.Versions() {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		ctl.Wait(wctx, v.Version.Model, v.Version.N)
		cancel()
	}
	if ok, probs, _ := ctl.Readiness(); !ok {
		t.Fatalf("examples not ready: %v", probs)
	}
	if cfg.Logger == nil {
		cfg.Logger = log
	}
	s := New(cfg, ctl)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close()
		ctl.Close(context.Background())
		store.Close()
	})
	return ts, ctl, s
}

type result struct {
	status int
	header http.Header
	body   []byte
	err    api.ErrorDetail
}

func post(t *testing.T, url, ctype, body string, hdr map[string]string) result {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, header: resp.Header, body: b}
	if resp.StatusCode != 200 {
		var eb api.ErrorBody
		if err := json.Unmarshal(b, &eb); err != nil {
			t.Fatalf("error body is not JSON: %q", b)
		}
		r.err = eb.Error
	}
	return r
}

func TestPredictOK(t *testing.T) {
	ts := newTestServer(t, Config{})
	r := post(t, ts.URL+"/v1/models/fraud:predict", "application/json",
		`{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"},{"amount":250,"accountAgeDays":10}],"deadlineMs":500}`,
		map[string]string{"X-Request-Id": "req-91"})
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var p api.PredictResponse
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.ModelVersion != "fraud@1" || p.SchemaVersion != "fraud-input@3" || p.RequestID != "req-91" {
		t.Errorf("response names %q %q %q", p.ModelVersion, p.SchemaVersion, p.RequestID)
	}
	if r.header.Get("X-Request-Id") != "req-91" {
		t.Errorf("X-Request-Id not echoed")
	}
	// The golden values from xgboost itself.
	if len(p.Predictions) != 2 || p.Predictions[0]["riskScore"] != 0.8455931 || p.Predictions[1]["riskScore"] != 0.5270861 {
		t.Errorf("predictions %v", p.Predictions)
	}
	st := r.header.Get("Server-Timing")
	for _, stage := range []string{"preprocess;", "queue;", "batch_wait;", "compute;", "total;"} {
		if !strings.Contains(st, stage) {
			t.Errorf("Server-Timing %q lacks %s", st, stage)
		}
	}
	// A request id is minted when absent.
	r = post(t, ts.URL+"/v1/models/churn:predict", "application/json", `{"instances":[{"tenureMonths":3,"supportTickets":4,"plan":"basic"}]}`, nil)
	if r.status != 200 || r.header.Get("X-Request-Id") == "" || !bytes.Contains(r.body, []byte(r.header.Get("X-Request-Id"))) {
		t.Errorf("minted request id: %d %q %s", r.status, r.header.Get("X-Request-Id"), r.body)
	}
	// Pinned version.
	r = post(t, ts.URL+"/v1/models/churn/versions/1:predict", "application/json", `{"instances":[{"tenureMonths":3,"supportTickets":4,"plan":"basic"}]}`, nil)
	if r.status != 200 || !bytes.Contains(r.body, []byte(`"modelVersion":"churn@1"`)) {
		t.Errorf("pinned: %d %s", r.status, r.body)
	}
}

func TestPredictRejects(t *testing.T) {
	ts := newTestServer(t, Config{MaxBodyBytes: 128 << 10, MaxDeadline: 10 * time.Second})
	ok := `"tenureMonths":3,"supportTickets":4,"plan":"basic"`
	many := `{"instances":[` + strings.Repeat(`{`+ok+`},`, 1000) + `{` + ok + `}]}`
	big := `{"instances":[{` + ok + `}],"deadlineMs":50` + strings.Repeat(" ", 200<<10) + `}`
	cases := []struct {
		name, path, ctype, body string
		status                  int
		code, field             string
	}{
		{"malformed json", "churn:predict", "application/json", `{"instances":[{`, 400, "invalid_argument", "instances[0]"},
		{"not an object", "churn:predict", "application/json", `[1,2]`, 400, "invalid_argument", ""},
		{"trailing data", "churn:predict", "application/json", `{"instances":[{` + ok + `}]} {}`, 400, "invalid_argument", ""},
		{"duplicate top key", "churn:predict", "application/json", `{"instances":[{` + ok + `}],"instances":[]}`, 400, "invalid_argument", "instances"},
		{"duplicate field", "churn:predict", "application/json", `{"instances":[{` + ok + `,"plan":"pro"}]}`, 400, "invalid_argument", "instances[0].plan"},
		{"wrong content type", "churn:predict", "text/plain", `{"instances":[{` + ok + `}]}`, 415, "unsupported_media_type", ""},
		{"missing content type", "churn:predict", "", `{"instances":[{` + ok + `}]}`, 415, "unsupported_media_type", ""},
		{"body over limit", "churn:predict", "application/json", big, 413, "payload_too_large", ""},
		{"no instances key", "churn:predict", "application/json", `{"deadlineMs":50}`, 400, "invalid_argument", "instances"},
		{"empty instances", "churn:predict", "application/json", `{"instances":[]}`, 400, "invalid_argument", "instances"},
		{"too many instances", "churn:predict", "application/json", many, 413, "too_many_instances", "instances"},
		{"unknown top key", "churn:predict", "application/json", `{"instances":[{` + ok + `}],"foo":1}`, 400, "invalid_argument", "foo"},
		{"unknown field", "churn:predict", "application/json", `{"instances":[{` + ok + `,"age":3}]}`, 400, "invalid_argument", "instances[0].age"},
		{"missing required field", "churn:predict", "application/json", `{"instances":[{` + ok + `},{"tenureMonths":3,"plan":"basic"}]}`, 400, "invalid_argument", "instances[1].supportTickets"},
		{"null for required", "churn:predict", "application/json", `{"instances":[{"tenureMonths":null,"supportTickets":4,"plan":"basic"}]}`, 400, "invalid_argument", "instances[0].tenureMonths"},
		{"NaN literal", "churn:predict", "application/json", `{"instances":[{"tenureMonths":NaN,"supportTickets":4,"plan":"basic"}]}`, 400, "invalid_argument", "instances[0].tenureMonths"},
		{"NaN as string", "churn:predict", "application/json", `{"instances":[{"tenureMonths":"NaN","supportTickets":4,"plan":"basic"}]}`, 400, "invalid_argument", "instances[0].tenureMonths"},
		{"Infinity literal", "churn:predict", "application/json", `{"instances":[{"tenureMonths":Infinity,"supportTickets":4,"plan":"basic"}]}`, 400, "invalid_argument", "instances[0].tenureMonths"},
		{"overflows float64", "churn:predict", "application/json", `{"instances":[{"tenureMonths":1e400,"supportTickets":4,"plan":"basic"}]}`, 400, "invalid_argument", "instances[0].tenureMonths"},
		{"wrong type", "churn:predict", "application/json", `{"instances":[{"tenureMonths":"3","supportTickets":4,"plan":"basic"}]}`, 400, "invalid_argument", "instances[0].tenureMonths"},
		{"nested value", "churn:predict", "application/json", `{"instances":[{"tenureMonths":[3],"supportTickets":4,"plan":"basic"}]}`, 400, "invalid_argument", "instances[0].tenureMonths"},
		{"int given 1.5", "churn:predict", "application/json", `{"instances":[{"tenureMonths":3,"supportTickets":1.5,"plan":"basic"}]}`, 400, "invalid_argument", "instances[0].supportTickets"},
		{"out of range", "churn:predict", "application/json", `{"instances":[{"tenureMonths":-1,"supportTickets":4,"plan":"basic"}]}`, 400, "invalid_argument", "instances[0].tenureMonths"},
		{"unknown category", "churn:predict", "application/json", `{"instances":[{"tenureMonths":3,"supportTickets":4,"plan":"gold"}]}`, 400, "invalid_argument", "instances[0].plan"},
		{"instance not an object", "churn:predict", "application/json", `{"instances":[3]}`, 400, "invalid_argument", "instances[0]"},
		{"deadline zero", "churn:predict", "application/json", `{"instances":[{` + ok + `}],"deadlineMs":0}`, 400, "invalid_argument", "deadlineMs"},
		{"deadline negative", "churn:predict", "application/json", `{"instances":[{` + ok + `}],"deadlineMs":-5}`, 400, "invalid_argument", "deadlineMs"},
		{"deadline over max", "churn:predict", "application/json", `{"instances":[{` + ok + `}],"deadlineMs":60000}`, 400, "invalid_argument", "deadlineMs"},
		{"deadline not a number", "churn:predict", "application/json", `{"instances":[{` + ok + `}],"deadlineMs":"50"}`, 400, "invalid_argument", "deadlineMs"},
		{"unknown model", "nope:predict", "application/json", `{"instances":[{` + ok + `}]}`, 404, "not_found", ""},
		{"unknown version", "churn/versions/9:predict", "application/json", `{"instances":[{` + ok + `}]}`, 404, "not_found", ""},
		{"bad version number", "churn/versions/x:predict", "application/json", `{"instances":[{` + ok + `}]}`, 400, "invalid_argument", "version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, ts.URL+"/v1/models/"+c.path, c.ctype, c.body, nil)
			if r.status != c.status || r.err.Code != c.code || r.err.Field != c.field {
				t.Fatalf("got %d %s field %q (%s), want %d %s field %q", r.status, r.err.Code, r.err.Field, r.err.Message, c.status, c.code, c.field)
			}
			if r.err.Message == "" || r.err.RequestID == "" {
				t.Errorf("error body lacks message or request id: %s", r.body)
			}
		})
	}
}

func TestRoutesAndMethods(t *testing.T) {
	ts := newTestServer(t, Config{})
	get := func(path string) (int, []byte) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if st, _ := get("/healthz"); st != 200 {
		t.Errorf("healthz %d", st)
	}
	if st, b := get("/readyz"); st != 200 {
		t.Errorf("readyz %d %s", st, b)
	}
	st, b := get("/v1/models/fraud/versions/1")
	var v api.Version
	if err := json.Unmarshal(b, &v); st != 200 || err != nil {
		t.Fatalf("version: %d %s", st, b)
	}
	if v.State != "ready" || len(v.ArtifactSHA256) != 64 || v.Runtime != "xgboost" || !v.Serving || v.Input.Schema != "fraud-input@3" {
		t.Errorf("version info %+v", v)
	}
	if st, _ := get("/v1/models/fraud/versions/7"); st != 404 {
		t.Errorf("missing version: %d", st)
	}
	if st, _ := get("/v1/models/nope"); st != 404 {
		t.Errorf("missing model: %d", st)
	}
	if st, _ := get("/v1/models/fraud:predict"); st != 405 {
		t.Errorf("GET predict: %d", st)
	}
	for _, c := range []struct{ method, path string }{{"POST", "/healthz"}, {"POST", "/readyz"}, {"POST", "/v1/models"}, {"PUT", "/v1/models/fraud"}} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") == "" {
			t.Errorf("%s %s: %d, want 405 with Allow", c.method, c.path, resp.StatusCode)
		}
	}
	var l api.ModelList
	_, b = get("/v1/models")
	if err := json.Unmarshal(b, &l); err != nil || len(l.Models) != 3 {
		t.Errorf("models: %s", b)
	}
}

func TestUploadLimits(t *testing.T) {
	ts := newTestServer(t, Config{MaxUploadBytes: 64 << 10})
	p, err := modelpkg.ReadDir("../../examples/fraud") // 180 KB artifact
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.WriteTarGz(&buf); err != nil {
		t.Fatal(err)
	}
	r := post(t, ts.URL+"/v1/models/fraud/versions", "application/gzip", buf.String(), nil)
	if r.status != 413 || r.err.Code != "payload_too_large" {
		t.Errorf("oversized package: %d %s %s", r.status, r.err.Code, r.err.Message)
	}
	r = post(t, ts.URL+"/v1/models/fraud/versions", "application/json", "{}", nil)
	if r.status != 415 {
		t.Errorf("wrong content type: %d", r.status)
	}
	c, _ := modelpkg.ReadDir("../../examples/churn")
	buf.Reset()
	c.WriteTarGz(&buf)
	r = post(t, ts.URL+"/v1/models/fraud/versions", "application/gzip", buf.String(), nil)
	if r.status != 400 || r.err.Field != "name" {
		t.Errorf("package of another model: %d %s %q", r.status, r.err.Code, r.err.Field)
	}
	r = post(t, ts.URL+"/v1/models/churn/versions?wait=30s", "application/gzip", buf.String(), nil)
	var pr api.PublishResponse
	if err := json.Unmarshal(r.body, &pr); r.status != 200 || err != nil || pr.Created || pr.Version.ID != "churn@1" || !pr.Version.Serving {
		t.Errorf("identical upload: %d %s", r.status, r.body)
	}
}

func TestReadinessIgnoresBrokenModel(t *testing.T) {
	fsys := fstest.MapFS{
		"bad/model.yaml":  {Data: []byte("name: bad\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\ngolden: [{instance: {x: 1}, expect: {y: 5}}]\n")},
		"bad/m.json":      {Data: []byte(`{"weights":[[1]],"bias":[0]}`)},
		"good/model.yaml": {Data: []byte("name: good\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n")},
		"good/m.json":     {Data: []byte(`{"weights":[[1]],"bias":[0]}`)},
	}
	ts, _ := newTestServerFS(t, Config{}, fsys)
	resp, err := http.Get(ts.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var rd api.Readiness
	json.NewDecoder(resp.Body).Decode(&rd)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(rd.Warnings) != 1 || !strings.Contains(rd.Warnings[0], "bad") {
		t.Errorf("readyz %d %+v: a model that failed must not hold the others back, but must be reported", resp.StatusCode, rd)
	}
	r := post(t, ts.URL+"/v1/models/bad:predict", "application/json", `{"instances":[{"x":1}]}`, nil)
	if r.status != 503 || r.err.Code != "not_ready" || !strings.Contains(r.err.Message, "golden example 0") {
		t.Errorf("failed model: %d %s %s", r.status, r.err.Code, r.err.Message)
	}
}

// Dropped prediction records leave the server ready (predictions answer)
// but /readyz lists a warning.
func TestReadyzWarnsOfDroppedRecords(t *testing.T) {
	w := records.NewWriter(nil, records.Config{Buffer: 1})
	ts := newTestServer(t, Config{Records: w})
	readyz := func() (int, api.Readiness) {
		resp, err := http.Get(ts.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rd api.Readiness
		json.NewDecoder(resp.Body).Decode(&rd)
		return resp.StatusCode, rd
	}
	if st, rd := readyz(); st != 200 || len(rd.Warnings) != 0 {
		t.Fatalf("before: %d %+v", st, rd)
	}
	// Not running: the buffer of one fills with the first answer.
	for range 3 {
		r := post(t, ts.URL+"/v1/models/fraud:predict", "application/json", `{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"}]}`, nil)
		if r.status != 200 {
			t.Fatalf("predict with records dropped: %d %s", r.status, r.body)
		}
	}
	st, rd := readyz()
	if st != 200 || !rd.Ready || len(rd.Warnings) != 1 || !strings.Contains(rd.Warnings[0], "records are being dropped") {
		t.Errorf("readyz with records dropped: %d %+v; want 200, ready, one warning", st, rd)
	}
}

// fullDisk is an artifact store on a full disk: Put fails as a write to
// the temporary file does when the file system answers ENOSPC.
type fullDisk struct {
	registry.Artifacts
	root string
}

func (f fullDisk) Put(ctx context.Context, sha string, r io.Reader) error {
	return &fs.PathError{Op: "write", Path: f.root + "/sha256/" + sha[:2] + "/.tmp-4242", Err: syscall.ENOSPC}
}

// A push on a full disk is 503 unavailable with no server path in the
// message; the log has the full cause.
func TestPushOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	d, err := registry.NewDir(dir + "/artifacts")
	if err != nil {
		t.Fatal(err)
	}
	store, err := registry.OpenSQLite(dir+"/sluice.db", fullDisk{d, dir + "/artifacts"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	logs := &syncWriter{w: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ctl := control.New(control.Config{Store: store, Logger: log})
	if err := ctl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctl.MarkStarted()
	defer ctl.Close(context.Background())
	s := New(Config{Logger: log}, ctl)
	defer s.Close()
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	p, err := modelpkg.ReadDir("../../examples/churn")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	p.WriteTarGz(&buf)
	r := post(t, ts.URL+"/v1/models/churn/versions", "application/gzip", buf.String(), nil)
	if r.status != 503 || r.err.Code != "unavailable" || strings.Contains(string(r.body), dir) || !strings.Contains(r.err.Message, "no space left") {
		t.Errorf("push on a full disk: %d %s; want 503 unavailable, no space left, no path", r.status, r.body)
	}
	if !strings.Contains(logs.String(), ".tmp-4242") {
		t.Errorf("the log lacks the full cause:\n%s", logs.String())
	}
}

// syncWriter serializes writes to w (handlers log from many goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.(*bytes.Buffer).String()
}
