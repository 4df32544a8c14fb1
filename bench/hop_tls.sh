#!/bin/sh
# The authenticated hop (issue 18, item 1): 1-row fraud through --workers 1
# --shard-size 1 with OLD (a binary before it: the plaintext hop) and NEW
# (the TLS hop with call and session secrets), and in process (OLD
# --workers 0), interleaved: RUNS (default 3) rounds of 10 s at RATE
# (default 200) req/s poisson against each in turn; servers on core 0, load
# on core 1 (as bench/workers_hop.sh). Binaries: e.g.
#   git archive ead5b24 | tar -x -C /tmp/old && (cd /tmp/old && go build -o /tmp/sluice-old ./cmd/sluice)
#   OLD=/tmp/sluice-old NEW=/tmp/sluice-new bench/hop_tls.sh
# JSON: $OUT/hop-MODE-RATE-N.json (default bench/results/hop-tls).
set -e
cd "$(dirname "$0")/.."
NICE=${NICE-nice -n -10}
RUNS=${RUNS:-3}; RATE=${RATE:-200}
: "${OLD:?OLD=binary before the authenticated hop}" "${NEW:?NEW=binary with it}"
OUT=${OUT:-bench/results/hop-tls}; mkdir -p $OUT
P=@bench/fraud-payload.json
PIDS= DIRS=
start() { bin=$1 port=$2; shift 2
	d=$(mktemp -d); DIRS="$DIRS $d"
	$NICE taskset -c 0 "$bin" serve --data "$d" --addr 127.0.0.1:$port "$@" >"$d/server.log" 2>&1 &
	PIDS="$PIDS $!"
	for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "server on $port did not start; see $d/server.log" >&2; return 1; }
trap 'for p in $PIDS; do kill $p 2>/dev/null; done; wait; rm -rf $DIRS' EXIT
start $OLD 18191 --workers 1 --shard-size 1
start $NEW 18192 --workers 1 --shard-size 1
start $OLD 18190 --workers 0
MODES="old:18191 new:18192 inproc:18190"
sleep 1
for m in $MODES; do $NICE taskset -c 1 $NEW bench fraud --server http://127.0.0.1:${m##*:} --payload $P --rate 500 --duration 3s >/dev/null; done
for i in $(seq 1 "$RUNS"); do for m in $MODES; do
	echo "run $i ${m%%:*}: loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	$NICE taskset -c 1 $NEW bench fraud --server http://127.0.0.1:${m##*:} --payload $P --arrivals poisson --seed $i \
		--rate "$RATE" --duration 10s --json >$OUT/hop-${m%%:*}-$RATE-$i.json
done; done
/usr/bin/python3 - "$OUT" "$RATE" "$RUNS" $MODES <<'PY'
import json, statistics as st, sys
out, rate, runs, modes = sys.argv[1], sys.argv[2], int(sys.argv[3]), [m.split(":")[0] for m in sys.argv[4:]]
for m in modes:
    rs = [json.load(open(f"{out}/hop-{m}-{rate}-{i}.json")) for i in range(1, runs + 1)]
    for k in ("latency", "uncorrectedLatency"):
        p50 = [r[k]["p50Ms"] for r in rs]; p99 = [r[k]["p99Ms"] for r in rs]
        print(f"{m} {k:18s} p50 {p50} median {st.median(p50):.3f}  p99 {p99} median {st.median(p99):.3f}  behind {[r['fellBehind'] for r in rs]}")
PY
