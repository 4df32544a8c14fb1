// Package lab is the Model Serving Lab (`sluice lab`): three experiments
// run against real `sluice serve --workers N` processes it starts itself
// — batching's latency against throughput, overload with admission on and
// off, many models on few workers under Zipf traffic — and one
// self-contained HTML report of them (inline SVG, no script, no outside
// request) with the raw numbers as CSV and JSON beside it. Load is open
// loop (internal/bench: poisson arrivals, latency from each request's
// intended send time). The charts, the tallies and the paragraphs of
// findings are pure functions of the numbers (plot.go, summary.go,
// report.go); the rest starts processes and offers load. It links no
// server code: it drives the binary it is given over HTTP.
package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/bench"
)

// BatchConfig is one batching configuration of experiment 1; MaxBatch 1
// is batching off.
type BatchConfig struct {
	MaxBatch int
	Delay    time.Duration
}

// Name is how the report names it.
func (c BatchConfig) Name() string {
	if c.MaxBatch <= 1 {
		return "no batching"
	}
	return fmt.Sprintf("batch %d, delay %v", c.MaxBatch, c.Delay)
}

func (c BatchConfig) model() string {
	if c.MaxBatch <= 1 {
		return "batch-off"
	}
	return fmt.Sprintf("batch-%d-%dus", c.MaxBatch, c.Delay.Microseconds())
}

// Plan is what a run measures and for how long.
type Plan struct {
	Quick   bool
	Workers int // local worker processes of every server (--workers)
	Seed    uint64

	Batching, Overload, Many bool // which experiments run

	// Experiment 1.
	BatchConfigs []BatchConfig
	BatchRates   []float64     // offered, requests/s, in order
	Point        time.Duration // each rate
	BoundMs      float64       // p99 bound of "sustained"

	// Experiment 2.
	SLO           time.Duration
	Factors       []float64 // offered / capacity
	OverloadPoint time.Duration
	CapStart      float64 // first rate of the capacity search
	CapSteps      int     // its bisection steps

	// Experiment 3.
	Models      int
	ZipfS       float64
	ManyRate    float64
	ManyFor     time.Duration
	Window      time.Duration
	HotModels   int
	BudgetShare float64 // of the models' memory, over all workers
	Warmup      time.Duration
}

// QuickPlan finishes within 5 minutes on 2 cores.
func QuickPlan() Plan {
	return Plan{Quick: true, Workers: 2, Seed: 1, Batching: true, Overload: true, Many: true,
		BatchConfigs: []BatchConfig{{1, 0}, {8, time.Millisecond}, {32, 3 * time.Millisecond}},
		BatchRates:   []float64{100, 300, 600, 1000, 1500}, Point: 3 * time.Second, BoundMs: 50,
		SLO: 50 * time.Millisecond, Factors: []float64{0.5, 1, 2, 3}, OverloadPoint: 3 * time.Second, CapStart: 100, CapSteps: 3,
		Models: 300, ZipfS: 1.1, ManyRate: 150, ManyFor: 75 * time.Second, Window: 5 * time.Second, HotModels: 10, BudgetShare: 0.2, Warmup: 20 * time.Second}
}

// FullPlan finishes within 30 minutes on 2 cores.
func FullPlan() Plan {
	return Plan{Workers: 2, Seed: 1, Batching: true, Overload: true, Many: true,
		BatchConfigs: []BatchConfig{{1, 0}, {8, time.Millisecond}, {8, 3 * time.Millisecond}, {32, time.Millisecond}, {32, 3 * time.Millisecond}, {64, 5 * time.Millisecond}},
		BatchRates:   []float64{100, 200, 300, 400, 600, 800, 1000, 1300, 1600, 2000, 2500}, Point: 6 * time.Second, BoundMs: 50,
		SLO: 50 * time.Millisecond, Factors: []float64{0.5, 1, 1.5, 2, 2.5, 3}, OverloadPoint: 10 * time.Second, CapStart: 100, CapSteps: 4,
		Models: 300, ZipfS: 1.1, ManyRate: 200, ManyFor: 8 * time.Minute, Window: 10 * time.Second, HotModels: 10, BudgetShare: 0.2, Warmup: 2 * time.Minute}
}

// Config is one run of the lab.
type Config struct {
	Binary  string // the sluice binary the servers run
	Out     string // the report's path; its CSV and JSON go beside it
	Scratch string // packages, data folders, server logs ("": a temporary folder, removed after)
	Plan    Plan
	Command string    // the command line, for the report
	Note    string    // said in the report's machine section
	Version string    // the binary's version (main.version), the commit when the build has no VCS stamp
	Machine Machine   // filled by Run when Cores is 0
	Log     io.Writer // progress (nil: none)
}

// Run runs the planned experiments and writes the report and its files.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Binary == "" || cfg.Out == "" {
		return nil, fmt.Errorf("lab: the binary and the report's path are required")
	}
	p := cfg.Plan
	if p.Workers < 1 {
		return nil, fmt.Errorf("lab: --workers %d: the experiments run on worker processes, at least 1", p.Workers)
	}
	if !p.Batching && !p.Overload && !p.Many {
		return nil, fmt.Errorf("lab: no experiment chosen")
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Out), 0o755); err != nil {
		return nil, err
	}
	scratch := cfg.Scratch
	if scratch == "" {
		d, err := os.MkdirTemp("", "sluice-lab-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		scratch = d
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "lab: "+format+"\n", args...)
		}
	}
	start := time.Now()
	r := &Report{Title: "Sluice Model Serving Lab", Command: cfg.Command, Quick: p.Quick, Started: start,
		Stem: strings.TrimSuffix(filepath.Base(cfg.Out), filepath.Ext(cfg.Out))}
	r.Machine = cfg.Machine
	if r.Machine.Cores == 0 {
		r.Machine = ThisMachine(cfg.Binary, cfg.Version)
	}
	r.Machine.Note = cfg.Note
	r.Machine.LoadStart = LoadAverage()
	e := &runner{cfg: cfg, p: p, scratch: scratch, logf: logf}
	if p.Batching || p.Overload {
		var err error
		if r.Batching, r.Overload, err = e.first(ctx); err != nil {
			return nil, err
		}
	}
	if p.Many {
		var err error
		if r.Many, err = e.many(ctx); err != nil {
			return nil, err
		}
	}
	r.Machine.LoadEnd = LoadAverage()
	r.ElapsedS = time.Since(start).Seconds()
	if err := Write(cfg.Out, r); err != nil {
		return nil, err
	}
	logf("wrote %s in %v", cfg.Out, time.Since(start).Round(time.Second))
	return r, nil
}

// Write writes the report's HTML to path and its CSV and JSON files
// beside it.
func Write(path string, r *Report) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string, f func(io.Writer) error) error {
		tmp := filepath.Join(dir, "."+name+".tmp")
		out, err := os.Create(tmp)
		if err != nil {
			return err
		}
		err = f(out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(tmp)
			return fmt.Errorf("write %s: %w", name, err)
		}
		return os.Rename(tmp, filepath.Join(dir, name))
	}
	if r.Batching != nil {
		if err := write(FileName(r.Stem, FileBatching), func(w io.Writer) error { return WriteBatchingCSV(w, r.Batching) }); err != nil {
			return err
		}
	}
	if r.Overload != nil {
		if err := write(FileName(r.Stem, FileOverload), func(w io.Writer) error { return WriteOverloadCSV(w, r.Overload) }); err != nil {
			return err
		}
	}
	if r.Many != nil {
		if err := write(FileName(r.Stem, FileMany), func(w io.Writer) error { return WriteManyCSV(w, r.Many) }); err != nil {
			return err
		}
	}
	if err := write(FileName(r.Stem, FileJSON), func(w io.Writer) error { return WriteJSON(w, r) }); err != nil {
		return err
	}
	return write(filepath.Base(path), func(w io.Writer) error { return WriteHTML(w, r) })
}

type runner struct {
	cfg     Config
	p       Plan
	scratch string
	logf    func(string, ...any)
}

const oneRow = `{"instances":[{"x":0.5}]}`

func (e *runner) load(srv *server, model string, rate float64, d time.Duration, seed int64) bench.Config {
	return bench.Config{Server: srv.url, Model: model, Rate: rate, Duration: d, Arrivals: bench.Poisson,
		Payload: []byte(oneRow), Seed: seed, Timeout: 20 * time.Second, Concurrency: 20000}
}

// first runs experiments 1 and 2 on one server.
func (e *runner) first(ctx context.Context) (*Batching, *Overload, error) {
	p := e.p
	pkgs := filepath.Join(e.scratch, "pkgs-1")
	var names []string
	if p.Batching {
		for _, c := range p.BatchConfigs {
			if err := batchPkg(c).write(pkgs); err != nil {
				return nil, nil, err
			}
			names = append(names, c.model())
		}
	}
	if p.Overload {
		if err := overloadPkg().write(pkgs); err != nil {
			return nil, nil, err
		}
		names = append(names, overloadModel)
	}
	e.logf("experiments 1 and 2: starting sluice serve --workers %d", p.Workers)
	srv, err := startServer(ctx, e.cfg.Binary, filepath.Join(e.scratch, "server-1.log"), "--data", filepath.Join(e.scratch, "data-1"),
		"--models", pkgs, "--workers", fmt.Sprint(p.Workers), "--no-records", "--job-runners", "0", "--grace", "5s")
	if err != nil {
		return nil, nil, err
	}
	defer srv.stop()
	for _, n := range names {
		if err := srv.waitAnswer(ctx, n, oneRow); err != nil {
			return nil, nil, err
		}
	}
	line := strings.Replace(srv.line, pkgs, "PKGS", 1)
	line = strings.Replace(line, filepath.Join(e.scratch, "data-1"), "DATA", 1)
	var b *Batching
	var o *Overload
	if p.Batching {
		if b, err = e.batching(ctx, srv, line); err != nil {
			return nil, nil, err
		}
	}
	if p.Overload {
		if o, err = e.overload(ctx, srv, line); err != nil {
			return nil, nil, err
		}
	}
	return b, o, nil
}

// saturated says a point went past its configuration's knee: the rest of
// its rates would only grow a queue.
func saturated(pt BatchPoint) bool {
	return pt.Achieved < 0.85*pt.OfferedRate || float64(pt.P99Ms) > 2000 || pt.NoAnswer > 0 || float64(pt.OK) < 0.9*float64(pt.Sent)
}

func (e *runner) batching(ctx context.Context, srv *server, line string) (*Batching, error) {
	p := e.p
	b := &Batching{BoundMs: p.BoundMs}
	var names []string
	for _, c := range p.BatchConfigs {
		names = append(names, c.Name())
	}
	b.Setup = Setup{
		Models: fmt.Sprintf("one synthetic model per configuration, the seed cost curve (1.7 ms + 0.32 ms per instance, sleeping: no CPU), one replica: %s", strings.Join(names, "; ")),
		Load: fmt.Sprintf("open loop, poisson, 1 instance per request, no deadline sent; rates %s req/s, %v each, the configurations interleaved at each rate; a configuration stops after its first saturated rate",
			joinF(p.BatchRates), p.Point),
		Server: line,
	}
	active := map[int]bool{}
	for i := range p.BatchConfigs {
		active[i] = true
	}
	for ri, rate := range p.BatchRates {
		for k := range p.BatchConfigs {
			i := (k + ri) % len(p.BatchConfigs) // rotate who goes first
			if !active[i] {
				continue
			}
			c := p.BatchConfigs[i]
			var outs []bench.Outcome
			cfg := e.load(srv, c.model(), rate, p.Point, int64(p.Seed)+int64(ri))
			var mu sync.Mutex
			cfg.Observe = func(o bench.Outcome) { mu.Lock(); outs = append(outs, o); mu.Unlock() }
			res, err := bench.Run(ctx, cfg)
			if err != nil {
				return nil, err
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			pt := BatchPoint{Config: c.Name(), MaxBatch: max(c.MaxBatch, 1), DelayMs: float64(c.Delay) / 1e6, OfferedRate: rate,
				Achieved: res.AchievedRate, LagP99Ms: float64(res.DispatchLag.P99) / 1e6, Tally: TallyOf(outs, 0)}
			b.Points = append(b.Points, pt)
			e.logf("batching %s at %g/s: achieved %.0f/s, p50 %s ms, p99 %s ms", c.Name(), rate, pt.Achieved, fmtNum(pt.P50Ms), fmtNum(pt.P99Ms))
			if saturated(pt) {
				active[i] = false
			}
		}
	}
	return b, nil
}

func (e *runner) overload(ctx context.Context, srv *server, line string) (*Overload, error) {
	p := e.p
	o := &Overload{SLOMs: float64(p.SLO) / 1e6}
	slo := p.SLO
	// Capacity: what a closed loop of capIn requests in flight gets
	// answered per second (after a warm-up at the same loop): the most
	// the server does, which an open-loop search on a busy machine
	// underestimates as soon as one noisy second fails a probe.
	if _, err := closedLoop(ctx, srv.url, overloadModel, capIn, time.Second); err != nil {
		return nil, err
	}
	cl, err := closedLoop(ctx, srv.url, overloadModel, capIn, p.OverloadPoint)
	if err != nil {
		return nil, err
	}
	o.Capacity = cl.Rate
	o.Probes = append(o.Probes, cl)
	capacity := cl.Rate
	e.logf("overload: capacity %.0f/s (closed loop of %d, p99 %.1f ms)", capacity, capIn, cl.P99Ms)
	o.Setup = Setup{
		Models: "one synthetic model: 2 ms of sleep per call (no CPU), no batching, one replica per copy, maxQueueInstances 100000, defaultDeadline 10s",
		Load: fmt.Sprintf("open loop, poisson, 1 instance per request, %v per point at %s x the measured capacity, admission on and off interleaved (the order alternating); goodput = 2xx answered within the SLO of %v, counted from the intended send time",
			p.OverloadPoint, joinF(p.Factors), p.SLO),
		Server: line,
		Notes: []string{
			fmt.Sprintf("Admission on: every request carries deadlineMs %d, so the worker refuses at once (503 deadline_infeasible, 429 queue_full) what its queue and cost model say cannot finish in time, and drops what expires in the queue (504).", slo.Milliseconds()),
			"Admission off: the requests carry no deadline, so the server admits everything its bounded queue holds (the model's 10 s default deadline never binds at these loads) and answers first come, first served, however late: what a server without admission control does. The client's SLO is the same.",
			fmt.Sprintf("Capacity: the 2xx answers per second of a closed loop keeping %d requests in flight for %v (no deadline), after a 1 s warm-up: the most the server answers per second.", capIn, p.OverloadPoint),
		},
	}
	if capacity <= 0 {
		return o, nil
	}
	for fi, f := range p.Factors {
		order := []bool{true, false}
		if fi%2 == 1 {
			order = []bool{false, true}
		}
		for _, adm := range order {
			rate := math.Round(f * capacity)
			cfg := e.load(srv, overloadModel, rate, p.OverloadPoint, int64(p.Seed)+200+int64(fi))
			if adm {
				cfg.DeadlineMs = int(slo.Milliseconds())
			}
			var outs []bench.Outcome
			var mu sync.Mutex
			cfg.Observe = func(o bench.Outcome) { mu.Lock(); outs = append(outs, o); mu.Unlock() }
			res, err := bench.Run(ctx, cfg)
			if err != nil {
				return nil, err
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t := TallyOf(outs, slo)
			pt := OverloadPoint{Admission: adm, Factor: f, OfferedRate: rate, Goodput: float64(t.Good) / p.OverloadPoint.Seconds(),
				LagP99Ms: float64(res.DispatchLag.P99) / 1e6, Tally: t}
			o.Points = append(o.Points, pt)
			e.logf("overload %gx (%g/s) admission %v: goodput %.0f/s, p99 %s ms, refused %d", f, rate, adm, pt.Goodput, fmtNum(pt.P99Ms), pt.Refused)
		}
	}
	return o, nil
}

func joinF(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmtF(x)
	}
	return strings.Join(s, ", ")
}

// ReadJSON reads a report's JSON (STEM.json), e.g. to render it again
// with Write after the page's code changed: the numbers stay as measured.
func ReadJSON(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a sluice lab report's JSON: %v", path, err)
	}
	if r.Batching == nil && r.Overload == nil && r.Many == nil {
		return nil, fmt.Errorf("%s: a report's JSON holds at least one experiment; this one none", path)
	}
	return &r, nil
}

// PublishedPath is where a server with --data dataDir looks for the last
// report by default: dataDir/lab/report.html.
func PublishedPath(dataDir string) string { return filepath.Join(dataDir, "lab", "report.html") }

// capIn is the closed loop's requests in flight when capacity is
// measured: enough to keep every copy's replica busy.
const capIn = 64

// closedLoop keeps n requests to model in flight for d, each sent when
// the last one answered, and reports 2xx answers per second and their p99
// (from each request's own send: a closed loop has no intended times).
func closedLoop(ctx context.Context, url, model string, n int, d time.Duration) (Probe, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	defer tr.CloseIdleConnections()
	target := url + "/v1/models/" + model + ":predict"
	var mu sync.Mutex
	var lat []float64
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				t := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(oneRow))
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					mu.Lock()
					lat = append(lat, float64(time.Since(t))/1e6)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Probe{}, err
	}
	el := time.Since(start).Seconds()
	return Probe{Rate: math.Round(float64(len(lat)) / el), Goodput: float64(len(lat)) / el, P99Ms: Quantile(lat, 0.99), Pass: len(lat) > 0}, nil
}
