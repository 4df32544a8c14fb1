#!/usr/bin/env python3
"""Write N synthetic model packages for the many-models benchmarks (issue 11).

    bench/manymodels.py DIR [--n 300] [--seed 1] [--base 1ms] [--tier warm]
                        [--exit-every-rank K --exit-every M]

Models are m001..mNNN (rank 1 is the hottest under bench/overload
--models-zipf N,S --model m%03d). Each is a sleep model costing --base per
call (no batching) with a memory size drawn from 4, 8, 16, 32 MiB and a load
time uniform in 50..500 ms (whole ms), both from a seeded RNG, so hot and cold
models have mixed sizes and load times. --exit-every-rank K gives model K
"exitEvery": M (a poison model). Prints the table of sizes on stdout as
JSON lines (name, memoryMiB, loadTimeMs).
"""
import argparse, json, os, random

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--n", type=int, default=300)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--base", default="1ms")
p.add_argument("--tier", default="")
p.add_argument("--max-replicas", type=int, default=0)
p.add_argument("--exit-every-rank", type=int, default=0)
p.add_argument("--exit-every", type=int, default=50)
p.add_argument("--deadline", default="2s")
a = p.parse_args()

rng = random.Random(a.seed)
os.makedirs(a.dir, exist_ok=True)
for k in range(1, a.n + 1):
    name = "m%03d" % k
    mem = rng.choice([4, 8, 16, 32])
    load = rng.randint(50, 500)
    cost = {"base": a.base, "perInstance": "0ms", "mode": "sleep",
            "memory": "%dMiB" % mem, "loadTime": "%dms" % load}
    if k == a.exit_every_rank:
        cost["exitEvery"] = a.exit_every
    d = os.path.join(a.dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "cost.json"), "w") as f:
        json.dump(cost, f)
        f.write("\n")
    placement = ""
    if a.tier or a.max_replicas:
        placement = "placement:\n"
        if a.tier:
            placement += "  tier: %s\n" % a.tier
        if a.max_replicas:
            placement += "  maxReplicas: %d\n" % a.max_replicas
    with open(os.path.join(d, "model.yaml"), "w") as f:
        f.write(f"""name: {name}
description: synthetic {a.base} sleep model, {mem} MiB, load {load} ms (issue 11)
runtime: synthetic
artifact: cost.json
input:
  schema: synth-input@1
  fields:
    - {{name: x, type: float, min: 0, max: 1}}
output:
  schema: synth-output@1
  fields: [{{name: y}}]
serving:
  maxBatchSize: 1
  maxQueueInstances: 10000
  defaultDeadline: {a.deadline}
  memory: {mem}MiB
  warmupBatches: 1
{placement}""")
    print(json.dumps({"name": name, "memoryMiB": mem, "loadTimeMs": load}))
