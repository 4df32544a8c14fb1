#!/bin/sh
# Capacity of fraud with worker processes (issue 9), one server at a time
# (its whole process tree pinned to core 0), with lib.sh's `capacity`: a
# poisson sweep SWEEP (default 1000:6000:1000, 5 s per rate) then a bisection
# (STEPS, default 3; 3 runs of 6 s per probe) for the highest rate with
# median p99 <= 50 ms and achieved >= 97%. MODES: NAME:FLAGS entries
# separated by ';' (FLAGS use ',' for spaces); NAME ending in "b" runs
# SLUICE_B instead (a second binary, e.g. a fix).
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
SWEEP=${SWEEP:-1000:6000:1000}
MODES=${MODES:-w0:--workers,0;w1:--workers,1,--shard-size,1;w2:--workers,2}
build_sluice
A=$SLUICE
IFS=';'
for m in $MODES; do
	unset IFS
	name=${m%%:*} SERVE_FLAGS=$(echo "${m#*:}" | tr , ' ')
	SLUICE=$A
	case $name in *b) SLUICE=${SLUICE_B:?set SLUICE_B for $name} ;; esac
	echo "== $name: $SLUICE serve $SERVE_FLAGS; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
	SERVER_LOG=/tmp/workers-cap-server.log start_server ""
	sleep 1
	STEPS=${STEPS:-3} capacity workers-cap-$name fraud @bench/fraud-payload.json "$SWEEP" 2>&1
	stop_server
	IFS=';'
done
