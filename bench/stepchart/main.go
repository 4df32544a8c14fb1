// Command stepchart reads a step-load run of bench/overload (its --json
// summary with --poll-workers samples, and its --records file) and writes
// an SVG chart of replicas and p99 against time, and prints the figures the
// step benchmark's goals ask for (docs/benchmarks.md, "Many models on few
// workers (issue 11)"):
//
//   - per step (each phase start after the first): the first window from
//     which the p99 of all requests sent (a non-2xx counts as a miss) stays
//     within the SLO for --hold consecutive windows;
//
//   - every change of the desired and of the ready replica count, and the
//     most changes inside any cooldown window (--cooldown) after the last
//     phase started.
//
//     go run ./bench/stepchart --json run.json --records run.jsonl --version step5ms@1 --slo 50ms --out run.svg
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"slices"
	"time"

	"github.com/sluiceml/sluice/internal/bench"
)

type summary struct {
	Phases []struct {
		OfferedRate     float64 `json:"offeredRate"`
		DurationSeconds float64 `json:"durationSeconds"`
	} `json:"phases"`
	Polls []struct {
		Seconds float64        `json:"seconds"`
		Ready   map[string]int `json:"ready"`
		Desired map[string]int `json:"desired"`
	} `json:"polls"`
}

type rec struct {
	AtMs      float64 `json:"atMs"`
	LatencyMs float64 `json:"latencyMs"`
	Status    int     `json:"status"`
}

type change struct {
	At       float64
	From, To int
}

func main() {
	jsonIn := flag.String("json", "", "bench/overload --json output (with --poll-workers)")
	recsIn := flag.String("records", "", "bench/overload --records output")
	version := flag.String("version", "", "the version whose replicas to chart, e.g. step5ms@1")
	slo := flag.Duration("slo", 50*time.Millisecond, "latency objective")
	win := flag.Duration("window", time.Second, "latency window")
	hold := flag.Int("hold", 3, "windows in a row within the SLO that count as recovered")
	cooldown := flag.Duration("cooldown", time.Minute, "the autoscaler's cooldown")
	out := flag.String("out", "", "SVG file to write")
	title := flag.String("title", "step load", "chart title")
	flag.Parse()

	var s summary
	b, err := os.ReadFile(*jsonIn)
	if err != nil {
		log.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		log.Fatal(err)
	}
	f, err := os.Open(*recsIn)
	if err != nil {
		log.Fatal(err)
	}
	var total float64
	var starts []float64
	for _, p := range s.Phases {
		starts = append(starts, total)
		total += p.DurationSeconds
	}
	nw := int(math.Ceil(total / win.Seconds()))
	all := make([][]float64, nw) // every request: non-2xx as +Inf
	ok := make([][]float64, nw)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			log.Fatal(err)
		}
		i := min(int(r.AtMs/1e3/win.Seconds()), nw-1)
		l := r.LatencyMs
		if r.Status/100 == 2 {
			ok[i] = append(ok[i], l)
		} else {
			l = math.Inf(1)
		}
		all[i] = append(all[i], l)
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	sloMs := float64(*slo) / 1e6
	xs := make([]float64, nw)
	p99All, p99OK, sloLine := make([]float64, nw), make([]float64, nw), make([]float64, nw)
	for i := range nw {
		xs[i] = (float64(i) + 0.5) * win.Seconds()
		p99All[i], p99OK[i], sloLine[i] = p99(all[i]), p99(ok[i]), sloMs
	}
	fmt.Printf("%d windows of %s; SLO %s\n", nw, *win, *slo)
	for k := 1; k < len(starts); k++ {
		w0 := int(starts[k] / win.Seconds())
		end := nw
		if k+1 < len(starts) {
			end = int(starts[k+1] / win.Seconds())
		}
		rec := -1
		run := 0
		bad := 0
		for i := w0; i < end; i++ {
			if p99All[i] <= sloMs {
				run++
				if run == *hold && rec < 0 {
					rec = i - *hold + 1
				}
			} else {
				run = 0
				bad++
			}
		}
		if rec < 0 {
			fmt.Printf("step %d at %.0fs (%.0f/s -> %.0f/s): p99 of all requests never within the SLO for %d windows in a row; %d of %d windows above it\n",
				k, starts[k], s.Phases[k-1].OfferedRate, s.Phases[k].OfferedRate, *hold, bad, end-w0)
		} else {
			fmt.Printf("step %d at %.0fs (%.0f/s -> %.0f/s): p99 within the SLO from %.0fs after the step (window %d); %d of %d windows of the phase above it; worst window p99 %s\n",
				k, starts[k], s.Phases[k-1].OfferedRate, s.Phases[k].OfferedRate, float64(rec-w0)*win.Seconds(), rec, bad, end-w0, fmtMs(slices.Max(p99All[w0:end])))
		}
	}

	// Replicas over time from the polls.
	var px, ready, desired []float64
	var readyCh, desCh []change
	lastR, lastD := -1, -1
	for _, p := range s.Polls {
		r, d := p.Ready[*version], p.Desired[*version]
		px = append(px, p.Seconds)
		ready, desired = append(ready, float64(r)), append(desired, float64(d))
		if lastR >= 0 && r != lastR {
			readyCh = append(readyCh, change{p.Seconds, lastR, r})
		}
		if lastD >= 0 && d != lastD {
			desCh = append(desCh, change{p.Seconds, lastD, d})
		}
		lastR, lastD = r, d
	}
	fmt.Printf("desired replica changes: %s\nready replica changes:   %s\n", fmtChanges(desCh), fmtChanges(readyCh))
	if len(starts) > 1 {
		down := starts[len(starts)-1]
		most := 0
		for _, c := range desCh {
			if c.At < down {
				continue
			}
			n := 0
			for _, d := range desCh {
				if d.At >= c.At && d.At < c.At+cooldown.Seconds() {
					n++
				}
			}
			most = max(most, n)
		}
		fmt.Printf("after the last step (%.0fs): most desired-count changes inside any %s window: %d\n", down, *cooldown, most)
		// The gaps between successive changes: a poll every 250 ms and a
		// tick every second put about ±1 s on each.
		var gaps []string
		prev := down
		for _, c := range desCh {
			if c.At < down {
				continue
			}
			gaps = append(gaps, fmt.Sprintf("%d->%d %.1fs after the previous", c.From, c.To, c.At-prev))
			prev = c.At
		}
		fmt.Printf("after the last step, each change and the time since the step or the change before: %v\n", gaps)
	}

	// The chart: replicas (polls resampled to the latency windows' centres)
	// and p99 per window.
	rAt, dAt := make([]float64, nw), make([]float64, nw)
	for i, x := range xs {
		rAt[i], dAt[i] = math.NaN(), math.NaN()
		j, _ := slices.BinarySearch(px, x)
		if j > 0 {
			j--
		}
		if j < len(px) {
			rAt[i], dAt[i] = ready[j], desired[j]
		}
	}
	capAt := 10 * sloMs // keep the axis readable: windows above 10x the SLO are drawn at 10x
	clip := func(v []float64) []float64 {
		o := make([]float64, len(v))
		for i, y := range v {
			o[i] = math.Min(y, capAt)
		}
		return o
	}
	panels := []bench.TimelinePanel{
		{YLabel: "replicas of " + *version, Series: []bench.TimelineSeries{
			{Name: "ready", Color: "#1f77b4", Y: rAt},
			{Name: "desired", Color: "#ff7f0e", Dashed: true, Y: dAt},
		}},
		{YLabel: fmt.Sprintf("p99 per %s (ms, cut at %.0f)", *win, capAt), Series: []bench.TimelineSeries{
			{Name: "p99 all", Color: "#d62728", Y: clip(p99All)},
			{Name: "p99 2xx", Color: "#2ca02c", Y: clip(p99OK)},
			{Name: "SLO", Color: "#999999", Dashed: true, Y: sloLine},
		}},
	}
	if *out != "" {
		w, err := os.Create(*out)
		if err != nil {
			log.Fatal(err)
		}
		if err := bench.WriteTimelineSVG(w, *title, "seconds into the run", xs, panels); err != nil {
			log.Fatal(err)
		}
		if err := w.Close(); err != nil {
			log.Fatal(err)
		}
	}
}

// p99 is the nearest-rank 99th percentile (NaN for none).
func p99(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[max(int(math.Ceil(0.99*float64(len(s))))-1, 0)]
}

func fmtMs(v float64) string {
	if math.IsInf(v, 1) {
		return "a miss (non-2xx)"
	}
	return fmt.Sprintf("%.1f ms", v)
}

func fmtChanges(cs []change) string {
	if len(cs) == 0 {
		return "none"
	}
	out := ""
	for i, c := range cs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%d->%d at %.1fs", c.From, c.To, c.At)
	}
	return out
}
