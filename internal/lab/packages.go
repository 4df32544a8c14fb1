package lab

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// A synthetic model package: the "synthetic" runtime's cost file and a
// model.yaml with one float input in [0, 1].
type pkg struct {
	Name        string
	Description string
	Cost        string // cost.json
	Serving     string // the serving: block's lines, indented by two
	Placement   string // the placement: block, or ""
}

func (p pkg) write(dir string) error {
	d := filepath.Join(dir, p.Name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d, "cost.json"), []byte(p.Cost+"\n"), 0o644); err != nil {
		return err
	}
	y := fmt.Sprintf(`name: %s
description: %s (written by sluice lab)
runtime: synthetic
artifact: cost.json
input:
  schema: lab-input@1
  fields:
    - {name: x, type: float, min: 0, max: 1}
output:
  schema: lab-output@1
  fields: [{name: y}]
serving:
%s`, p.Name, p.Description, p.Serving)
	if p.Placement != "" {
		y += "placement:\n" + p.Placement
	}
	return os.WriteFile(filepath.Join(d, "model.yaml"), []byte(y), 0o644)
}

// The seed's cost curve: 1.7 ms per batch + 0.32 ms per instance, waiting
// without CPU (as an accelerator would).
const seedCost = `{"base":"1.7ms","perInstance":"0.32ms","mode":"sleep"}`

// batchPkg is experiment 1's model under one batching configuration.
func batchPkg(c BatchConfig) pkg {
	s := "  replicas: 1\n  maxBatchSize: 1\n  maxQueueInstances: 100000\n  defaultDeadline: 10s\n"
	if c.MaxBatch > 1 {
		s = fmt.Sprintf("  replicas: 1\n  maxBatchSize: %d\n  maxBatchDelay: %s\n  maxQueueInstances: 100000\n  defaultDeadline: 10s\n", c.MaxBatch, c.Delay)
	}
	return pkg{Name: c.model(), Description: "synthetic sleep model, the seed cost curve, " + c.Name(), Cost: seedCost, Serving: s}
}

// overloadPkg is experiment 2's model: 2 ms of sleep per call, no
// batching, one replica, a long default deadline (so a request that
// sends none is never refused for its deadline).
func overloadPkg() pkg {
	return pkg{Name: overloadModel, Description: "synthetic 2 ms sleep model, no batching",
		Cost:    `{"base":"2ms","perInstance":"0ms","mode":"sleep"}`,
		Serving: "  replicas: 1\n  maxBatchSize: 1\n  maxQueueInstances: 100000\n  defaultDeadline: 10s\n"}
}

const overloadModel = "overload"

// ManyModel is one of experiment 3's models.
type ManyModel struct {
	Name      string
	MemoryMiB int
	LoadTime  time.Duration
}

// ManyModels draws n models m001… (rank 1 the hottest under Zipf): memory
// 4, 8, 16 or 32 MiB and a load time uniform in 50–500 ms, from a seeded
// stream (as bench/manymodels.py does).
func ManyModels(n int, seed uint64) []ManyModel {
	rng := rand.New(rand.NewPCG(seed, 0x3a11))
	out := make([]ManyModel, n)
	for k := range out {
		out[k] = ManyModel{Name: ManyName(k + 1), MemoryMiB: []int{4, 8, 16, 32}[rng.IntN(4)],
			LoadTime: time.Duration(50+rng.IntN(451)) * time.Millisecond}
	}
	return out
}

// ManyName is the name of rank k's model.
func ManyName(k int) string { return fmt.Sprintf("m%03d", k) }

func (m ManyModel) pkg() pkg {
	return pkg{Name: m.Name, Description: fmt.Sprintf("synthetic 1 ms sleep model, %d MiB, load %v", m.MemoryMiB, m.LoadTime),
		Cost:    fmt.Sprintf(`{"base":"1ms","perInstance":"0ms","mode":"sleep","memory":"%dMiB","loadTime":"%dms"}`, m.MemoryMiB, m.LoadTime.Milliseconds()),
		Serving: fmt.Sprintf("  maxBatchSize: 1\n  maxQueueInstances: 10000\n  defaultDeadline: 2s\n  memory: %dMiB\n  warmupBatches: 1\n", m.MemoryMiB)}
}
