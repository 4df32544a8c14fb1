#!/bin/sh
# Low-load latency, interleaved: Sluice (churn, port 18090) and bench/bare
# (port 18091) both pinned to core 0 and running at once (the idle one costs
# nothing); RUNS (default 3) rounds of 10 s at 200 req/s poisson against
# each in turn, so the machine's noise hits both alike.
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${RUNS:-3}
build_sluice
[ "${SKIP_BUILD:-0}" = 1 ] || go build -o /tmp/issue3-bench/bare ./bench/bare
start_server "${EXAMPLES:-examples}"   # EXAMPLES: the examples folder matching the binary
$NICE taskset -c 0 /tmp/issue3-bench/bare --addr 127.0.0.1:18091 2>/dev/null &
BARE=$!
trap 'kill $BARE; stop_server' EXIT
sleep 0.5
P=@bench/churn-payload.json
for s in $SERVER http://127.0.0.1:18091; do
	$NICE taskset -c 1 "$SLUICE" bench churn --server $s --payload $P --rate 500 --duration 3s >/dev/null
done
for i in $(seq 1 "$RUNS"); do
	for n in sluice bare; do
		s=$SERVER; [ $n = bare ] && s=http://127.0.0.1:18091
		$NICE taskset -c 1 "$SLUICE" bench churn --server $s --payload $P --arrivals poisson --seed $i \
			--rate 200 --duration 10s --json >bench/results/exp4-$n-200-$i.json
	done
done
/usr/bin/python3 - <<'PY'
import json, statistics as st
for n in ("sluice", "bare"):
    rs = [json.load(open(f"bench/results/exp4-{n}-200-{i}.json")) for i in (1, 2, 3)]
    for k in ("latency", "uncorrectedLatency"):
        print(n, k, "p50", [r[k]["p50Ms"] for r in rs], "median", st.median(r[k]["p50Ms"] for r in rs),
              "p99", [r[k]["p99Ms"] for r in rs])
PY
