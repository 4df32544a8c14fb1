#!/usr/bin/env bash
# Stops the Redis scripts/start-redis.sh started (SLUICE_REDIS_DIR, default
# ~/.cache/sluice/redis). Nothing running is not an error.
set -euo pipefail
dir="${SLUICE_REDIS_DIR:-$HOME/.cache/sluice/redis}"
if [ -f "$dir/pid" ]; then
	pid="$(cat "$dir/pid")"
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	rm -f "$dir/pid" "$dir/port"
fi
