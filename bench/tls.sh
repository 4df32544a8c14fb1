#!/bin/bash
# Issue 18: the overhead of TLS on the HTTP listener at 1 row. Three servers
# of the fraud example, one per mode (MODES: http, https = --tls-cert/--tls-key,
# mtls = https plus --tls-client-ca and a client certificate), all up at once
# on core SRV_CPU and measured in turn, the order rotating by round, ROUNDS
# (3) rounds, each on fresh servers. Per mode and round, with `sluice bench`
# (open loop, keep-alive connections: HTTP/1.1 over TLS as over TCP) on core
# LOAD_CPU:
#   p50   P50_RATE (200) req/s poisson for P50_DUR (10s) over at most 4
#         connections: latency p50/p99 from the intended send time, and the
#         server's own (Server-Timing).
#   sat   an offer far past capacity (SAT_RATE 50000/s for SAT_DUR 5s) with at
#         most SAT_CONC (16) in flight on as many connections: the arrivals
#         beyond those are dropped by the generator, so the answers per
#         second are the most the server (and the generator's own TLS) does
#         with 16 requests in flight. Also the server process's CPU time
#         (utime+stime from /proc/PID/stat) over the run divided by the 2xx
#         answers: CPU per request, which other processes on the machine
#         disturb far less than they do throughput.
# A warm-up of WARM (3s) at 500/s on every server first. Certificates are
# made with openssl (ECDSA P-256, as docs/operations.md "Making
# certificates"). Everything at NICE (nice -n -10; NICE= turns it off).
#
#   bash bench/tls.sh                           # ROUNDS=3, about 3 minutes
#   ROUNDS=1 P50_DUR=2s SAT_DUR=1s bash bench/tls.sh   # smoke test
#
# Binary built into OUT/bin from this checkout (SKIP_BUILD=1 SLUICE=path: use
# that one). Raw JSON per mode, measure and round, server logs, meta.txt and
# summary.md in OUT (default /tmp/tls-bench).
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/tls-bench}
ROUNDS=${ROUNDS:-3}
MODES=${MODES:-http https mtls}
SRV_CPU=${SRV_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
NICE=${NICE-nice -n -10}
BASE_PORT=${BASE_PORT:-18230}
WARM=${WARM:-3s}
P50_RATE=${P50_RATE:-200}
P50_DUR=${P50_DUR:-10s}
SAT_RATE=${SAT_RATE:-50000}
SAT_DUR=${SAT_DUR:-5s}
SAT_CONC=${SAT_CONC:-16}
PAYLOAD=@bench/fraud-payload.json

case $ROUNDS in '' | *[!0-9]* | 0) echo "ROUNDS=$ROUNDS: want a whole number >= 1" >&2; exit 2 ;; esac
for m in $MODES; do
	case $m in http | https | mtls) ;; *) echo "MODES: unknown mode '$m' (want some of: http https mtls)" >&2; exit 2 ;; esac
done
mkdir -p "$OUT/bin" "$OUT/certs" "$OUT/models" || exit 1
rm -f "$OUT"/*.json "$OUT"/server-*.log
SLUICE=${SLUICE:-$OUT/bin/sluice}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
	go build -o "$SLUICE" ./cmd/sluice || exit 1
fi
rm -rf "$OUT/models/fraud" && cp -r examples/fraud "$OUT/models/" || exit 1

# Certificates: a CA, the servers' (127.0.0.1), a client's.
C=$OUT/certs
(
	cd "$C" || exit 1
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench-ca -keyout ca-key.pem -out ca.pem
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=sluice -keyout server-key.pem -out server.csr
	printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
	openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -days 2 -extfile server.ext -out server.pem
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=bench -keyout client-key.pem -out client.csr
	printf 'extendedKeyUsage=clientAuth\n' >client.ext
	openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -days 2 -extfile client.ext -out client.pem
) >"$OUT/openssl.log" 2>&1 || { echo "openssl failed: $OUT/openssl.log" >&2; exit 1; }

port() { # MODE
	case $1 in http) echo $BASE_PORT ;; https) echo $((BASE_PORT + 1)) ;; mtls) echo $((BASE_PORT + 2)) ;; esac
}
url() { # MODE
	case $1 in http) echo "http://127.0.0.1:$(port http)" ;; *) echo "https://127.0.0.1:$(port "$1")" ;; esac
}
serve_flags() { # MODE
	case $1 in
	https) echo "--tls-cert $C/server.pem --tls-key $C/server-key.pem" ;;
	mtls) echo "--tls-cert $C/server.pem --tls-key $C/server-key.pem --tls-client-ca $C/ca.pem" ;;
	esac
}
client_flags() { # MODE
	case $1 in
	https) echo "--ca $C/ca.pem" ;;
	mtls) echo "--ca $C/ca.pem --cert $C/client.pem --key $C/client-key.pem" ;;
	esac
}
curl_flags() { # MODE
	case $1 in
	https) echo "--cacert $C/ca.pem" ;;
	mtls) echo "--cacert $C/ca.pem --cert $C/client.pem --key $C/client-key.pem" ;;
	esac
}

PIDS=$OUT/.servers # "PID DATA-DIR" of the servers up
: >"$PIDS"
stop_all() {
	while read -r pid dir; do
		[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
		[ -n "$dir" ] && rm -rf "$dir"
	done <"$PIDS"
	: >"$PIDS"
}
trap 'stop_all' EXIT
trap 'exit 130' INT TERM

start_all() { # ROUND
	for m in $MODES; do
		d=$(mktemp -d)
		# shellcheck disable=SC2046
		$NICE taskset -c "$SRV_CPU" "$SLUICE" serve --data "$d" --models "$OUT/models" --addr "127.0.0.1:$(port "$m")" \
			$(serve_flags "$m") >"$OUT/server-$m-$1.log" 2>&1 &
		echo "$! $d" >>"$PIDS"
		eval "PID_$m=$!"
	done
	for m in $MODES; do
		ok=0
		for _ in $(seq 1 600); do
			# shellcheck disable=SC2046
			curl -sf $(curl_flags "$m") "$(url "$m")/readyz" >/dev/null 2>&1 && { ok=1; break; }
			sleep 0.1
		done
		[ $ok = 1 ] || { echo "server $m not ready in 60 s: $OUT/server-$m-$1.log" >&2; exit 1; }
	done
}

# cpu_ticks PID: the process's user + system CPU time, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

load() { # MODE ARGS...
	m=$1
	shift
	# shellcheck disable=SC2046
	$NICE taskset -c "$LOAD_CPU" "$SLUICE" bench fraud --server "$(url "$m")" $(client_flags "$m") --payload "$PAYLOAD" "$@"
}

{
	echo "commit $(git rev-parse --short HEAD) $(git status --porcelain | grep -q . && echo '(dirty)')"
	echo "date $(date -u +%FT%TZ)"
	echo "nproc $(nproc); $(uname -r)"
	echo "modes $MODES; rounds $ROUNDS; p50 $P50_RATE/s poisson $P50_DUR; sat $SAT_RATE/s $SAT_DUR at most $SAT_CONC in flight"
} >"$OUT/meta.txt"

set -- $MODES
n=$#
for r in $(seq 1 "$ROUNDS"); do
	echo "== round $r $(uptime)" | tee -a "$OUT/meta.txt"
	start_all "$r"
	# The order rotates by round: round 1 http https mtls, round 2 https mtls http, ...
	order=""
	set -- $MODES
	for i in $(seq 0 $((n - 1))); do
		k=$(( (i + r - 1) % n + 1 ))
		order="$order ${!k}"
	done
	for m in $order; do
		load "$m" --rate 500 --duration "$WARM" --connections 4 >/dev/null || exit 1
	done
	for m in $order; do
		load "$m" --arrivals poisson --seed "$r" --rate "$P50_RATE" --duration "$P50_DUR" --connections 4 --json >"$OUT/p50-$m-$r.json" || exit 1
		pid_var=PID_$m
		t0=$(cpu_ticks "${!pid_var}")
		load "$m" --rate "$SAT_RATE" --duration "$SAT_DUR" --concurrency "$SAT_CONC" --connections "$SAT_CONC" --json >"$OUT/sat-$m-$r.json" 2>"$OUT/sat-$m-$r.err" || exit 1
		t1=$(cpu_ticks "${!pid_var}")
		echo "$((t1 - t0)) $(getconf CLK_TCK)" >"$OUT/cpu-$m-$r.txt"
		echo "$m: $(python3 -c "import json,sys; p=json.load(open('$OUT/p50-$m-$r.json')); s=json.load(open('$OUT/sat-$m-$r.json')); t,hz=map(int,open('$OUT/cpu-$m-$r.txt').read().split()); print(f\"p50 {p['latency']['p50Ms']:.3f} ms, p99 {p['latency']['p99Ms']:.3f} ms; saturated {s['achievedRate']:.0f} req/s ({s['ok']} ok), server CPU {t/hz*1e6/max(1,s['ok']):.1f} us/request\")")"
	done
	echo "   after: $(uptime)" | tee -a "$OUT/meta.txt"
	stop_all
done

/usr/bin/python3 - "$OUT" "$ROUNDS" $MODES <<'PY' | tee "$OUT/summary.md"
import json, statistics as st, sys
out, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def get(kind, m, r):
    return json.load(open(f"{out}/{kind}-{m}-{r}.json"))
def cpu(m, r):  # server CPU microseconds per 2xx answer of the saturation run
    t, hz = map(int, open(f"{out}/cpu-{m}-{r}.txt").read().split())
    return t / hz * 1e6 / max(1, get("sat", m, r)["ok"])
print("| mode | p50 (per round) | median p50 | p99 median | server p50 median | req/s with 16 in flight (per round) | median req/s | server CPU per request (per round) | vs http, same round: p50 / req/s / CPU |")
print("|---|---|---|---|---|---|---|---|---|")
for m in modes:
    p50 = [get("p50", m, r)["latency"]["p50Ms"] for r in range(1, rounds + 1)]
    p99 = [get("p50", m, r)["latency"]["p99Ms"] for r in range(1, rounds + 1)]
    sp50 = [get("p50", m, r)["serverLatency"]["p50Ms"] for r in range(1, rounds + 1)]
    rps = [get("sat", m, r)["achievedRate"] for r in range(1, rounds + 1)]
    cpus = [cpu(m, r) for r in range(1, rounds + 1)]
    ratio = ""
    if m != "http" and "http" in modes:
        dp = [p50[r] - get("p50", "http", r + 1)["latency"]["p50Ms"] for r in range(rounds)]
        rr = [rps[r] / get("sat", "http", r + 1)["achievedRate"] for r in range(rounds)]
        dc = [cpus[r] - cpu("http", r + 1) for r in range(rounds)]
        ratio = (f"p50 {st.median(dp):+.3f} ms ({', '.join(f'{x:+.3f}' for x in dp)}); req/s {st.median(rr):.3f}x ({', '.join(f'{x:.3f}' for x in rr)}); "
                 f"CPU {st.median(dc):+.1f} µs ({', '.join(f'{x:+.1f}' for x in dc)})")
    print(f"| {m} | {', '.join(f'{x:.3f}' for x in p50)} ms | **{st.median(p50):.3f} ms** | {st.median(p99):.3f} ms | {st.median(sp50):.3f} ms | "
          f"{', '.join(f'{x:.0f}' for x in rps)} | **{st.median(rps):.0f}** | {', '.join(f'{x:.1f}' for x in cpus)} µs, median **{st.median(cpus):.1f} µs** | {ratio} |")
PY
