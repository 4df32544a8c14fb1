#!/bin/sh
# Issue 12's goal row 7: the throughput cost of prediction records alone
# (async, the default) — the churn example served with records on and with
# --no-records (metrics and drift on in both), alternating, RUNS rounds:
# closed loop, 16 in flight, 5 s after a 2 s warm-up; server on core 0,
# bench/overload on core 1. JSON in OUT; the summary prints per-round
# throughput and the medians.
set -e
SLUICE=${SLUICE:-/tmp/b12/sluice}
PORT=${PORT:-18800}
. bench/lib.sh
RUNS=${RUNS:-5}
OUT=${OUT:-/tmp/b12/records}
OVERLOAD=${OVERLOAD:-/tmp/b12/overload}
build_sluice
[ "${SKIP_BUILD:-0}" = 1 ] || go build -o "$OVERLOAD" ./bench/overload
churn_models "$OUT"
for i in $(seq 1 "$RUNS"); do
	for mode in on off; do
		start_records "$mode" "$OUT" "$i"
		$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model churn --payload @bench/churn-payload.json --closed 16 --closed-duration 2s >/dev/null
		$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model churn --payload @bench/churn-payload.json \
			--closed 16 --closed-duration 5s --json "$OUT/$mode-$i.json" >/dev/null
		stop_server
	done
done
/usr/bin/python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
on = [json.load(open(f"{out}/on-{i}.json"))["throughput"] for i in range(1, runs + 1)]
off = [json.load(open(f"{out}/off-{i}.json"))["throughput"] for i in range(1, runs + 1)]
for i, (a, b) in enumerate(zip(on, off), 1):
    print(f"round {i}: records on {a:,.0f}/s, off {b:,.0f}/s, on/off {a / b:.3f}")
print(f"medians: on {statistics.median(on):,.0f}/s, off {statistics.median(off):,.0f}/s, "
      f"ratio of medians {statistics.median(on) / statistics.median(off):.3f}, "
      f"median of per-round ratios {statistics.median(a / b for a, b in zip(on, off)):.3f}")
PY
