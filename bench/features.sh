#!/usr/bin/env bash
# Enrichment's share of a request's latency through the real binary
# (issue 19, goals rows 1-2): one `sluice serve` with --features-redis and
# three versions of a 51-field linear model, `sluice bench` at RATE/s for
# DURATION against each:
#   redis    1 entity x 50 features filled from Redis (memory ttl 1ns)
#   memory   the same from the memory tier (ttl 1h)
#   none     every field sent by the caller (no lookup): the baseline
# The share is the p99 (and p50) of redis/memory minus none's, in the
# server's own latency (Server-Timing total: no client or network time).
#   bench/features.sh [RATE] [DURATION]      (needs redis-server; make build)
set -euo pipefail
cd "$(dirname "$0")/.."
rate="${1:-1000}"; dur="${2:-10s}"
bin=bin/sluice; [ -x "$bin" ] || go build -o "$bin" ./cmd/sluice
work="$(mktemp -d)"; trap 'kill $srv $rpid 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
port="$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >/dev/null & rpid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
args=(HSET bench_stats:e1)
fields=""; golden="x: 1"; ws=""
for i in $(seq 0 49); do args+=("f$i" "$i.5"); fields+="    - {name: f$i, type: float}"$'\n'; ws+="0.01,"; golden+=", f$i: $i.5"; done
redis-cli -p "$port" "${args[@]}" _ts "$(date +%s)" >/dev/null
mk() { # name ttl
	local d="$work/models/$1"; mkdir -p "$d"
	echo "{\"weights\":[[${ws}1]],\"bias\":[0],\"link\":\"identity\"}" >"$d/model.json"
	local ff=""; for i in $(seq 0 49); do ff+="    - {name: f$i, default: 0}"$'\n'; done
	cat >"$d/model.yaml" <<YAML
name: $1
runtime: linear
artifact: model.json
input:
  schema: wide@1
  fields:
$fields    - {name: x, type: float}
output: {schema: wide-out@1, fields: [{name: y}]}
serving: {defaultDeadline: 100ms}
features:
  entity: cardId
  view: bench_stats
  fields:
$ff  timeout: 10ms
  memory: {ttl: $2}
YAML
}
mk wide-redis 1ns; mk wide-memory 1h
"$bin" serve --addr 127.0.0.1:0 --data "$work/data" --models "$work/models" --no-records --features-redis "redis://127.0.0.1:$port/0" 2>"$work/log" & srv=$!
for _ in $(seq 100); do addr="$(grep -o 'msg=serving addr=127.0.0.1:[0-9]*' "$work/log" | cut -d= -f3 || true)"; [ -n "$addr" ] && break; sleep 0.2; done
url="http://$addr"
for _ in $(seq 100); do curl -sf "$url/readyz" >/dev/null && break; sleep 0.2; done
all="{\"x\":1"; for i in $(seq 0 49); do all+=",\"f$i\":$i.5"; done; all+="}"
echo "rate $rate/s for $dur each; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "case\tp50_ms\tp99_ms\tp999_ms\tok\n"
for c in "redis wide-redis {\"cardId\":\"e1\",\"x\":1}" "memory wide-memory {\"cardId\":\"e1\",\"x\":1}" "none wide-redis $all"; do
	set -- $c
	"$bin" bench "$2" --server "$url" --rate "$rate" --duration "$dur" --deadline-ms 100 --payload "$3" --json >"$work/$1.json"
	/usr/bin/python3 - "$1" "$work/$1.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
lat = r.get("serverLatency") or r.get("latency") or {}
def g(*ks):
    for k in ks:
        if k in lat: return lat[k]
        if k in r: return r[k]
    return float("nan")
print(f"{sys.argv[1]}\t{g('p50','p50Ms')}\t{g('p99','p99Ms')}\t{g('p999','p99.9','p999Ms')}\t{r.get('ok', r.get('succeeded', '?'))}")
PY
done
