// Command features measures enrichment (internal/features over the real
// Redis store, internal/features/redisfeat) as the gateway runs it, open
// loop: lookups start at a fixed rate whatever the previous ones took, and
// each one's time is the enrichment's share of its request. It seeds
// -entities × -fields hashes, then runs each case for -duration and prints
// p50, p99, p99.9 and the maximum of one Lookup.
//
//	go run ./bench/features -redis redis://127.0.0.1:6379/0 -rate 1000 -rate100 100 -duration 10s
//
// Cases (the goals of issue 19, rows 1–3): 1 entity × 50 features from
// Redis (the memory tier's ttl 1ns: every lookup a Redis round trip), the
// same from memory, 100 entities × 50 features from Redis.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/features"
	"github.com/sluiceml/sluice/internal/features/redisfeat"
)

func main() {
	url := flag.String("redis", "redis://127.0.0.1:6379/0", "Redis URL")
	rate := flag.Int("rate", 1000, "lookups started per second (1-entity cases)")
	rate100 := flag.Int("rate100", 100, "lookups started per second of the 100-entity case")
	dur := flag.Duration("duration", 10*time.Second, "each case's duration")
	nf := flag.Int("fields", 50, "features per entity")
	pool := flag.Int("pool", 10000, "distinct entities seeded (each lookup picks at random)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the cases to this file")
	only := flag.String("case", "", "run only the case whose name starts with this")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	src, err := redisfeat.Open(ctx, *url)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	if err := src.Ping(ctx); err != nil {
		log.Fatal(err)
	}
	fields := make([]string, *nf)
	defs := make([]float64, *nf)
	for i := range fields {
		fields[i] = "f" + strconv.Itoa(i)
	}
	view := &features.View{Name: "bench_stats", Entity: "id", Fields: fields}
	ents := make([]string, *pool)
	rows := make([]features.Row, *pool)
	for i := range ents {
		ents[i] = "e" + strconv.Itoa(i)
		rows[i] = features.Row{Found: true, Values: make([]float64, *nf), At: time.Now()}
		for k := range rows[i].Values {
			rows[i].Values[k] = float64(i*k) / 8
		}
	}
	for i := 0; i < len(ents); i += 500 {
		j := min(i+500, len(ents))
		if err := src.Fill(ctx, view, ents[i:j], rows[i:j]); err != nil {
			log.Fatal(err)
		}
	}
	set := features.NewSet(features.Config{Stores: []features.Store{{Tier: features.Redis, Source: src}}})
	fmt.Printf("open loop at %d lookups/s for %s per case, %d features per entity, %d entities seeded\n", *rate, *dur, *nf, *pool)
	fmt.Printf("the 100-entity case at %d lookups/s\n", *rate100)
	fmt.Println("case\tlookups\tp50_ms\tp99_ms\tp99.9_ms\tmax_ms\tnot_from_tier")
	for _, c := range []struct {
		name string
		n    int
		ttl  time.Duration
		want features.Origin
	}{
		{"1 entity, Redis", 1, time.Nanosecond, features.Redis},
		{"1 entity, memory", 1, time.Hour, features.Memory},
		{"100 entities, Redis", 100, time.Nanosecond, features.Redis},
	} {
		if !strings.HasPrefix(c.name, *only) {
			continue
		}
		e := set.Enricher(features.ViewConfig{View: *view, Defaults: defs, Timeout: time.Second, MemoryBytes: 1 << 30, MemoryTTL: c.ttl})
		if c.want == features.Memory { // fill the memory tier first
			out := make([]features.Result, 1)
			for _, ent := range ents {
				e.Lookup(ctx, []string{ent}, out)
			}
		}
		r := *rate
		if c.n > 1 {
			r = *rate100
		}
		lat, off := run(ctx, e, ents, c.n, r, *dur, c.want)
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / 1e6 }
		fmt.Printf("%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%d\n", c.name, len(lat), q(0.5), q(0.99), q(0.999), float64(lat[len(lat)-1])/1e6, off)
	}
}

// run starts lookups of n random entities at rate per second for d, each
// on its own goroutine at its scheduled time, and returns their times and
// how many values did not come from the tier wanted.
func run(ctx context.Context, e *features.Enricher, ents []string, n, rate int, d time.Duration, want features.Origin) ([]time.Duration, int) {
	total := int(d.Seconds() * float64(rate))
	lat := make([]time.Duration, total)
	var mu sync.Mutex
	off := 0
	var wg sync.WaitGroup
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < total; i++ {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			batch := make([]string, n)
			for j := range batch {
				batch[j] = ents[rand.IntN(len(ents))]
			}
			out := make([]features.Result, n)
			t := time.Now()
			e.Lookup(ctx, batch, out)
			lat[i] = time.Since(t)
			bad := 0
			for _, r := range out {
				for _, o := range r.Origins {
					if o != want {
						bad++
					}
				}
			}
			if bad > 0 {
				mu.Lock()
				off += bad
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	return lat, off
}
