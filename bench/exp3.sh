#!/bin/sh
# Overload: spin2ms (capacity CAP req/s, measured in experiment 1) at 2x CAP
# for 30 s with deadlineMs 50, immediately followed by 10 s at 0.5x CAP,
# with bench/overload (keeps every outcome: latency by outcome, and latency
# per 500 ms window after the overload). RUNS runs (default 3).
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
CAP=${CAP:?set CAP to the measured capacity, req/s}
RUNS=${RUNS:-3}
build_sluice
go build -o /tmp/issue3-bench/overload ./bench/overload
start_server bench/models/exp1
trap stop_server EXIT
load spin2ms --rate 200 --duration 3s >/dev/null   # warm-up
for i in $(seq 1 "$RUNS"); do
	$NICE taskset -c 1 /tmp/issue3-bench/overload --server "$SERVER" --model spin2ms --deadline-ms 50 --seed "$i" \
		--phases "$((CAP * 2)):30s,$((CAP / 2)):10s" --json bench/results/exp3-run$i.json
	sleep 2
done
