#!/bin/sh
# Overload: MODEL (default spin2ms from bench/models/exp1; or
# MODEL=sleep-nobatch MODELS=bench/models/exp2) with capacity CAP req/s
# (measured in experiments 1/2) at 2x CAP for 30 s with deadlineMs 50,
# immediately followed by 10 s at 0.5x CAP, with bench/overload (keeps every
# outcome: latency by outcome, and latency per 500 ms window after the
# overload). Runs RUN_IDS (default "1 2 3"); JSON to
# bench/results/exp3-MODEL[-TAG]-runN.json. PAYLOAD: the body (default the
# synthetic {"x":0.5}; e.g. @bench/fraud-payload.json); MODELS= (empty):
# the built-in examples; SERVE_FLAGS: e.g. "--workers 2" (issue 9).
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
CAP=${CAP:?set CAP to the measured capacity, req/s}
MODEL=${MODEL:-spin2ms}
MODELS=${MODELS-bench/models/exp1}
NAME=$MODEL${TAG:+-$TAG}
RUN_IDS=${RUN_IDS:-1 2 3}
build_sluice
OVERLOAD=${OVERLOAD:-/tmp/issue3-bench/overload}
[ "${SKIP_BUILD:-0}" = 1 ] || go build -o "$OVERLOAD" ./bench/overload
start_server "$MODELS"
trap stop_server EXIT
load "$MODEL" ${PAYLOAD:+--payload "$PAYLOAD"} --rate 200 --duration 3s >/dev/null   # warm-up
for i in $RUN_IDS; do
	$NICE taskset -c 1 "$OVERLOAD" --server "$SERVER" --model "$MODEL" ${PAYLOAD:+--payload "$PAYLOAD"} --deadline-ms 50 --seed "$i" \
		--phases "$((CAP * 2)):30s,$((CAP / 2)):10s" --json bench/results/exp3-$NAME-run$i.json
	sleep 2
done
