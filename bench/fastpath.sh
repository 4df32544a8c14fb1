#!/bin/sh
# Issue 12's goals, rows 1 and 2: 1,000-row requests to a 500-tree XGBoost
# model (30 float features; bench/models/issue12/trees500 with
# internal/runtime/xgboost/testdata/bench500.ubj) as /v1 JSON and as OIP
# gRPC raw FP32 (bench/grpcjson: closed loop, CONC clients, DURATION per
# measurement) against `sluice serve` on core 0, and xgboost's own
# inplace_predict with nthread=1 (scripts/bench_xgboost.py) on core 1,
# ROUNDS times interleaved; take the medians. Files in OUT.
set -e
SLUICE=${SLUICE:-/tmp/b12/sluice}
PORT=${PORT:-18750}
GPORT=${GPORT:-18751}
. bench/lib.sh
OUT=${OUT:-/tmp/b12/fast}
ROUNDS=${ROUNDS:-3}
CONC=${CONC:-4}
DURATION=${DURATION:-5s}
ROWS=${ROWS:-1000}
GRPCJSON=${GRPCJSON:-/tmp/b12/grpcjson}
mkdir -p "$OUT/pkgs/trees500"
cp bench/models/issue12/trees500/model.yaml internal/runtime/xgboost/testdata/bench500.ubj "$OUT/pkgs/trees500/"
build_sluice
go build -o "$GRPCJSON" ./bench/grpcjson
r=0
while [ "$r" -lt "$ROUNDS" ]; do
	r=$((r + 1))
	echo "== round $r $(uptime)"
	SERVER_LOG=$OUT/server-$r.log SERVE_FLAGS="--grpc-addr 127.0.0.1:$GPORT $SERVE_FLAGS" start_server "$OUT/pkgs"
	wait_ready # until the version is loaded and warm
	$NICE taskset -c 1 "$GRPCJSON" --http "$SERVER" --grpc "127.0.0.1:$GPORT" --model trees500 --rows "$ROWS" \
		--concurrency "$CONC" --duration "$DURATION" --runs 1 | tee "$OUT/grpcjson-$r.txt"
	stop_server
	$NICE taskset -c 1 /usr/bin/python3 scripts/bench_xgboost.py | tee "$OUT/xgboost-$r.txt"
done
