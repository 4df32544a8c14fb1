#!/bin/sh
# Runs the hardening issue's memory attacks against a fresh `sluice serve`
# and prints the server's VmRSS (and VmHWM, its peak) before and after each.
# Usage: bench/attack/run.sh [port]
set -eu
port=${1:-18500}
dir=$(mktemp -d)
go build -o "$dir/sluice" ./cmd/sluice
go build -o "$dir/attack" ./bench/attack
"$dir/sluice" serve --addr 127.0.0.1:$port --data "$dir/data" --no-drift >"$dir/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
until curl -sf http://127.0.0.1:$port/readyz >/dev/null; do sleep 0.2; done
rss() { echo "$1: $(grep -E 'VmRSS|VmHWM' /proc/$pid/status | tr -s ' \t' ' ' | tr '\n' ' ')"; }
rss "ready"
"$dir/attack" --server http://127.0.0.1:$port literal
rss "after 300 predicts with a 1 MB literal"
"$dir/attack" --server http://127.0.0.1:$port --n ${SEED:-2000} seed
rss "after seeding the history"
"$dir/attack" --server http://127.0.0.1:$port --hold ${HOLD:-30s} history &
apid=$!
sleep 5
rss "30 clients not reading the largest history page (5s in)"
wait $apid
rss "after the history attack"
