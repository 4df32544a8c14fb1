#!/bin/sh
# probe.sh MODELS_DIR MODEL RATE...: start a server on MODELS_DIR and, for
# each RATE, RUNS (default 3) poisson runs of DUR (default 6s); prints the
# median achieved rate and p99 per rate (pass: p99 <= 50 ms and achieved
# >= 97% of offered). Used to confirm the capacity of experiment 2 at chosen
# rates, since the sweep's pass/fail is not monotonic on this noisy machine.
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
D=$1 M=$2
shift 2
RUNS=${RUNS:-3} DUR=${DUR:-6s}
build_sluice
start_server "$D"
trap stop_server EXIT
load "$M" --rate 200 --duration 2s >/dev/null
for rate in "$@"; do
	for i in $(seq 1 "$RUNS"); do
		load "$M" --arrivals poisson --seed "$i" --rate "$rate" --duration "$DUR" --json >"bench/results/probe-$M-$rate-$i.json"
	done
	/usr/bin/python3 - "$rate" bench/results/probe-$M-$rate-*.json <<'PY'
import json, statistics, sys
rate, rs = float(sys.argv[1]), [json.load(open(f)) for f in sys.argv[2:]]
p99 = statistics.median(r["latency"]["p99Ms"] for r in rs)
ach = statistics.median(r["achievedRate"] for r in rs)
ok = p99 <= 50 and ach >= 0.97 * rate
print(f"{rate:.0f}/s: median achieved {ach:.1f}/s, p99 {p99:.2f} ms (runs {[round(r['latency']['p99Ms'], 1) for r in rs]}, p50 {[round(r['latency']['p50Ms'], 2) for r in rs]}) -> {'pass' if ok else 'fail'}")
PY
done
