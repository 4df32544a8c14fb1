#!/usr/bin/env bash
# make test-openapi: a TypeScript client generated from a real server's
# /openapi.json (openapi-typescript types, openapi-fetch calls) passes a
# smoke test against that server. The client's packages are pinned in
# scripts/openapi-client/package-lock.json (npm ci); node and npm must be
# installed. The server is the binary built from this tree, `sluice serve`
# with the embedded examples on a free port of 127.0.0.1, stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
client=scripts/openapi-client
command -v npm >/dev/null || { echo "test-openapi needs node and npm (Debian: apt-get install nodejs npm)" >&2; exit 1; }
work=$(mktemp -d)
pid=""
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/sluice" ./cmd/sluice
(cd "$client" && { [ -d node_modules/openapi-typescript ] && [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error; })
"$work/sluice" serve --addr 127.0.0.1:0 --data "$work/data" 2>"$work/serve.log" &
pid=$!
addr=""
for _ in $(seq 1 600); do
	addr=$(sed -n 's/.*msg=serving addr=\(127\.0\.0\.1:[0-9]*\).*/\1/p' "$work/serve.log" | head -1)
	[ -n "$addr" ] && curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; echo "sluice serve exited" >&2; exit 1; }
	sleep 0.1
done
[ -n "$addr" ] || { cat "$work/serve.log" >&2; echo "sluice serve did not start" >&2; exit 1; }
curl -fsS "http://$addr/openapi.json" -o "$work/openapi.json"
cd "$client"
rm -rf gen out
./node_modules/.bin/openapi-typescript "$work/openapi.json" -o gen/sluice.ts
./node_modules/.bin/tsc -p tsconfig.json
node out/smoke.js "http://$addr"
