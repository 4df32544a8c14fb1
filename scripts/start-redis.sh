#!/usr/bin/env bash
# Starts a Redis for Sluice's feature tests (make test-features) and prints
# its URL (redis://127.0.0.1:PORT/0) on the last line. Idempotent: a server
# already running from the folder is reused (its port is kept in DIR/port);
# Debian's redis-server is installed with apt-get when it is missing.
#
#   SLUICE_REDIS_DIR   the server's folder (default ~/.cache/sluice/redis)
#   SLUICE_REDIS_PORT  its port (default: a free random port on 127.0.0.1)
#
# The server listens on 127.0.0.1 only, saves nothing and has no password
# (a test server: never expose it). Stop it with scripts/stop-redis.sh.
set -euo pipefail
dir="${SLUICE_REDIS_DIR:-$HOME/.cache/sluice/redis}"

if ! command -v redis-server >/dev/null; then
	if ! command -v apt-get >/dev/null; then
		echo "start-redis: redis-server is missing and there is no apt-get to install it" >&2
		exit 1
	fi
	sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
	echo "start-redis: installing redis-server (apt-get)" >&2
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
	# policy-rc.d keeps the package's own service from starting where
	# there is an init; without one, nothing starts.
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends redis-server >&2
fi
mkdir -p "$dir"
ping() { redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG; }
if [ -f "$dir/port" ] && [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null && ping "$(cat "$dir/port")"; then
	echo "redis://127.0.0.1:$(cat "$dir/port")/0"
	exit 0
fi
port="${SLUICE_REDIS_PORT:-}"
if [ -z "$port" ]; then
	port="$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
fi
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
	--dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >&2
for _ in $(seq 1 50); do
	if ping "$port"; then break; fi
	sleep 0.1
done
ping "$port" || { echo "start-redis: the server does not answer on 127.0.0.1:$port (see $dir/redis.log)" >&2; exit 1; }
cat "$dir/redis.pid" >"$dir/pid"
echo "$port" >"$dir/port"
echo "redis://127.0.0.1:$port/0"
