package lab

import (
	"bytes"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func bp(config string, offered, achieved, p50, p99 float64) BatchPoint {
	return BatchPoint{Config: config, OfferedRate: offered, Achieved: achieved, Tally: Tally{Sent: 100, OK: 100, P50Ms: Num(p50), P99Ms: Num(p99)}}
}

func sampleReport() *Report {
	nan := Num(math.NaN())
	return &Report{
		Title: "Sluice Model Serving Lab", Command: "sluice lab --quick", Quick: true, Started: time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC), ElapsedS: 200, Stem: "report",
		Machine: Machine{Cores: 2, CPU: "AMD EPYC <test>", GoVersion: "go1.26", Commit: "abc123", LoadStart: [3]float64{3.1, 2, 1}, LoadEnd: [3]float64{4, 3, 2}, Note: "busy machine"},
		Batching: &Batching{BoundMs: 50, Setup: Setup{Models: "seed curve", Load: "poisson", Server: "sluice serve --workers 2"}, Points: []BatchPoint{
			bp("no batching", 100, 100, 3, 10), bp("no batching", 300, 298, 6, 40), bp("no batching", 600, 410, 900, 2500),
			bp("batch 32, delay 3ms", 100, 100, 5, 12), bp("batch 32, delay 3ms", 300, 300, 5, 14), bp("batch 32, delay 3ms", 600, 600, 6, 20), bp("batch 32, delay 3ms", 1200, 1190, 8, 45),
		}},
		Overload: &Overload{SLOMs: 50, Capacity: 400, Setup: Setup{Models: "2 ms sleep"}, Probes: []Probe{{Rate: 400, P99Ms: 30, Pass: true}}, Points: []OverloadPoint{
			{Admission: true, Factor: 1, OfferedRate: 400, Goodput: 390, Tally: Tally{Sent: 4000, OK: 3950, Good: 3900, P99Ms: 40, RefusedP99Ms: 1}},
			{Admission: false, Factor: 1, OfferedRate: 400, Goodput: 350, Tally: Tally{Sent: 4000, OK: 4000, Good: 3500, P99Ms: 90, RefusedP99Ms: nan}},
			{Admission: true, Factor: 3, OfferedRate: 1200, Goodput: 380, Tally: Tally{Sent: 12000, OK: 3900, Good: 3800, Refused: 8000, P99Ms: 45, RefusedP99Ms: 2}},
			{Admission: false, Factor: 3, OfferedRate: 1200, Goodput: 20, Tally: Tally{Sent: 12000, OK: 9000, Good: 200, NoAnswer: 3000, P99Ms: 9000, RefusedP99Ms: nan}},
		}},
		Many: &Many{Setup: Setup{Models: "300 synthetic models", Load: "zipf"}, Models: 300, Workers: 2, ZipfS: 1.1, Rate: 200, DurationS: 120, TotalMiB: 4000, BudgetMiB: 400, HotModels: 10, HotShare: 0.54, WarmupS: 20, WindowS: 10,
			HitRatio: 0.75, Loads: 60, Evictions: 40,
			All:   Tally{Sent: 24000, ByCode: map[string]int{"cold_start": 6000}},
			Hot:   Tally{Sent: 10000, OK: 10000, P50Ms: 2.5, P99Ms: 8},
			After: Tally{Sent: 20000, P50Ms: 2.6, P99Ms: 300},
			Windows: []ManyWindow{
				{FromS: 0, Sent: 2000, HitRatio: 0.5, Loads: 40, Evictions: 30, MemoryMiB: 790, HotP99Ms: 400, AllP99Ms: 800},
				{FromS: 10, Sent: 2000, HitRatio: 0.8, Loads: 10, Evictions: 6, MemoryMiB: 798, HotP99Ms: 8, AllP99Ms: 300},
				{FromS: 20, Sent: 2000, HitRatio: 0.9, Loads: 10, Evictions: 4, MemoryMiB: 799, HotP99Ms: 7, AllP99Ms: 200},
				{FromS: 30, Sent: 2000, HitRatio: nan, MemoryMiB: nan, HotP99Ms: nan, AllP99Ms: nan},
			}},
	}
}

func TestSustained(t *testing.T) {
	r := sampleReport().Batching
	for _, c := range []struct {
		config string
		want   float64
		ok     bool
	}{{"no batching", 298, true}, {"batch 32, delay 3ms", 1190, true}, {"absent", 0, false}} {
		if got, ok := Sustained(r.Points, c.config, 50); got != c.want || ok != c.ok {
			t.Errorf("Sustained(%q) = %g, %v; want %g, %v", c.config, got, ok, c.want, c.ok)
		}
	}
	// A point with errors is not sustained, whatever its p99.
	ps := []BatchPoint{{Config: "x", Achieved: 500, Tally: Tally{Sent: 100, OK: 90, P99Ms: 5}}}
	if _, ok := Sustained(ps, "x", 50); ok {
		t.Error("a point with 10 % errors counted as sustained")
	}
}

func TestFindings(t *testing.T) {
	r := sampleReport()
	for _, c := range []struct {
		name string
		text string
		want []string
	}{
		{"batching", r.Batching.Findings(), []string{"up to 298 answers/s", "With no batching the model kept p99 within 50.0 ms", "batch 32, delay 3ms, kept it up to 1190 answers/s: 3.99x", "p50 5.00 ms against 3.00 ms", "no batching 410/s"}},
		{"overload", r.Overload.Findings(), []string{"capacity was 400 answers/s", "At 3.00x capacity, with admission goodput was 380/s (0.950x", "Without admission goodput was 20.0/s (0.050x) and p99 9000 ms, and 3000 requests got no answer", "Admission kept 19.0x the goodput", "under half of what was offered (or of capacity) at 3.00x"}},
		{"many", r.Many.Findings(), []string{"300 models of 4000 MiB", "20.0% of the models fit", "75.0% of requests found their model loaded", "averaged 90.0% per window (lowest 90.0%)", "60.0 loads and 40.0 evictions (30.0 and 20.0 a minute)", "25.0% of all requests were refused cold_start", "p99 8.00 ms", "The hot models stayed loaded"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.text, w) {
				t.Errorf("%s findings lack %q:\n%s", c.name, w, c.text)
			}
		}
	}
	// The other way round, the text follows the numbers.
	o := *r.Overload
	o.Points = []OverloadPoint{{Admission: true, Factor: 2, OfferedRate: 800, Goodput: 100}, {Admission: false, Factor: 2, OfferedRate: 800, Goodput: 390}}
	if f := o.Findings(); !strings.Contains(f, "Here admission cost goodput") || !strings.Contains(f, "never fell under half") {
		t.Errorf("findings for admission losing: %s", f)
	}
	if strings.Contains(r.Overload.Findings(), "fell short") {
		t.Errorf("goodput under capacity, yet the findings say the capacity fell short: %s", r.Overload.Findings())
	}
	o.Points = append(o.Points, OverloadPoint{Admission: true, Factor: 3, OfferedRate: 1200, Goodput: 600})
	if f := o.Findings(); !strings.Contains(f, "Goodput reached 600/s (at 3.00x, admission on), 1.50x the measured capacity") {
		t.Errorf("findings for a goodput above the capacity: %s", f)
	}
	if f := (&Overload{}).Findings(); !strings.Contains(f, "No capacity") {
		t.Errorf("findings without a capacity: %s", f)
	}
	if f := (&Batching{BoundMs: 50}).Findings(); f != "No point was measured." {
		t.Errorf("findings without points: %s", f)
	}
}

func TestBursts(t *testing.T) {
	win := func(loads ...float64) []ManyWindow {
		ws := make([]ManyWindow, len(loads))
		for i, l := range loads {
			ws[i] = ManyWindow{FromS: float64(10 * i), Loads: l}
		}
		return ws
	}
	for _, c := range []struct {
		loads []float64
		want  string
	}{
		{[]float64{46, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 78, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 96, 0, 1}, "88.7% of them in 3 of the 27 windows (from 0, 120, 240 s)"},
		{[]float64{5, 5, 5, 5, 5, 5, 5, 5}, ""}, // steady loading is no burst
		{[]float64{0, 0, 0, 0}, ""},
		{[]float64{9, 1}, ""}, // too few windows to say
	} {
		got := Bursts(win(c.loads...), 0.8)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Bursts(%v) = %q, want %q", c.loads, got, c.want)
		}
	}
}

func TestMachineBusy(t *testing.T) {
	for _, c := range []struct {
		load float64
		want string
	}{{0.3, "A quiet machine"}, {1.2, "A partly busy machine"}, {5, "A busy machine"}} {
		m := Machine{Cores: 2, LoadStart: [3]float64{c.load}}
		if got := m.Busy(); !strings.HasPrefix(got, c.want) {
			t.Errorf("load %g: %q, want %q…", c.load, got, c.want)
		}
	}
}

func TestWriteHTML(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, id := range []string{`id="batching"`, `id="overload"`, `id="many"`, `id="machine"`} {
		if !strings.Contains(page, id) {
			t.Errorf("the page has no section %s", id)
		}
	}
	if n := strings.Count(page, "<svg "); n != 8 {
		t.Errorf("%d charts, want 8 (2 + 2 + 4)", n)
	}
	for _, bad := range []string{"<script", "NaN", "<img", "<link", "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	// No request leaves the page: the only URL is SVG's namespace.
	for _, u := range regexp.MustCompile(`(?:https?:)?//[^"'\s<)]+`).FindAllString(page, -1) {
		if u != "http://www.w3.org/2000/svg" {
			t.Errorf("the page refers to %s", u)
		}
	}
	for _, f := range []string{"report-batching.csv", "report-overload.csv", "report-many.csv", "report.json", "AMD EPYC &lt;test&gt;", "busy machine", "A busy machine"} {
		if !strings.Contains(page, f) {
			t.Errorf("the page does not mention %q", f)
		}
	}
	if !strings.Contains(page, "Admission kept 19.0x the goodput") {
		t.Error("the overload findings are not on the page")
	}
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet") // made by Write
	r := sampleReport()
	r.Stem = "lab"
	if err := Write(filepath.Join(dir, "lab.html"), r); err != nil {
		t.Fatal(err)
	}
	rows := func(name string) [][]string {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rs, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return rs
	}
	if rs := rows("lab-batching.csv"); len(rs) != 8 || rs[0][0] != "config" || rs[1][0] != "no batching" || rs[1][10] != "3" {
		t.Errorf("batching.csv: %v", rs)
	}
	if rs := rows("lab-overload.csv"); len(rs) != 5 || rs[4][0] != "false" || rs[4][9] != "3000" || rs[4][12] != "" {
		t.Errorf("overload.csv: %v", rs)
	}
	if rs := rows("lab-many.csv"); len(rs) != 5 || rs[4][4] != "" || rs[2][4] != "0.8" {
		t.Errorf("many.csv: %v", rs)
	}
	back, err := ReadJSON(filepath.Join(dir, "lab.json"))
	if err != nil {
		t.Fatalf("lab.json: %v", err)
	}
	// Rendered again from its JSON, the page is the same.
	first, _ := os.ReadFile(filepath.Join(dir, "lab.html"))
	back.Stem = "lab"
	var again bytes.Buffer
	if err := WriteHTML(&again, back); err != nil || again.String() != string(first) {
		t.Errorf("the page rendered from lab.json differs from the first (%v)", err)
	}
	if _, err := ReadJSON(filepath.Join(dir, "lab-many.csv")); err == nil {
		t.Error("ReadJSON took a CSV file")
	}
	if back.Many.Setup.Models != "300 synthetic models" || back.Many.Models != 300 {
		t.Errorf("lab.json read back: many models %q, %d", back.Many.Setup.Models, back.Many.Models)
	}
	if back.Overload == nil || back.Overload.Capacity != 400 || len(back.Many.Windows) != 4 || !math.IsNaN(float64(back.Many.Windows[3].HitRatio)) {
		t.Errorf("lab.json read back: %+v", back.Overload)
	}
	if _, err := os.Stat(filepath.Join(dir, "lab.html")); err != nil {
		t.Error(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
