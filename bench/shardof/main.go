// Command shardof prints the shard of each model (cluster.Shard, the
// rendezvous hashing the pool uses) over worker ids, and which models share
// workers with one given model: for the poison-model benchmark (issue 11).
//
//	go run ./bench/shardof --workers 4 --k 2 --models m%03d --n 50 --poison m007
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/sluiceml/sluice/internal/cluster"
)

func main() {
	workers := flag.Int("workers", 4, "workers worker-1..worker-N")
	k := flag.Int("k", 2, "shard size")
	pattern := flag.String("models", "m%03d", "model name pattern")
	n := flag.Int("n", 50, "models 1..n")
	poison := flag.String("poison", "", "the model whose shard to compare with")
	flag.Parse()
	var ids []string
	for i := 1; i <= *workers; i++ {
		ids = append(ids, fmt.Sprintf("worker-%d", i))
	}
	ps := cluster.Shard(*poison, ids, *k)
	type row struct {
		Model   string   `json:"model"`
		Shard   []string `json:"shard"`
		Same    bool     `json:"sameShard"`    // exactly the poison's workers
		Overlap int      `json:"overlapCount"` // workers in common with the poison's shard
	}
	enc := json.NewEncoder(os.Stdout)
	same, overlap := 0, 0
	for i := 1; i <= *n; i++ {
		m := fmt.Sprintf(*pattern, i)
		if m == *poison {
			continue
		}
		s := cluster.Shard(m, ids, *k)
		r := row{Model: m, Shard: s}
		for _, id := range s {
			if slices.Contains(ps, id) {
				r.Overlap++
			}
		}
		r.Same = r.Overlap == len(ps)
		if r.Same {
			same++
		}
		if r.Overlap > 0 {
			overlap++
		}
		enc.Encode(r)
	}
	fmt.Fprintf(os.Stderr, "poison %s on %v: of %d other models, %d have the same shard, %d share at least one worker\n", *poison, ps, *n-1, same, overlap)
}
