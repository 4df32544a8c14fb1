// Command redisclient measures the two Redis clients considered for the
// feature store (internal/features/redisfeat) on the operation enrichment
// does: one pipelined round trip of N HMGETs of F fields each, against a
// real redis-server. It prints p50, p99 and the mean per round trip and
// the allocations per round trip of each client, interleaved in rounds.
//
//	go run ./bench/redisclient -addr 127.0.0.1:6379 -n 1,100 -fields 50 -iters 5000 -rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "redis-server address")
	ns := flag.String("n", "1,100", "entities per round trip (comma separated)")
	nf := flag.Int("fields", 50, "features per entity")
	iters := flag.Int("iters", 5000, "round trips per client and N per round")
	rounds := flag.Int("rounds", 3, "rounds (clients interleaved in each)")
	flag.Parse()
	ctx := context.Background()

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{*addr}, DisableCache: true})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	gc := goredis.NewClient(&goredis.Options{Addr: *addr})
	defer gc.Close()

	fields := make([]string, *nf)
	for i := range fields {
		fields[i] = "f" + strconv.Itoa(i)
	}
	var maxN int
	var counts []int
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			log.Fatalf("-n: %q is not a count", s)
		}
		counts = append(counts, n)
		maxN = max(maxN, n)
	}
	for e := 0; e < maxN; e++ {
		kv := make([]any, 0, 2*len(fields))
		for i, f := range fields {
			kv = append(kv, f, strconv.FormatFloat(float64(e*i)/7, 'g', -1, 64))
		}
		if err := gc.HSet(ctx, "bench_view:"+strconv.Itoa(e), kv...).Err(); err != nil {
			log.Fatal(err)
		}
	}
	keys := make([]string, maxN)
	for i := range keys {
		keys[i] = "bench_view:" + strconv.Itoa(i)
	}

	rueidisOnce := func(n int) error {
		cmds := make(rueidis.Commands, n)
		for i := 0; i < n; i++ {
			cmds[i] = rc.B().Hmget().Key(keys[i]).Field(fields...).Build()
		}
		for _, r := range rc.DoMulti(ctx, cmds...) {
			vals, err := r.ToArray()
			if err != nil {
				return err
			}
			for _, v := range vals {
				s, _ := v.ToString()
				_, _ = strconv.ParseFloat(s, 64)
			}
		}
		return nil
	}
	goredisOnce := func(n int) error {
		pipe := gc.Pipeline()
		cmds := make([]*goredis.SliceCmd, n)
		for i := 0; i < n; i++ {
			cmds[i] = pipe.HMGet(ctx, keys[i], fields...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		for _, c := range cmds {
			for _, v := range c.Val() {
				s, _ := v.(string)
				_, _ = strconv.ParseFloat(s, 64)
			}
		}
		return nil
	}
	clients := []struct {
		name string
		once func(int) error
	}{{"rueidis v1.0.79", rueidisOnce}, {"go-redis v9.23.0", goredisOnce}}

	fmt.Printf("redis-server %s, %d fields per entity, %d round trips per cell, GOMAXPROCS %d, %d CPUs\n", *addr, *nf, *iters, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Println("round\tclient\tN\tp50_us\tp99_us\tmean_us\tallocs/op\tKB/op")
	for r := 1; r <= *rounds; r++ {
		for _, n := range counts {
			order := clients
			if r%2 == 0 {
				order = []struct {
					name string
					once func(int) error
				}{clients[1], clients[0]}
			}
			for _, c := range order {
				for i := 0; i < 200; i++ { // warm up
					if err := c.once(n); err != nil {
						log.Fatal(err)
					}
				}
				lat := make([]time.Duration, *iters)
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				var sum time.Duration
				for i := range lat {
					t := time.Now()
					if err := c.once(n); err != nil {
						log.Fatal(err)
					}
					lat[i] = time.Since(t)
					sum += lat[i]
				}
				runtime.ReadMemStats(&m1)
				slices.Sort(lat)
				us := func(d time.Duration) float64 { return float64(d) / 1e3 }
				fmt.Printf("%d\t%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\n", r, c.name, n, us(lat[len(lat)/2]), us(lat[len(lat)*99/100]), us(sum/time.Duration(len(lat))),
					float64(m1.Mallocs-m0.Mallocs)/float64(len(lat)), float64(m1.TotalAlloc-m0.TotalAlloc)/float64(len(lat))/1024)
			}
		}
	}
	os.Exit(0)
}
