package telemetry

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// These tests keep deploy/prometheus and docs/operations.md in step with the
// metrics registered here. promtool (Debian's prometheus package, installed
// by .ci/run) checks the exposition and the alert rules; without it those
// tests fail unless SLUICE_SKIP_PROMTOOL=1.

const repoRoot = "../.."

var metricRef = regexp.MustCompile(`sluice_[a-z_]+`)

// registered is every metric family name New registers, with every metric
// observed so that each family shows up in a scrape.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	m, reg := newTest(t)
	observeAll(m)
	names := map[string]bool{}
	for _, n := range familyNames(t, reg) {
		names[n] = true
	}
	return names
}

// unknownRefs returns the sluice_* names in text that are not registered
// families (a histogram's _bucket, _sum and _count series count as its own).
// notMetrics are names the docs use that look like metrics and are not:
// the PostgreSQL store's own tables and NOTIFY channel (internal/registry,
// internal/pgdb).
var notMetrics = map[string]bool{"sluice_changes": true, "sluice_schema": true, "sluice_registry_changes": true,
	// The batch jobs' runner registers its own (internal/jobs, whose
	// TestOperationsDocListsJobMetrics checks the doc lists them).
	"sluice_job_rows_total": true, "sluice_job_chunk_seconds": true, "sluice_job_rows_per_second": true, "sluice_jobs": true}

func unknownRefs(text string, families map[string]bool) []string {
	var bad []string
	seen := map[string]bool{}
	for _, ref := range metricRef.FindAllString(text, -1) {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		if families[ref] || notMetrics[ref] {
			continue
		}
		ok := false
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if strings.HasSuffix(ref, suf) && families[strings.TrimSuffix(ref, suf)] {
				ok = true
			}
		}
		if !ok {
			bad = append(bad, ref)
		}
	}
	sort.Strings(bad)
	return bad
}

// promtool is the path of promtool. Without it the test fails: the checks
// must not pass by not running (.ci/run installs Debian's prometheus
// package, which has it). SLUICE_SKIP_PROMTOOL=1 skips them, said aloud.
func promtool(t *testing.T) string {
	t.Helper()
	if os.Getenv("SLUICE_SKIP_PROMTOOL") == "1" {
		t.Skip("SLUICE_SKIP_PROMTOOL=1: the promtool check is skipped")
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): install Debian's prometheus package, as .ci/run does, or set SLUICE_SKIP_PROMTOOL=1 to skip this check", err)
	}
	return p
}

func TestPromtoolCheckMetrics(t *testing.T) {
	reg := NewRegistry()
	m := New(reg, BuildInfo{Version: "test", GoVersion: "go1.26"})
	observeAll(m)
	body := scrape(t, m.Handler())
	p := promtool(t)
	cmd := exec.Command(p, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	// promtool reports problems of the Go and process collectors too; only
	// sluice_ metrics are ours to fix.
	var ours []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "sluice_") {
			ours = append(ours, line)
		}
	}
	switch {
	case len(ours) > 0:
		t.Errorf("promtool check metrics:\n%s", strings.Join(ours, "\n"))
	case err != nil:
		t.Logf("promtool check metrics found problems outside sluice_ metrics: %v\n%s", err, out)
	}
}

func TestAlertRules(t *testing.T) {
	path := filepath.Join(repoRoot, "deploy", "prometheus", "alerts.yml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	families := registered(t)
	n := 0
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			n++
			if bad := unknownRefs(r.Expr, families); len(bad) > 0 {
				t.Errorf("%s: rule %s%s references metrics telemetry does not register: %v", path, r.Alert, r.Record, bad)
			}
		}
	}
	if n == 0 {
		t.Errorf("%s: no rules", path)
	}
	p := promtool(t)
	if out, err := exec.Command(p, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules %s: %v\n%s", path, err, out)
	}
}

func TestDashboard(t *testing.T) {
	path := filepath.Join(repoRoot, "deploy", "prometheus", "dashboard.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s is not valid JSON: %v", path, err)
	}
	if len(dash.Panels) == 0 {
		t.Fatalf("%s: no panels", path)
	}
	families := registered(t)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("%s: panel %q has an empty expr", path, p.Title)
			}
			if bad := unknownRefs(tg.Expr, families); len(bad) > 0 {
				t.Errorf("%s: panel %q references metrics telemetry does not register: %v", path, p.Title, bad)
			}
		}
	}
	// Template variables and anything else in the file, too.
	if bad := unknownRefs(string(raw), families); len(bad) > 0 {
		t.Errorf("%s references metrics telemetry does not register: %v", path, bad)
	}
}

func TestOperationsDocListsEveryMetric(t *testing.T) {
	path := filepath.Join(repoRoot, "docs", "operations.md")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	families := registered(t)
	for name := range families {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("%s does not document %s", path, name)
		}
	}
	if bad := unknownRefs(doc, families); len(bad) > 0 {
		t.Errorf("%s mentions metrics telemetry does not register: %v", path, bad)
	}
}
