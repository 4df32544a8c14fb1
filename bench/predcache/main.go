// Command predcache is the prediction cache's load generator (issue 19,
// goals rows 5 and 6): an open loop of 1-row predict calls at --rate
// (poisson) for --duration, a share --hit of them repeating one of --hot
// rows (sent once each before the run, so they are cached), the others a
// row never sent before. At most --conc calls are in flight: arrivals past
// that are dropped and counted, so an offer past capacity measures the
// answers per second the server gives with --conc in flight. It prints one
// JSON line: offered, answered (2xx) per second, dropped, errors, latency
// p50/p99 from the intended send time, and the X-Cache values seen.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:18470", "server")
	model := flag.String("model", "spin1ms", "model")
	field := flag.String("field", "x", "the model's one float input, in [0, 1]")
	rate := flag.Float64("rate", 1000, "offered calls per second (poisson)")
	dur := flag.Duration("duration", 5*time.Second, "how long to offer")
	hit := flag.Float64("hit", 0, "share of calls that repeat a hot row (0 – 1)")
	hot := flag.Int("hot", 100, "hot rows (warmed before the run)")
	conc := flag.Int("conc", 16, "calls in flight at most (arrivals past it are dropped)")
	seed := flag.Uint64("seed", 1, "random seed")
	base := flag.Uint64("base", 0, "first unique row's number (give each run its own range so no row repeats across runs)")
	flag.Parse()
	if *hit < 0 || *hit > 1 || *conc < 1 || *rate <= 0 || *hot < 1 || *hot > 1024 {
		fmt.Fprintln(os.Stderr, "predcache: --hit must be in [0, 1], --conc >= 1, --rate > 0, --hot in [1, 1024]")
		os.Exit(2)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: *conc, MaxConnsPerHost: *conc}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	endpoint := *url + "/v1/models/" + *model + ":predict"
	// Hot rows: k/1024; unique rows: odd numerators over 2^24, so the two
	// never meet and every unique row is a new float32.
	body := func(x float64) []byte { return fmt.Appendf(nil, `{"instances":[{"%s":%.10g}]}`, *field, x) }
	hotRow := func(k int) []byte { return body(float64(k) / 1024) }
	var next atomic.Uint64
	next.Store(*base)
	uniqueRow := func() []byte {
		n := next.Add(1)
		return body(float64(2*(n%(1<<23))+1) / (1 << 24))
	}
	call := func(b []byte) (int, string, error) {
		resp, err := hc.Post(endpoint, "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, "", err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Cache"), nil
	}
	for k := 0; k < *hot; k++ {
		if st, _, err := call(hotRow(k)); err != nil || st != 200 {
			fmt.Fprintf(os.Stderr, "predcache: warm-up row %d: %v %d\n", k, err, st)
			os.Exit(1)
		}
	}

	rng := rand.New(rand.NewPCG(*seed, 19))
	sem := make(chan struct{}, *conc)
	var mu sync.Mutex
	var lat []float64
	cache := map[string]int{}
	var ok, errors, dropped int
	var wg sync.WaitGroup
	start := time.Now()
	at := time.Duration(0)
	offered := 0
	for at < *dur {
		at += time.Duration(rng.ExpFloat64() / *rate * float64(time.Second))
		if d := time.Until(start.Add(at)); d > 0 {
			time.Sleep(d)
		}
		offered++
		var b []byte
		if rng.Float64() < *hit {
			b = hotRow(rng.IntN(*hot))
		} else {
			b = uniqueRow()
		}
		select {
		case sem <- struct{}{}:
		default:
			dropped++
			continue
		}
		intended := start.Add(at)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			st, xc, err := call(b)
			l := time.Since(intended).Seconds() * 1000
			mu.Lock()
			defer mu.Unlock()
			if err != nil || st != 200 {
				errors++
				return
			}
			ok++
			lat = append(lat, l)
			cache[xc]++
		}()
	}
	elapsed := time.Since(start)
	wg.Wait()
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"model": *model, "hit": *hit, "rate": *rate, "conc": *conc,
		"offered": offered, "ok": ok, "errors": errors, "dropped": dropped, "seconds": elapsed.Seconds(),
		"ok_per_s": float64(ok) / elapsed.Seconds(), "p50_ms": q(0.5), "p99_ms": q(0.99), "x_cache": cache})
}
