#!/bin/sh
# Issue 12's goal row 7 measured as CPU per request: the churn example at
# a fixed open-loop RATE (below saturation, so every request is answered)
# with records on and with --no-records, alternating, RUNS rounds. The
# server's CPU (utime + stime of its process, from /proc) over the 8 s
# phase divided by the requests answered is its CPU per request; a
# one-core CPU-bound server's saturation throughput is the inverse, so
# cpu(off)/cpu(on) is the throughput ratio records cost, without the
# ±20 % run-to-run noise of a saturation run. Server on core 0,
# bench/overload on core 1.
set -e
SLUICE=${SLUICE:-/tmp/b12/sluice}
PORT=${PORT:-18802}
. bench/lib.sh
RUNS=${RUNS:-5} RATE=${RATE:-6000}
OUT=${OUT:-/tmp/b12/records-cpu}
OVERLOAD=${OVERLOAD:-/tmp/b12/overload}
build_sluice
[ "${SKIP_BUILD:-0}" = 1 ] || go build -o "$OVERLOAD" ./bench/overload
churn_models "$OUT"
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
for i in $(seq 1 "$RUNS"); do
	for mode in on off; do
		start_records "$mode" "$OUT" "$i"
		$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model churn --payload @bench/churn-payload.json --phases "$RATE:2s" >/dev/null
		t0=$(cpu_ticks "$SERVER_PID")
		$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model churn --payload @bench/churn-payload.json \
			--phases "$RATE:8s" --json "$OUT/$mode-$i.json" >/dev/null
		t1=$(cpu_ticks "$SERVER_PID")
		ok=$(/usr/bin/python3 -c "import json; print(json.load(open('$OUT/$mode-$i.json'))['phases'][0]['ok'])")
		echo "round $i records $mode: $ok answered, server CPU $(awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v n="$ok" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }') µs/request"
		stop_server
	done
done
