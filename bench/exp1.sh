#!/bin/sh
# Seed lab experiment 1: 2 ms spin model, 1 replica, no batching, poisson
# sweep 100..600 req/s, 10 s per rate, runs RUN_IDS (default "1 2 3").
# Output: bench/results/exp1-runN.json (sweep JSON) and exp1-runN.svg.
set -e
cd "$(dirname "$0")/.."
. bench/lib.sh
RUN_IDS=${RUN_IDS:-1 2 3}
build_sluice
start_server bench/models/exp1
trap stop_server EXIT
load spin2ms --rate 200 --duration 3s >/dev/null   # warm-up
for i in $RUN_IDS; do
	load spin2ms --arrivals poisson --seed "$i" --sweep 100:600:50 --duration 10s \
		--json --out bench/results/exp1-run$i.svg >bench/results/exp1-run$i.json
done
