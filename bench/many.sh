#!/bin/sh
# Issue 11, lab experiment 3: N (300) synthetic models (bench/manymodels.py:
# 1 ms sleep, memory 4-32 MiB, loadTime 50-500 ms), Zipf traffic (S 1.1) at
# RATE req/s for DURATION on --workers 2 whose --worker-memory budgets hold
# about a fifth of the models' memory (BUDGET per worker, default total/5/2).
# Then the 10 hottest alone (the same arrivals for ranks 1..10, others left
# out) for ALONE on a fresh server. Metrics scraped every 10 s.
# Files in OUT (default /tmp/h-bench11/many); summary: bench/many_table.py.
set -e
SLUICE=${SLUICE:-/tmp/h-bench11/sluice}
OVERLOAD=${OVERLOAD:-/tmp/h-bench11/overload}
PORT=${PORT:-18720}
. bench/lib.sh
N=${N:-300}
S=${S:-1.1}
RATE=${RATE:-200}
DURATION=${DURATION:-10m}
ALONE=${ALONE:-3m}
OUT=${OUT:-/tmp/h-bench11/many}
mkdir -p "$OUT"
rm -rf "$OUT/pkgs"
python3 bench/manymodels.py "$OUT/pkgs" --n "$N" >"$OUT/sizes.jsonl"
TOTAL=$(python3 -c 'import json,sys; print(sum(json.loads(l)["memoryMiB"] for l in open(sys.argv[1])))' "$OUT/sizes.jsonl")
BUDGET=${BUDGET:-$((TOTAL / 5 / 2))MiB}
echo "models $N, total memory ${TOTAL}MiB, budget per worker $BUDGET"
METRICS="sluice_worker_loads_total sluice_evictions_total sluice_cold_starts_total sluice_worker_memory sluice_quarantines_total sluice_requests_total"
wait_models() {
	for _ in $(seq 1 600); do
		n=$(curl -s "$SERVER/v1/models" | python3 -c 'import json,sys
d=json.load(sys.stdin); ms=d.get("models", d) if isinstance(d, dict) else d
print(len(ms))' 2>/dev/null || echo 0)
		[ "$n" -ge "$N" ] && return 0
		sleep 0.5
	done
	echo "only $n models listed" >&2
	return 1
}
run() { # TAG EXTRA...
	tag=$1
	shift
	echo "$tag: start $(uptime)"
	SERVER_LOG=$OUT/server-$tag.log SERVE_FLAGS="--workers 2 --worker-memory $BUDGET $SERVE_FLAGS" start_server "$OUT/pkgs"
	wait_models
	sleep 5
	rm -f "$OUT/metrics-$tag.jsonl"
	$NICE taskset -c 1 python3 bench/scrape.py "$SERVER" 10 "$OUT/metrics-$tag.jsonl" $METRICS &
	SCRAPE=$!
	$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model 'm%03d' --models-zipf "$N,$S" "$@" \
		--timeline 10s --json "$OUT/$tag.json" --records "$OUT/$tag.jsonl" >"$OUT/$tag.txt"
	sleep 1
	kill "$SCRAPE"
	curl -s "$SERVER/v1/workers" >"$OUT/workers-$tag.json"
	stop_server
	echo "$tag: end $(uptime)"
}
[ "${SKIP_BUILD:-0}" = 1 ] || { build_sluice; go build -o "$OVERLOAD" ./bench/overload; }
run all --phases "$RATE:$DURATION"
[ "$ALONE" = 0 ] || run top10 --phases "$RATE:$ALONE" --zipf-top 10
