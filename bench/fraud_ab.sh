#!/bin/sh
# A/B of 1-row fraud saturation: `sluice serve` binaries given as
# arguments (each serving the examples; a wrapper script that ignores its
# arguments can stand for bench/barefraud on port P), interleaved, ROUNDS
# rounds of a closed loop of 16 for 5 s after a 2 s warm-up; server on
# core 0, bench/overload (OVERLOAD) on core 1. Prints req/s per round.
cd "$(dirname "$0")/.."
P=${P:-18795}
OVERLOAD=${OVERLOAD:-/tmp/b12/overload}
for i in $(seq 1 ${ROUNDS:-3}); do
for bin in "$@"; do
	D=$(mktemp -d)
	nice -n -10 taskset -c 0 $bin serve --data $D --models examples --addr 127.0.0.1:$P $FLAGS >${SERVER_LOG:-/tmp/fraud-ab-server.log} 2>&1 &
	S=$!
	for _ in $(seq 1 300); do curl -sf -H "Content-Type: application/json" -d @bench/fraud-payload.json http://127.0.0.1:$P/v1/models/fraud:predict >/dev/null 2>&1 && break; sleep 0.1; done
	nice -n -10 taskset -c 1 $OVERLOAD --server http://127.0.0.1:$P --model fraud --payload @bench/fraud-payload.json --closed 16 --closed-duration 2s >/dev/null 2>&1
	r=$(nice -n -10 taskset -c 1 $OVERLOAD --server http://127.0.0.1:$P --model fraud --payload @bench/fraud-payload.json --closed 16 --closed-duration 5s 2>&1 | grep -o '([0-9.]*/s)')
	echo "round $i $(basename $bin) $r"
	kill $S; wait $S 2>/dev/null; rm -rf $D
done
done
