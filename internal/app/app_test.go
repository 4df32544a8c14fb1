package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/registry"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	"github.com/sluiceml/sluice/internal/testwait"
)

// linearModels writes one linear package into a folder and returns it.
func linearModels(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "models", "calc")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"model.yaml": "name: calc\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n",
		"m.json":     `{"weights":[[2]],"bias":[1]}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Dir(dir)
}

func testConfig(t *testing.T) Config {
	return Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test",
		Addr: "127.0.0.1:0", Data: t.TempDir(), Models: linearModels(t), Grace: 10 * time.Second, Retention: time.Hour}
}

// Run serves until ctx ends, then stops every part: the answer is served,
// Run returns nil, the stores are closed (goleak in TestMain: no
// goroutine is left) and the port is free.
func TestRunServesAndStops(t *testing.T) {
	cfg := testConfig(t)
	addrc := make(chan net.Addr, 1)
	cfg.Serving = func(a net.Addr) { addrc <- a }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("Run ended before serving: %v", err)
	}
	base := "http://" + addr.String()
	// Ready, and calc deployed (its first policy is written just after
	// it turns ready): a predict answers.
	var status int
	var body []byte
	predict := func() bool {
		r, err := http.Post(base+"/v1/models/calc:predict", "application/json", strings.NewReader(`{"instances":[{"x":3}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
		status = r.StatusCode
		return status == 200
	}
	testwait.Until(t, time.Minute, predict)
	var out struct {
		Predictions []map[string]float64 `json:"predictions"`
	}
	if err := json.Unmarshal(body, &out); err != nil || len(out.Predictions) != 1 || out.Predictions[0]["y"] != 7 {
		t.Fatalf("predict: %d %s", status, body)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after ctx ended: %v", err)
	}
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatalf("the port is still held after Run: %v", err)
	}
	ln.Close()
}

// A part that fails to start (here pprof, on a port in use) stops the
// parts started before it: Run returns that part's error, the HTTP port
// is free again and no goroutine is left (goleak in TestMain); the
// registry was opened, so it was closed: it opens again.
func TestRunFailingHalfWayStopsWhatStarted(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Addr = free.Addr().String()
	free.Close()
	cfg.PprofAddr = busy.Addr().String()
	cfg.Serving = func(net.Addr) { t.Error("served although a part failed") }
	err = Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "--pprof-addr "+cfg.PprofAddr) {
		t.Fatalf("Run: %v, want the --pprof-addr error", err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		t.Fatalf("--addr still held after a failed start: %v", err)
	}
	ln.Close()
	if _, err := os.Stat(filepath.Join(cfg.Data, "sluice.db")); err != nil {
		t.Fatalf("the registry was not opened before pprof: %v", err)
	}
	store, err := registry.Open(cfg.Data)
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
}

// The one order, as docs/design.md ("Lifecycle") writes it: the parts of
// a process with every option on, in start order (stop is the reverse).
var fullOrder = []string{"gc floor", "listen", "tenants", "registry", "records store", "job store", "outcome store", "tracing", "pprof",
	"pool", "control plane", "local workers", "kube pod watch", "records writer", "outcome joins", "experiments", "feature stores", "events", "controller", "models",
	"autoscaler", "gateway", "job runner", "listeners"}

func TestOrder(t *testing.T) {
	full := Config{OTLPEndpoint: "http://x", PprofAddr: ":0", Workers: 2, KubeWorkers: "app=w", FeaturesRedis: "redis://127.0.0.1:1/0", JobRunners: 1}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"every option", full, fullOrder},
		{"in process, no records", Config{NoRecords: true},
			[]string{"gc floor", "listen", "tenants", "registry", "job store", "events", "controller", "models", "gateway", "listeners"}},
		{"attached workers only", Config{ControlAddr: ":0"},
			[]string{"gc floor", "listen", "tenants", "registry", "records store", "job store", "outcome store", "pool", "control plane", "records writer", "outcome joins", "experiments", "events", "controller", "models", "autoscaler", "gateway", "listeners"}},
	} {
		if got := newApp(tc.cfg).group().Names(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: order\n %q\nwant\n %q", tc.name, got, tc.want)
		}
	}
	// docs/design.md lists the same parts in the same order.
	b, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## Lifecycle")
	if i < 0 {
		t.Fatal("docs/design.md has no \"## Lifecycle\" section")
	}
	sec := doc[i:]
	if j := strings.Index(sec[3:], "\n## "); j >= 0 {
		sec = sec[:j+3]
	}
	at := 0
	for _, name := range fullOrder {
		k := strings.Index(sec[at:], "**"+name+"**")
		if k < 0 {
			t.Fatalf("docs/design.md's Lifecycle section lacks **%s** after the part before it (the start order is %q)", name, fullOrder)
		}
		at += k
	}
}
