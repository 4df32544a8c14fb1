package lab

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Series is one line of a chart: points (X[i], Y[i]); a NaN or infinite
// coordinate (or, on a log axis, a value ≤ 0) leaves that point out.
type Series struct {
	Name   string
	Color  string // any SVG colour; "" picks one from the palette
	Dashed bool
	X, Y   []float64
}

// Chart is an XY line chart rendered as a self-contained SVG element.
type Chart struct {
	Title          string
	XLabel, YLabel string
	LogY           bool // a log10 y axis (latencies that span decades)
	// YMin and YMax fix the y range when YMax > YMin (e.g. 0..1 for a
	// ratio); otherwise it covers the data (from 0 on a linear axis).
	YMin, YMax float64
	Series     []Series
}

// Geometry of a chart.
const (
	plotW      = 760
	plotH      = 300
	plotLeft   = 72
	plotRight  = 190
	plotTop    = 36
	plotBottom = 46
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// SVG renders the chart. It never fails: a chart without a point says so
// in its plot area.
func (c Chart) SVG() string {
	var b strings.Builder
	w, h := plotW, plotTop+plotH+plotBottom
	pw := plotW - plotLeft - plotRight
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="%s" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		html.EscapeString(c.Title), w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft, html.EscapeString(c.Title))

	ok := func(x, y float64) bool {
		if math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(y) || math.IsInf(y, 0) {
			return false
		}
		return !c.LogY || y > 0
	}
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	n := 0
	for _, s := range c.Series {
		for i := range min(len(s.X), len(s.Y)) {
			if !ok(s.X[i], s.Y[i]) {
				continue
			}
			n++
			xlo, xhi = math.Min(xlo, s.X[i]), math.Max(xhi, s.X[i])
			ylo, yhi = math.Min(ylo, s.Y[i]), math.Max(yhi, s.Y[i])
		}
	}
	if n == 0 {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
		if c.LogY {
			ylo, yhi = 1, 10
		}
	}
	if c.YMax > c.YMin {
		ylo, yhi = c.YMin, c.YMax
	}
	xt := Ticks(math.Min(0, xlo), xhi)
	if xlo > 0 && xlo > (xhi-xlo) { // far from 0: do not squash the data to the right
		xt = Ticks(xlo, xhi)
	}
	var yt []float64
	if c.LogY {
		yt = LogTicks(ylo, yhi)
	} else {
		if !(c.YMax > c.YMin) {
			ylo = math.Min(0, ylo)
		}
		yt = Ticks(ylo, yhi)
	}
	x0, x1 := xt[0], xt[len(xt)-1]
	y0, y1 := yt[0], yt[len(yt)-1]
	tr := func(y float64) float64 {
		if c.LogY {
			return math.Log10(y)
		}
		return y
	}
	px := func(x float64) float64 { return float64(plotLeft) + (x-x0)/(x1-x0)*float64(pw) }
	py := func(y float64) float64 {
		return float64(plotTop+plotH) - (tr(y)-tr(y0))/(tr(y1)-tr(y0))*float64(plotH)
	}
	clampY := func(v float64) float64 { return math.Max(float64(plotTop), math.Min(float64(plotTop+plotH), v)) }

	for _, y := range yt {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", plotLeft, py(y), plotLeft+pw, py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", plotLeft-6, py(y), TickLabel(y))
	}
	for _, x := range xt {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", px(x), plotTop, px(x), plotTop+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(x), plotTop+plotH+16, TickLabel(x))
	}
	fmt.Fprintf(&b, `<polyline points="%d,%d %d,%d %d,%d" fill="none" stroke="black"/>`+"\n", plotLeft, plotTop, plotLeft, plotTop+plotH, plotLeft+pw, plotTop+plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>`+"\n",
		16, plotTop+plotH/2, 16, plotTop+plotH/2, html.EscapeString(c.YLabel))
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", plotLeft+pw/2, h-8, html.EscapeString(c.XLabel))
	if n == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#666">no data</text>`+"\n", plotLeft+pw/2, plotTop+plotH/2)
	}

	for i, s := range c.Series {
		color := s.Color
		if color == "" {
			color = palette[i%len(palette)]
		}
		var pts []string
		for j := range min(len(s.X), len(s.Y)) {
			if !ok(s.X[j], s.Y[j]) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.X[j]), clampY(py(s.Y[j]))))
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6,4"`
		}
		fmt.Fprintf(&b, `<g class="series" data-name="%s">`, html.EscapeString(s.Name))
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`, strings.Join(pts, " "), color, dash)
			if !s.Dashed {
				for _, pt := range pts {
					x, y, _ := strings.Cut(pt, ",")
					fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`, x, y, color)
				}
			}
		}
		b.WriteString("</g>\n")
		ly := plotTop + 10 + 18*i
		lx := plotLeft + pw + 14
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+24, ly, color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+30, ly, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// Ticks returns about five round values covering [lo, hi].
func Ticks(lo, hi float64) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step+1e-9) * step
	var out []float64
	for i := 0; ; i++ {
		t := start + float64(i)*step
		out = append(out, round12(math.Round(t/step)*step))
		if t >= hi-step*1e-9 || len(out) > 50 {
			break
		}
	}
	return out
}

// round12 drops the float error of a product (0.6000000000000001).
func round12(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	return r
}

// LogTicks returns the powers of ten covering [lo, hi] (lo, hi > 0),
// with 2 and 5 between them when they span at most two decades.
func LogTicks(lo, hi float64) []float64 {
	if !(lo > 0) {
		lo = 1
	}
	if !(hi > lo) {
		hi = lo * 10
	}
	a, z := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if z == a {
		z = a + 1
	}
	var out []float64
	fine := z-a <= 2
	for e := a; e <= z; e++ {
		p := round12(math.Pow(10, e))
		out = append(out, p)
		if fine && e < z {
			for _, m := range []float64{2, 5} {
				if v := round12(m * p); v > lo/2 && v < hi*2 {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// TickLabel renders a tick value compactly: 1500 as 1.5k, 0.25 as 0.25.
func TickLabel(v float64) string {
	av := math.Abs(v)
	switch {
	case av >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case av >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}
