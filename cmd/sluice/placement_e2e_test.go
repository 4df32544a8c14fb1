package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
)

// The placement e2e of issue 17: 2 workers, 100 synthetic models of
// 8 MiB whose loads take 50 ms, budgets of 96 MiB a worker (24 copies for
// 100 models: eviction is forced), a Zipf mix (s 1.1) from 8 closed-loop
// clients. Most requests' deadlines (2 s) cover the load time; one in ten
// has 10 ms, which does not. The manifests declare no serving.memory: the
// reservation comes from the artifact (cost.json's memory). GET
// /v1/workers is sampled through the run: no worker is ever above its
// budget, by placement's count or by the memory its versions report; at
// least 99 % of the requests whose deadline covers the load are served;
// the refusals are cold_start for the short deadlines only.
func TestManyModelsPlacement(t *testing.T) {
	const (
		n        = 100
		budget   = 96 << 20
		clients  = 8
		runFor   = 15 * time.Second
		longMs   = 2000
		shortMs  = 10
		loadTime = 50 * time.Millisecond
	)
	models := t.TempDir()
	for i := range n {
		tier := "warm"
		if i%2 == 1 {
			tier = "cold"
		}
		dir := filepath.Join(models, fmt.Sprintf("p%03d", i))
		synPackage(t, dir, fmt.Sprintf(`{"base":"200us","mode":"sleep","memory":"8MiB","loadTime":"%s"}`, loadTime),
			"serving: {warmupBatches: 0}\nplacement: {tier: "+tier+"}\n")
		manifest, _ := os.ReadFile(filepath.Join(dir, "model.yaml"))
		if err := os.WriteFile(filepath.Join(dir, "model.yaml"), []byte(strings.Replace(string(manifest), "name: syn", fmt.Sprintf("name: p%03d", i), 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServer(t, "--data", t.TempDir(), "--models", models, "--workers", "2", "--worker-memory", "96MiB", "--min-residency", "100ms")

	// Sample the workers' memory through the run.
	type peak struct{ used, reported, rss int64 }
	var mu sync.Mutex
	peaks := map[string]peak{}
	var over []string
	samples := 0
	sample := func() {
		resp, err := http.Get(srv.url + "/v1/workers")
		if err != nil {
			return
		}
		var wl api.WorkerList
		err = json.NewDecoder(resp.Body).Decode(&wl)
		resp.Body.Close()
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		samples++
		for _, w := range wl.Workers {
			var reported int64
			for _, v := range w.Versions {
				reported += v.MemoryBytes
			}
			pk := peaks[w.ID]
			pk.used, pk.reported, pk.rss = max(pk.used, w.MemoryUsedBytes), max(pk.reported, reported), max(pk.rss, w.RSSBytes)
			peaks[w.ID] = pk
			if w.MemoryBudgetBytes != budget {
				over = append(over, fmt.Sprintf("%s: budget %d, want %d (--worker-memory passed through serve)", w.ID, w.MemoryBudgetBytes, budget))
			}
			if w.MemoryUsedBytes > budget || reported > budget {
				over = append(over, fmt.Sprintf("%s: placement counts %d MiB, its versions report %d MiB, over the %d MiB budget", w.ID, w.MemoryUsedBytes>>20, reported>>20, budget>>20))
			}
		}
	}
	sample() // at start, after the warm versions were placed
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	})

	type tally struct{ covered, served, short, shortServed, shortCold int }
	var total tally
	codes := map[string]int{}
	end := time.Now().Add(runFor)
	var cwg sync.WaitGroup
	for c := range clients {
		cwg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 17))
			z := rand.NewZipf(r, 1.1, 1, n-1)
			var mine tally
			mineCodes := map[string]int{}
			for i := 0; time.Now().Before(end); i++ {
				m := z.Uint64()
				dl := longMs
				if i%10 == 9 {
					dl = shortMs
				}
				status, body, err := postJSON(fmt.Sprintf("%s/v1/models/p%03d:predict", srv.url, m), fmt.Sprintf(`{"instances":[{"x":1}],"deadlineMs":%d}`, dl))
				code := ""
				if err == nil && status != 200 {
					var e struct {
						Error struct{ Code string } `json:"error"`
					}
					_ = json.Unmarshal(body, &e)
					code = e.Error.Code
				}
				if err != nil {
					code = "transport: " + err.Error()
				}
				if dl == longMs {
					mine.covered++
					if status == 200 {
						mine.served++
					} else {
						mineCodes[code]++
					}
				} else {
					mine.short++
					switch {
					case status == 200:
						mine.shortServed++
					case code == "cold_start":
						mine.shortCold++
					}
				}
			}
			mu.Lock()
			total.covered += mine.covered
			total.served += mine.served
			total.short += mine.short
			total.shortServed += mine.shortServed
			total.shortCold += mine.shortCold
			for k, v := range mineCodes {
				codes[k] += v
			}
			mu.Unlock()
		})
	}
	cwg.Wait()
	close(stop)
	wg.Wait()
	sample()

	wl := workers(t, srv.url)
	var evictions, loads int64
	for _, w := range wl.Workers {
		evictions += w.Evictions
		loads += w.Loads
	}
	mu.Lock()
	defer mu.Unlock()
	for _, o := range over[:min(len(over), 10)] {
		t.Error(o)
	}
	served := float64(total.served) / float64(max(total.covered, 1))
	t.Logf("%d requests whose 2 s deadline covers the 50 ms load: %d served (%.2f %%), refused by code %v; %d with a 10 ms deadline: %d served, %d cold_start; %d loads, %d evictions; %d samples of /v1/workers, peaks %+v (budget %d MiB)",
		total.covered, total.served, 100*served, codes, total.short, total.shortServed, total.shortCold, loads, evictions, samples, peaks, budget>>20)
	if total.covered < 200 {
		t.Fatalf("only %d requests in %s: too few to judge", total.covered, runFor)
	}
	if served < 0.99 {
		t.Errorf("%.2f %% of the requests whose deadline covers the load were served, want >= 99 %%: refused by code %v", 100*served, codes)
	}
	if evictions == 0 || loads <= int64(2*budget/(8<<20)) {
		t.Errorf("%d loads and %d evictions for %d models of 8 MiB on 2×96 MiB: expected evictions", loads, evictions, n)
	}
	if samples < 20 {
		t.Errorf("only %d samples of /v1/workers", samples)
	}
	srv.stop(t)
}
