# Shared helpers for the bench scripts. Source it: . bench/lib.sh
# SLUICE: the binary (built once by build_sluice). PORT: server port.
# A private path: other engineers build /tmp/sluice and may restart it.
SLUICE=${SLUICE:-/tmp/issue3-bench/sluice}
PORT=${PORT:-18090}
SERVER=http://127.0.0.1:$PORT
# Other engineers compile on this machine; run our processes at a higher
# priority (nice -10) so their compiles take less from the measured cores.
# NICE= (empty) turns this off.
NICE=${NICE-nice -n -10}

# build_sluice: go build of cmd/sluice, skipped when SKIP_BUILD=1 (e.g. the
# binary was built from a clean `git archive HEAD` while the work tree is
# mid-edit by someone else).
build_sluice() {
	[ "${SKIP_BUILD:-0}" = 1 ] && return 0
	mkdir -p "$(dirname "$SLUICE")" && go build -o "$SLUICE" ./cmd/sluice
}

# start_server MODELS_DIR: serve that folder pinned to core 0 (extra flags in
# SERVE_FLAGS); waits until ready.
start_server() {
	# A previous server may still be draining (up to --grace) after an overload.
	for _ in $(seq 1 400); do
		ss -ltn "sport = :$PORT" | grep -q LISTEN || break
		sleep 0.1
	done
	DATA=$(mktemp -d)
	$NICE taskset -c 0 "$SLUICE" serve --data "$DATA" --models "$1" --addr 127.0.0.1:$PORT $SERVE_FLAGS >"${SERVER_LOG:-/tmp/issue3-bench/server.log}" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 300); do
		curl -sf "$SERVER/v1/models" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "server did not start; see ${SERVER_LOG:-/tmp/issue3-bench/server.log}" >&2
	return 1
}

# wait_ready: until the running server's /readyz answers (its versions
# loaded and warm), at most 30 s; a server still not ready is reported and
# the run goes on, as before.
wait_ready() {
	for _ in $(seq 1 300); do
		curl -sf "$SERVER/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "server not ready after 30 s; see ${SERVER_LOG:-/tmp/issue3-bench/server.log}" >&2
}

# churn_models OUT: OUT/models holds the churn example alone (the records
# benchmarks).
churn_models() { mkdir -p "$1/models" && rm -rf "$1/models/churn" && cp -r examples/churn "$1/models/"; }

# start_records MODE OUT I: serve OUT/models with records on (MODE on) or
# off (--no-records), its log OUT/server-MODE-I.log, and wait until ready.
start_records() {
	SERVE_FLAGS=""
	[ "$1" = off ] && SERVE_FLAGS="--no-records"
	export SERVE_FLAGS
	SERVER_LOG=$2/server-$1-$3.log start_server "$2/models"
	wait_ready
}

stop_server() {
	[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	SERVER_PID=
	[ -n "$DATA" ] && rm -rf "$DATA"
}

# load MODEL ARGS...: the load generator, pinned to core 1.
load() { $NICE taskset -c 1 "$SLUICE" bench "$@" --server "$SERVER"; }

# capacity NAME MODEL PAYLOAD SWEEP: against the running server, a coarse
# poisson sweep (5 s per rate; chart and JSON in bench/results/NAME.*), then
# maxrate.sh bisects between its last passing and first failing rate.
capacity() {
	load "$2" --payload "$3" --rate 200 --duration 3s >/dev/null   # warm-up
	load "$2" --payload "$3" --arrivals poisson --sweep "$4" --duration 5s --json \
		--out bench/results/$1.svg >bench/results/$1-sweep.json
	set -- "$1" "$2" "$3" $(/usr/bin/python3 -c '
import json, sys
rs = json.load(sys.stdin)
lo, hi = 0, None
for r in rs:
    ok = r["latency"]["p99Ms"] <= 50 and r["achievedRate"] >= 0.97 * r["offeredRate"]
    if ok and hi is None: lo = int(r["offeredRate"])
    elif not ok and hi is None: hi = int(r["offeredRate"])
print(lo, hi if hi is not None else int(rs[-1]["offeredRate"]) * 2)' <bench/results/$1-sweep.json)
	echo "$1: sweep passes at $4/s, fails at $5/s; bisecting"
	EXTRA="--payload $3" bench/maxrate.sh "$2" "$4" "$5" "${STEPS:-4}"
}
