#!/bin/sh
# Worker hop at low load (issue 9), interleaved: three servers of the
# built-in examples at once, each process tree pinned to core 0 (workers
# inherit the gateway's affinity): in process (--workers 0, port 18090), one
# worker (--workers 1 --shard-size 1, 18091), two workers (--workers 2,
# 18092). RUNS (default 3) rounds of 10 s of fraud at RATE (default 200)
# req/s poisson against each in turn, load pinned to core 1, so machine
# noise hits all three alike. With SLUICE_B (a second binary, e.g. a fix),
# two more servers run it (w1b on 18093, w2b on 18094) in the same rounds.
# JSON: bench/results/workers-hop-MODE-RATE-N.json.
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${RUNS:-3}
RATE=${RATE:-200}
build_sluice
P=@bench/fraud-payload.json
PIDS= DIRS=
start() { # BINARY PORT FLAGS...
	bin=$1 port=$2; shift 2
	d=$(mktemp -d); DIRS="$DIRS $d"
	$NICE taskset -c 0 "$bin" serve --data "$d" --addr 127.0.0.1:$port "$@" >"$d/server.log" 2>&1 &
	PIDS="$PIDS $!"
	for _ in $(seq 1 300); do
		curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "server on $port did not start; see $d/server.log" >&2
	return 1
}
trap 'for p in $PIDS; do kill $p 2>/dev/null; done; wait; rm -rf $DIRS' EXIT
MODES="w0:18090 w1:18091 w2:18092"
start "$SLUICE" 18090 --workers 0
start "$SLUICE" 18091 --workers 1 --shard-size 1
start "$SLUICE" 18092 --workers 2
if [ -n "$SLUICE_B" ]; then
	start "$SLUICE_B" 18093 --workers 1 --shard-size 1
	start "$SLUICE_B" 18094 --workers 2
	MODES="$MODES w1b:18093 w2b:18094"
fi
sleep 1   # workers report their versions ready
for m in $MODES; do
	$NICE taskset -c 1 "$SLUICE" bench fraud --server http://127.0.0.1:${m##*:} --payload $P --rate 500 --duration 3s >/dev/null
done
for i in $(seq 1 "$RUNS"); do
	for m in $MODES; do
		echo "run $i ${m%%:*}: loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >&2
		$NICE taskset -c 1 "$SLUICE" bench fraud --server http://127.0.0.1:${m##*:} --payload $P --arrivals poisson --seed $i \
			--rate "$RATE" --duration 10s --json >bench/results/workers-hop-${m%%:*}-$RATE-$i.json
	done
done
/usr/bin/python3 - "$RATE" "$RUNS" $MODES <<'PY'
import json, statistics as st, sys
rate, runs, modes = sys.argv[1], int(sys.argv[2]), [m.split(":")[0] for m in sys.argv[3:]]
med = {}
for m in modes:
    rs = [json.load(open(f"bench/results/workers-hop-{m}-{rate}-{i}.json")) for i in range(1, runs + 1)]
    for k in ("latency", "uncorrectedLatency"):
        p50 = [r[k]["p50Ms"] for r in rs]; p99 = [r[k]["p99Ms"] for r in rs]
        med[m, k] = st.median(p50)
        print(f"{m} {k:18s} p50 {p50} median {st.median(p50):.3f}  p99 {p99} median {st.median(p99):.3f}  behind {[r['fellBehind'] for r in rs]}")
for m in modes[1:]:
    print(f"{m} - w0: p50 +{(med[m,'latency'] - med['w0','latency']) * 1000:.0f} us (corrected), +{(med[m,'uncorrectedLatency'] - med['w0','uncorrectedLatency']) * 1000:.0f} us (uncorrected)")
PY
