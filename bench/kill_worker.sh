#!/bin/sh
# kill -9 recovery (issue 9): fraud served with --workers 2 (shard size 2:
# both workers hold it; whole tree pinned to core 0), open-loop poisson load
# at RATE req/s (default 1000: about half of the two-worker capacity, see
# docs/benchmarks.md) with deadlineMs DEADLINE_MS (default 200) from core 1
# by bench/overload in three back-to-back phases of the same rate: 5 s, 5 s
# (the "before" windows), then 15 s that start with `kill -9` of WORKER
# (default worker-1) by bench/kill_worker.py, which also times the worker's
# way back in GET /v1/workers. Runs RUN_IDS (default "1 2 3").
# Output: bench/results/kill-worker-runN.json (load, per 500 ms window) and
# kill-worker-runN-recovery.json (times after the kill).
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
RATE=${RATE:-1000}
DEADLINE_MS=${DEADLINE_MS:-200}
WORKER=${WORKER:-worker-1}
RUN_IDS=${RUN_IDS:-1 2 3}
build_sluice
[ "${SKIP_BUILD:-0}" = 1 ] || go build -o /tmp/issue3-bench/overload ./bench/overload
OVERLOAD=${OVERLOAD:-/tmp/issue3-bench/overload}
for i in $RUN_IDS; do
	SERVE_FLAGS="--workers 2" SERVER_LOG=/tmp/kill-worker-server.log start_server ""
	sleep 1
	load fraud --payload @bench/fraud-payload.json --rate 500 --duration 3s >/dev/null   # warm-up
	echo "run $i: loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
	$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model fraud --payload @bench/fraud-payload.json \
		--deadline-ms "$DEADLINE_MS" --seed "$i" --phases "$RATE:5s,$RATE:5s,$RATE:15s" --series 15s \
		--exec-at-phase "3:/usr/bin/python3 bench/kill_worker.py $SERVER $WORKER bench/results/kill-worker-run$i-recovery.json" \
		--json bench/results/kill-worker-run$i.json
	grep -E 'worker (exited|started|registered|out of|back)|version ready on worker' /tmp/kill-worker-server.log | tail -6
	stop_server
done
/usr/bin/python3 - $RUN_IDS <<'PY'
import json, sys
for i in sys.argv[1:]:
    r = json.load(open(f"bench/results/kill-worker-run{i}.json"))
    k = json.load(open(f"bench/results/kill-worker-run{i}-recovery.json"))
    before, after = r["phases"][1], r["phases"][2]
    fivexx = sum(n for p in r["phases"] for s, n in p["byStatus"].items() if s.startswith("5"))
    non2xx = sum(sum(p["byCode"].values()) for p in r["phases"])
    print(f"run {i}: 5xx {fivexx}, non-2xx {non2xx} {[p['byCode'] for p in r['phases']]}; "
          f"seen down {k.get('seenDownSeconds', -1):.3f}s, new pid {k.get('newPidSeconds', -1):.3f}s, back ready {k.get('backReadySeconds', -1):.3f}s")
    print("  before p99/500ms:", [round(w["okLatencyMs"].get("p99", 0), 2) for w in before["windows"]])
    print("  after  p99/500ms:", [round(w["okLatencyMs"].get("p99", 0), 2) for w in after["windows"]])
    print(f"  after: first 2 s p99 {after['first2sOkLatencyMs'].get('p99', 0):.2f} ms, from 2 s p99 {after['after2sOkLatencyMs'].get('p99', 0):.2f} ms; before p99 {before['okLatencyMs'].get('p99', 0):.2f} ms")
PY
