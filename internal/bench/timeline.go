package bench

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// TimelineSeries is one line of a timeline panel: Y[i] belongs to the
// chart's X[i] (NaN: no point). Dashed lines are drawn without markers.
type TimelineSeries struct {
	Name   string
	Color  string
	Dashed bool
	Y      []float64
}

// TimelinePanel is one panel of a timeline chart: a y axis and its lines.
type TimelinePanel struct {
	YLabel string
	Series []TimelineSeries
}

// WriteTimelineSVG writes a self-contained SVG chart of panels stacked
// over one shared x axis (e.g. replicas and p99 against seconds into a
// run), in the style of WriteSweepSVG.
func WriteTimelineSVG(w io.Writer, title, xlabel string, xs []float64, panels []TimelinePanel) error {
	var b strings.Builder
	h := marginTop + len(panels)*panelH + max(len(panels)-1, 0)*gap + marginBot
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, h, chartW, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, html.EscapeString(title))
	for i, p := range panels {
		ss := make([]series, len(p.Series))
		for j, s := range p.Series {
			if len(s.Y) != len(xs) {
				return fmt.Errorf("timeline chart: series %q has %d points for %d x values", s.Name, len(s.Y), len(xs))
			}
			ss[j] = series{s.Name, s.Color, s.Dashed, s.Y}
		}
		panel(&b, marginTop+i*(panelH+gap), xs, p.YLabel, ss)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", marginL+(chartW-marginL-marginR)/2, h-12, html.EscapeString(xlabel))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
