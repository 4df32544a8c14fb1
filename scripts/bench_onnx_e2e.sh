#!/usr/bin/env bash
# End-to-end benchmark for runtime onnx (docs/benchmarks.md, "ONNX runtime"):
# the examples/mlp MLP served with batching off (maxBatchSize 1) and on
# (maxBatchSize 64, maxBatchDelay 2ms); for each, `sluice bench --sweep`
# finds the highest offered rate whose p99 stays <= 20 ms. Server on CPU 0,
# load generator on CPU 1. Needs ONNX Runtime (scripts/fetch-onnxruntime.sh).
#
#   bash scripts/bench_onnx_e2e.sh [runs]      # default 3 runs per variant
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
export SLUICE_ONNXRUNTIME_LIB="${SLUICE_ONNXRUNTIME_LIB:-$(bash scripts/fetch-onnxruntime.sh | tail -1)}"
go build -o /tmp/sluice ./cmd/sluice
work="$(mktemp -d)"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

variant() { # name maxBatchSize maxBatchDelay(or "")
	mkdir -p "$work/$1/mlp"
	cp examples/mlp/model.onnx "$work/$1/mlp/"
	sed -e "s/maxBatchSize: 64/maxBatchSize: $2/" -e '/maxBatchDelay/d' \
		examples/mlp/model.yaml >"$work/$1/mlp/model.yaml"
	if [ -n "$3" ]; then
		sed -i "s/  maxBatchSize: $2/  maxBatchSize: $2\n  maxBatchDelay: $3/" "$work/$1/mlp/model.yaml"
	fi
}
variant off 1 ""
variant on 64 2ms

for v in off on; do
	case $v in
	off) sweep=500:4000:500 ;;
	on) sweep=1000:10000:1000 ;;
	esac
	for r in $(seq "$runs"); do
		taskset -c 0 /tmp/sluice serve --data "$(mktemp -d -p "$work")" --models "$work/$v" --addr 127.0.0.1:18095 >"$work/serve.log" 2>&1 &
		server=$!
		for _ in $(seq 100); do curl -sf http://127.0.0.1:18095/readyz >/dev/null 2>&1 && break; sleep 0.1; done
		taskset -c 1 /tmp/sluice bench mlp --server http://127.0.0.1:18095 --sweep "$sweep" --duration 10s --json >"$work/$v-$r.json"
		kill "$server"; wait "$server" 2>/dev/null || true; server=""
		/usr/bin/python3 - "$v" "$r" "$work/$v-$r.json" <<'PY'
import json, sys
v, r, path = sys.argv[1:]
res = json.load(open(path))
best = max([x["offeredRate"] for x in res if x["latency"]["p99Ms"] <= 20 and x["goodput"] >= 0.99 * x["offeredRate"]], default=0)
print(f"batching {v:3} run {r}: highest rate with p99 <= 20 ms: {best:.0f}/s   " +
      " ".join(f'{x["offeredRate"]:.0f}:{x["latency"]["p99Ms"]:.1f}ms' for x in res))
PY
	done
done
