package control

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	"github.com/sluiceml/sluice/internal/testwait"
)

// linear returns the files of a linear package named name whose weight is w
// (its content, and so its digest, changes with w).
func linear(name string, w float64) map[string]string {
	return map[string]string{
		"model.yaml": fmt.Sprintf("name: %s\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n", name),
		"m.json":     fmt.Sprintf(`{"weights":[[%v]],"bias":[0]}`, w),
	}
}

// folder lays packages out under their folder names (prefix "" puts a
// single package at the root).
func folder(pkgs map[string]map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for dir, files := range pkgs {
		for name, data := range files {
			p := name
			if dir != "" {
				p = dir + "/" + name
			}
			fsys[p] = &fstest.MapFile{Data: []byte(data)}
		}
	}
	return fsys
}

type harness struct {
	t     *testing.T
	data  string
	store *registry.SQLite
	ctl   *Controller
}

// start opens the registry in data and starts a controller over it.
func start(t *testing.T, data string) *harness {
	t.Helper()
	return startWith(t, data, Config{})
}

// startWith is start with cfg (its Store and Logger are set here).
func startWith(t *testing.T, data string, cfg Config) *harness {
	t.Helper()
	store, err := registry.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Logger = store, slog.New(slog.NewTextHandler(io.Discard, nil))
	ctl := New(cfg)
	if err := ctl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, data: data, store: store, ctl: ctl}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	if h.ctl == nil {
		return
	}
	_ = h.ctl.Close(context.Background())
	_ = h.store.Close()
	h.ctl = nil
}

// waitAll waits until every known version finished loading.
func (h *harness) waitAll() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range h.ctl.Versions() {
		h.ctl.Wait(ctx, s.Version.Model, s.Version.N)
	}
	if ctx.Err() != nil {
		h.t.Fatal("versions did not finish loading")
	}
}

func (h *harness) state(model string, n int) (registry.State, string) {
	for _, s := range h.ctl.Versions() {
		if s.Version.Model == model && s.Version.N == n {
			return s.State, s.Reason
		}
	}
	return "", "unknown version"
}

func (h *harness) scan(fsys fstest.MapFS) Scan {
	h.t.Helper()
	sc, err := h.ctl.PublishFS(context.Background(), fsys, ".", "models")
	if err != nil {
		h.t.Fatal(err)
	}
	h.ctl.MarkStarted()
	h.waitAll()
	return sc
}

func hasWarning(ws []string, sub string) bool {
	for _, w := range ws {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

// A folder that is itself a package is published like a folder of one.
func TestPublishFSSinglePackageFolder(t *testing.T) {
	h := start(t, t.TempDir())
	sc := h.scan(folder(map[string]map[string]string{"": linear("calc", 1)}))
	if len(sc.Published) != 1 || sc.Published[0].Version.ID() != "calc@1" || sc.Empty {
		t.Fatalf("scan = %+v", sc)
	}
	if st, why := h.state("calc", 1); st != registry.Ready {
		t.Fatalf("calc@1 is %s: %s", st, why)
	}
}

// A folder holding no package warns in readiness instead of serving nothing
// in silence.
func TestPublishFSEmptyFolderWarns(t *testing.T) {
	h := start(t, t.TempDir())
	sc := h.scan(fstest.MapFS{"notes/readme.txt": {Data: []byte("hi")}})
	if !sc.Empty {
		t.Fatalf("scan = %+v", sc)
	}
	ready, _, warnings := h.ctl.Readiness()
	if !ready || !hasWarning(warnings, "models folder models holds no model package") {
		t.Fatalf("ready %v, warnings %q", ready, warnings)
	}
	// A package arriving later clears the warning.
	h.scan(folder(map[string]map[string]string{"calc": linear("calc", 1)}))
	if _, _, warnings := h.ctl.Readiness(); hasWarning(warnings, "holds no model package") {
		t.Fatalf("warnings after a package arrived: %q", warnings)
	}
}

// One invalid package does not stop the others; it is reported with the
// strict parser's file:line:key message until it is fixed.
func TestPublishFSInvalidPackageDoesNotStopOthers(t *testing.T) {
	h := start(t, t.TempDir())
	bad := linear("fraud", 2)
	bad["model.yaml"] += "sering: {replicas: 1}\n" // typo of serving
	sc := h.scan(folder(map[string]map[string]string{"calc": linear("calc", 1), "fraud": bad}))
	if len(sc.Published) != 1 || sc.Published[0].Version.ID() != "calc@1" {
		t.Fatalf("published %+v", sc.Published)
	}
	want := "models/fraud/model.yaml:6: sering"
	if len(sc.Invalid) != 1 || sc.Invalid[0].Model != "fraud" || sc.Invalid[0].Dir != "models/fraud" || !strings.Contains(sc.Invalid[0].Err, want) {
		t.Fatalf("invalid %+v, want an error containing %q", sc.Invalid, want)
	}
	ready, _, warnings := h.ctl.Readiness()
	if !ready || !hasWarning(warnings, "package models/fraud (model fraud) is invalid and was not published: "+want) {
		t.Fatalf("ready %v, warnings %q", ready, warnings)
	}
	if got := h.ctl.InvalidPackages(); len(got) != 1 || got[0].Model != "fraud" {
		t.Fatalf("InvalidPackages = %+v", got)
	}
	// Fixed: published, and no longer reported.
	sc = h.scan(folder(map[string]map[string]string{"calc": linear("calc", 1), "fraud": linear("fraud", 2)}))
	if len(sc.Invalid) != 0 || len(h.ctl.InvalidPackages()) != 0 {
		t.Fatalf("after the fix: %+v", sc.Invalid)
	}
	if st, why := h.state("fraud", 1); st != registry.Ready {
		t.Fatalf("fraud@1 is %s: %s", st, why)
	}
}

// A release that cannot start does not stop the others, and none moves
// traffic without a plan.
func TestReleaseChangedReportsEveryFailure(t *testing.T) {
	h := start(t, t.TempDir())
	plan := modelpkg.Immediate()
	pubs := []Published{
		{Version: registry.Version{Model: "a", N: 2}, Created: true, HadPolicy: true, Release: &plan},
		{Version: registry.Version{Model: "b", N: 2}, Created: true, HadPolicy: true}, // no plan: skipped
		{Version: registry.Version{Model: "c", N: 2}, Created: true, HadPolicy: true, Release: &plan},
	}
	err := h.ctl.ReleaseChanged(context.Background(), pubs)
	if err == nil || !strings.Contains(err.Error(), "release a@2") || !strings.Contains(err.Error(), "release c@2") || strings.Contains(err.Error(), "b@2") {
		t.Fatalf("ReleaseChanged = %v", err)
	}
}

// heldPolicy blocks SetPolicy until release is closed, as a slow store
// does: the window between a version's load and its first deployment.
type heldPolicy struct {
	registry.Store
	entered chan struct{}
	release chan struct{}
}

func (h *heldPolicy) SetPolicy(ctx context.Context, p registry.Policy, expect int) (registry.Policy, error) {
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-h.release
	return h.Store.SetPolicy(ctx, p, expect)
}

// A version loaded at start whose model's first deployment is not yet
// written keeps the server unready: nothing routes to it, so a client
// told "ready" would be answered not_ready.
func TestNotReadyUntilTheFirstDeploymentIsWritten(t *testing.T) {
	store, err := registry.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	held := &heldPolicy{Store: store, entered: make(chan struct{}, 1), release: make(chan struct{})}
	ctl := New(Config{Store: held, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer ctl.Close(context.Background())
	var once sync.Once
	release := func() { once.Do(func() { close(held.release) }) }
	defer release() // before Close: a failed check must not leave the write held
	if err := ctl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.PublishFS(context.Background(), folder(map[string]map[string]string{"calc": linear("calc", 1)}), ".", "models"); err != nil {
		t.Fatal(err)
	}
	ctl.MarkStarted()
	<-held.entered // calc@1 is ready; its first deployment is being written
	ready, problems, _ := ctl.Readiness()
	if ready || len(problems) != 1 || !strings.Contains(problems[0], "calc@1 is ready, its model's first deployment not yet written") {
		t.Fatalf("ready %v, problems %q while the first deployment is not written", ready, problems)
	}
	release()
	testwait.Until(t, 30*time.Second, func() bool { r, _, _ := ctl.Readiness(); return r })
	if servingVersion(ctl, "calc") != 1 {
		t.Fatal("ready, but calc@1 is not served")
	}
}
