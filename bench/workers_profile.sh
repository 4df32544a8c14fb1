#!/bin/sh
# Where the worker hop's time goes (issue 9): serve the built-in examples
# with MODE_FLAGS (default "--workers 1 --shard-size 1"; "--workers 0" for
# the in-process baseline), tree pinned to core 0; fraud at RATE (default
# 1000) req/s poisson for 16 s from core 1; over 10 s of it, CPU time of
# every process of the tree (utime+stime from /proc, per request) and a
# perf CPU profile (call graphs by frame pointer) of each.
# Output: bench/results/workers-profile-TAG-{cpu.txt,PROCESS.perf.txt}.
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
MODE_FLAGS=${MODE_FLAGS:---workers 1 --shard-size 1}
RATE=${RATE:-1000}
TAG=${TAG:-w1}
build_sluice
SERVE_FLAGS="$MODE_FLAGS" SERVER_LOG=/tmp/workers-profile-server.log start_server ""
trap stop_server EXIT
sleep 1
load fraud --payload @bench/fraud-payload.json --rate 500 --duration 3s >/dev/null
tree="$SERVER_PID $(pgrep -P "$SERVER_PID" || true)"
cpu() { for p in $tree; do awk -v p=$p '{print p, $14 + $15}' /proc/$p/stat; done; }
load fraud --payload @bench/fraud-payload.json --arrivals poisson --rate "$RATE" --duration 16s --json \
	>bench/results/workers-profile-$TAG-load.json &
LOAD=$!
sleep 3
cpu >/tmp/workers-profile-cpu0
n=0
for p in $tree; do
	taskset -c 1 perf record -q -F 1999 -g -p $p -o /tmp/workers-profile-$p.data -- sleep 10 2>/dev/null &
	taskset -c 1 perf stat -x, -e context-switches,raw_syscalls:sys_enter -p $p -o /tmp/workers-profile-$p.stat -- sleep 10 &
done
sleep 10
cpu >/tmp/workers-profile-cpu1
wait $LOAD
sleep 1
hz=$(getconf CLK_TCK)
{
	echo "mode: $MODE_FLAGS, fraud at $RATE req/s; CPU over 10 s (ticks of 1/$hz s)"
	join /tmp/workers-profile-cpu0 /tmp/workers-profile-cpu1 | while read p a b; do
		echo "pid $p ($(tr '\0' ' ' </proc/$p/cmdline | cut -c1-60)): $(( (b - a) * 1000 / hz )) ms CPU in 10 s = $(( (b - a) * 1000000 / hz / 10 / RATE )) us per request"
		awk -F, -v r=$RATE '$1 ~ /^[0-9]/ {printf "    %s: %.1f per request\n", $3, $1 / 10 / r}' /tmp/workers-profile-$p.stat
	done
} | tee bench/results/workers-profile-$TAG-cpu.txt
n=0
for p in $tree; do
	name=gateway; [ "$p" = "$SERVER_PID" ] || { n=$((n + 1)); name=worker$n; }
	perf report -q -i /tmp/workers-profile-$p.data --no-children --sort symbol --percent-limit 0.7 2>/dev/null | grep -v '^$' \
		>bench/results/workers-profile-$TAG-$name.perf.txt
	perf report -q -i /tmp/workers-profile-$p.data --children --sort symbol --percent-limit 3 -g none 2>/dev/null | grep -v '^$' \
		>bench/results/workers-profile-$TAG-$name.children.txt
	perf report -q -i /tmp/workers-profile-$p.data --no-children --sort dso 2>/dev/null | grep -v '^$' | head -8 \
		>bench/results/workers-profile-$TAG-$name.dso.txt
	rm -f /tmp/workers-profile-$p.data /tmp/workers-profile-$p.stat
done
