#!/bin/sh
# Closed-loop maximum throughput (experiments 4 and 5): for each server in
# turn (Sluice churn, bare churn, Sluice fraud, FastAPI fraud), pinned to
# core 0, bench/overload --closed WORKERS (default 16) on core 1 for 5 s,
# RUNS times (default 3). A closed loop measures the most the server can do
# with WORKERS requests in flight; it is robust to the machine's noise
# (throughput, not tails), unlike the open-loop p99 <= 50 ms search.
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
W=${WORKERS:-16} RUNS=${RUNS:-3}
build_sluice
[ "${SKIP_BUILD:-0}" = 1 ] || { go build -o /tmp/issue3-bench/overload ./bench/overload; go build -o /tmp/issue3-bench/bare ./bench/bare; }
closed() { # NAME MODEL PAYLOADFILE
	$NICE taskset -c 1 /tmp/issue3-bench/overload --server "$SERVER" --model "$2" --payload "@$3" --closed "$W" --closed-duration 2s >/dev/null # warm-up
	for i in $(seq 1 "$RUNS"); do
		$NICE taskset -c 1 /tmp/issue3-bench/overload --server "$SERVER" --model "$2" --payload "@$3" \
			--closed "$W" --closed-duration 5s --json "bench/results/closed-$1-$i.json"
	done
}
start_server "${EXAMPLES:-examples}"   # EXAMPLES: the examples folder matching the binary
closed sluice-churn churn bench/churn-payload.json
closed sluice-fraud fraud bench/fraud-payload.json
stop_server
$NICE taskset -c 0 /tmp/issue3-bench/bare --addr 127.0.0.1:$PORT 2>/dev/null &
BARE=$!
sleep 0.5
closed bare-churn churn bench/churn-payload.json
kill $BARE
FRAUD_MODEL=examples/fraud/model.json $NICE taskset -c 0 /usr/bin/python3 -m uvicorn \
	--app-dir bench/fastapi app:app --host 127.0.0.1 --port $PORT \
	--workers 1 --no-access-log --log-level warning &
UV=$!
trap 'kill $UV' EXIT
for _ in $(seq 1 100); do
	curl -sf -X POST -H 'Content-Type: application/json' -d @bench/fraud-payload.json \
		"$SERVER/v1/models/fraud:predict" >/dev/null 2>&1 && break
	sleep 0.2
done
closed fastapi-fraud fraud bench/fraud-payload.json
