// Command overload is an open-loop load generator for the overload benchmark
// (docs/benchmarks.md, issue 3, benchmark 3). It does what `sluice bench`
// does (poisson arrivals at fixed intended times, latency counted from the
// intended send time) but keeps every request's outcome, so it can report
// what `sluice bench` does not: latency split by outcome (2xx vs each error
// code) and, for a run of several back-to-back phases (an overload followed
// by normal load), latency over time windows after a phase change.
//
//	taskset -c 1 go run ./bench/overload --model spin2ms --phases 960:30s,240:10s --deadline-ms 50
//
// For the many-models benchmarks (issue 11) it can also choose each
// request's model from a Zipf distribution over N models named by a
// pattern (--models-zipf 300,1.1 --model m%03d: rank 1 is m001, the
// hottest), write every request to a JSON-lines file (--records), report
// latency per window over the whole run (--timeline 1s) and poll the
// server's replicas while it runs (--poll-workers 250ms: ready replicas per
// version from GET /v1/workers, desired ones from sluice_replicas_desired).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type phase struct {
	rate float64
	dur  time.Duration
}

type record struct {
	model    int // Zipf rank (1-based); 0 without --models-zipf
	phase    int
	at       time.Duration // intended send time from the start of the run
	latency  time.Duration // intended send time to end of response
	status   int           // 0: no HTTP response
	code     string        // error code from the body, for non-2xx
	lag      time.Duration // dispatch lag
	received bool
}

func main() {
	server := flag.String("server", "http://127.0.0.1:18090", "server base URL")
	model := flag.String("model", "", "model name")
	payloadFlag := flag.String("payload", `{"instances":[{"x":0.5}]}`, "request body, or @FILE")
	phasesFlag := flag.String("phases", "100:10s", "RATE:DURATION[,RATE:DURATION...] run back to back")
	deadlineMs := flag.Int("deadline-ms", 0, "deadlineMs to set in the body (0: none)")
	seed := flag.Uint64("seed", 1, "seed for poisson gaps")
	window := flag.Duration("window", 500*time.Millisecond, "window for the latency-over-time table of phases after the first")
	series := flag.Duration("series", 5*time.Second, "how much of each later phase to show in windows")
	timeout := flag.Duration("timeout", 10*time.Second, "per-request timeout")
	jsonOut := flag.String("json", "", "write the summary as JSON to this file")
	closed := flag.Int("closed", 0, "closed loop instead: N workers, each sending its next request when the last is answered, for --closed-duration; reports throughput")
	closedDur := flag.Duration("closed-duration", 5*time.Second, "duration of the closed-loop run")
	execAt := flag.String("exec-at-phase", "", "N:CMD: run CMD (sh -c, in the background, output to stderr) when phase N (1-based) starts, e.g. to kill a worker at a known time")
	zipfFlag := flag.String("models-zipf", "", "N,S: choose each request's model by Zipf (exponent S) over ranks 1..N; --model is then a pattern with one integer verb (m%03d)")
	zipfTop := flag.Int("zipf-top", 0, "with --models-zipf: send only the requests drawn for ranks 1..K (the same arrivals and per-model rates as the full run, the others left out): the hottest models served alone")
	recordsOut := flag.String("records", "", "write every request as a JSON line (model, phase, atMs, latencyMs, lagMs, status, code) to this file")
	timeline := flag.Duration("timeline", 0, "also report latency per window of this length over the whole run (JSON \"timeline\")")
	pollEvery := flag.Duration("poll-workers", 0, "poll GET /v1/workers and /metrics this often during the run (JSON \"polls\": ready and desired replicas per version)")
	precise := flag.Bool("precise", true, "dispatch at the intended send times within microseconds (clock_nanosleep on a locked thread) rather than with time.Sleep, which wakes up to 1 ms late")
	flag.Parse()
	if *model == "" {
		log.Fatal("--model is required")
	}
	body := []byte(*payloadFlag)
	if f, ok := strings.CutPrefix(*payloadFlag, "@"); ok {
		var err error
		if body, err = os.ReadFile(f); err != nil {
			log.Fatal(err)
		}
	}
	if *deadlineMs > 0 {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			log.Fatalf("payload: %v", err)
		}
		m["deadlineMs"] = *deadlineMs
		body, _ = json.Marshal(m)
	}
	if *closed > 0 {
		closedLoop(*server, *model, body, *closed, *closedDur, *timeout, *jsonOut)
		return
	}
	var zipf *zipfChooser
	if *zipfFlag != "" {
		n, sv, ok := strings.Cut(*zipfFlag, ",")
		k, err1 := strconv.Atoi(n)
		s, err2 := strconv.ParseFloat(sv, 64)
		if !ok || err1 != nil || err2 != nil || k < 1 || s <= 0 || !strings.Contains(*model, "%") {
			log.Fatalf("bad --models-zipf %q (want N,S with N >= 1, S > 0, and --model a pattern such as m%%03d)", *zipfFlag)
		}
		zipf = newZipf(k, s)
	}
	var phases []phase
	for _, p := range strings.Split(*phasesFlag, ",") {
		r, d, ok := strings.Cut(p, ":")
		rate, err1 := strconv.ParseFloat(r, 64)
		dur, err2 := time.ParseDuration(d)
		if !ok || err1 != nil || err2 != nil || rate <= 0 || dur <= 0 {
			log.Fatalf("bad phase %q (want RATE:DURATION)", p)
		}
		phases = append(phases, phase{rate, dur})
	}

	// The plan: intended send times, poisson gaps per phase.
	rng := rand.New(rand.NewPCG(*seed, 42))
	type arrival struct {
		phase int
		at    time.Duration
		model int
	}
	// Model choices use their own stream so the arrival times do not depend
	// on --models-zipf.
	mrng := rand.New(rand.NewPCG(*seed, 7))
	var plan []arrival
	var phaseStart []time.Duration
	var t time.Duration
	for i, p := range phases {
		phaseStart = append(phaseStart, t)
		end := t + p.dur
		at := t
		for {
			at += time.Duration(rng.ExpFloat64() / p.rate * float64(time.Second))
			if at >= end {
				break
			}
			a := arrival{phase: i, at: at}
			if zipf != nil {
				a.model = zipf.draw(mrng)
				if *zipfTop > 0 && a.model > *zipfTop {
					continue
				}
			}
			plan = append(plan, a)
		}
		t = end
	}

	tr := &http.Transport{MaxIdleConns: 20000, MaxIdleConnsPerHost: 20000, IdleConnTimeout: time.Minute}
	client := &http.Client{Transport: tr, Timeout: *timeout}
	base := strings.TrimRight(*server, "/")
	url := base + "/v1/models/" + *model + ":predict"
	urlOf := func(rank int) string {
		if rank == 0 {
			return url
		}
		return base + "/v1/models/" + fmt.Sprintf(*model, rank) + ":predict"
	}
	if zipf != nil {
		url = urlOf(1)
	}
	// Warm a few connections so the first phase does not pay for dialing.
	for range 8 {
		if resp, err := client.Post(url, "application/json", bytes.NewReader(body)); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	time.Sleep(200 * time.Millisecond)

	execPhase, execCmd := -1, ""
	if *execAt != "" {
		n, c, ok := strings.Cut(*execAt, ":")
		k, err := strconv.Atoi(n)
		if !ok || err != nil || k < 1 || k > len(phases) || c == "" {
			log.Fatalf("bad --exec-at-phase %q (want N:CMD, 1 <= N <= %d)", *execAt, len(phases))
		}
		execPhase, execCmd = k-1, c
	}
	var execDone chan struct{}
	runExec := func() {
		cmd := exec.Command("sh", "-c", execCmd)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		execDone = make(chan struct{})
		go func() {
			defer close(execDone)
			if err := cmd.Run(); err != nil {
				log.Printf("--exec-at-phase: %v", err)
			}
		}()
	}

	recs := make([]record, len(plan))
	var wg sync.WaitGroup
	start := time.Now()
	var polls []pollSample
	pollStop, pollDone := make(chan struct{}), make(chan struct{})
	if *pollEvery > 0 {
		go func() {
			defer close(pollDone)
			polls = pollWorkers(base, start, *pollEvery, pollStop)
		}()
	} else {
		close(pollDone)
	}
	if execPhase == 0 {
		runExec()
	}
	if *precise {
		// Go's timers wake through the network poller's epoll wait, whose
		// timeout is in whole milliseconds: time.Sleep dispatched up to
		// 1 ms late (lag p50 0.5 ms, p99 1.1 ms), a floor under every
		// latency measured from the intended send time. The dispatcher
		// instead sleeps in clock_nanosleep on its own thread, with a
		// second P so that the requests' goroutines keep running.
		runtime.LockOSThread()
		if runtime.GOMAXPROCS(0) < 2 {
			runtime.GOMAXPROCS(2)
		}
	}
	sleepUntil := func(t time.Time) {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		if !*precise {
			time.Sleep(d)
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
		}
	}
	for i, a := range plan {
		if execPhase > 0 && execDone == nil && a.at >= phaseStart[execPhase] {
			sleepUntil(start.Add(phaseStart[execPhase]))
			runExec()
		}
		sleepUntil(start.Add(a.at))
		lag := time.Since(start) - a.at
		wg.Add(1)
		go func(i int, a arrival, lag time.Duration) {
			defer wg.Done()
			r := &recs[i]
			r.phase, r.at, r.lag, r.model = a.phase, a.at, lag, a.model
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, urlOf(a.model), bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				r.latency = time.Since(start) - a.at
				r.code = "transport"
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r.latency = time.Since(start) - a.at
			r.status, r.received = resp.StatusCode, true
			if resp.StatusCode/100 != 2 {
				var e struct {
					Error struct{ Code string } `json:"error"`
				}
				if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
					r.code = e.Error.Code
				} else {
					r.code = "unparseable"
				}
			}
		}(i, a, lag)
	}
	wg.Wait()
	close(pollStop)
	<-pollDone
	if execDone != nil {
		<-execDone
	}
	if *recordsOut != "" {
		writeRecords(*recordsOut, recs, *model, zipf != nil)
	}

	summary := map[string]any{"model": *model, "deadlineMs": *deadlineMs, "phases": []any{}, "startUnixMs": start.UnixMilli()}
	for pi, p := range phases {
		var ok, good, rej, refused []float64
		var lags []float64
		byCode := map[string]int{}
		byStatus := map[int]int{}
		var okByWin = map[int][]float64{}
		var nByWin = map[int]int{}
		var goodByWin = map[int]int{}
		var badByWin = map[int]int{}
		n := 0
		for _, r := range recs {
			if r.phase != pi {
				continue
			}
			n++
			ms := float64(r.latency) / 1e6
			lags = append(lags, float64(r.lag)/1e6)
			byStatus[r.status]++
			w := int((r.at - phaseStart[pi]) / *window)
			nByWin[w]++
			if r.status/100 == 2 {
				ok = append(ok, ms)
				okByWin[w] = append(okByWin[w], ms)
				if *deadlineMs == 0 || ms <= float64(*deadlineMs) {
					good = append(good, ms)
					goodByWin[w]++
				}
			} else {
				rej = append(rej, ms)
				if r.status == 429 || r.status == 503 {
					// Refused: the server decided not to compute it (quota,
					// queue_full, deadline_infeasible, not_ready); a 504 was
					// accepted and missed its deadline.
					refused = append(refused, ms)
				}
				byCode[r.code]++
				badByWin[w]++
			}
		}
		secs := p.dur.Seconds()
		ps := map[string]any{
			"offeredRate":        p.rate,
			"durationSeconds":    secs,
			"sent":               n,
			"sentRate":           float64(n) / secs,
			"ok":                 len(ok),
			"goodWithinDeadline": len(good),
			"goodput":            float64(len(good)) / secs,
			"okLatencyMs":        pct(ok),
			"rejectedLatencyMs":  pct(rej),
			"refusedLatencyMs":   pct(refused),
			"byCode":             byCode,
			"byStatus":           byStatus,
			"dispatchLagMs":      pct(lags),
		}
		fmt.Printf("phase %d: offered %.0f/s for %s: sent %d (%.1f/s), 2xx %d, good %d (goodput %.1f/s)\n",
			pi+1, p.rate, p.dur, n, float64(n)/secs, len(ok), len(good), float64(len(good))/secs)
		fmt.Printf("  2xx latency      %s\n", fmtPct(pct(ok)))
		fmt.Printf("  non-2xx latency  %s\n", fmtPct(pct(rej)))
		fmt.Printf("  refused (429/503) %s\n", fmtPct(pct(refused)))
		fmt.Printf("  dispatch lag     %s\n", fmtPct(pct(lags)))
		fmt.Printf("  by status %v, by code %v\n", byStatus, byCode)
		if pi > 0 {
			var wins []any
			fmt.Printf("  first %s by %s window (intended send time): n, 2xx p50/p99/max, good, non-2xx\n", *series, *window)
			for w := 0; time.Duration(w)**window < *series && time.Duration(w)**window < p.dur; w++ {
				q := pct(okByWin[w])
				fmt.Printf("    %5.1fs-%5.1fs  n %4d  p50 %7.2fms  p99 %7.2fms  max %7.2fms  good %d  non-2xx %d\n",
					(time.Duration(w) * *window).Seconds(), (time.Duration(w+1) * *window).Seconds(),
					nByWin[w], q["p50"], q["p99"], q["max"], goodByWin[w], badByWin[w])
				wins = append(wins, map[string]any{"fromSeconds": (time.Duration(w) * *window).Seconds(), "n": nByWin[w], "okLatencyMs": q, "good": goodByWin[w], "non2xx": badByWin[w]})
			}
			var first2 []float64
			for _, r := range recs {
				if r.phase == pi && r.status/100 == 2 && r.at-phaseStart[pi] < 2*time.Second {
					first2 = append(first2, float64(r.latency)/1e6)
				}
			}
			ps["windows"] = wins
			ps["first2sOkLatencyMs"] = pct(first2)
			var after2 []float64
			for _, r := range recs {
				if r.phase == pi && r.status/100 == 2 && r.at-phaseStart[pi] >= 2*time.Second {
					after2 = append(after2, float64(r.latency)/1e6)
				}
			}
			ps["after2sOkLatencyMs"] = pct(after2)
			fmt.Printf("  first 2 s 2xx: %s\n  after 2 s 2xx: %s\n", fmtPct(pct(first2)), fmtPct(pct(after2)))
		}
		summary["phases"] = append(summary["phases"].([]any), ps)
	}
	if *timeline > 0 {
		summary["timeline"] = timelineOf(recs, *timeline, *deadlineMs)
		summary["timelineWindowSeconds"] = timeline.Seconds()
	}
	if polls != nil {
		summary["polls"] = polls
	}
	if zipf != nil {
		summary["zipf"] = map[string]any{"models": zipf.n, "s": zipf.s, "pattern": *model, "top": *zipfTop}
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(summary, "", " ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// pct returns nearest-rank percentiles (ms) of xs.
func pct(xs []float64) map[string]float64 {
	out := map[string]float64{"n": float64(len(xs))}
	if len(xs) == 0 {
		return out
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	out["p50"], out["p90"], out["p99"], out["p999"], out["max"] = at(0.5), at(0.9), at(0.99), at(0.999), s[len(s)-1]
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	out["mean"] = sum / float64(len(s))
	return out
}

func fmtPct(p map[string]float64) string {
	if p["n"] == 0 {
		return "n 0"
	}
	return fmt.Sprintf("n %.0f  p50 %.2fms  p90 %.2fms  p99 %.2fms  p99.9 %.2fms  max %.2fms  mean %.2fms",
		p["n"], p["p50"], p["p90"], p["p99"], p["p999"], p["max"], p["mean"])
}

// closedLoop runs n workers back to back for d and prints the throughput
// (2xx answers per second) and the latency of the answers. This measures the
// most the server can do (with n requests in flight), not latency under a
// given load: a closed loop slows down with the server (see docs/bench.md).
func closedLoop(server, model string, body []byte, n int, d, timeout time.Duration, jsonOut string) {
	tr := &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n}
	client := &http.Client{Transport: tr, Timeout: timeout}
	url := strings.TrimRight(server, "/") + "/v1/models/" + model + ":predict"
	lat := make([][]float64, n)
	errsN := make([]int, n)
	statusN := make([]map[int]int, n) // non-2xx answers by status; 0: no answer
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range n {
		wg.Add(1)
		statusN[w] = map[int]int{}
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				t := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					errsN[w]++
					statusN[w][0]++
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					errsN[w]++
					statusN[w][resp.StatusCode]++
					continue
				}
				lat[w] = append(lat[w], float64(time.Since(t))/1e6)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	var all []float64
	ne := 0
	byStatus := map[int]int{}
	for w := range n {
		all = append(all, lat[w]...)
		ne += errsN[w]
		for st, k := range statusN[w] {
			byStatus[st] += k
		}
	}
	p := pct(all)
	fmt.Printf("closed loop, %d workers, %.1fs: %d ok (%.1f/s), %d errors %v (status 0: no answer); latency %s\n", n, el, len(all), float64(len(all))/el, ne, byStatus, fmtPct(p))
	if jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"model": model, "workers": n, "seconds": el, "ok": len(all), "errors": ne,
			"errorsByStatus": byStatus, "throughput": float64(len(all)) / el, "latencyMs": p}, "", " ")
		if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// zipfChooser draws ranks 1..n with P(k) proportional to 1/k^s.
type zipfChooser struct {
	n   int
	s   float64
	cdf []float64
}

func newZipf(n int, s float64) *zipfChooser {
	z := &zipfChooser{n: n, s: s, cdf: make([]float64, n)}
	sum := 0.0
	for k := 1; k <= n; k++ {
		sum += math.Pow(float64(k), -s)
		z.cdf[k-1] = sum
	}
	for i := range z.cdf {
		z.cdf[i] /= sum
	}
	return z
}

func (z *zipfChooser) draw(r *rand.Rand) int {
	u := r.Float64()
	i, _ := slices.BinarySearch(z.cdf, u)
	return min(i, z.n-1) + 1
}

// writeRecords writes one JSON line per request.
func writeRecords(path string, recs []record, pattern string, zipf bool) {
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for _, r := range recs {
		name := pattern
		if zipf {
			name = fmt.Sprintf(pattern, r.model)
		}
		enc.Encode(map[string]any{"model": name, "rank": r.model, "phase": r.phase + 1,
			"atMs": float64(r.at) / 1e6, "latencyMs": float64(r.latency) / 1e6, "lagMs": float64(r.lag) / 1e6, "status": r.status, "code": r.code})
	}
	if err := bw.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

// timelineOf cuts the whole run into windows of length w by intended send
// time: per window the requests sent, 2xx latency percentiles, the 2xx
// within the deadline (all 2xx without one) and the non-2xx.
func timelineOf(recs []record, w time.Duration, deadlineMs int) []any {
	type win struct {
		ok      []float64
		n, good int
		non2xx  int
		byCode  map[string]int
	}
	var wins []*win
	for _, r := range recs {
		i := int(r.at / w)
		for len(wins) <= i {
			wins = append(wins, &win{byCode: map[string]int{}})
		}
		x := wins[i]
		x.n++
		ms := float64(r.latency) / 1e6
		if r.status/100 == 2 {
			x.ok = append(x.ok, ms)
			if deadlineMs == 0 || ms <= float64(deadlineMs) {
				x.good++
			}
		} else {
			x.non2xx++
			x.byCode[r.code]++
		}
	}
	out := make([]any, len(wins))
	for i, x := range wins {
		out[i] = map[string]any{"fromSeconds": (time.Duration(i) * w).Seconds(), "n": x.n, "okLatencyMs": pct(x.ok),
			"good": x.good, "non2xx": x.non2xx, "byCode": x.byCode}
	}
	return out
}

// pollSample is one look at the server's replicas: ready replicas per
// version summed over the workers (GET /v1/workers) and the autoscaler's
// desired count per version (sluice_replicas_desired).
type pollSample struct {
	Seconds float64        `json:"seconds"`
	Ready   map[string]int `json:"ready"`
	Desired map[string]int `json:"desired,omitempty"`
	Err     string         `json:"err,omitempty"`
}

func pollWorkers(base string, start time.Time, every time.Duration, stop <-chan struct{}) []pollSample {
	client := &http.Client{Timeout: every * 4}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var out []pollSample
	for {
		s := pollSample{Seconds: time.Since(start).Seconds(), Ready: map[string]int{}, Desired: map[string]int{}}
		var ws struct {
			Workers []struct {
				Versions []struct {
					Version       string `json:"version"`
					ReadyReplicas int    `json:"readyReplicas"`
				} `json:"versions"`
			} `json:"workers"`
		}
		if err := getJSON(client, base+"/v1/workers", &ws); err != nil {
			s.Err = err.Error()
		}
		for _, w := range ws.Workers {
			for _, v := range w.Versions {
				s.Ready[v.Version] += v.ReadyReplicas
			}
		}
		if resp, err := client.Get(base + "/metrics"); err == nil {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				rest, ok := strings.CutPrefix(line, "sluice_replicas_desired{")
				if !ok {
					continue
				}
				labels, val, _ := strings.Cut(rest, "} ")
				var m, v string
				for _, kv := range strings.Split(labels, ",") {
					k, x, _ := strings.Cut(kv, "=")
					x = strings.Trim(x, `"`)
					switch k {
					case "model":
						m = x
					case "version":
						v = x
					}
				}
				if n, err := strconv.ParseFloat(val, 64); err == nil {
					s.Desired[m+"@"+v] = int(n)
				}
			}
			resp.Body.Close()
		}
		out = append(out, s)
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
	}
}

func getJSON(c *http.Client, url string, v any) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
