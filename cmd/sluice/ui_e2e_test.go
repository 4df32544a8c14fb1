//go:build ui

package main

// The console's browser test (make test-ui; build tag ui, so `make test`
// needs no browser): Debian's chromium, headless, driven over DevTools by
// chromedp against the real binary with real models. It loads every page,
// changes a weight through the UI and finds it in the audit trail, starts,
// pauses, resumes and watches a rollout advance without reloading, aborts
// one, rolls back, signs in with a read-only key (no buttons, 403 on a
// try), times a page of 500 models, and fails on any JavaScript error or
// any request to another host. Screenshots go to $SLUICE_UI_ARTIFACTS
// (default: a temporary folder).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sluiceml/sluice/examples"
)

// browser is one headless chromium with what it saw: JavaScript errors,
// requests to hosts other than the server's, failed loads.
type browser struct {
	t    *testing.T
	ctx  context.Context
	host string

	mu       sync.Mutex // guards the slices below (DevTools events arrive on chromedp's goroutine)
	jsErrors []string
	foreign  []string
	failed   []string
	bytes    map[string]float64 // encoded bytes per URL path under /ui/
	urls     map[network.RequestID]string
}

func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: run make test-ui (scripts/install-chromium.sh installs Debian's chromium)")
	return ""
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", "new"),
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // as root chromium needs it (docs/console.md)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	b := &browser{t: t, ctx: ctx, host: u.Host, bytes: map[string]float64{}, urls: map[network.RequestID]string{}}
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no deadline
		t.Fatalf("start chromium: %v", err)
	}
	if err := chromedp.Listen(ctx, b.observe); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) observe(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg := e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
		b.jsErrors = append(b.jsErrors, "exception: "+msg)
	case *runtime.EventConsoleAPICalled:
		if e.Type == "error" || e.Type == "assert" {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			b.jsErrors = append(b.jsErrors, "console."+string(e.Type)+": "+strings.Join(parts, " "))
		}
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError {
			if e.Entry.Source == cdplog.EntrySourceNetwork {
				b.failed = append(b.failed, e.Entry.URL+": "+e.Entry.Text)
			} else {
				b.jsErrors = append(b.jsErrors, string(e.Entry.Source)+": "+e.Entry.Text)
			}
		}
	case *network.EventRequestWillBeSent:
		u, err := url.Parse(e.Request.URL)
		if err != nil || (u.Scheme != "data" && u.Scheme != "about" && u.Host != b.host) {
			b.foreign = append(b.foreign, e.Request.URL)
		}
		b.urls[e.RequestID] = e.Request.URL
	case *network.EventLoadingFinished:
		if u, err := url.Parse(b.urls[e.RequestID]); err == nil && strings.HasPrefix(u.Path, "/ui") {
			b.bytes[u.Path] = e.EncodedDataLength
		}
	}
}

// run runs actions with a deadline.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("main").innerText.slice(0, 2000)`))
	b.t.Fatalf("%s: %v\npage:\n%s", what, err, body)
}

// waitJS waits (in the page, with a deadline) until expr is true.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(45*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
		if err != nil && strings.Contains(err.Error(), "Cannot find context") && ctx.Err() == nil {
			continue // the page navigated (a reload) while the poll ran: poll the new one
		}
		if err != nil {
			b.fail("wait for "+what, err)
		}
		return
	}
}

// eval evaluates expr in the page and decodes its value.
func eval[T any](b *browser, expr string, opts ...chromedp.EvaluateOption) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		b.fail("evaluate "+expr, err)
	}
	return v
}

// shot saves a screenshot of the whole page as NAME.png in the artifacts folder.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fail("screenshot "+name, err)
	}
	if err := os.WriteFile(filepath.Join(artifactsDir(b.t), name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

var artifactsOnce sync.Once
var artifacts string

func artifactsDir(t *testing.T) string {
	artifactsOnce.Do(func() {
		artifacts = os.Getenv("SLUICE_UI_ARTIFACTS")
		if artifacts == "" {
			artifacts, _ = os.MkdirTemp("", "sluice-ui-")
		}
		_ = os.MkdirAll(artifacts, 0o755)
	})
	return artifacts
}

// clean fails the test on a JavaScript error or a request that left the
// server; failed loads other than allowed ones (404s the console expects
// of routes this server may lack) fail it too.
func (b *browser) clean(allowedFailures ...string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.jsErrors {
		b.t.Errorf("JavaScript error: %s", e)
	}
	for _, u := range b.foreign {
		b.t.Errorf("a request left the server: %s", u)
	}
next:
	for _, f := range b.failed {
		for _, a := range allowedFailures {
			if strings.Contains(f, a) {
				continue next
			}
		}
		b.t.Errorf("failed load: %s", f)
	}
}

// click clicks a link or button, waiting for it to be there. A live page
// may draw the element again between the lookup and the click (an event
// arrived): then it is looked up again.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.retry("click "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

func (b *browser) set(sel, value string) {
	b.t.Helper()
	b.retry("set "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.SetValue(chromedp.CSS(sel), value))
}

func (b *browser) typeInto(sel, text string) {
	b.t.Helper()
	b.retry("type into "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.SendKeys(chromedp.CSS(sel), text))
}

// retry runs actions, again when the node they found was replaced
// meanwhile, within one deadline.
func (b *browser) retry(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	for {
		err := chromedp.Do(ctx, actions...)
		if err != nil && ctx.Err() == nil && (strings.Contains(err.Error(), "Could not find node") || strings.Contains(err.Error(), "Cannot find context") || strings.Contains(err.Error(), "could not set value") || strings.Contains(err.Error(), "No node")) {
			continue
		}
		if err != nil {
			b.fail(what, err)
		}
		return
	}
}

// act goes through an action dialog: fill (set by the caller before),
// review, check the diff, give the reason, apply, wait for it to close.
func (b *browser) act(button, wantDiff, reason string, fill func()) {
	b.t.Helper()
	b.click(button)
	b.waitJS("dialog open", `document.getElementById("dialog").open`)
	if fill != nil {
		fill()
	}
	b.click("#dialog-submit")
	b.waitJS("diff shown", `!document.getElementById("dialog-diff").hidden`)
	diff := eval[string](b, `document.getElementById("diff-text").textContent`)
	if !strings.Contains(diff, wantDiff) {
		b.t.Fatalf("%s: the diff says %q, want %q in it", button, diff, wantDiff)
	}
	b.typeInto("#reason", reason)
	b.click("#dialog-submit")
	b.waitJS("dialog closed", `!document.getElementById("dialog").open`)
}

func getJSON(t *testing.T, u string, out any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// uiModels is a models folder with three of the examples (churn has a
// drift monitor).
func uiModels(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"churn", "fraud", "iris"} {
		sub, err := fs.Sub(examples.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(filepath.Join(dir, name), sub); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// allowed404s are routes the console asks for that a server may not have
// (yet): it shows what that means instead of failing.
var allowed404s = []string{"/v1/events", "/stats?window=", "/v1/experiments", "/v1/lab/report", "/drift"}

// TestUI: every page and action against one server with real models and
// two worker processes.
func TestUI(t *testing.T) {
	pkgs := t.TempDir()
	data := t.TempDir()
	srv := startServer(t, "--data", data, "--models", uiModels(t), "--workers", "2", "--jobs-dir", pkgs)
	for _, v := range []string{"v1", "v2"} {
		if out, stderr, err := sluice(t, "push", synPackage(t, filepath.Join(pkgs, v), fast, "description: build "+v+"\n"), "--server", srv.url); err != nil {
			t.Fatalf("push syn %s: %v %s %s", v, err, out, stderr)
		}
	}
	l := startLoad(t, srv.url, "syn", 100, 1000000)
	defer l.finish()
	if out, stderr, err := sluice(t, "bench", "churn", "--rate", "100", "--duration", "2s", "--server", srv.url); err != nil {
		t.Fatalf("bench churn: %v %s %s", err, out, stderr)
	}
	b := newBrowser(t, srv.url)
	defer func() { b.t = t; b.clean(allowed404s...) }() // JavaScript errors and foreign requests, even after a failure

	if !t.Run("models", func(t *testing.T) {
		b.t = t
		if _, err := chromedp.Call(b.ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
			t.Fatal(err)
		}
		b.run("open /ui/", chromedp.Navigate(srv.url+"/ui/"))
		b.waitJS("loaded", `document.readyState === "complete"`)
		b.mu.Lock()
		weight := b.bytes["/ui/"] + b.bytes["/ui/app.js"] + b.bytes["/ui/app.css"]
		t.Logf("page weight (the first load, cache off, bytes on the wire with headers): /ui/ %.0f, app.js %.0f, app.css %.0f; %.0f in all",
			b.bytes["/ui/"], b.bytes["/ui/app.js"], b.bytes["/ui/app.css"], weight)
		if len(b.bytes) != 3 {
			t.Errorf("the console loaded %v: want exactly /ui/, app.js and app.css", b.bytes)
		}
		b.mu.Unlock()
		if weight > 300<<10 {
			t.Errorf("the console weighs %.0f bytes, over the 300 KB goal", weight)
		}
		if _, err := chromedp.Call(b.ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: false}); err != nil {
			t.Fatal(err)
		}
		b.waitJS("the event stream", `document.getElementById("live").className === "on"`) // GET /v1/events is read: changes arrive live
		b.waitJS("syn's weights", `!!document.querySelector("#row-syn .c-weights .chip")`)
		b.waitJS("syn's rate", `parseFloat(document.querySelector("#row-syn .c-rps").textContent) > 0 && /ms$/.test(document.querySelector("#row-syn .c-p99").textContent)`) // under the load started above
		rows := eval[int](b, `document.querySelectorAll("main tbody tr").length`)
		if rows != 4 {
			t.Errorf("%d model rows, want 4 (churn, fraud, iris, syn)", rows)
		}
		text := eval[string](b, `document.getElementById("row-syn").innerText`)
		for _, want := range []string{"v1 ready", "v2 ready", "v1 100%"} {
			if !strings.Contains(text, want) {
				t.Errorf("syn's row %q lacks %q", text, want)
			}
		}
		b.shot("models")
	}) {
		return
	}

	if !t.Run("change a weight, see it in the audit trail", func(t *testing.T) {
		b.t = t
		b.click(`a[href="/ui/models/syn"]`)
		b.waitJS("model page", `!!document.getElementById("act-weights")`)
		b.shot("model")
		b.act("#act-weights", "syn@1 100→90, syn@2 0→10", "console: try v2 on 10%", func() {
			b.set("#w-1", "90")
			b.set("#w-2", "10")
		})
		var d struct {
			Targets []struct{ Version, Weight int }
			Actor   string
			Reason  string
		}
		getJSON(t, srv.url+"/v1/deployments/syn", &d)
		if len(d.Targets) != 2 || d.Targets[0].Weight != 90 || d.Targets[1].Weight != 10 || d.Reason != "console: try v2 on 10%" || d.Actor != "default" {
			t.Fatalf("after the change the deployment is %+v", d)
		}
		b.click(`a[data-nav="audit"]`)
		b.waitJS("audit row", `[...document.querySelectorAll("main tbody tr")].some(r => r.innerText.includes("console: try v2 on 10%") && r.innerText.includes("syn@1 100→90") && r.innerText.includes("default"))`)
		b.set("#f-model", "syn")
		b.click(`form[role="search"] button[type="submit"]`)
		b.waitJS("filtered", `location.search === "?model=syn" && [...document.querySelectorAll("main tbody tr")].every(r => r.innerText.includes("syn"))`)
		b.shot("audit")
		// A change made elsewhere (the CLI) reaches the open model page
		// over /v1/events without a reload: the time is logged (issue
		// 21's goal is 2 s), not asserted.
		b.click(`a[data-nav="models"]`)
		b.click(`a[href="/ui/models/syn"]`)
		b.waitJS("model page at 10%", `[...document.querySelectorAll("main tbody tr")].some(r => r.innerText.startsWith("syn@2") && r.innerText.includes("10%"))`)
		eval[bool](b, `window.__before = performance.timeOrigin; true`)
		if out, stderr, err := sluice(t, "traffic", "syn", "syn@1=70", "syn@2=30", "--server", srv.url); err != nil {
			t.Fatalf("traffic: %v %s %s", err, out, stderr)
		}
		returned := time.Now()
		b.waitJS("the CLI's change in the open page", `[...document.querySelectorAll("main tbody tr")].some(r => r.innerText.startsWith("syn@2") && r.innerText.includes("30%"))`)
		t.Logf("a traffic change through the CLI was in the open page %s after the CLI returned (polled every 100 ms)", time.Since(returned).Round(time.Millisecond))
		if eval[bool](b, `window.__before === performance.timeOrigin`) != true {
			t.Error("the page reloaded: the change should reach the open page")
		}
	}) {
		return
	}

	if !t.Run("a rollout advances live", func(t *testing.T) {
		b.t = t
		b.run("open syn", chromedp.Navigate(srv.url+"/ui/models/syn"))
		b.waitJS("model page", `!!document.getElementById("act-rollout")`)
		eval[int](b, `window.__samePage = 1`)
		b.act("#act-rollout", "start a rollout of syn@2 (baseline syn@1), steps 10% → 50% → 100%, bake 3s", "console rollout", func() {
			b.set("#ro-steps", "10,50,100")
			b.set("#ro-bake", "3s")
			b.set("#ro-plan", `{"gates":{"maxP99Ratio":8},"minSamples":20}`)
		})
		b.waitJS("canary", `document.querySelector("#rollout")?.dataset.phase === "canary"`)
		b.act("#act-pause", "freeze the weights", "console: pause to look", nil)
		b.waitJS("paused", `document.querySelector("#rollout")?.dataset.phase === "paused"`)
		b.shot("rollout")
		b.act("#act-resume", "resume the rollout of syn@2", "console: go on", nil)
		seen := map[string]bool{}
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			st := eval[string](b, `(document.querySelector("#rollout")?.dataset.phase || "") + "/" + (document.querySelector("#rollout")?.dataset.step || "")`)
			seen[st] = true
			if strings.HasPrefix(st, "promoted") || strings.HasPrefix(st, "rolled_back") {
				break
			}
			b.run("wait", chromedp.Sleep(200*time.Millisecond)) // sampling what the page shows, not waiting for the server
		}
		same := eval[int](b, `window.__samePage || 0`)
		if same != 1 {
			t.Error("the page reloaded: the rollout should advance in the open page")
		}
		if !seen["promoted/3"] {
			t.Fatalf("the page never showed the rollout promoted; it showed %v (rollout %+v)", seen, rolloutOf(t, srv.url, "syn"))
		}
		steps := 0
		for _, s := range []string{"canary/1", "canary/2", "canary/3"} {
			if seen[s] {
				steps++
			}
		}
		if steps < 1 {
			t.Errorf("the page showed no canary step after resuming: %v", seen)
		}
		t.Logf("the open page showed %v", seen)
		b.waitJS("charts of the last hour", `document.querySelectorAll("svg.chart path.line").length >= 4 && document.querySelector(".charts").innerText.includes("(last minute)")`)
		b.shot("promoted")
	}) {
		return
	}

	if !t.Run("roll back and abort", func(t *testing.T) {
		b.t = t
		b.act("#act-rollback", "syn@1 0→100, syn@2 100→0", "console: roll back drill", func() { b.set("#rb-to", "1") })
		d := deployment(t, srv.url, "syn")
		if len(d.Targets) != 1 || d.Targets[0].Version != 1 || d.Targets[0].Weight != 100 {
			t.Fatalf("after the rollback: %+v", d.Targets)
		}
		if _, stderr, err := sluice(t, "deploy", "syn@2", "--steps", "50,100", "--bake", "10m", "--min-samples", "1000000", "--server", srv.url); err != nil {
			t.Fatalf("deploy: %v %s", err, stderr)
		}
		b.waitJS("abort button", `!!document.getElementById("act-abort")`)
		b.act("#act-abort", "syn@1", "console: abort drill", nil)
		b.waitJS("aborted", `document.querySelector("#rollout")?.dataset.phase === "aborted"`)
		if r := rolloutOf(t, srv.url, "syn"); r.Phase != "aborted" {
			t.Fatalf("rollout %s, want aborted", r.Phase)
		}
		b.click(`a[data-nav="audit"]`)
		for _, want := range []string{"console: pause to look", "console: go on", "console: roll back drill", "console: abort drill", "console rollout"} {
			b.waitJS("audit has "+want, fmt.Sprintf(`document.querySelector("main").innerText.includes(%q)`, want))
		}
	}) {
		return
	}

	if !t.Run("churn: drift and charts", func(t *testing.T) {
		b.t = t
		b.run("open churn", chromedp.Navigate(srv.url+"/ui/models/churn"))
		b.waitJS("drift table", `document.querySelector("main").innerText.includes("PSI")`)
		b.shot("model-churn")
	}) {
		return
	}

	if !t.Run("workers, jobs, experiments, lab", func(t *testing.T) {
		b.t = t
		b.click(`a[data-nav="workers"]`)
		b.waitJS("workers table", `document.querySelector("main").innerText.includes("worker-1") && document.querySelector("main").innerText.includes("syn@1")`)
		b.shot("workers")
		rows := "id,x\n"
		for i := range 500 {
			rows += fmt.Sprintf("r%d,%d\n", i, i)
		}
		if err := os.WriteFile(filepath.Join(pkgs, "rows.csv"), []byte(rows), 0o644); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(srv.url+"/v1/jobs", "application/json", strings.NewReader(`{"model":"syn","input":{"uri":"file:rows.csv","format":"csv"},"output":{"uri":"file:out.jsonl","format":"jsonl"}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("submit a job: %d", resp.StatusCode)
		}
		b.click(`a[data-nav="jobs"]`)
		b.waitJS("jobs table", `document.querySelector("main").innerText.includes("syn@1") && document.querySelector("main").innerText.includes("succeeded")`)
		b.shot("jobs")
		b.click(`a[data-nav="experiments"]`)
		b.waitJS("no experiments", `!!document.getElementById("experiments-none")`)
		// An A/B experiment started from the CLI is listed (GET
		// /v1/experiments) with its arms and decision.
		if out, stderr, err := sluice(t, "ab", "start", "syn", "--a", "1", "--b", "2", "--metric", "converted", "--reason", "console e2e", "--server", srv.url); err != nil {
			t.Fatalf("ab start: %v %s %s", err, out, stderr)
		}
		if out, stderr, err := sluice(t, "ab", "list", "--server", srv.url); err != nil || !strings.Contains(out, "syn@1") || !strings.Contains(out, "running") {
			t.Fatalf("ab list: %v %q %s", err, out, stderr)
		}
		b.click(`a[data-nav="jobs"]`)
		b.click(`a[data-nav="experiments"]`)
		b.waitJS("experiments table", `(document.querySelector('tr[data-experiment="syn"]')?.innerText || "").includes("syn@2") && document.querySelector('tr[data-experiment="syn"] .decision')?.textContent === "running"`)
		b.shot("experiments")
		b.click(`a[data-nav="lab"]`)
		b.waitJS("no lab report yet", `!!document.getElementById("lab-none")`)
		// A report published where sluice lab --publish puts it: shown in
		// its sandboxed frame, its inline styles and SVG allowed, no script.
		if err := os.MkdirAll(filepath.Join(data, "lab"), 0o755); err != nil {
			t.Fatal(err)
		}
		report, err := os.ReadFile("../../docs/lab/report.html") // the full run checked in (docs/lab.md)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "lab", "report.html"), report, 0o644); err != nil {
			t.Fatal(err)
		}
		b.run("open the lab", chromedp.Navigate(srv.url+"/ui/lab"))
		b.waitJS("the report's frame", `!!document.querySelector("iframe.report") && document.querySelector("iframe.report").srcdoc.includes("Model Serving Lab")`)
		b.shot("lab")
	}) {
		return
	}

	if !t.Run("phone width", func(t *testing.T) {
		b.t = t
		b.run("narrow", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(srv.url+"/ui/models/syn"))
		b.waitJS("model page", `!!document.getElementById("act-weights") || !!document.getElementById("act-abort") || !!document.getElementById("act-rollback")`)
		overflow := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth + 2`)
		if overflow {
			t.Error("the page is wider than a phone's screen (tables should scroll in their own box)")
		}
		b.shot("phone-model")
		b.run("wide", chromedp.EmulateViewport(1280, 900))
	}) {
		return
	}

	if !t.Run("keyboard", func(t *testing.T) {
		b.t = t
		b.run("open /ui/", chromedp.Navigate(srv.url+"/ui/"))
		b.waitJS("models", `!!document.getElementById("row-syn")`)
		// The first Tab reaches the skip link; every control has a name.
		b.run("tab", chromedp.KeyEvent("\t"))
		first := eval[string](b, `document.activeElement.textContent`)
		if first != "Skip to content" {
			t.Errorf("the first Tab stop is %q, want the skip link", first)
		}
		unnamed := eval[[]string](b, `[...document.querySelectorAll("input,select,textarea,button")].filter(e => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.textContent.trim()).map(e => e.outerHTML)`)
		if len(unnamed) > 0 {
			t.Errorf("controls without a label: %v", unnamed)
		}
	}) {
		return
	}

}

// TestUIReadOnly: with a tenants file the console asks for a key; a
// read-only key sees no buttons and gets 403 when it tries anyway; an
// admin's key sees them. The key is in session storage, never a cookie.
func TestUIReadOnly(t *testing.T) {
	admin, reader := "sk_ui_admin_key_0123456789", "sk_ui_reader_key_0123456789"
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	os.WriteFile(tenants, []byte(fmt.Sprintf(`tenants:
  - name: ops
    keys: ["sha256:%s"]
    models: ["*"]
    admin: true
  - name: viewer
    keys: ["sha256:%s"]
    models: ["*"]
`, sha256Hex(admin), sha256Hex(reader))), 0o644)
	srv := startServer(t, "--data", t.TempDir(), "--models", uiModels(t), "--tenants", tenants)
	b := newBrowser(t, srv.url)
	b.run("open /ui/", chromedp.Navigate(srv.url+"/ui/models/iris"))
	b.waitJS("key form", `!!document.getElementById("key")`)
	b.shot("key")
	b.typeInto("#key", "wrong-key")
	b.click(`main form button[type="submit"]`)
	b.waitJS("refused", `document.querySelector("main .error")?.textContent.includes("401")`)
	b.typeInto("#key", reader) // (the form is drawn again, empty, after a refusal)
	b.click(`main form button[type="submit"]`)
	b.waitJS("model page", `document.querySelector("main h1")?.textContent === "iris" && !!document.querySelector("main table")`)
	buttons := eval[int](b, `document.querySelectorAll("main .actions button").length`)
	if buttons != 0 {
		t.Errorf("a read-only key sees %d action buttons", buttons)
	}
	who := eval[string](b, `document.getElementById("who").textContent`)
	if !strings.Contains(who, "read-only") {
		t.Errorf("the header says %q, want read-only", who)
	}
	status := eval[int](b, `fetch("/v1/deployments/iris", {method: "PUT", headers: {"Content-Type": "application/json", Authorization: "Bearer " + sessionStorage.getItem("sluice.apiKey")}, body: JSON.stringify({targets: [{version: 1, weight: 100}], reason: "try"})}).then(r => r.status)`, chromedp.EvalAwaitPromise)
	if status != 403 {
		t.Errorf("a read-only key's PUT: %d, want 403", status)
	}
	cookie := eval[string](b, `document.cookie`)
	if cookie != "" {
		t.Errorf("cookies set: %q", cookie)
	}
	b.shot("read-only")
	// An admin's key, after signing out: the buttons are there.
	b.click(`#who button`)
	b.waitJS("key form again", `!!document.getElementById("key")`)
	b.typeInto("#key", admin)
	b.click(`main form button[type="submit"]`)
	b.waitJS("buttons", `!!document.getElementById("act-weights")`)
	// The workers page needs an admin (the console reads it with the key).
	b.click(`a[data-nav="workers"]`)
	b.waitJS("workers", `document.querySelector("main").innerText.includes("in-process")`)
	b.clean(append(allowed404s, "/v1/models", "/v1/workers", "/v1/deployments/iris")...) // the 401s and the 403 above were asked for
}

// TestUIManyModels times the models page with 500 models: from the
// navigation's start to the table's 500 rows (the first render) and to
// every row's deployment (one GET /v1/deployments), as the browser's
// performance marks say. Reported in docs/benchmarks.md, not asserted.
func TestUIManyModels(t *testing.T) {
	models := t.TempDir()
	const n = 500
	for i := range n {
		dir := writePackage(t, filepath.Join(models, fmt.Sprintf("m%03d", i)), []float64{1, 2}, 3.5)
		b, err := os.ReadFile(filepath.Join(dir, "model.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "model.yaml"), []byte(strings.Replace(string(b), "name: calc", fmt.Sprintf("name: m%03d", i), 1)), 0o644)
	}
	srv := startServer(t, "--data", t.TempDir(), "--models", models)
	var list struct{ Models []struct{ Name string } }
	getJSON(t, srv.url+"/v1/models", &list)
	if len(list.Models) != n {
		t.Fatalf("%d models served, want %d", len(list.Models), n)
	}
	b := newBrowser(t, srv.url)
	var timings []string
	for round := range 3 {
		if _, err := chromedp.Call(b.ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
			t.Fatal(err)
		}
		b.run("open /ui/", chromedp.Navigate(srv.url+"/ui/"))
		b.waitJS("500 rows", `document.querySelectorAll("main tbody tr").length === 500`)
		b.waitJS("deployments", `performance.getEntriesByName("models-deployments").length === 1`)
		rendered := eval[float64](b, `performance.getEntriesByName("models-rendered")[0].startTime`)
		deps := eval[float64](b, `performance.getEntriesByName("models-deployments")[0].startTime`)
		line := fmt.Sprintf("round %d: 500 rows rendered %.0f ms after navigation start, every deployment filled in at %.0f ms", round+1, rendered, deps)
		t.Log(line)
		timings = append(timings, line)
	}
	b.shot("models-500")
	os.WriteFile(filepath.Join(artifactsDir(t), "models-500-timings.txt"), []byte(strings.Join(timings, "\n")+"\n"), 0o644)
	b.clean(allowed404s...)
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
