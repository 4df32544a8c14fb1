#!/bin/sh
# Overhead of metrics + prediction records + drift (issue 5): the churn
# example (which declares a drift reference) served with everything on (the
# default) and with `--no-metrics --no-records --no-drift`, alternating,
# RUNS times (default 3): closed-loop throughput (16 workers, 5 s) and p50 at
# an open-loop 200 req/s (10 s), server on core 0, load on core 1.
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${RUNS:-3}
build_sluice
[ "${SKIP_BUILD:-0}" = 1 ] || go build -o /tmp/issue3-bench/overload ./bench/overload
mkdir -p /tmp/issue5-models && rm -rf /tmp/issue5-models/churn && cp -r examples/churn /tmp/issue5-models/
for i in $(seq 1 "$RUNS"); do
	for mode in on off; do
		SERVE_FLAGS=""
		[ "$mode" = off ] && SERVE_FLAGS="--no-metrics --no-records --no-drift"
		export SERVE_FLAGS
		start_server /tmp/issue5-models
		$NICE taskset -c 1 /tmp/issue3-bench/overload --server "$SERVER" --model churn --payload @bench/churn-payload.json --closed 16 --closed-duration 2s >/dev/null
		$NICE taskset -c 1 /tmp/issue3-bench/overload --server "$SERVER" --model churn --payload @bench/churn-payload.json \
			--closed 16 --closed-duration 5s --json bench/results/overhead-$mode-closed-$i.json >/dev/null
		$NICE taskset -c 1 /tmp/issue3-bench/overload --server "$SERVER" --model churn --payload @bench/churn-payload.json \
			--phases 200:10s --seed "$i" --json bench/results/overhead-$mode-open-$i.json >/dev/null
		stop_server
	done
done
