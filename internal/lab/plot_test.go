package lab

import (
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 10, []float64{0, 2, 4, 6, 8, 10}},
		{0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 2400, []float64{0, 500, 1000, 1500, 2000, 2500}},
		{0.5, 3, []float64{0.5, 1, 1.5, 2, 2.5, 3}},
		{5, 5, []float64{5, 5.2, 5.4, 5.6, 5.8, 6}}, // an empty range gets one unit
	} {
		if got := Ticks(c.lo, c.hi); !slices.Equal(got, c.want) {
			t.Errorf("Ticks(%g, %g) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

func TestLogTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{3, 40, []float64{1, 2, 5, 10, 20, 50, 100}},
		{0.5, 2000, []float64{0.1, 1, 10, 100, 1000, 10000}},
		{10, 10, []float64{10, 20, 50, 100}},
		{0, 5, []float64{1, 2, 5, 10}}, // lo ≤ 0 on a log axis: from 1
	} {
		if got := LogTicks(c.lo, c.hi); !slices.Equal(got, c.want) {
			t.Errorf("LogTicks(%g, %g) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

func TestTickLabel(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.25: "0.25", 1500: "1500", 25000: "25k", 2e6: "2M"} {
		if got := TickLabel(v); got != want {
			t.Errorf("TickLabel(%g) = %q, want %q", v, got, want)
		}
	}
}

// svgDoc is what the tests read of a chart.
type svgDoc struct {
	XMLName xml.Name `xml:"svg"`
	Groups  []struct {
		Name     string `xml:"data-name,attr"`
		Polyline []struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
		Circles []struct{} `xml:"circle"`
	} `xml:"g"`
	Texts []string `xml:"text"`
}

func parseSVG(t *testing.T, s string) svgDoc {
	t.Helper()
	var d svgDoc
	if err := xml.Unmarshal([]byte(s), &d); err != nil {
		t.Fatalf("the chart is not well-formed XML: %v\n%s", err, s)
	}
	return d
}

func TestChartSVG(t *testing.T) {
	nan := math.NaN()
	c := Chart{Title: "p99 <against> throughput", XLabel: "answers/s", YLabel: "ms", LogY: true, Series: []Series{
		{Name: "no batching", X: []float64{100, 200, 300}, Y: []float64{5, 20, 900}},
		{Name: "batch 32 & 3ms", Dashed: true, X: []float64{100, 200, 300, 400}, Y: []float64{8, nan, 0, 12}}, // NaN and 0 (log) left out
		{Name: "empty"},
	}}
	s := c.SVG()
	if strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
		t.Fatalf("the chart holds NaN or Inf:\n%s", s)
	}
	d := parseSVG(t, s)
	if len(d.Groups) != 3 {
		t.Fatalf("%d series groups, want 3", len(d.Groups))
	}
	for i, want := range []struct {
		name            string
		points, circles int
	}{{"no batching", 3, 3}, {"batch 32 & 3ms", 2, 0}, {"empty", 0, 0}} {
		g := d.Groups[i]
		n := 0
		if len(g.Polyline) > 0 {
			n = len(strings.Fields(g.Polyline[0].Points))
		}
		if g.Name != want.name || n != want.points || len(g.Circles) != want.circles {
			t.Errorf("series %d: %q with %d points and %d markers, want %q with %d and %d", i, g.Name, n, len(g.Circles), want.name, want.points, want.circles)
		}
	}
	if !slices.Contains(d.Texts, "p99 <against> throughput") || !slices.Contains(d.Texts, "1000") {
		t.Errorf("title or the log axis' 1000 tick missing from the texts %q", d.Texts)
	}
	// Points stay inside the plot area.
	for _, g := range d.Groups {
		for _, pl := range g.Polyline {
			for _, pt := range strings.Fields(pl.Points) {
				var x, y float64
				if _, err := fmtSscan(pt, &x, &y); err != nil || x < plotLeft || x > plotW-plotRight || y < plotTop || y > plotTop+plotH {
					t.Errorf("point %s of %q outside the plot area", pt, g.Name)
				}
			}
		}
	}
}

func TestChartWithoutData(t *testing.T) {
	d := parseSVG(t, Chart{Title: "nothing", Series: []Series{{Name: "a", X: []float64{math.NaN()}, Y: []float64{1}}}}.SVG())
	if !slices.Contains(d.Texts, "no data") {
		t.Errorf("a chart without a point should say so: %q", d.Texts)
	}
}

func TestChartFixedRange(t *testing.T) {
	d := parseSVG(t, Chart{Title: "ratio", YMin: 0, YMax: 1, Series: []Series{{Name: "hit", X: []float64{1, 2}, Y: []float64{0.4, 0.5}}}}.SVG())
	if !slices.Contains(d.Texts, "1") || !slices.Contains(d.Texts, "0.2") {
		t.Errorf("the fixed 0..1 axis' ticks are missing: %q", d.Texts)
	}
}

func fmtSscan(pt string, x, y *float64) (int, error) {
	return fmt.Sscanf(strings.Replace(pt, ",", " ", 1), "%g %g", x, y)
}
