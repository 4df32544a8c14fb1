#!/bin/sh
# Compare the Go sklearn runtime with scikit-learn's own predict_proba on
# the same 500-tree HistGradientBoostingClassifier and 1000 rows, and with
# the Go xgboost runtime on its benchmark of the same shape (500 trees of
# depth 6, 30 features, 5% missing, 1000 rows), each pinned to one core.
# Runs them ROUNDS times, interleaved, so background load hits all alike;
# take the medians. Needs testdata/bench500.joblib: run
# /usr/bin/python3 scripts/make_sklearn_fixtures.py --bench once first.
#
#   sh scripts/bench_sklearn_compare.sh [ROUNDS] [CPU]
set -eu
ROUNDS=${1:-5}
CPU=${2:-1}
cd "$(dirname "$0")/.."
go test -c -o /tmp/sluice_sklearn.test ./internal/runtime/sklearn/
go test -c -o /tmp/sluice_xgboost.test ./internal/runtime/xgboost/
i=0
while [ "$i" -lt "$ROUNDS" ]; do
	i=$((i + 1))
	echo "== round $i"
	taskset -c "$CPU" /usr/bin/python3 scripts/bench_sklearn.py
	(cd internal/runtime/sklearn && taskset -c "$CPU" /tmp/sluice_sklearn.test \
		-test.run '^$' -test.bench 'Predict500Trees|PredictSingleRow' -test.benchtime 2s -test.benchmem) |
		sed -n 's/^Benchmark/sklearn runtime: Benchmark/p'
	(cd internal/runtime/xgboost && taskset -c "$CPU" /tmp/sluice_xgboost.test \
		-test.run '^$' -test.bench 'Predict500Trees|PredictSingleRow' -test.benchtime 2s -test.benchmem) |
		sed -n 's/^Benchmark/xgboost runtime: Benchmark/p'
done
