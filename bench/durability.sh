#!/bin/sh
# Cost of --records-durability durable against async (the default): the
# churn example, the two modes alternating, RUNS times (default 3):
# closed-loop throughput (16 workers, 5 s after a 2 s warm-up), then p50 at
# open-loop 200 req/s and 2,000 req/s (10 s each), server on core 0, load on
# core 1, a fresh data directory per run.
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${RUNS:-3}
build_sluice
OVERLOAD=${OVERLOAD:-/tmp/issue3-bench/overload}
[ "${SKIP_BUILD:-0}" = 1 ] || go build -o "$OVERLOAD" ./bench/overload
MODELS=$(mktemp -d) && cp -r examples/churn "$MODELS/"
for i in $(seq 1 "$RUNS"); do
	for mode in async durable; do
		SERVE_FLAGS="--records-durability $mode"
		export SERVE_FLAGS
		start_server "$MODELS"
		$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model churn --payload @bench/churn-payload.json --closed 16 --closed-duration 2s >/dev/null
		$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model churn --payload @bench/churn-payload.json \
			--closed 16 --closed-duration 5s --json bench/results/durability-$mode-closed-$i.json >/dev/null
		for rate in 200 2000; do
			$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model churn --payload @bench/churn-payload.json \
				--phases $rate:10s --seed "$i" --json bench/results/durability-$mode-open$rate-$i.json >/dev/null
		done
		stop_server
	done
done
rm -rf "$MODELS"
