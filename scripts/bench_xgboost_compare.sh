#!/bin/sh
# Compare the Go XGBoost runtime with xgboost's own predictor on the same
# 500-tree model and 1000 rows, each pinned to one core. Runs both ROUNDS
# times, interleaved, so background load hits both alike; take the medians.
#
#   sh scripts/bench_xgboost_compare.sh [ROUNDS] [CPU]
set -eu
ROUNDS=${1:-5}
CPU=${2:-1}
cd "$(dirname "$0")/.."
go test -c -o /tmp/sluice_xgboost.test ./internal/runtime/xgboost/
i=0
while [ "$i" -lt "$ROUNDS" ]; do
	i=$((i + 1))
	echo "== round $i"
	taskset -c "$CPU" /usr/bin/python3 scripts/bench_xgboost.py
	(cd internal/runtime/xgboost && taskset -c "$CPU" /tmp/sluice_xgboost.test \
		-test.run '^$' -test.bench 'Predict500Trees|PredictSingleRow' -test.benchtime 2s -test.benchmem) |
		grep '^Benchmark'
done
