#!/bin/sh
# Sluice serving examples/fraud vs FastAPI + uvicorn + xgboost
# (bench/fastapi; run bench/fastapi/setup.sh first), same payload
# (bench/fraud-payload.json), server pinned to core 0 (so 1 uvicorn worker),
# load on core 1. Capacity as in lib.sh (p99 <= 50 ms).
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
build_sluice
P=@bench/fraud-payload.json
start_server "${EXAMPLES:-examples}"   # EXAMPLES: the examples folder matching the binary
capacity exp5-sluice fraud $P "${SWEEP_SLUICE:-1000:9000:1000}"
stop_server
FRAUD_MODEL=examples/fraud/model.json $NICE taskset -c 0 /usr/bin/python3 -m uvicorn \
	--app-dir bench/fastapi app:app --host 127.0.0.1 --port $PORT \
	--workers 1 --no-access-log --log-level warning &
UV=$!
trap 'kill $UV' EXIT
for _ in $(seq 1 100); do
	curl -sf -X POST -H 'Content-Type: application/json' -d @bench/fraud-payload.json \
		"$SERVER/v1/models/fraud:predict" >/dev/null 2>&1 && break
	sleep 0.2
done
capacity exp5-fastapi fraud $P "${SWEEP_FASTAPI:-100:1500:100}"
