#!/bin/bash
# Issue 19, goals rows 5 and 6: throughput of 1-row predict calls to a
# synthetic 1 ms model (one replica, no batching) without the prediction
# cache and with it, at 0 % hits (every row new) and at 90 % hits (9 in 10
# calls repeat one of 100 warmed rows). One server holds the four models
# (bench/models/issue19: spin1ms, spin1msc, sleep1ms, sleep1msc; "c" = with
# cache:) on core SRV_CPU; bench/predcache (open loop, poisson, at most
# CONC in flight, arrivals past it dropped) offers RATE/s for DUR on core
# LOAD_CPU, so the answers per second are the most the server gives with
# CONC in flight. Per round the eight runs (2 modes x cache off/on x 0/90 %
# hits) go in an order rotating by round; ROUNDS rounds; the ratio of each
# "on" run is to the "off" run of the same round, mode and hit share.
#
#   bash bench/predcache.sh                      # ROUNDS=3, about 4 minutes
#   ROUNDS=1 DUR=1s bash bench/predcache.sh      # smoke test
#   MODES=spin HITS=0 ROUNDS=10 DUR=2s bash bench/predcache.sh   # row 5 alone
#
# OUT (default /tmp/predcache-bench): run.txt (one JSON line per run),
# server.log, meta.txt, summary.md.
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/predcache-bench}
ROUNDS=${ROUNDS:-3}
SRV_CPU=${SRV_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
NICE=${NICE-nice -n -10}
PORT=${PORT:-18470}
RATE=${RATE:-20000}
DUR=${DUR:-5s}
CONC=${CONC:-16}
MODES=${MODES:-spin sleep}
HITS=${HITS:-0 0.9}
case $ROUNDS in '' | *[!0-9]* | 0) echo "ROUNDS=$ROUNDS: want a whole number >= 1" >&2; exit 2 ;; esac
mkdir -p "$OUT/bin" || exit 1
rm -f "$OUT/run.txt"
SLUICE=${SLUICE:-$OUT/bin/sluice}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
	go build -o "$SLUICE" ./cmd/sluice || exit 1
fi
go build -o "$OUT/bin/predcache" ./bench/predcache || exit 1
{
	echo "commit $(git rev-parse --short HEAD) $(date -u +%FT%TZ)"
	echo "nproc $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "MODES='$MODES' HITS='$HITS' RATE=$RATE DUR=$DUR CONC=$CONC ROUNDS=$ROUNDS SRV_CPU=$SRV_CPU LOAD_CPU=$LOAD_CPU NICE='$NICE'"
} >"$OUT/meta.txt"
DATA=$(mktemp -d)
$NICE taskset -c "$SRV_CPU" "$SLUICE" serve --data "$DATA" --models bench/models/issue19 --addr 127.0.0.1:$PORT --no-records >"$OUT/server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 1 300); do
	curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null || { echo "server not ready: $OUT/server.log" >&2; exit 1; }

run=0
for r in $(seq 1 "$ROUNDS"); do
	set --
	for m in $MODES; do
		for h in $HITS; do
			set -- "$@" "$m:off:$h" "$m:on:$h"
		done
	done
	n=$#
	# rotate by round
	for i in $(seq 0 $((n - 1))); do
		j=$(((i + r - 1) % n + 1))
		spec=${!j}
		IFS=: read -r m c h <<<"$spec"
		model=${m}1ms
		[ "$c" = on ] && model=${m}1msc
		run=$((run + 1))
		line=$($NICE taskset -c "$LOAD_CPU" "$OUT/bin/predcache" --url "http://127.0.0.1:$PORT" --model "$model" \
			--rate "$RATE" --duration "$DUR" --conc "$CONC" --hit "$h" --seed "$run" --base $((run * 1000000)))
		echo "{\"round\":$r,\"mode\":\"$m\",\"cache\":\"$c\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"run\":$line}" | tee -a "$OUT/run.txt"
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
python3 - "$OUT/run.txt" >"$OUT/summary.md" <<'PY'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for x in rows:
    by[(x["round"], x["mode"], x["cache"], x["run"]["hit"])] = x["run"]
print("| model | hits | cache | answers/s (per round) | median | vs off, same round (per round) | median ratio | p50 median |")
print("|---|---|---|---|---|---|---|---|")
for mode in sorted({x["mode"] for x in rows}, reverse=True):
    for hit in sorted({x["run"]["hit"] for x in rows}):
        for c in ("off", "on"):
            rs = sorted(r for (r, m, cc, h) in by if m == mode and cc == c and h == hit)
            v = [by[(r, mode, c, hit)]["ok_per_s"] for r in rs]
            p50 = [by[(r, mode, c, hit)]["p50_ms"] for r in rs]
            ratio = ""
            if c == "on":
                q = [by[(r, mode, "on", hit)]["ok_per_s"] / by[(r, mode, "off", hit)]["ok_per_s"] for r in rs if (r, mode, "off", hit) in by]
                ratio = "%s | **%.2fx**" % (", ".join("%.2f" % x for x in q), st.median(q))
            else:
                ratio = " | "
            print("| %s 1 ms | %d %% | %s | %s | **%.0f** | %s | %.2f ms |" % (mode, hit * 100, c, ", ".join("%.0f" % x for x in v), st.median(v), ratio, st.median(p50)))
PY
cat "$OUT/summary.md"
