#!/bin/sh
# maxrate.sh MODEL LO HI [STEPS]: bisect for the highest offered rate (poisson)
# whose p99 (corrected) is <= P99_MS (default 50) and whose achieved rate is
# >= 97% of offered, between LO (assumed to pass) and HI (assumed to fail).
# Each probe is RUNS runs (default 3) of DUR (default 6s); the probe passes
# when the median run passes. Needs a server already running (see lib.sh).
# Prints one line per probe and the result; per-run JSON goes to $OUT_DIR.
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
MODEL=$1 LO=$2 HI=$3 STEPS=${4:-6}
P99_MS=${P99_MS:-50} RUNS=${RUNS:-3} DUR=${DUR:-6s}
OUT_DIR=${OUT_DIR:-$(mktemp -d)}
probe() {
	rate=$1
	for i in $(seq 1 "$RUNS"); do
		load "$MODEL" --arrivals poisson --seed "$i" --rate "$rate" --duration "$DUR" --json $EXTRA >"$OUT_DIR/$MODEL-$rate-$i.json"
	done
	/usr/bin/python3 - "$P99_MS" "$rate" "$OUT_DIR"/"$MODEL-$rate"-*.json <<'PY'
import json, statistics, sys
lim, rate, files = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
rs = [json.load(open(f)) for f in files]
p99 = statistics.median(r["latency"]["p99Ms"] for r in rs)
ach = statistics.median(r["achievedRate"] for r in rs)
ok = p99 <= lim and ach >= 0.97 * rate
print(f"probe {rate:.0f}/s: median achieved {ach:.1f}/s, median p99 {p99:.2f} ms, runs p99 {[round(r['latency']['p99Ms'],2) for r in rs]}, behind {[r['fellBehind'] for r in rs]} -> {'pass' if ok else 'fail'}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}
for _ in $(seq 1 "$STEPS"); do
	mid=$(( (LO + HI) / 2 ))
	if probe "$mid"; then LO=$mid; else HI=$mid; fi
done
echo "$MODEL: highest passing rate $LO/s (first failing $HI/s)"
