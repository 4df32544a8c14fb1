package top

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/api"
)

// column is one column of the table: its header, how wide it is at least,
// and whether its cells are right-aligned (numbers).
type column struct {
	head  string
	min   int
	right bool
}

var columns = []column{
	{"MODEL", 5, false},
	{"VER", 3, true},
	{"WEIGHT", 6, true},
	{"ROLLOUT", 14, false},
	{"REQ/S", 7, true},
	{"ERR%", 5, true},
	{"P50", 6, true},
	{"P99", 6, true},
	{"QUEUED", 6, true},
	{"FILL", 5, true},
	{"READY", 5, true},
	{"RESTART", 7, true},
	{"REFUSED/S", 0, false}, // last: as wide as it needs, cut at the screen's edge
}

// Render writes rows as a fixed-width table, one line per model version,
// sorted by model then version. deps gives each model's deployment (by
// model name; a model missing from it shows "-" for weight and rollout):
// WEIGHT is the version's traffic share ("shadow" for a shadow), ROLLOUT
// the rollout's phase on the candidate's row ("canary 2/4 25%") and
// "baseline" on the baseline's while it runs. A cell with nothing to show
// (no requests, no batches in the window) is "-". Lines are cut to width
// characters when width > 0.
func Render(w io.Writer, rows []Row, deps map[string]api.Deployment, width int) error {
	rows = append([]Row(nil), rows...)
	SortRows(rows)
	cells := make([][]string, 0, len(rows)+1)
	head := make([]string, len(columns))
	for i, c := range columns {
		head[i] = c.head
	}
	cells = append(cells, head)
	for _, r := range rows {
		d, ok := deps[r.Model]
		weight, rollout := "-", "-"
		if ok {
			weight, rollout = weightCell(d, r.Version), rolloutCell(d.Rollout, r.Version)
		}
		cells = append(cells, []string{
			r.Model,
			r.Version,
			weight,
			rollout,
			rate(r.ReqPerSec),
			when(r.Requests > 0, func() string { return fmt.Sprintf("%.1f", r.ErrorPct) }),
			when(r.Latencies > 0, func() string { return latency(r.P50) }),
			when(r.Latencies > 0, func() string { return latency(r.P99) }),
			strconv.Itoa(r.Queued),
			when(r.Batches > 0, func() string { return fmt.Sprintf("%.0f%%", 100*r.BatchFill) }),
			strconv.Itoa(r.Ready),
			strconv.Itoa(r.Restarting),
			refusals(r.Refusals),
		})
	}
	widths := make([]int, len(columns))
	for i, c := range columns {
		widths[i] = c.min
		for _, line := range cells {
			widths[i] = max(widths[i], len([]rune(line[i])))
		}
	}
	var b strings.Builder
	for _, line := range cells {
		var l strings.Builder
		for i, cell := range line {
			if i > 0 {
				l.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-len([]rune(cell)))
			switch {
			case columns[i].right:
				l.WriteString(pad + cell)
			case i == len(line)-1:
				l.WriteString(cell)
			default:
				l.WriteString(cell + pad)
			}
		}
		b.WriteString(strings.TrimRight(cut(l.String(), width), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func when(ok bool, f func() string) string {
	if !ok {
		return "-"
	}
	return f()
}

// weightCell is the version's share of its model's traffic.
func weightCell(d api.Deployment, version string) string {
	for _, t := range d.Targets {
		if strconv.Itoa(t.Version) != version {
			continue
		}
		if t.Shadow {
			return "shadow"
		}
		return strconv.Itoa(t.Weight) + "%"
	}
	return "0%"
}

// rolloutCell says where the model's rollout is, on the rows of the
// versions it concerns.
func rolloutCell(r *api.Rollout, version string) string {
	if r == nil {
		return "-"
	}
	switch version {
	case strconv.Itoa(r.Candidate):
		switch r.Phase {
		case "canary", "paused":
			if len(r.Steps) > 0 && r.Step > 0 {
				return fmt.Sprintf("%s %d/%d %d%%", r.Phase, r.Step, len(r.Steps), r.Percent)
			}
		}
		return r.Phase
	case strconv.Itoa(r.Baseline):
		switch r.Phase {
		case "waiting", "shadow", "canary", "paused":
			return "baseline"
		}
	}
	return "-"
}

func rate(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 1000:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// latency prints a duration in milliseconds with three significant
// digits or so, seconds from 10 s on.
func latency(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 10000:
		return fmt.Sprintf("%.0fms", ms)
	default:
		return fmt.Sprintf("%.1fs", ms/1000)
	}
}

// refusals lists refusals per second by reason, most first.
func refusals(m map[string]float64) string {
	if len(m) == 0 {
		return "-"
	}
	reasons := make([]string, 0, len(m))
	for r := range m {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if m[reasons[i]] != m[reasons[j]] {
			return m[reasons[i]] > m[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = r + " " + rate(m[r])
	}
	return strings.Join(parts, ", ")
}

func cut(s string, width int) string {
	if width <= 0 {
		return s
	}
	if r := []rune(s); len(r) > width {
		return string(r[:width])
	}
	return s
}

// Summary is one line of totals over rows: versions, requests per second,
// the share of them that failed, and refusals per second.
func Summary(rows []Row) string {
	var reqs, rps, failed, refused float64
	models := map[string]bool{}
	for _, r := range rows {
		models[r.Model] = true
		reqs += r.Requests
		rps += r.ReqPerSec
		failed += r.Requests * r.ErrorPct / 100
		refused += r.Refused()
	}
	errPct := "-"
	if reqs > 0 {
		errPct = fmt.Sprintf("%.1f%%", 100*failed/reqs)
	}
	return fmt.Sprintf("%d models, %d versions: %s req/s, %s errors, %s refused/s", len(models), len(rows), rate(rps), errPct, rate(refused))
}
