package lab

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is everything one lab run measured: what the HTML, the CSV and
// the JSON files are made from.
type Report struct {
	Title    string    `json:"title"`
	Command  string    `json:"command"`
	Quick    bool      `json:"quick"`
	Started  time.Time `json:"started"`
	ElapsedS float64   `json:"elapsedSeconds"`
	Machine  Machine   `json:"machine"`
	Batching *Batching `json:"batching,omitempty"`
	Overload *Overload `json:"overload,omitempty"`
	Many     *Many     `json:"many,omitempty"`
	// Stem names the files beside the report: STEM-batching.csv, … and
	// STEM.json.
	Stem string `json:"-"`
}

// Machine is where the run happened.
type Machine struct {
	Cores     int        `json:"cores"`
	CPU       string     `json:"cpu"`
	MemoryGiB float64    `json:"memoryGiB"`
	OS        string     `json:"os"`
	GoVersion string     `json:"goVersion"`
	Commit    string     `json:"commit"`
	Modified  bool       `json:"modified"` // built from a work tree with changes
	LoadStart [3]float64 `json:"loadAverageStart"`
	LoadEnd   [3]float64 `json:"loadAverageEnd"`
	Note      string     `json:"note,omitempty"` // the operator's --note (e.g. "busy machine")
}

// Setup says what an experiment ran.
type Setup struct {
	Models string   `json:"models"`
	Load   string   `json:"load"`
	Server string   `json:"server"` // the command line of the server the lab started
	Notes  []string `json:"notes,omitempty"`
}

// Batching is experiment 1: latency against throughput for each batching
// configuration of one model.
type Batching struct {
	Setup
	BoundMs float64      `json:"boundMs"` // the p99 a point must keep to count as sustained
	Points  []BatchPoint `json:"points"`
}

// BatchPoint is one rate offered to one configuration.
type BatchPoint struct {
	Config      string  `json:"config"`
	MaxBatch    int     `json:"maxBatchSize"`
	DelayMs     float64 `json:"maxBatchDelayMs"`
	OfferedRate float64 `json:"offeredRate"`
	Achieved    float64 `json:"achievedRate"` // answers per second
	LagP99Ms    float64 `json:"dispatchLagP99Ms"`
	Tally
}

// Overload is experiment 2: goodput and p99 from 0.5x to 3x of the
// measured capacity, with admission on (the deadline sent) and off.
type Overload struct {
	Setup
	SLOMs    float64         `json:"sloMs"`
	Capacity float64         `json:"capacity"`
	Probes   []Probe         `json:"capacityProbes"`
	Points   []OverloadPoint `json:"points"`
}

// Probe is one capacity measurement: the answers per second a load got.
type Probe struct {
	Rate    float64 `json:"rate"`
	Goodput float64 `json:"goodput"`
	P99Ms   float64 `json:"p99Ms"`
	Pass    bool    `json:"answered"`
}

// OverloadPoint is one offered load with admission on or off.
type OverloadPoint struct {
	Admission   bool    `json:"admission"`
	Factor      float64 `json:"factor"` // offered / capacity
	OfferedRate float64 `json:"offeredRate"`
	Goodput     float64 `json:"goodput"` // 2xx within the SLO per second
	LagP99Ms    float64 `json:"dispatchLagP99Ms"`
	Tally
}

// Many is experiment 3: many models under Zipf traffic on few workers
// whose memory budget holds a share of them.
type Many struct {
	Setup
	Models    int          `json:"modelCount"` // (Setup.Models is the text)
	Workers   int          `json:"workers"`
	ZipfS     float64      `json:"zipfS"`
	Rate      float64      `json:"rate"`
	DurationS float64      `json:"durationSeconds"`
	TotalMiB  float64      `json:"modelsMemoryMiB"`
	BudgetMiB float64      `json:"budgetPerWorkerMiB"`
	HotModels int          `json:"hotModels"`
	HotShare  float64      `json:"hotShare"` // the hot models' share of requests, by the Zipf law
	WarmupS   float64      `json:"warmupSeconds"`
	WindowS   float64      `json:"windowSeconds"`
	Windows   []ManyWindow `json:"windows"`
	All       Tally        `json:"all"`         // every request
	Hot       Tally        `json:"hot"`         // the hot models' requests after the warm-up
	After     Tally        `json:"afterWarmup"` // every request after the warm-up
	HitRatio  Num          `json:"hitRatio"`    // server side, the whole run
	Loads     float64      `json:"loads"`
	Evictions float64      `json:"evictions"`
}

// Sustained is the highest achieved rate of a configuration whose p99
// stayed within bound with at least 99 % of its requests answered 2xx, and
// whether any point did.
func Sustained(ps []BatchPoint, config string, bound float64) (float64, bool) {
	best, found := 0.0, false
	for _, p := range ps {
		if p.Config != config || p.Sent == 0 || !(float64(p.P99Ms) <= bound) || float64(p.OK) < 0.99*float64(p.Sent) {
			continue
		}
		if !found || p.Achieved > best {
			best, found = p.Achieved, true
		}
	}
	return best, found
}

// configs lists the configurations in the order they first appear.
func configs(ps []BatchPoint) []string {
	var out []string
	for _, p := range ps {
		if !slices.Contains(out, p.Config) {
			out = append(out, p.Config)
		}
	}
	return out
}

// Findings says what experiment 1's numbers show.
func (b *Batching) Findings() string {
	cs := configs(b.Points)
	if len(cs) == 0 {
		return "No point was measured."
	}
	var s strings.Builder
	base := cs[0]
	baseRate, baseOK := Sustained(b.Points, base, b.BoundMs)
	best, bestRate := "", 0.0
	for _, c := range cs[1:] {
		if r, ok := Sustained(b.Points, c, b.BoundMs); ok && r > bestRate {
			best, bestRate = c, r
		}
	}
	if baseOK {
		fmt.Fprintf(&s, "With %s the model kept p99 within %s ms up to %s answers/s. ", base, fmtF(b.BoundMs), fmtF(baseRate))
	} else {
		fmt.Fprintf(&s, "With %s no offered rate kept p99 within %s ms. ", base, fmtF(b.BoundMs))
	}
	switch {
	case best == "":
		fmt.Fprintf(&s, "No other configuration kept p99 within %s ms at any rate measured. ", fmtF(b.BoundMs))
	case baseOK && baseRate > 0:
		fmt.Fprintf(&s, "The best of the others, %s, kept it up to %s answers/s: %sx. ", best, fmtF(bestRate), fmtF(bestRate/baseRate))
	default:
		fmt.Fprintf(&s, "The best of the others, %s, kept it up to %s answers/s. ", best, fmtF(bestRate))
	}
	// The price at light load: p50 at each configuration's lowest rate.
	low := func(c string) (BatchPoint, bool) {
		var out BatchPoint
		found := false
		for _, p := range b.Points {
			if p.Config == c && (!found || p.OfferedRate < out.OfferedRate) {
				out, found = p, true
			}
		}
		return out, found
	}
	if lb, ok := low(base); ok && best != "" {
		if lo, ok := low(best); ok && !math.IsNaN(float64(lo.P50Ms)) && !math.IsNaN(float64(lb.P50Ms)) {
			d := float64(lo.P50Ms - lb.P50Ms)
			switch {
			case d > 0.1:
				fmt.Fprintf(&s, "At the lightest load (%s req/s) it costs latency instead: p50 %s ms against %s ms with %s, since a request waits up to the batch delay for company. ",
					fmtF(lo.OfferedRate), fmtF(float64(lo.P50Ms)), fmtF(float64(lb.P50Ms)), base)
			default:
				fmt.Fprintf(&s, "At the lightest load (%s req/s) its p50 was %s ms against %s ms with %s: the batch delay cost no measurable latency there. ",
					fmtF(lo.OfferedRate), fmtF(float64(lo.P50Ms)), fmtF(float64(lb.P50Ms)), base)
			}
		}
	}
	// Where each configuration's curve turned.
	var sat []string
	for _, c := range cs {
		top := 0.0
		for _, p := range b.Points {
			if p.Config == c {
				top = math.Max(top, p.Achieved)
			}
		}
		sat = append(sat, fmt.Sprintf("%s %s/s", c, fmtF(top)))
	}
	fmt.Fprintf(&s, "Highest throughput reached (any latency): %s.", strings.Join(sat, ", "))
	return s.String()
}

// Findings says what experiment 2's numbers show.
func (o *Overload) Findings() string {
	if len(o.Points) == 0 || o.Capacity <= 0 {
		return "No capacity was measured, so no overload point was run."
	}
	var s strings.Builder
	fmt.Fprintf(&s, "The measured capacity was %s answers/s; the SLO %s ms. ", fmtF(o.Capacity), fmtF(o.SLOMs))
	top := 0.0
	for _, p := range o.Points {
		top = math.Max(top, p.Factor)
	}
	at := func(adm bool, f float64) (OverloadPoint, bool) {
		for _, p := range o.Points {
			if p.Admission == adm && p.Factor == f {
				return p, true
			}
		}
		return OverloadPoint{}, false
	}
	on, okOn := at(true, top)
	off, okOff := at(false, top)
	if okOn && okOff {
		fmt.Fprintf(&s, "At %sx capacity, with admission goodput was %s/s (%sx capacity) and the answered requests' p99 %s ms; refusals came back with p99 %s ms. ",
			fmtF(top), fmtF(on.Goodput), fmtF(on.Goodput/o.Capacity), fmtNum(on.P99Ms), fmtNum(on.RefusedP99Ms))
		fmt.Fprintf(&s, "Without admission goodput was %s/s (%sx) and p99 %s ms", fmtF(off.Goodput), fmtF(off.Goodput/o.Capacity), fmtNum(off.P99Ms))
		if off.NoAnswer > 0 {
			fmt.Fprintf(&s, ", and %d requests got no answer within the client's timeout", off.NoAnswer)
		}
		s.WriteString(". ")
		switch r := on.Goodput / math.Max(off.Goodput, 1e-9); {
		case off.Goodput <= 0 && on.Goodput > 0:
			s.WriteString("Admission kept the server useful where the queue without it made every answer late. ")
		case r >= 1.2:
			fmt.Fprintf(&s, "Admission kept %sx the goodput: refusing what cannot finish in time leaves the replicas to the requests that can. ", fmtF(r))
		case r <= 1/1.2:
			fmt.Fprintf(&s, "Here admission cost goodput (%sx of the run without it). ", fmtF(r))
		default:
			s.WriteString("Goodput was about the same either way at this load. ")
		}
	}
	// A goodput above the capacity says the measurement fell short.
	best := OverloadPoint{}
	for _, p := range o.Points {
		if p.Goodput > best.Goodput {
			best = p
		}
	}
	if best.Goodput > 1.1*o.Capacity {
		fmt.Fprintf(&s, "Goodput reached %s/s (at %sx, admission %s), %sx the measured capacity: the closed loop fell short of what the server can do, and every label (0.5x, 1x, …) overstates its load by up to that factor. ",
			fmtF(best.Goodput), fmtF(best.Factor), onOff(best.Admission), fmtF(best.Goodput/o.Capacity))
	}
	// Where the run without admission fell apart.
	var fell []string
	for _, p := range o.Points {
		if !p.Admission && p.Goodput < 0.5*math.Min(p.OfferedRate, o.Capacity) {
			fell = append(fell, fmtF(p.Factor)+"x")
		}
	}
	if len(fell) > 0 {
		fmt.Fprintf(&s, "Without admission goodput was under half of what was offered (or of capacity) at %s.", strings.Join(fell, ", "))
	} else {
		s.WriteString("Without admission goodput never fell under half of what was offered (or of capacity).")
	}
	return s.String()
}

// Findings says what experiment 3's numbers show.
func (m *Many) Findings() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%d models of %s MiB in all shared %d workers of %s MiB each (%s%% of the models fit at once). ",
		m.Models, fmtF(m.TotalMiB), m.Workers, fmtF(m.BudgetMiB), fmtF(100*m.BudgetMiB*float64(m.Workers)/math.Max(m.TotalMiB, 1)))
	if !math.IsNaN(float64(m.HitRatio)) {
		fmt.Fprintf(&s, "Over the run %s%% of requests found their model loaded (the server's cold-start count). ", fmtF(100*float64(m.HitRatio)))
	}
	var late []float64
	for _, w := range m.Windows {
		if w.FromS >= m.WarmupS && !math.IsNaN(float64(w.HitRatio)) {
			late = append(late, float64(w.HitRatio))
		}
	}
	if len(late) > 0 {
		mean := 0.0
		for _, h := range late {
			mean += h
		}
		mean /= float64(len(late))
		fmt.Fprintf(&s, "After the first %s s the hit ratio averaged %s%% per window (lowest %s%%). ", fmtF(m.WarmupS), fmtF(100*mean), fmtF(100*slices.Min(late)))
	}
	mins := m.DurationS / 60
	if mins > 0 {
		fmt.Fprintf(&s, "The workers made %s loads and %s evictions (%s and %s a minute). ", fmtF(m.Loads), fmtF(m.Evictions), fmtF(m.Loads/mins), fmtF(m.Evictions/mins))
	}
	if b := Bursts(m.Windows, 0.8); b != "" {
		s.WriteString(b)
	}
	if m.All.Sent > 0 {
		fmt.Fprintf(&s, "%s%% of all requests were refused cold_start. ", fmtF(100*float64(m.All.ByCode["cold_start"])/float64(m.All.Sent)))
	}
	if m.Hot.Sent > 0 {
		fmt.Fprintf(&s, "After the warm-up the %d hottest models (%s%% of the traffic) were answered with p50 %s ms and p99 %s ms, %d of their %d requests refused; the 2xx answers of all models had p50 %s ms and p99 %s ms (cold starts that waited for a load included).",
			m.HotModels, fmtF(100*m.HotShare), fmtNum(m.Hot.P50Ms), fmtNum(m.Hot.P99Ms), m.Hot.Refused, m.Hot.Sent, fmtNum(m.After.P50Ms), fmtNum(m.After.P99Ms))
		if h, a := float64(m.Hot.P99Ms), float64(m.After.P99Ms); h > 0 && a > 0 && !math.IsNaN(h) && !math.IsNaN(a) {
			if h < a/2 {
				s.WriteString(" The hot models stayed loaded: their tail is the queueing of a loaded model, the rest's is the loads.")
			} else {
				s.WriteString(" The hot models' tail was as long as everyone's: they were not spared the loads and evictions.")
			}
		}
	}
	return s.String()
}

// Bursts says whether the loads came in bursts: when the fewest windows
// holding share of them (the busiest first) are at most a quarter of
// the windows, it names them; else "".
func Bursts(ws []ManyWindow, share float64) string {
	total := 0.0
	idx := make([]int, 0, len(ws))
	for i, w := range ws {
		total += w.Loads
		idx = append(idx, i)
	}
	if total <= 0 || len(ws) < 4 {
		return ""
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpDesc(ws[a].Loads, ws[b].Loads) })
	sum, k := 0.0, 0
	for sum < share*total {
		sum += ws[idx[k]].Loads
		k++
	}
	if k > len(ws)/4 {
		return ""
	}
	at := slices.Clone(idx[:k])
	slices.Sort(at)
	var ts []string
	for _, i := range at {
		ts = append(ts, fmtF(ws[i].FromS))
	}
	return fmt.Sprintf("Loads came in bursts: %s%% of them in %d of the %d windows (from %s s), with little loading between. ",
		fmtF(100*sum/total), k, len(ws), strings.Join(ts, ", "))
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// fmtF renders a figure with about three significant digits.
func fmtF(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case v == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func fmtNum(n Num) string { return fmtF(float64(n)) }

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Files beside the report, by what they hold.
const (
	FileBatching = "batching.csv"
	FileOverload = "overload.csv"
	FileMany     = "many.csv"
	FileJSON     = "json"
)

// FileName is the name of one of the report's files: STEM-batching.csv
// and so on, STEM.json for the JSON.
func FileName(stem, kind string) string {
	if kind == FileJSON {
		return stem + ".json"
	}
	return stem + "-" + kind
}

func csvNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// WriteBatchingCSV writes experiment 1's points.
func WriteBatchingCSV(w io.Writer, b *Batching) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"config", "maxBatchSize", "maxBatchDelayMs", "offeredRate", "achievedRate", "sent", "ok", "refused", "late", "noAnswer", "p50Ms", "p99Ms", "dispatchLagP99Ms"})
	for _, p := range b.Points {
		_ = cw.Write([]string{p.Config, strconv.Itoa(p.MaxBatch), csvNum(p.DelayMs), csvNum(p.OfferedRate), csvNum(p.Achieved),
			strconv.Itoa(p.Sent), strconv.Itoa(p.OK), strconv.Itoa(p.Refused), strconv.Itoa(p.Late), strconv.Itoa(p.NoAnswer),
			csvNum(float64(p.P50Ms)), csvNum(float64(p.P99Ms)), csvNum(p.LagP99Ms)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteOverloadCSV writes experiment 2's points.
func WriteOverloadCSV(w io.Writer, o *Overload) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"admission", "factor", "offeredRate", "sent", "ok", "good", "goodput", "refused", "late", "noAnswer", "p50Ms", "p99Ms", "refusedP99Ms", "dispatchLagP99Ms"})
	for _, p := range o.Points {
		_ = cw.Write([]string{strconv.FormatBool(p.Admission), csvNum(p.Factor), csvNum(p.OfferedRate), strconv.Itoa(p.Sent), strconv.Itoa(p.OK), strconv.Itoa(p.Good),
			csvNum(p.Goodput), strconv.Itoa(p.Refused), strconv.Itoa(p.Late), strconv.Itoa(p.NoAnswer),
			csvNum(float64(p.P50Ms)), csvNum(float64(p.P99Ms)), csvNum(float64(p.RefusedP99Ms)), csvNum(p.LagP99Ms)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteManyCSV writes experiment 3's windows.
func WriteManyCSV(w io.Writer, m *Many) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"fromSeconds", "sent", "ok", "coldRefused", "hitRatio", "loads", "evictions", "memoryUsedMiB", "hotP99Ms", "allP99Ms"})
	for _, x := range m.Windows {
		_ = cw.Write([]string{csvNum(x.FromS), strconv.Itoa(x.Sent), strconv.Itoa(x.OK), strconv.Itoa(x.ColdRefused), csvNum(float64(x.HitRatio)),
			csvNum(x.Loads), csvNum(x.Evictions), csvNum(float64(x.MemoryMiB)), csvNum(float64(x.HotP99Ms)), csvNum(float64(x.AllP99Ms))})
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes the whole report as JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(r)
}

// Charts of each experiment (pure functions of the numbers).

// BatchingCharts: p99 and p50 against achieved throughput, one line per
// configuration.
func BatchingCharts(b *Batching) []Chart {
	var p99, p50 []Series
	for _, c := range configs(b.Points) {
		var xs, y99, y50 []float64
		for _, p := range b.Points {
			if p.Config == c {
				xs = append(xs, p.Achieved)
				y99 = append(y99, float64(p.P99Ms))
				y50 = append(y50, float64(p.P50Ms))
			}
		}
		p99 = append(p99, Series{Name: c, X: xs, Y: y99})
		p50 = append(p50, Series{Name: c, X: xs, Y: y50})
	}
	return []Chart{
		{Title: "p99 latency against throughput", XLabel: "achieved throughput (answers/s)", YLabel: "p99 latency, ms (log)", LogY: true, Series: p99},
		{Title: "p50 latency against throughput", XLabel: "achieved throughput (answers/s)", YLabel: "p50 latency, ms (log)", LogY: true, Series: p50},
	}
}

// OverloadCharts: goodput and p99 against offered load (× capacity),
// admission on and off.
func OverloadCharts(o *Overload) []Chart {
	var good, p99, offered []Series
	for _, adm := range []bool{true, false} {
		name := "admission off"
		color := "#d62728"
		if adm {
			name, color = "admission on", "#1f77b4"
		}
		var xs, g, l []float64
		for _, p := range o.Points {
			if p.Admission == adm {
				xs = append(xs, p.Factor)
				g = append(g, p.Goodput)
				l = append(l, float64(p.P99Ms))
			}
		}
		good = append(good, Series{Name: name, Color: color, X: xs, Y: g})
		p99 = append(p99, Series{Name: name + " (2xx)", Color: color, X: xs, Y: l})
		if adm {
			var r []float64
			for _, p := range o.Points {
				if p.Admission {
					r = append(r, float64(p.RefusedP99Ms))
				}
			}
			p99 = append(p99, Series{Name: "refusals, admission on", Color: "#7f7f7f", Dashed: true, X: xs, Y: r})
		}
	}
	var xs, cap, diag []float64
	for _, p := range o.Points {
		if p.Admission {
			xs = append(xs, p.Factor)
			cap = append(cap, o.Capacity)
			diag = append(diag, p.OfferedRate)
		}
	}
	offered = append(offered, Series{Name: "offered", Color: "#bbbbbb", Dashed: true, X: xs, Y: diag}, Series{Name: "capacity", Color: "#2ca02c", Dashed: true, X: xs, Y: cap})
	return []Chart{
		{Title: "Goodput against offered load", XLabel: "offered load (x measured capacity)", YLabel: "goodput (2xx within the SLO, /s)", Series: append(good, offered...)},
		{Title: "p99 latency against offered load", XLabel: "offered load (x measured capacity)", YLabel: "p99 latency, ms (log)", LogY: true, Series: p99},
	}
}

// ManyCharts: hit ratio, loads and evictions, and p99 over time.
func ManyCharts(m *Many) []Chart {
	var t, hit, loads, ev, hot, all, mem []float64
	for _, w := range m.Windows {
		t = append(t, w.FromS+m.WindowS)
		hit = append(hit, float64(w.HitRatio))
		loads = append(loads, w.Loads)
		ev = append(ev, w.Evictions)
		hot = append(hot, float64(w.HotP99Ms))
		all = append(all, float64(w.AllP99Ms))
		mem = append(mem, float64(w.MemoryMiB))
	}
	budget := make([]float64, len(t))
	for i := range budget {
		budget[i] = m.BudgetMiB * float64(m.Workers)
	}
	per := fmt.Sprintf("per %s s", fmtF(m.WindowS))
	return []Chart{
		{Title: "Hit ratio over time", XLabel: "seconds into the run", YLabel: "hit ratio (1 − cold starts / requests)", YMin: 0, YMax: 1,
			Series: []Series{{Name: "hit ratio", X: t, Y: hit}}},
		{Title: "Loads and evictions over time", XLabel: "seconds into the run", YLabel: "count " + per,
			Series: []Series{{Name: "loads", Color: "#1f77b4", X: t, Y: loads}, {Name: "evictions", Color: "#d62728", X: t, Y: ev}}},
		{Title: "p99 latency over time", XLabel: "seconds into the run", YLabel: "p99 of 2xx, ms (log)", LogY: true,
			Series: []Series{{Name: fmt.Sprintf("%d hottest", m.HotModels), Color: "#1f77b4", X: t, Y: hot}, {Name: "all models", Color: "#ff7f0e", X: t, Y: all}}},
		{Title: "Memory the workers' versions hold", XLabel: "seconds into the run", YLabel: "MiB (all workers)",
			Series: []Series{{Name: "used", Color: "#9467bd", X: t, Y: mem}, {Name: "budget", Color: "#2ca02c", Dashed: true, X: t, Y: budget}}},
	}
}

// WriteHTML writes the report as one self-contained page: inline SVG, no
// script, no request to anywhere.
func WriteHTML(w io.Writer, r *Report) error {
	var b strings.Builder
	esc := html.EscapeString
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	p("<title>%s</title>\n<style>%s</style>\n</head><body>\n", esc(r.Title), css)
	p("<h1>%s</h1>\n", esc(r.Title))
	mode := "full run"
	if r.Quick {
		mode = "quick run (--quick): short points, fewer rates; read the shapes, not the decimals"
	}
	p("<p>Started %s, took %s; %s.</p>\n", r.Started.UTC().Format(time.RFC3339), (time.Duration(r.ElapsedS * float64(time.Second))).Round(time.Second), esc(mode))
	p("<p>Command: <code>%s</code></p>\n", esc(r.Command))
	p("<nav><ul>")
	if r.Batching != nil {
		p(`<li><a href="#batching">1. Batching: latency against throughput</a></li>`)
	}
	if r.Overload != nil {
		p(`<li><a href="#overload">2. Overload: admission on and off</a></li>`)
	}
	if r.Many != nil {
		p(`<li><a href="#many">3. Many models on few workers</a></li>`)
	}
	p("<li><a href=\"#machine\">Machine</a></li></ul></nav>\n")

	m := r.Machine
	p("<section id=\"machine\"><h2>Machine</h2>\n<table>")
	row := func(k, v string) { p("<tr><th>%s</th><td>%s</td></tr>", esc(k), esc(v)) }
	row("cores", strconv.Itoa(m.Cores))
	row("CPU", m.CPU)
	row("memory", fmtF(m.MemoryGiB)+" GiB")
	row("OS", m.OS)
	row("Go", m.GoVersion)
	commit := m.Commit
	if m.Modified {
		commit += " (work tree with changes)"
	}
	row("commit", commit)
	row("load average at start (1, 5, 15 min)", fmt.Sprintf("%.2f %.2f %.2f", m.LoadStart[0], m.LoadStart[1], m.LoadStart[2]))
	row("load average at end", fmt.Sprintf("%.2f %.2f %.2f", m.LoadEnd[0], m.LoadEnd[1], m.LoadEnd[2]))
	p("</table>\n<p>%s</p>", esc(m.Busy()))
	if m.Note != "" {
		p("<p class=\"note\"><strong>Note:</strong> %s</p>", esc(m.Note))
	}
	p("<p>The servers, their worker processes and the load generator (this lab, open loop, poisson arrivals, latency counted from each request's intended send time) share these cores.</p></section>\n")

	files := func(kind string) {
		p("<p>Raw numbers: <a href=\"%s\">%s</a>, and everything in <a href=\"%s\">%s</a>.</p>\n",
			esc(FileName(r.Stem, kind)), esc(FileName(r.Stem, kind)), esc(FileName(r.Stem, FileJSON)), esc(FileName(r.Stem, FileJSON)))
	}
	setup := func(s Setup) {
		p("<h3>What was run</h3>\n<table>")
		row("models", s.Models)
		row("load", s.Load)
		row("server", s.Server)
		p("</table>\n")
		for _, n := range s.Notes {
			p("<p>%s</p>\n", esc(n))
		}
	}
	charts := func(cs []Chart) {
		p("<div class=\"charts\">")
		for _, c := range cs {
			p("<figure>%s</figure>\n", c.SVG())
		}
		p("</div>\n")
	}
	if x := r.Batching; x != nil {
		p("<section id=\"batching\"><h2>1. Batching: latency against throughput</h2>\n")
		setup(x.Setup)
		charts(BatchingCharts(x))
		p("<h3>What it shows</h3>\n<p class=\"findings\">%s</p>\n", esc(x.Findings()))
		p("<h3>Numbers</h3>\n<table class=\"num\"><tr><th>config</th><th>offered/s</th><th>achieved/s</th><th>sent</th><th>2xx</th><th>p50 ms</th><th>p99 ms</th><th>lag p99 ms</th></tr>")
		for _, q := range x.Points {
			p("<tr><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td></tr>", esc(q.Config), fmtF(q.OfferedRate), fmtF(q.Achieved), q.Sent, q.OK, fmtNum(q.P50Ms), fmtNum(q.P99Ms), fmtF(q.LagP99Ms))
		}
		p("</table>\n")
		files(FileBatching)
		p("</section>\n")
	}
	if x := r.Overload; x != nil {
		p("<section id=\"overload\"><h2>2. Overload: goodput and p99, admission on and off</h2>\n")
		setup(x.Setup)
		charts(OverloadCharts(x))
		p("<h3>What it shows</h3>\n<p class=\"findings\">%s</p>\n", esc(x.Findings()))
		p("<h3>Numbers</h3>\n")
		for _, pr := range x.Probes {
			p("<p>Capacity (closed loop): %s answers/s, their p99 %s ms.</p>\n", fmtF(pr.Rate), fmtF(pr.P99Ms))
		}
		p("<table class=\"num\"><tr><th>admission</th><th>x capacity</th><th>offered/s</th><th>sent</th><th>2xx</th><th>good</th><th>goodput/s</th><th>refused</th><th>504</th><th>no answer</th><th>p50 ms</th><th>p99 ms</th><th>refusal p99 ms</th></tr>")
		for _, q := range x.Points {
			a := "off"
			if q.Admission {
				a = "on"
			}
			p("<tr><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td></tr>",
				a, fmtF(q.Factor), fmtF(q.OfferedRate), q.Sent, q.OK, q.Good, fmtF(q.Goodput), q.Refused, q.Late, q.NoAnswer, fmtNum(q.P50Ms), fmtNum(q.P99Ms), fmtNum(q.RefusedP99Ms))
		}
		p("</table>\n")
		files(FileOverload)
		p("</section>\n")
	}
	if x := r.Many; x != nil {
		p("<section id=\"many\"><h2>3. Many models on few workers</h2>\n")
		setup(x.Setup)
		charts(ManyCharts(x))
		p("<h3>What it shows</h3>\n<p class=\"findings\">%s</p>\n", esc(x.Findings()))
		p("<h3>Numbers</h3>\n<table class=\"num\"><tr><th>from s</th><th>sent</th><th>2xx</th><th>cold_start</th><th>hit ratio</th><th>loads</th><th>evictions</th><th>memory MiB</th><th>hot p99 ms</th><th>all p99 ms</th></tr>")
		for _, q := range x.Windows {
			p("<tr><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>",
				fmtF(q.FromS), q.Sent, q.OK, q.ColdRefused, fmtNum(q.HitRatio), fmtF(q.Loads), fmtF(q.Evictions), fmtNum(q.MemoryMiB), fmtNum(q.HotP99Ms), fmtNum(q.AllP99Ms))
		}
		p("</table>\n")
		files(FileMany)
		p("</section>\n")
	}
	p("<footer><p>Made by <code>sluice lab</code> (docs/lab.md).</p></footer>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// Busy says, from the load averages, how busy the machine was.
func (m Machine) Busy() string {
	hi := math.Max(m.LoadStart[0], m.LoadEnd[0])
	cores := float64(max(m.Cores, 1))
	switch {
	case hi >= cores:
		return fmt.Sprintf("A busy machine: the 1-minute load average reached %.2f on %d cores (other work was running beside the lab), so absolute figures, tails most, are worse than on a quiet one; the comparisons within each experiment were measured interleaved, under the same conditions.", hi, m.Cores)
	case hi >= cores/2:
		return fmt.Sprintf("A partly busy machine: the 1-minute load average reached %.2f on %d cores.", hi, m.Cores)
	default:
		return fmt.Sprintf("A quiet machine: the 1-minute load average stayed under %.2f on %d cores.", hi, m.Cores)
	}
}

const css = `body{font-family:system-ui,sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;color:#111;line-height:1.45}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}
table.num td{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4}
.charts{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0;max-width:100%}svg{max-width:100%;height:auto}
.findings{background:#f6f8fa;border-left:4px solid #1f77b4;padding:.6em 1em}.note{background:#fff6e0;padding:.5em 1em}
code{background:#f4f4f4;padding:0 .2em;word-break:break-all}`
