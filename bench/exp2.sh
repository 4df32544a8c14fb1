#!/bin/sh
# Seed lab experiment 2: sleep model with the seed's cost curve (1.7 ms +
# 0.32 ms/instance), 1 replica; batching off (sleep-nobatch) vs
# maxBatchSize 32 + maxBatchDelay 3ms (sleep-batch32). For each: a coarse
# poisson sweep (10 s per rate), then maxrate.sh bisects between the last
# passing and first failing rate (p99 <= 50 ms, achieved >= 97% offered,
# median of 3 runs of 6 s per probe).
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
build_sluice
start_server bench/models/exp2
trap stop_server EXIT
bounds() { # sweep JSON on stdin -> "LO HI"
	/usr/bin/python3 -c '
import json, sys
rs = json.load(sys.stdin)
lo, hi = 0, None
for r in rs:
    ok = r["latency"]["p99Ms"] <= 50 and r["achievedRate"] >= 0.97 * r["offeredRate"]
    if ok and hi is None: lo = int(r["offeredRate"])
    elif not ok and hi is None: hi = int(r["offeredRate"])
print(lo, hi if hi is not None else int(rs[-1]["offeredRate"]) * 2)'
}
run() { # MODEL SWEEP
	load "$1" --rate 100 --duration 2s >/dev/null
	load "$1" --arrivals poisson --sweep "$2" --duration 10s --json \
		--out bench/results/exp2-$1.svg >bench/results/exp2-$1-sweep.json
	set -- "$1" $(bounds <bench/results/exp2-$1-sweep.json)
	echo "$1: sweep says pass at $2/s, fail at $3/s; bisecting"
	bench/maxrate.sh "$1" "$2" "$3" "${STEPS:-5}"
}
run sleep-nobatch 100:600:100
run sleep-batch32 500:3500:500
