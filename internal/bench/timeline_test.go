package bench

import (
	"math"
	"strings"
	"testing"
)

func TestWriteTimelineSVG(t *testing.T) {
	xs := []float64{0, 1, 2, 3}
	panels := []TimelinePanel{
		{YLabel: "replicas", Series: []TimelineSeries{{Name: "ready", Color: "#1f77b4", Y: []float64{2, 2, 5, 5}}}},
		{YLabel: "p99 (ms)", Series: []TimelineSeries{
			{Name: "p99", Color: "#d62728", Y: []float64{10, math.NaN(), 80, 12}},
			{Name: "SLO", Color: "#999999", Dashed: true, Y: []float64{50, 50, 50, 50}},
		}},
	}
	var b strings.Builder
	if err := WriteTimelineSVG(&b, "step <1x>", "seconds", xs, panels); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"<svg", "</svg>", "step &lt;1x&gt;", "replicas", "p99 (ms)", "SLO", "seconds"} {
		if !strings.Contains(out, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	// 3 + 3 markers for the solid lines with points (one p99 point is NaN).
	if n := strings.Count(out, "<circle"); n != 7 {
		t.Errorf("%d markers, want 7 (4 ready + 3 p99)", n)
	}
	panels[0].Series[0].Y = []float64{1}
	if err := WriteTimelineSVG(&b, "t", "s", xs, panels); err == nil {
		t.Error("a series shorter than xs: want an error")
	}
}
