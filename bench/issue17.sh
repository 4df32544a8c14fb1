#!/bin/bash
# Issue 17, item 7: every fast-path figure, in process (--workers 0, "w0")
# and with --workers 2 ("w2"), in one run, and one summary table (figure,
# in-process, workers 2, goal, met?) from bench/issue17_table.py.
#
#   bash bench/issue17.sh                       # full: ROUNDS=3, about 12 min
#   ROUNDS=1 SHORT=1 bash bench/issue17.sh      # smoke test: 1-2 s per measurement
#   python3 bench/issue17_table.py /tmp/i17     # the table again from the raw files
#
# Steps (STEPS, default all four, in this order), each ROUNDS interleaved
# rounds, the mode order alternating by round, every ratio taken against a
# baseline measured in the same round:
#   hop       fraud at HOP_RATE (200) req/s poisson, open loop (bench/overload:
#             latency from the intended send time), w0 and w2 servers up at
#             once and measured in turn (as bench/workers_hop.sh): p50 and the
#             hop = p50(w2) - p50(w0) per round. Goal <= 0.1 ms.
#   overload  spin2ms (bench/models/exp1: 2 ms of CPU, one replica) with
#             OVERLOAD_FLAGS (default --model-sched idle), per mode and round
#             on a fresh server: CAP = a closed loop of CAP_CLIENTS (8) for
#             CAP_DUR (unless CAP, or CAP_W0 / CAP_W2, is set: then that),
#             the refusal floor (everything refused at once: --deadline-ms 1
#             at FLOOR_RATE 900/s), then 2xCAP for 30 s and CAP/2 for 10 s
#             with deadlineMs 50 (as bench/exp3.sh). Goals: refused (429/503)
#             p99 <= 1 ms, goodput (2xx within 50 ms) >= 0.95 CAP, no 504.
#   fastpath  1,000-row requests to trees500 (bench/models/issue12, 30 float
#             features, 500 trees) as /v1 JSON and OIP gRPC raw FP32
#             (bench/grpcjson, closed loop of CONC 4) per mode, and xgboost's
#             own inplace_predict nthread=1 (scripts/bench_xgboost.py) on the
#             load core between them (as bench/fastpath.sh). Goals: JSON
#             >= 0.8x and gRPC >= 1.2x xgboost.
#   fraud     1-row fraud saturation: closed loop of FRAUD_CLIENTS (16) for
#             FRAUD_DUR after a warm-up, sluice serve (the examples) per mode
#             and bench/barefraud between them (as bench/fraud_bare.sh).
#             Goal >= 0.7x bare.
#
# Servers (and the workers they start) run on core SRV_CPU (0), the load
# generators and xgboost on LOAD_CPU (1), all at NICE (nice -n -10; NICE=
# turns it off). Each server is its own process group, stopped at the end
# of its measurement and by a trap on exit or interrupt. Ports BASE_PORT
# (18170) .. BASE_PORT+6, away from the other bench scripts' (18090-18094,
# 18750, 18795). A failed step says which step and what it was doing, the
# others still run, and the exit status is 1.
#
# Binaries are built once into OUT/bin from this checkout; SKIP_BUILD=1
# uses SLUICE=path as is (and OVERLOAD, GRPCJSON, BARE when given; the
# bench tools missing from OUT/bin are built anyway). Raw outputs, server
# logs, meta.txt (commit, load average) and summary.md / summary.json in
# OUT (default /tmp/i17; earlier results there are replaced, except with
# KEEP=1 those of the steps not in STEPS).
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
OUT=${OUT:-/tmp/i17}
ROUNDS=${ROUNDS:-3}
SHORT=${SHORT:-0}
STEPS=${STEPS:-hop overload fastpath fraud}
BASE_PORT=${BASE_PORT:-18170}
SRV_CPU=${SRV_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
NICE=${NICE-nice -n -10}
READY_TIMEOUT=${READY_TIMEOUT:-120}
OVERLOAD_FLAGS=${OVERLOAD_FLAGS---model-sched idle}

# dur FULL SHORT: the duration of a measurement.
dur() { if [ "$SHORT" = 1 ]; then echo "$2"; else echo "$1"; fi; }
WARM=${WARM:-$(dur 3s 1s)}
HOP_RATE=${HOP_RATE:-200}
HOP_DUR=${HOP_DUR:-$(dur 10s 2s)}
CAP_CLIENTS=${CAP_CLIENTS:-8}
CAP_DUR=${CAP_DUR:-$(dur 5s 1s)}
FLOOR_RATE=${FLOOR_RATE:-900}
FLOOR_DUR=${FLOOR_DUR:-$(dur 5s 1s)}
OVER_DUR=${OVER_DUR:-$(dur 30s 2s)}
AFTER_DUR=${AFTER_DUR:-$(dur 10s 1s)}
CONC=${CONC:-4}
ROWS=${ROWS:-1000}
FAST_DUR=${FAST_DUR:-$(dur 5s 1s)}
FRAUD_CLIENTS=${FRAUD_CLIENTS:-16}
FRAUD_DUR=${FRAUD_DUR:-$(dur 5s 1s)}

case $ROUNDS in '' | *[!0-9]* | 0) echo "ROUNDS=$ROUNDS: want a whole number >= 1" >&2; exit 2 ;; esac
for s in $STEPS; do
	case $s in hop | overload | fastpath | fraud) ;; *) echo "STEPS: unknown step '$s' (want some of: hop overload fastpath fraud)" >&2; exit 2 ;; esac
done
for c in CAP CAP_W0 CAP_W2; do
	v=${!c}
	case $v in '') ;; *[!0-9]* | 0) echo "$c=$v: want req/s as a whole number >= 1 (or unset it to measure)" >&2; exit 2 ;; esac
done

mkdir -p "$OUT/bin" || exit 1
BIN=$(cd "$OUT/bin" && pwd)
PIDS=$OUT/.servers # "PID DATA-DIR" of every server still up
: >"$PIDS"

# kill_group PID: TERM to the server (a gateway stops its own workers), then
# after 10 s KILL to its whole process group (anything left of the tree).
kill_group() {
	kill -TERM "$1" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL -- "-$1" 2>/dev/null || kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
stop_all() {
	while read -r pid dir; do
		[ -n "$pid" ] && kill_group "$pid"
		[ -n "$dir" ] && rm -rf "$dir"
	done <"$PIDS"
	: >"$PIDS"
}
LOADS=$OUT/.loads # PIDs of the load generators running
: >"$LOADS"
STEP_PID=
cleanup() {
	[ -n "$STEP_PID" ] && kill -TERM "$STEP_PID" 2>/dev/null
	while read -r pid; do
		[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
	done <"$LOADS"
	stop_all
}
trap cleanup EXIT
trap 'echo "interrupted: stopping the servers" >&2; exit 130' INT TERM

# at WHAT: what the current step is doing (said when it fails).
at() { echo "$*" >"$STEP_DIR/.at"; echo "  $* (load average $(cut -d' ' -f1-3 /proc/loadavg))"; echo "$STEP $* $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/loadavg.txt"; }

port_free() {
	if ss -ltn "sport = :$1" | grep -q LISTEN; then
		echo "port $1 is already in use (set BASE_PORT to move this script's ports)" >&2
		return 1
	fi
}

# started PID [DIR]: remember a server for stop_all; stop PID: stop it now.
started() { echo "$1 $2" >>"$PIDS"; }
stop() {
	local pid=$1 dir
	dir=$(awk -v p="$pid" '$1 == p {print $2}' "$PIDS")
	kill_group "$pid"
	[ -n "$dir" ] && rm -rf "$dir"
	awk -v p="$pid" '$1 != p' "$PIDS" >"$PIDS.new" && mv "$PIDS.new" "$PIDS"
}

# wait_up PID URL [BODY]: until URL answers 200 (POST BODY when given),
# the process still alive, at most READY_TIMEOUT s.
wait_up() {
	local pid=$1 url=$2 body=$3 i
	for i in $(seq 1 $((READY_TIMEOUT * 10))); do
		kill -0 "$pid" 2>/dev/null || { echo "the server exited before it was ready" >&2; return 1; }
		if [ -n "$body" ]; then
			curl -sf -o /dev/null -H 'Content-Type: application/json' -d "$body" "$url" 2>/dev/null && return 0
		else
			curl -sf -o /dev/null "$url" 2>/dev/null && return 0
		fi
		sleep 0.1
	done
	echo "no 200 from $url after ${READY_TIMEOUT}s" >&2
	return 1
}

# serve NAME PORT FLAGS...: sluice serve on SRV_CPU in its own process
# group, log STEP_DIR/NAME.log; waits for /readyz. Sets SRV.
serve() {
	local name=$1 port=$2 d
	shift 2
	port_free "$port" || return 1
	d=$(mktemp -d "$OUT/data.XXXXXX")
	$NICE taskset -c "$SRV_CPU" setsid "$SLUICE" serve --data "$d" --addr "127.0.0.1:$port" --grace 5s $SERVE_FLAGS "$@" \
		>"$STEP_DIR/$name.log" 2>&1 &
	SRV=$!
	started "$SRV" "$d"
	wait_up "$SRV" "http://127.0.0.1:$port/readyz" || { echo "server $name: see $STEP_DIR/$name.log:" >&2; tail -5 "$STEP_DIR/$name.log" >&2; return 1; }
}

# load CMD...: a load generator on LOAD_CPU, remembered for cleanup.
load() {
	local p rc=0
	$NICE taskset -c "$LOAD_CPU" "$@" &
	p=$!
	echo "$p" >>"$LOADS"
	wait "$p" || rc=$?
	awk -v p="$p" '$1 != p' "$LOADS" >"$LOADS.new" && mv "$LOADS.new" "$LOADS"
	return $rc
}
# modes ROUND: w0 w2 in odd rounds, w2 w0 in even ones.
modes() { if [ $(($1 % 2)) = 1 ]; then echo w0 w2; else echo w2 w0; fi; }
flags() { if [ "$1" = w0 ]; then echo --workers 0; else echo --workers 2; fi; }
# jget FILE EXPR: a value from a JSON file (python expression on j).
jget() { /usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

FRAUD_BODY=$(cat bench/fraud-payload.json)
SPIN_BODY='{"instances":[{"x":0.5}]}'

step_build() {
	if [ "${SKIP_BUILD:-0}" = 1 ]; then
		SLUICE=${SLUICE:?SKIP_BUILD=1 needs SLUICE=path of the sluice binary}
		at "SKIP_BUILD=1: using $SLUICE"
		[ -x "$SLUICE" ] || { echo "SLUICE=$SLUICE is not an executable" >&2; return 1; }
	else
		at "go build ./cmd/sluice -> $BIN/sluice"
		go build -o "$BIN/sluice" ./cmd/sluice
	fi
	for t in overload grpcjson barefraud; do
		[ "${SKIP_BUILD:-0}" = 1 ] && [ -x "$BIN/$t" ] && continue
		at "go build ./bench/$t -> $BIN/$t"
		go build -o "$BIN/$t" "./bench/$t"
	done
	if [[ " $STEPS " == *" fastpath "* ]]; then
		at "check python3 xgboost"
		/usr/bin/python3 -c 'import xgboost, numpy' || { echo "scripts/bench_xgboost.py needs xgboost: apt-get install -y python3-xgboost python3-numpy" >&2; return 1; }
	fi
}

step_hop() {
	local w0p=$BASE_PORT w2p=$((BASE_PORT + 1)) i m port
	at "start w0 (--workers 0) on $w0p"
	serve w0 "$w0p" --workers 0
	wait_up "$SRV" "http://127.0.0.1:$w0p/v1/models/fraud:predict" "$FRAUD_BODY"
	at "start w2 (--workers 2) on $w2p"
	serve w2 "$w2p" --workers 2
	wait_up "$SRV" "http://127.0.0.1:$w2p/v1/models/fraud:predict" "$FRAUD_BODY"
	for m in w0 w2; do
		port=$w0p && [ $m = w2 ] && port=$w2p
		at "warm-up $m: 500/s for $WARM"
		load "$OVERLOAD" --server "http://127.0.0.1:$port" --model fraud --payload @bench/fraud-payload.json --phases "500:$WARM" >/dev/null
	done
	for i in $(seq 1 "$ROUNDS"); do
		for m in $(modes "$i"); do
			port=$w0p && [ $m = w2 ] && port=$w2p
			at "round $i $m: fraud $HOP_RATE/s poisson for $HOP_DUR"
			load "$OVERLOAD" --server "http://127.0.0.1:$port" --model fraud --payload @bench/fraud-payload.json \
				--seed "$i" --phases "$HOP_RATE:$HOP_DUR" --json "$STEP_DIR/$m-$i.json" >"$STEP_DIR/$m-$i.txt"
		done
	done
}

step_overload() {
	local port=$((BASE_PORT + 2)) i m cap src url
	url=http://127.0.0.1:$port/v1/models/spin2ms:predict
	for i in $(seq 1 "$ROUNDS"); do
		for m in $(modes "$i"); do
			at "round $i $m: start spin2ms server ($(flags $m) $OVERLOAD_FLAGS)"
			serve "$m-$i" "$port" $(flags $m) $OVERLOAD_FLAGS --models bench/models/exp1
			wait_up "$SRV" "$url" "$SPIN_BODY"
			at "round $i $m: warm-up, closed loop of $CAP_CLIENTS for $WARM"
			load "$OVERLOAD" --server "http://127.0.0.1:$port" --model spin2ms --closed "$CAP_CLIENTS" --closed-duration "$WARM" >/dev/null
			cap=$CAP src=env
			[ $m = w0 ] && [ -n "$CAP_W0" ] && cap=$CAP_W0
			[ $m = w2 ] && [ -n "$CAP_W2" ] && cap=$CAP_W2
			if [ -z "$cap" ]; then
				at "round $i $m: capacity, closed loop of $CAP_CLIENTS for $CAP_DUR"
				load "$OVERLOAD" --server "http://127.0.0.1:$port" --model spin2ms --closed "$CAP_CLIENTS" --closed-duration "$CAP_DUR" \
					--json "$STEP_DIR/cap-$m-$i.json" >"$STEP_DIR/cap-$m-$i.txt"
				cap=$(jget "$STEP_DIR/cap-$m-$i.json" 'int(j["throughput"])')
				src="measured (closed loop of $CAP_CLIENTS, $CAP_DUR)"
				[ "$cap" -ge 2 ] || { echo "capacity measured as $cap/s; see $STEP_DIR/cap-$m-$i.txt" >&2; return 1; }
			fi
			echo "$cap $src" >"$STEP_DIR/cap-$m-$i.cap"
			at "round $i $m: refusal floor, --deadline-ms 1 at $FLOOR_RATE/s for $FLOOR_DUR"
			load "$OVERLOAD" --server "http://127.0.0.1:$port" --model spin2ms --deadline-ms 1 --seed "$i" \
				--phases "$FLOOR_RATE:$FLOOR_DUR" --json "$STEP_DIR/floor-$m-$i.json" >"$STEP_DIR/floor-$m-$i.txt"
			sleep 1
			at "round $i $m: overload $((cap * 2))/s for $OVER_DUR then $((cap / 2))/s for $AFTER_DUR, deadlineMs 50 (CAP $cap, $src)"
			load "$OVERLOAD" --server "http://127.0.0.1:$port" --model spin2ms --deadline-ms 50 --seed "$i" \
				--phases "$((cap * 2)):$OVER_DUR,$((cap / 2 > 0 ? cap / 2 : 1)):$AFTER_DUR" \
				--json "$STEP_DIR/over-$m-$i.json" >"$STEP_DIR/over-$m-$i.txt"
			at "round $i $m: stop"
			stop "$SRV"
		done
	done
}

step_fastpath() {
	local port=$((BASE_PORT + 3)) gport=$((BASE_PORT + 4)) i m pkgs=$OUT/fastpath/pkgs
	mkdir -p "$pkgs/trees500"
	cp bench/models/issue12/trees500/model.yaml internal/runtime/xgboost/testdata/bench500.ubj "$pkgs/trees500/"
	for i in $(seq 1 "$ROUNDS"); do
		set -- $(modes "$i")
		for m in "$1" xgb "$2"; do
			if [ $m = xgb ]; then
				at "round $i: xgboost inplace_predict nthread=1 (scripts/bench_xgboost.py)"
				load /usr/bin/python3 scripts/bench_xgboost.py >"$STEP_DIR/xgboost-$i.txt"
				continue
			fi
			at "round $i $m: start trees500 server ($(flags $m), gRPC on $gport)"
			serve "$m-$i" "$port" $(flags $m) --models "$pkgs" --grpc-addr "127.0.0.1:$gport"
			at "round $i $m: warm-up, $ROWS rows for $WARM"
			load "$GRPCJSON" --http "http://127.0.0.1:$port" --grpc "127.0.0.1:$gport" --model trees500 --rows "$ROWS" \
				--concurrency "$CONC" --duration "$WARM" --runs 1 >/dev/null
			at "round $i $m: $ROWS rows, /v1 JSON and gRPC raw FP32, $CONC clients, $FAST_DUR each"
			load "$GRPCJSON" --http "http://127.0.0.1:$port" --grpc "127.0.0.1:$gport" --model trees500 --rows "$ROWS" \
				--concurrency "$CONC" --duration "$FAST_DUR" --runs 1 >"$STEP_DIR/grpcjson-$m-$i.txt"
			at "round $i $m: stop"
			stop "$SRV"
		done
	done
}

step_fraud() {
	local port=$((BASE_PORT + 5)) bport=$((BASE_PORT + 6)) i m url
	for i in $(seq 1 "$ROUNDS"); do
		set -- $(modes "$i")
		for m in "$1" bare "$2"; do
			if [ $m = bare ]; then
				at "round $i bare: start bench/barefraud on $bport"
				port_free "$bport"
				$NICE taskset -c "$SRV_CPU" setsid "$BARE" --addr "127.0.0.1:$bport" >"$STEP_DIR/bare-$i.log" 2>&1 &
				SRV=$!
				started "$SRV"
				url=http://127.0.0.1:$bport
			else
				at "round $i $m: start the examples ($(flags $m))"
				serve "$m-$i" "$port" $(flags $m)
				url=http://127.0.0.1:$port
			fi
			wait_up "$SRV" "$url/v1/models/fraud:predict" "$FRAUD_BODY"
			at "round $i $m: warm-up, closed loop of $FRAUD_CLIENTS for $WARM"
			load "$OVERLOAD" --server "$url" --model fraud --payload @bench/fraud-payload.json --closed "$FRAUD_CLIENTS" --closed-duration "$WARM" >/dev/null
			at "round $i $m: closed loop of $FRAUD_CLIENTS for $FRAUD_DUR"
			load "$OVERLOAD" --server "$url" --model fraud --payload @bench/fraud-payload.json --closed "$FRAUD_CLIENTS" \
				--closed-duration "$FRAUD_DUR" --json "$STEP_DIR/$m-$i.json" >"$STEP_DIR/$m-$i.txt"
			at "round $i $m: stop"
			stop "$SRV"
		done
	done
}

# run_step NAME: step_NAME in a subshell with set -e; a failure is reported
# with what the step was doing, and the run goes on.
FAILED=
run_step() {
	STEP=$1 STEP_DIR=$OUT/$1
	rm -rf "$STEP_DIR" && mkdir -p "$STEP_DIR"
	echo "== step $STEP ($(date -u +%H:%M:%S) UTC)"
	local t0=$SECONDS rc
	# In the background, so that an interrupt reaches the trap at once.
	(
		set -e
		trap stop_all EXIT
		"step_$STEP"
	) &
	STEP_PID=$!
	rc=0
	wait "$STEP_PID" || rc=$?
	STEP_PID=
	if [ $rc != 0 ]; then
		echo "FAILED: step $STEP (exit $rc) while: $(cat "$STEP_DIR/.at" 2>/dev/null); files in $STEP_DIR" >&2
		echo "$STEP: $(cat "$STEP_DIR/.at" 2>/dev/null) (exit $rc)" >>"$OUT/failed.txt"
		FAILED="$FAILED $STEP"
	fi
	echo "   step $STEP: $((SECONDS - t0)) s"
	return $rc
}

rm -f "$OUT/failed.txt" "$OUT/loadavg.txt" "$OUT/summary.md" "$OUT/summary.json"
# A step's files are replaced when it runs; those of the steps not in STEPS
# go too, unless KEEP=1 (redo one step, keep the others' results).
[ "${KEEP:-0}" = 1 ] || rm -rf "$OUT/hop" "$OUT/overload" "$OUT/fastpath" "$OUT/fraud"
{
	echo "commit $(git rev-parse HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' (work tree modified)')"
	echo "started $(date -u '+%Y-%m-%d %H:%M:%S') UTC, nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "ROUNDS=$ROUNDS SHORT=$SHORT STEPS=$STEPS SRV_CPU=$SRV_CPU LOAD_CPU=$LOAD_CPU NICE='$NICE' OVERLOAD_FLAGS='$OVERLOAD_FLAGS' SERVE_FLAGS='$SERVE_FLAGS'"
	echo "durations: warm-up $WARM, hop $HOP_DUR at $HOP_RATE/s, capacity $CAP_DUR x $CAP_CLIENTS clients, floor $FLOOR_DUR at $FLOOR_RATE/s, overload $OVER_DUR + $AFTER_DUR, fastpath $FAST_DUR x $CONC clients x $ROWS rows, fraud $FRAUD_DUR x $FRAUD_CLIENTS clients"
	echo "CAP=$CAP CAP_W0=$CAP_W0 CAP_W2=$CAP_W2"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt"

if ! run_step build; then
	echo "the build failed: nothing measured" >&2
	exit 1
fi
[ "${SKIP_BUILD:-0}" = 1 ] || SLUICE=$BIN/sluice
OVERLOAD=${OVERLOAD:-$BIN/overload}
GRPCJSON=${GRPCJSON:-$BIN/grpcjson}
BARE=${BARE:-$BIN/barefraud}
echo "binaries: SLUICE=$SLUICE OVERLOAD=$OVERLOAD GRPCJSON=$GRPCJSON BARE=$BARE" >>"$OUT/meta.txt"

for s in $STEPS; do
	run_step "$s"
done
echo "finished $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
echo
/usr/bin/python3 bench/issue17_table.py "$OUT" || FAILED="$FAILED table"
if [ -n "$FAILED" ]; then
	echo "failed steps:$FAILED (see $OUT/failed.txt)" >&2
	exit 1
fi
