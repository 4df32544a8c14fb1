#!/bin/sh
# Issue 12's goal row 6: 1-row fraud requests, saturation throughput of
# `sluice serve` (the embedded examples, defaults: records, metrics on)
# against bench/barefraud (net/http + encoding/json + the same XGBoost
# runtime, nothing else), each pinned to core 0 in turn, RUNS interleaved
# rounds of a closed loop with WORKERS requests in flight for 5 s
# (bench/overload on core 1). JSON in OUT.
set -e
SLUICE=${SLUICE:-/tmp/b12/sluice}
PORT=${PORT:-18795}
. bench/lib.sh
OUT=${OUT:-/tmp/b12/bare}
W=${WORKERS:-16} RUNS=${RUNS:-3}
OVERLOAD=${OVERLOAD:-/tmp/b12/overload}
BARE=${BARE:-/tmp/b12/barefraud}
mkdir -p "$OUT"
build_sluice
[ "${SKIP_BUILD:-0}" = 1 ] || { go build -o "$OVERLOAD" ./bench/overload; go build -o "$BARE" ./bench/barefraud; }
closed() { # NAME
	$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model fraud --payload @bench/fraud-payload.json --closed "$W" --closed-duration 2s >/dev/null # warm-up
	$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model fraud --payload @bench/fraud-payload.json \
		--closed "$W" --closed-duration 5s --json "$OUT/$1.json" | grep -iE 'throughput|achieved|req/s' | head -3 | sed "s/^/$1: /"
}
for i in $(seq 1 "$RUNS"); do
	SERVER_LOG=$OUT/server-$i.log start_server examples
	wait_ready
	closed "sluice-$i"
	stop_server
	$NICE taskset -c 0 "$BARE" --addr 127.0.0.1:$PORT 2>/dev/null &
	B=$!
	for _ in $(seq 1 100); do
		curl -sf -X POST -d @bench/fraud-payload.json "$SERVER/v1/models/fraud:predict" >/dev/null 2>&1 && break
		sleep 0.1
	done
	closed "bare-$i"
	kill $B; wait $B 2>/dev/null || true
done
