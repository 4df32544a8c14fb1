#!/bin/sh
# Issue 12's goal row 5: the mlp example (ONNX, 30 -> 256 -> 256 -> 1) with
# batching off (maxBatchSize 1) and on (maxBatchSize 64, maxBatchDelay 2ms;
# MODES="off on opportunistic" adds maxBatchDelay 0: take what is queued),
# one row per OIP gRPC request (raw FP32), closed loop from CONCS concurrent
# clients (bench/grpcjson, core 1) against sluice serve (core 0): rows/s
# and p99 per concurrency; the figure is the most rows/s with p99 <= 20 ms.
set -e
SLUICE=${SLUICE:-/tmp/b12/sluice}
PORT=${PORT:-18780}
GPORT=${GPORT:-18781}
. bench/lib.sh
OUT=${OUT:-/tmp/b12/onnx}
CONCS=${CONCS:-1 2 4 8 16 32 64}
DURATION=${DURATION:-3s}
GRPCJSON=${GRPCJSON:-/tmp/b12/grpcjson}
# cpu_ticks PID: user + system CPU ticks of a process so far.
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
build_sluice
[ -x "$GRPCJSON" ] || go build -o "$GRPCJSON" ./bench/grpcjson
for mode in ${MODES:-off on}; do
	rm -rf "$OUT/$mode" && mkdir -p "$OUT/$mode"
	cp -r examples/mlp "$OUT/$mode/mlp"
	case $mode in
	off) sed -i 's/^  maxBatchSize: 64$/  maxBatchSize: 1/; /^  maxBatchDelay: 2ms$/d' "$OUT/$mode/mlp/model.yaml" ;;
	opportunistic) sed -i 's/^  maxBatchDelay: 2ms$/  maxBatchDelay: 0ms/' "$OUT/$mode/mlp/model.yaml" ;; # take what is queued, never wait
	esac
	grep -E 'maxBatch' "$OUT/$mode/mlp/model.yaml"
	SERVER_LOG=$OUT/server-$mode.log SERVE_FLAGS="--grpc-addr 127.0.0.1:$GPORT --onnxruntime-lib ${SLUICE_ONNXRUNTIME_LIB:?set SLUICE_ONNXRUNTIME_LIB} $SERVE_FLAGS" start_server "$OUT/$mode"
	wait_ready # until the version is loaded and warm
	for c in $CONCS; do
		# The server's CPU over the run (utime+stime ticks of its process):
		# under 100 % of its core at the best rate means the load generator,
		# not the server, set the pace.
		t0=$(cpu_ticks "$SERVER_PID") s0=$(date +%s%N)
		$NICE taskset -c 1 "$GRPCJSON" --http "$SERVER" --grpc "127.0.0.1:$GPORT" --model mlp --rows 1 \
			--concurrency "$c" --duration "$DURATION" --runs 1 | grep 'gRPC raw' | sed "s/^/batching $mode, concurrency $c /" | tr -d '\n'
		t1=$(cpu_ticks "$SERVER_PID") s1=$(date +%s%N)
		echo " server CPU $(( (t1 - t0) * 1000000000 / $(getconf CLK_TCK) * 100 / (s1 - s0) ))%"
	done
	stop_server
done
