#!/bin/sh
# Issue 11, poison model: N (50) synthetic models (bench/manymodels.py, 1 ms
# sleep) on --workers 4 --shard-size 2, one of them (POISON_RANK, default 7)
# with "exitEvery": EVERY (default 50) so it kills its worker process on
# every 50th call there. Nearly uniform traffic (Zipf S 0.01) at RATE for
# DURATION. bench/shardof says which models share the poison's workers;
# bench/poison_table.py counts which models saw errors, before and after the
# quarantine (the server log's time of it).
set -e
SLUICE=${SLUICE:-/tmp/h-bench11/sluice}
OVERLOAD=${OVERLOAD:-/tmp/h-bench11/overload}
SHARDOF=${SHARDOF:-/tmp/h-bench11/shardof}
PORT=${PORT:-18730}
. bench/lib.sh
N=${N:-50}
RATE=${RATE:-250}
DURATION=${DURATION:-3m}
POISON_RANK=${POISON_RANK:-7}
EVERY=${EVERY:-50}
RUNS=${RUNS:-1}
OUT=${OUT:-/tmp/h-bench11/poison}
mkdir -p "$OUT"
rm -rf "$OUT/pkgs"
python3 bench/manymodels.py "$OUT/pkgs" --n "$N" --exit-every-rank "$POISON_RANK" --exit-every "$EVERY" >"$OUT/sizes.jsonl"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
	build_sluice
	go build -o "$OVERLOAD" ./bench/overload
	go build -o "$SHARDOF" ./bench/shardof
fi
POISON=$(printf 'm%03d' "$POISON_RANK")
"$SHARDOF" --workers 4 --k 2 --n "$N" --poison "$POISON" >"$OUT/shards.jsonl"
for i in $(seq 1 "$RUNS"); do
	echo "run $i: start $(uptime)"
	SERVER_LOG=$OUT/server-run$i.log SERVE_FLAGS="--workers 4 --shard-size 2 $SERVE_FLAGS" start_server "$OUT/pkgs"
	# Wait until every model is ready on some worker (run 1 of the doc
	# started after 5 s and its first 3 s saw not_ready from the last loads).
	for _ in $(seq 1 120); do
		n=$(curl -s "$SERVER/v1/workers" | python3 -c 'import json,sys
print(len({v["version"] for w in json.load(sys.stdin)["workers"] for v in w.get("versions", []) if v.get("state") == "ready"}))' 2>/dev/null || echo 0)
		[ "$n" -ge "$N" ] && break
		sleep 0.5
	done
	$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model 'm%03d' --models-zipf "$N,0.01" --phases "$RATE:$DURATION" --seed "$i" \
		--timeline 1s --json "$OUT/run$i.json" --records "$OUT/run$i.jsonl" >"$OUT/run$i.txt"
	curl -s "$SERVER/v1/workers" >"$OUT/workers-run$i.json"
	curl -s "$SERVER/v1/models/$POISON" >"$OUT/poison-run$i.json"
	stop_server
	echo "run $i: end $(uptime)"
done
