package bench

import (
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// fmtDur renders a latency with about three significant digits, in ms
// below a second.
func fmtDur(d time.Duration) string {
	ms := float64(d) / 1e6
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case ms >= 100:
		return fmt.Sprintf("%.0fms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1fms", ms)
	default:
		return fmt.Sprintf("%.2fms", ms)
	}
}

func fmtCounts[K int | string](m map[K]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%v: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func fmtRate(r float64) string { return strconv.FormatFloat(r, 'f', 1, 64) + "/s" }

// WriteText writes a human-readable report of one run.
func WriteText(w io.Writer, r Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	dl := "none"
	if r.DeadlineMs > 0 {
		dl = strconv.Itoa(r.DeadlineMs) + "ms"
	}
	p("model\t%s at %s", r.Model, r.Server)
	p("load\t%s %s for %v, %d instances/request, deadline %s", r.Arrivals, fmtRate(r.OfferedRate), r.Duration, r.InstancesPerRequest, dl)
	p("requests\tscheduled %d, sent %d, answered %d (2xx %d, within deadline %d), dropped by generator %d, no answer %d",
		r.Scheduled, r.Sent, r.Answered, r.OK, r.Good, r.DroppedByGenerator, r.TransportErrors)
	p("throughput\toffered %s, sent %s, achieved %s, goodput %s (over %v)",
		fmtRate(r.OfferedRate), fmtRate(r.SendRate), fmtRate(r.AchievedRate), fmtRate(r.Goodput), r.Elapsed.Round(time.Millisecond))
	l := r.Latency
	p("latency\tp50 %s, p90 %s, p99 %s, p99.9 %s, max %s, mean %s  (corrected: from intended send time)",
		fmtDur(l.P50), fmtDur(l.P90), fmtDur(l.P99), fmtDur(l.P999), fmtDur(l.Max), fmtDur(l.Mean))
	p("uncorrected\tp50 %s, p99 %s, max %s  (from actual send)", fmtDur(r.Uncorrected.P50), fmtDur(r.Uncorrected.P99), fmtDur(r.Uncorrected.Max))
	p("generator\tdispatch lag p50 %s, p99 %s, max %s", fmtDur(r.DispatchLag.P50), fmtDur(r.DispatchLag.P99), fmtDur(r.DispatchLag.Max))
	if len(r.ByStatus) > 0 {
		p("status\t%s", fmtCounts(r.ByStatus))
	}
	if len(r.ByCode) > 0 {
		p("errors\t%s", fmtCounts(r.ByCode))
	}
	if len(r.TransportByReason) > 0 {
		p("no answer\t%s", fmtCounts(r.TransportByReason))
	}
	for _, wn := range r.Warnings {
		p("WARNING\t%s", wn)
	}
	return tw.Flush()
}

// errorRate is the share of sent requests without a 2xx answer.
func errorRate(r Result) float64 {
	if r.Sent == 0 {
		return 0
	}
	return float64(r.Sent-r.OK) / float64(r.Sent)
}

// WriteSweepText writes one line per rate.
func WriteSweepText(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "offered/s\tsent/s\tachieved/s\tgoodput/s\tp50\tp90\tp99\tp99.9\tmax\tnon-2xx\tdropped\tbehind\t")
	for _, r := range rs {
		behind := ""
		if r.FellBehind {
			behind = "yes"
		}
		fmt.Fprintf(tw, "%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%d\t%s\t\n",
			r.OfferedRate, r.SendRate, r.AchievedRate, r.Goodput,
			fmtDur(r.Latency.P50), fmtDur(r.Latency.P90), fmtDur(r.Latency.P99), fmtDur(r.Latency.P999), fmtDur(r.Latency.Max),
			100*errorRate(r), r.DroppedByGenerator, behind)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		for _, wn := range r.Warnings {
			if _, err := fmt.Fprintf(w, "WARNING at %s: %s\n", fmtRate(r.OfferedRate), wn); err != nil {
				return err
			}
		}
	}
	return nil
}

// Chart geometry.
const (
	chartW    = 720
	panelH    = 260
	marginL   = 70
	marginR   = 150
	marginTop = 40
	gap       = 60
	marginBot = 50
)

type series struct {
	name  string
	color string
	dash  bool
	ys    []float64
}

// WriteSweepSVG writes a self-contained SVG chart of a sweep: throughput
// (achieved, goodput, and the offered diagonal) and latency (corrected p50
// and p99) against offered rate.
func WriteSweepSVG(w io.Writer, rs []Result, title string) error {
	var b strings.Builder
	xs := make([]float64, len(rs))
	var achieved, goodput, offered, p50, p99 []float64
	for i, r := range rs {
		xs[i] = r.OfferedRate
		offered = append(offered, r.OfferedRate)
		achieved = append(achieved, r.AchievedRate)
		goodput = append(goodput, r.Goodput)
		p50 = append(p50, float64(r.Latency.P50)/1e6)
		p99 = append(p99, float64(r.Latency.P99)/1e6)
	}
	h := marginTop + 2*panelH + gap + marginBot
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, h, chartW, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, html.EscapeString(title))
	panel(&b, marginTop, xs, "throughput (req/s)", []series{
		{"offered", "#999999", true, offered},
		{"achieved", "#1f77b4", false, achieved},
		{"goodput", "#2ca02c", false, goodput},
	})
	panel(&b, marginTop+panelH+gap, xs, "latency, corrected (ms)", []series{
		{"p50", "#ff7f0e", false, p50},
		{"p99", "#d62728", false, p99},
	})
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">offered rate (req/s)</text>`+"\n", marginL+(chartW-marginL-marginR)/2, h-12)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteSweepHTML writes an HTML page holding the SVG chart and the table.
func WriteSweepHTML(w io.Writer, rs []Result, title string) error {
	var svg, table strings.Builder
	if err := WriteSweepSVG(&svg, rs, title); err != nil {
		return err
	}
	if err := WriteSweepText(&table, rs); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head>\n<body>\n%s<pre>%s</pre>\n</body></html>\n",
		html.EscapeString(title), svg.String(), html.EscapeString(table.String()))
	return err
}

// panel draws one chart panel at vertical offset top.
func panel(b *strings.Builder, top int, xs []float64, ylabel string, ss []series) {
	pw := chartW - marginL - marginR
	x0, x1 := minMax(xs)
	if x0 == x1 {
		x0 = 0
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	ymax := 0.0
	for _, s := range ss {
		for _, y := range s.ys {
			if !math.IsNaN(y) && !math.IsInf(y, 0) {
				ymax = max(ymax, y)
			}
		}
	}
	yt := ticks(0, ymax)
	ymax = yt[len(yt)-1]
	xt := ticks(x0, x1)
	x0, x1 = xt[0], xt[len(xt)-1]
	px := func(x float64) float64 { return float64(marginL) + (x-x0)/(x1-x0)*float64(pw) }
	py := func(y float64) float64 { return float64(top+panelH) - y/ymax*float64(panelH) }

	// Grid, ticks and axes.
	for _, y := range yt {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", marginL, py(y), marginL+pw, py(y))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginL-6, py(y), tickLabel(y))
	}
	for _, x := range xt {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", px(x), top, px(x), top+panelH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(x), top+panelH+16, tickLabel(x))
	}
	fmt.Fprintf(b, `<polyline points="%d,%d %d,%d %d,%d" fill="none" stroke="black"/>`+"\n", marginL, top, marginL, top+panelH, marginL+pw, top+panelH)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>`+"\n",
		18, top+panelH/2, 18, top+panelH/2, html.EscapeString(ylabel))

	// Series and legend.
	for i, s := range ss {
		var pts []string
		for j, y := range s.ys {
			if math.IsNaN(y) || math.IsInf(y, 0) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(xs[j]), py(y)))
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="5,4"`
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
		if !s.dash {
			for _, pt := range pts {
				xy := strings.Split(pt, ",")
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], s.color)
			}
		}
		ly := top + 14 + 20*i
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", marginL+pw+15, ly, marginL+pw+40, ly, s.color, dash)
		fmt.Fprintf(b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", marginL+pw+46, ly, html.EscapeString(s.name))
	}
}

func minMax(v []float64) (lo, hi float64) {
	if len(v) == 0 {
		return 0, 1
	}
	return slices.Min(v), slices.Max(v)
}

// ticks returns about five round tick values covering [lo, hi].
func ticks(lo, hi float64) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var out []float64
	for t := start; ; t += step {
		out = append(out, math.Round(t/step)*step)
		if t >= hi-step*1e-9 || len(out) > 50 {
			break
		}
	}
	return out
}

func tickLabel(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}
