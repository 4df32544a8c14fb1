package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/bench"
)

// many runs experiment 3 on a server of its own.
func (e *runner) many(ctx context.Context) (*Many, error) {
	p := e.p
	pkgs := filepath.Join(e.scratch, "pkgs-3")
	models := ManyModels(p.Models, p.Seed)
	total := 0
	for _, m := range models {
		if err := m.pkg().write(pkgs); err != nil {
			return nil, err
		}
		total += m.MemoryMiB
	}
	budget := int(math.Max(64, p.BudgetShare*float64(total)/float64(p.Workers)))
	e.logf("experiment 3: %d models, %d MiB in all, --workers %d --worker-memory %dMiB", p.Models, total, p.Workers, budget)
	data := filepath.Join(e.scratch, "data-3")
	srv, err := startServer(ctx, e.cfg.Binary, filepath.Join(e.scratch, "server-3.log"), "--data", data,
		"--models", pkgs, "--workers", fmt.Sprint(p.Workers), "--worker-memory", fmt.Sprintf("%dMiB", budget),
		"--no-records", "--job-runners", "0", "--grace", "5s")
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	if err := srv.waitModels(ctx, p.Models); err != nil {
		return nil, err
	}
	line := strings.Replace(strings.Replace(srv.line, pkgs, "PKGS", 1), data, "DATA", 1)

	z := NewZipf(p.Models, p.ZipfS, p.Seed)
	hotShare := 0.0
	for k := 1; k <= p.HotModels; k++ {
		hotShare += z.Share(k)
	}
	hot := map[string]bool{}
	for k := 1; k <= p.HotModels; k++ {
		hot[ManyName(k)] = true
	}
	m := &Many{Models: p.Models, Workers: p.Workers, ZipfS: p.ZipfS, Rate: p.ManyRate, DurationS: p.ManyFor.Seconds(),
		TotalMiB: float64(total), BudgetMiB: float64(budget), HotModels: p.HotModels, HotShare: hotShare,
		WarmupS: p.Warmup.Seconds(), WindowS: p.Window.Seconds()}
	m.Setup = Setup{
		Models: fmt.Sprintf("%d synthetic models m001…m%03d (rank 1 the hottest): 1 ms of sleep per call, no batching, memory 4/8/16/32 MiB and load time 50–500 ms drawn from a seeded stream (%d MiB in all), defaultDeadline 2s (a request may wait for a load), tier warm",
			p.Models, p.Models, total),
		Load: fmt.Sprintf("open loop, poisson, %s req/s for %v, each request's model drawn by Zipf (s = %s) over the %d ranks; the %d hottest take %s%% of the requests; windows of %v; the server's counters scraped every window",
			fmtF(p.ManyRate), p.ManyFor, fmtF(p.ZipfS), p.Models, p.HotModels, fmtF(100*hotShare), p.Window),
		Server: line,
		Notes: []string{
			fmt.Sprintf("Memory: each worker's budget (--worker-memory %d MiB) is %s%% of the models' memory over %d workers, so at most about that share is loaded at once; a request for a model loaded nowhere waits for its load when its deadline allows (a cold start that waited) or is refused 503 cold_start.",
				budget, fmtF(100*p.BudgetShare), p.Workers),
			fmt.Sprintf("Hit ratio per window: 1 − (cold starts waited + refused) / requests, both from the server's counters (sluice_cold_starts_total, sluice_requests_total). Hot p99: the 2xx answers of the %d hottest models; the totals below count from %v on (the warm-up).", p.HotModels, p.Warmup),
		},
	}

	cfg := e.load(srv, ManyName(1), p.ManyRate, p.ManyFor, int64(p.Seed)+300)
	cfg.Route = func(int) string { return ManyName(z.Draw()) }
	var outs []bench.Outcome
	var mu sync.Mutex
	cfg.Observe = func(o bench.Outcome) { mu.Lock(); outs = append(outs, o); mu.Unlock() }

	sctx, stopScrape := context.WithCancel(ctx)
	var scrapes []Scrape
	var wg sync.WaitGroup
	first, err := scrape(&http.Client{Timeout: 10 * time.Second}, srv.url) // before the load: the counters at its start
	if err != nil {
		stopScrape()
		return nil, err
	}
	t0 := time.Now()
	wg.Add(1)
	go func() { // stopped by stopScrape below
		defer wg.Done()
		scrapes = append([]Scrape{first}, scrapeEvery(sctx, srv.url, t0, p.Window)...)
	}()
	_, err = bench.Run(ctx, cfg)
	stopScrape()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.Windows = Windows(outs, scrapes, p.Window, p.ManyFor, func(s string) bool { return hot[s] })
	var hotOuts, after []bench.Outcome
	for _, o := range outs {
		if o.At < p.Warmup {
			continue
		}
		after = append(after, o)
		if hot[o.Model] {
			hotOuts = append(hotOuts, o)
		}
	}
	m.All, m.Hot, m.After = TallyOf(outs, 0), TallyOf(hotOuts, 0), TallyOf(after, 0)
	m.HitRatio = Num(math.NaN())
	if len(scrapes) >= 2 {
		a, b := scrapes[0], scrapes[len(scrapes)-1]
		m.Loads, m.Evictions = b.Loads-a.Loads, b.Evictions-a.Evictions
		if req := b.Requests - a.Requests; req > 0 {
			m.HitRatio = Num(math.Max(0, 1-((b.ColdWaited-a.ColdWaited)+(b.ColdRefused-a.ColdRefused))/req))
		}
	}
	e.logf("many models: hit ratio %s, loads %.0f, evictions %.0f, hot p99 %s ms", fmtNum(m.HitRatio), m.Loads, m.Evictions, fmtNum(m.Hot.P99Ms))
	return m, nil
}

// scrapeEvery reads the server's counters every d until ctx ends, then
// once more.
func scrapeEvery(ctx context.Context, url string, t0 time.Time, d time.Duration) []Scrape {
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	var out []Scrape
	take := func() {
		if s, err := scrape(c, url); err == nil {
			s.At = time.Since(t0)
			out = append(out, s)
		}
	}
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			take()
			return out
		case <-tick.C:
			take()
		}
	}
}

func scrape(c *http.Client, url string) (Scrape, error) {
	resp, err := c.Get(url + "/metrics")
	if err != nil {
		return Scrape{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Scrape{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return ParseMetrics(io.LimitReader(resp.Body, 64<<20))
}

// ParseMetrics sums the counters a Scrape holds from a Prometheus text
// exposition.
func ParseMetrics(r io.Reader) (Scrape, error) {
	var s Scrape
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		labels := ""
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			name, labels, rest = line[:i], line[i+1:j], strings.TrimSpace(line[j+1:])
		}
		val, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		switch name {
		case "sluice_requests_total":
			s.Requests += v
		case "sluice_worker_loads_total":
			s.Loads += v
		case "sluice_evictions_total":
			s.Evictions += v
		case "sluice_worker_memory_used_bytes":
			s.MemoryUsed += v
		case "sluice_cold_starts_total":
			switch {
			case strings.Contains(labels, `outcome="waited"`):
				s.ColdWaited += v
			case strings.Contains(labels, `outcome="refused"`):
				s.ColdRefused += v
			}
		}
	}
	return s, sc.Err()
}
