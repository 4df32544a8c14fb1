package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/testwait"
)

// copyPackage copies the example package name into a temp folder.
func copyPackage(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join("../../examples", name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("../../examples", name, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A retrained artifact's golden values are rewritten in place: only the
// numbers change, every comment and space stays.
func TestCheckUpdateGolden(t *testing.T) {
	orig, err := os.ReadFile("../../examples/iris/model.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := copyPackage(t, "iris")
	man := filepath.Join(dir, "model.yaml")
	stale := strings.NewReplacer("setosa: 0.9531188", "setosa: 0.5", "virginica: 0.9527456", "virginica: 0.25").Replace(string(orig))
	if stale == string(orig) {
		t.Fatal("the example's golden values changed; update this test")
	}
	os.WriteFile(man, []byte(stale), 0o644)
	if _, _, err := sluice(t, "check", dir); err == nil {
		t.Fatal("check passed with stale golden values")
	}
	out, stderr, err := sluice(t, "check", "--update-golden", dir)
	if err != nil {
		t.Fatalf("check --update-golden: %v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{"example 0 setosa: 0.5 -> 0.9531188", "example 2 virginica: 0.25 -> 0.9527456", "example 1 setosa = 0.024172813 (unchanged)", "2 expected value(s) updated"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	got, _ := os.ReadFile(man)
	if string(got) != string(orig) {
		t.Fatalf("model.yaml after the update:\n%s\nwant the original byte for byte:\n%s", got, orig)
	}
	if out, stderr, err := sluice(t, "check", dir); err != nil {
		t.Fatalf("check after the update: %v\n%s%s", err, out, stderr)
	}
	out, _, err = sluice(t, "check", "--update-golden", dir)
	if err != nil || !strings.Contains(out, "nothing written") {
		t.Fatalf("second update: %v\n%s", err, out)
	}

	// No golden examples: refused, the file untouched.
	bare := strings.Split(string(orig), "\ngolden:")[0] + "\n"
	os.WriteFile(man, []byte(bare), 0o644)
	_, stderr, err = sluice(t, "check", "--update-golden", dir)
	if err == nil || !strings.Contains(stderr, "no golden examples to update") {
		t.Fatalf("no golden: err %v, stderr %s", err, stderr)
	}
	if got, _ := os.ReadFile(man); string(got) != bare {
		t.Fatal("model.yaml changed although the update was refused")
	}
}

func TestVersionCommand(t *testing.T) {
	out, stderr, err := sluice(t, "version")
	if err != nil || !strings.HasPrefix(out, "sluice dev (go") {
		t.Fatalf("sluice version: %v\n%s%s", err, out, stderr)
	}
}

// A port in use is reported before the data directory is created.
func TestServePortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	_, stderr, err := sluice(t, "serve", "--addr", ln.Addr().String(), "--data", data)
	if err == nil || !strings.Contains(stderr, "listen on "+ln.Addr().String()) {
		t.Fatalf("serve on a used port: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data directory was touched: %v", err)
	}
}

// sluice init writes a model.yaml that passes sluice check as written, with
// the artifact's own feature names, and never overwrites one.
func TestInitThenCheck(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(mustRead(t, "../../examples/fraud/model.json"), &m); err != nil {
		t.Fatal(err)
	}
	l := m["learner"].(map[string]any)
	l["feature_names"] = []string{"amount_log", "accountAgeDays", "declines5m", "country US", "country GB", "country DE"}
	l["feature_types"] = []string{"float", "int", "int", "i", "i", "i"}
	art, _ := json.Marshal(m)
	src := filepath.Join(t.TempDir(), "booster.json")
	os.WriteFile(src, art, 0o644)
	out := filepath.Join(t.TempDir(), "risk")
	stdout, stderr, err := sluice(t, "init", src, "--out", out)
	if err != nil {
		t.Fatalf("init: %v\n%s%s", err, stdout, stderr)
	}
	y := string(mustRead(t, filepath.Join(out, "model.yaml")))
	for _, want := range []string{"name: risk\n", "runtime: xgboost\n", "artifact: booster.json\n", "{name: accountAgeDays, type: int}", `{name: country_US, type: bool}   # the artifact calls it "country US"; XGBoost feature type i (indicator)`, "{name: probability}", "expect: {probability: 0."} {
		if !strings.Contains(y, want) {
			t.Errorf("model.yaml lacks %q:\n%s", want, y)
		}
	}
	if stdout, stderr, err := sluice(t, "check", out); err != nil || !strings.HasSuffix(stdout, "ok\n") {
		t.Fatalf("check of the generated package: %v\n%s%s", err, stdout, stderr)
	}
	if _, stderr, err := sluice(t, "init", src, "--out", out); err == nil || !strings.Contains(stderr, "never overwrites") {
		t.Fatalf("second init: %v %s", err, stderr)
	}
	if string(mustRead(t, filepath.Join(out, "model.yaml"))) != y {
		t.Fatal("the second init changed model.yaml")
	}

	if os.Getenv("SLUICE_ONNXRUNTIME_LIB") == "" {
		t.Log("SLUICE_ONNXRUNTIME_LIB unset: the ONNX part is skipped")
		return
	}
	out = filepath.Join(t.TempDir(), "mlp")
	if stdout, stderr, err := sluice(t, "init", "../../examples/mlp/model.onnx", "--out", out); err != nil {
		t.Fatalf("init onnx: %v\n%s%s", err, stdout, stderr)
	}
	if stdout, stderr, err := sluice(t, "check", out); err != nil || !strings.Contains(stdout, "30 fields -> 30 features") {
		t.Fatalf("check of the generated onnx package: %v\n%s%s", err, stdout, stderr)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sluice drift MODEL prints the serving version's drift report as a table:
// one line per feature column and output, "not enough samples" until
// drift.minSamples rows were seen, the PSI after.
func TestDriftCommand(t *testing.T) {
	srv := startServer(t, "--data", t.TempDir())
	out, stderr, err := sluice(t, "drift", "churn", "--server", srv.url)
	if err != nil || !strings.HasPrefix(out, "churn@1: 0 rows") || !strings.Contains(out, "COLUMN") || !strings.Contains(out, "not enough samples") || !strings.Contains(out, "output:churnProbability") {
		t.Fatalf("drift before traffic: %v %q %q", err, out, stderr)
	}
	var b strings.Builder
	b.WriteString(`{"instances":[`)
	for i := range 120 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"tenureMonths":%d,"supportTickets":%d,"plan":"basic"}`, 60+i%10, 9)
	}
	b.WriteString(`]}`)
	if status, body, err := postJSON(srv.url+"/v1/models/churn:predict", b.String()); err != nil || status != 200 {
		t.Fatalf("predict: %d %v %s", status, err, body)
	}
	testwait.UntilNil(t, 10*time.Second, func() error {
		out, stderr, err = sluice(t, "drift", "churn@1", "--server", srv.url)
		if err != nil || !strings.HasPrefix(out, "churn@1: 120 rows") || !strings.Contains(out, " yes ") {
			return fmt.Errorf("drift after 120 shifted rows: %v %q %q", err, out, stderr)
		}
		return nil
	})
	if strings.Contains(out, "e+") || strings.Contains(out, "e-") {
		t.Errorf("drift prints an exponent:\n%s", out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	checkAligned(t, lines[1:], columnStarts(t, lines[1], "COLUMN", "PSI", "DRIFT", "SAMPLES", "MISSING", "REF MISSING"))
	if _, stderr, err := sluice(t, "drift", "fraud", "--server", srv.url); err == nil || !strings.Contains(stderr, "has no drift monitor") {
		t.Errorf("drift of a model without drift: %v %q", err, stderr)
	}
}

// sluice predict retries a refusal that carries Retry-After (here the
// tenant's quota) after the wait, within --timeout and --attempts, and
// says why when it gives up.
func TestPredictRetriesAfterRetryAfter(t *testing.T) {
	tenants := filepath.Join(t.TempDir(), "tenants.yaml")
	os.WriteFile(tenants, []byte(fmt.Sprintf("tenants:\n  - {name: app, keys: [\"sha256:%s\"], models: [\"*\"], quota: {instancesPerSecond: 0.25, burst: 1}}\n", sha("app-key"))), 0o644)
	srv := startServer(t, "--data", t.TempDir(), "--tenants", tenants)
	predict := func(args ...string) (string, string, error) {
		cmd := exec.Command(binary, append([]string{"predict", "churn", `{"tenureMonths":3,"supportTickets":1,"plan":"basic"}`, "--server", srv.url}, args...)...)
		cmd.Env = append(os.Environ(), "SLUICE_API_KEY=app-key")
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	if out, stderr, err := predict(); err != nil || !strings.Contains(out, `"modelVersion":"churn@1"`) {
		t.Fatalf("first call: %v %q %q", err, out, stderr)
	}
	// The bucket is empty: refused with Retry-After 4, answered on the retry.
	out, stderr, err := predict()
	if err != nil || !strings.Contains(out, `"modelVersion":"churn@1"`) || !strings.Contains(stderr, "429 quota_exceeded") || !strings.Contains(stderr, "retrying in 4s (attempt 2 of 3)") {
		t.Fatalf("call over quota: %v %q %q", err, out, stderr)
	}
	if _, stderr, err := predict("--attempts", "1"); err == nil || !strings.Contains(stderr, "429 quota_exceeded") || !strings.Contains(stderr, "gave up after 1 attempt(s) (--attempts 1)") {
		t.Fatalf("--attempts 1: %v %q", err, stderr)
	}
	if _, stderr, err := predict("--timeout", "300ms"); err == nil || !strings.Contains(stderr, "past the deadline") || strings.Contains(stderr, "retrying") {
		t.Fatalf("--timeout 300ms: %v %q", err, stderr)
	}
}

// sluice init reads pandas.get_dummies columns (plan_basic, plan_pro,
// plan_team) as one category field with onehot, in the artifact's order:
// the package checks, publishes and answers the raw rows as XGBoost
// answered their dummies (scripts/make_dummies_fixture.py).
func TestInitGetDummiesToCategory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plans")
	os.MkdirAll(dir, 0o755)
	art, err := os.ReadFile("testdata/dummies/plans.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "plans.json"), art, 0o644)
	if out, stderr, err := sluice(t, "init", filepath.Join(dir, "plans.json")); err != nil || !strings.Contains(out, "3 input fields") {
		t.Fatalf("init: %v %q %q", err, out, stderr)
	}
	man, _ := os.ReadFile(filepath.Join(dir, "model.yaml"))
	for _, want := range []string{`{name: plan, type: category, values: ["basic", "pro", "team"]}`, "{op: onehot, field: plan}"} {
		if !strings.Contains(string(man), want) {
			t.Fatalf("model.yaml lacks %q:\n%s", want, man)
		}
	}
	if out, stderr, err := sluice(t, "check", dir); err != nil || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("check: %v %q %q", err, out, stderr)
	}
	srv := startServer(t, "--data", t.TempDir(), "--models", t.TempDir())
	if out, stderr, err := sluice(t, "push", dir, "--server", srv.url); err != nil || !strings.Contains(out, "state=ready") {
		t.Fatalf("push: %v %q %q", err, out, stderr)
	}
	var want struct {
		Rows        []map[string]any `json:"rows"`
		Probability []float64        `json:"probability"`
	}
	b, _ := os.ReadFile("testdata/dummies/plans.expect.json")
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"instances": want.Rows})
	status, out, err := postJSON(srv.url+"/v1/models/plans:predict", string(body))
	if err != nil || status != 200 {
		t.Fatalf("predict: %d %v %s", status, err, out)
	}
	var got struct {
		Predictions []map[string]float64 `json:"predictions"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Predictions) != len(want.Probability) {
		t.Fatalf("predict: %v %s", err, out)
	}
	for i, p := range want.Probability {
		if d := got.Predictions[i]["probability"] - p; d > 1e-6 || d < -1e-6 {
			t.Errorf("row %d %v: %v, XGBoost %v", i, want.Rows[i], got.Predictions[i]["probability"], p)
		}
	}
	// --rows: the golden examples are the file's rows (here the dummies
	// frame), their outputs what the artifact answers: XGBoost's own.
	dir3 := filepath.Join(t.TempDir(), "plans")
	os.MkdirAll(dir3, 0o755)
	os.WriteFile(filepath.Join(dir3, "plans.json"), art, 0o644)
	rows := filepath.Join(t.TempDir(), "x.csv")
	os.WriteFile(rows, []byte("tenure,plan_basic,plan_pro,plan_team,tickets\n3,1,0,0,7\n48,0,1,0,1\n12,0,0,1,4\n"), 0o644)
	if out, stderr, err := sluice(t, "init", "--rows", rows, filepath.Join(dir3, "plans.json")); err != nil {
		t.Fatalf("init --rows: %v %q %q", err, out, stderr)
	}
	man, _ = os.ReadFile(filepath.Join(dir3, "model.yaml"))
	for i, row := range []string{`{tenure: 3, plan: "basic", tickets: 7}`, `{tenure: 48, plan: "pro", tickets: 1}`, `{tenure: 12, plan: "team", tickets: 4}`} {
		want := fmt.Sprintf("- instance: %s\n    expect: {probability: %s}", row, strconv.FormatFloat(float64(float32(want.Probability[i])), 'g', -1, 32))
		if !strings.Contains(string(man), want) {
			t.Errorf("model.yaml lacks %q:\n%s", want, man)
		}
	}
	if out, stderr, err := sluice(t, "check", dir3); err != nil || !strings.HasSuffix(out, "ok\n") {
		t.Fatalf("check after init --rows: %v %q %q", err, out, stderr)
	}
	// --dummies=false keeps a field a column.
	dir2 := filepath.Join(t.TempDir(), "plans")
	os.MkdirAll(dir2, 0o755)
	os.WriteFile(filepath.Join(dir2, "plans.json"), art, 0o644)
	if out, stderr, err := sluice(t, "init", "--dummies=false", filepath.Join(dir2, "plans.json")); err != nil || !strings.Contains(out, "5 input fields") {
		t.Fatalf("init --dummies=false: %v %q %q", err, out, stderr)
	}
}

// TestOpenAPICommand: sluice openapi prints the description this binary
// embeds, and with --server the one the server serves at /openapi.json
// (JSON, every route: /v1/experiments among them).
func TestOpenAPICommand(t *testing.T) {
	out, stderr, err := sluice(t, "openapi")
	if err != nil || !strings.HasPrefix(out, "openapi: 3.1") || !strings.Contains(out, "/v1/models/{name}:predict") {
		t.Fatalf("sluice openapi: %v %s %.200s", err, stderr, out)
	}
	srv := startServer(t, "--data", t.TempDir())
	out, stderr, err = sluice(t, "openapi", "--server", srv.url)
	var spec struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err != nil || json.Unmarshal([]byte(out), &spec) != nil || !strings.HasPrefix(spec.OpenAPI, "3.1") || spec.Paths["/v1/experiments"] == nil {
		t.Fatalf("sluice openapi --server: %v %s %.200s", err, stderr, out)
	}
	if _, stderr, err := sluice(t, "openapi", "--server", "http://127.0.0.1:1"); err == nil || !strings.Contains(stderr, "--server http://127.0.0.1:1") {
		t.Fatalf("an unreachable server: %v %s", err, stderr)
	}
}
