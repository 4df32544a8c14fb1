#!/bin/sh
# Overhead: churn (linear) on Sluice (--models examples) vs bench/bare, a bare
# net/http + encoding/json server doing the same math. Same payload
# (bench/churn-payload.json), same pinning. For each: p50 at 200 req/s
# (poisson, 3 runs of 10 s), then capacity (lib.sh: sweep + bisect for the
# highest rate with p99 <= 50 ms and achieved >= 97% of offered).
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
build_sluice
[ "${SKIP_BUILD:-0}" = 1 ] || go build -o /tmp/issue3-bench/bare ./bench/bare
P=@bench/churn-payload.json
measure() { # NAME
	load churn --payload $P --rate 500 --duration 3s >/dev/null   # warm-up
	for i in 1 2 3; do
		load churn --payload $P --arrivals poisson --seed $i --rate 200 --duration 10s --json >bench/results/exp4-$1-200-$i.json
	done
	capacity exp4-$1 churn $P "${SWEEP:-1000:9000:1000}"
}
start_server "${EXAMPLES:-examples}"   # EXAMPLES: the examples folder matching the binary
measure sluice
stop_server
$NICE taskset -c 0 /tmp/issue3-bench/bare --addr 127.0.0.1:$PORT 2>/dev/null &
BARE=$!
trap 'kill $BARE' EXIT
sleep 0.5
measure bare
