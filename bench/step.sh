#!/bin/sh
# Issue 11, step load on one model: step5ms (5 ms sleep, no batching,
# placement.maxReplicas 8, loadTime 1s) on --workers 2, open loop
# 1x -> 3x -> 1x (PHASES, default 200/s for 30 s, 600/s for 60 s, 200/s for
# 330 s, long enough to see the steps down; 1x is what the floor of 2 replicas carries at 50 %), replicas polled
# every 250 ms. RUNS runs (default 2), a fresh server each.
# Files: bench/results/step-runN.{json,svg} (the records, large, in /tmp).
set -e
# Before lib.sh, which would set its own defaults.
SLUICE=${SLUICE:-/tmp/h-bench11/sluice}
OVERLOAD=${OVERLOAD:-/tmp/h-bench11/overload}
STEPCHART=${STEPCHART:-/tmp/h-bench11/stepchart}
PORT=${PORT:-18710}
. bench/lib.sh
PHASES=${PHASES:-200:30s,600:60s,200:330s}
RUNS=${RUNS:-2}
OUT=${OUT:-/tmp/h-bench11}
SERVER_LOG=$OUT/step-server.log
if [ "${SKIP_BUILD:-0}" != 1 ]; then
	build_sluice
	go build -o "$OVERLOAD" ./bench/overload
	go build -o "$STEPCHART" ./bench/stepchart
fi
SERVE_FLAGS="--workers 2 $SERVE_FLAGS"
for i in $(seq 1 "$RUNS"); do
	echo "run $i: $(uptime)"
	SERVER_LOG=$OUT/step-server-run$i.log start_server bench/models/issue11
	# Wait until both workers hold the floor.
	sleep 5
	$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model step5ms --phases "$PHASES" --seed "$i" \
		--timeline 1s --poll-workers 250ms --json bench/results/step-run$i.json --records "$OUT/step-run$i.jsonl" >"$OUT/step-run$i.txt"
	stop_server
	"$STEPCHART" --json bench/results/step-run$i.json --records "$OUT/step-run$i.jsonl" --version step5ms@1 --slo 50ms \
		--title "step5ms on 2 workers: 1x -> 3x -> 1x (run $i)" --out bench/results/step-run$i.svg | tee "$OUT/step-run$i-goals.txt"
	echo "run $i done: $(uptime)"
done
