#!/usr/bin/env bash
# Stops the SeaweedFS that scripts/start-seaweedfs.sh started from DIR
# (default ~/.cache/sluice/seaweedfs); a no-op when it is not running. Its
# data stays in DIR/data.
set -euo pipefail
dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/seaweedfs}"
[ -f "$dir/weed.pid" ] || exit 0
dir="$(cd "$dir" && pwd)"
pid="$(cat "$dir/weed.pid")"
# Only the process started from this DIR, never another one that reused the pid.
if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "-dir=$dir/data"; then
	# weed's graceful shutdown was seen to hang (its volume growth loop
	# keeps going): it gets 3 s, then SIGKILL. A test store loses nothing.
	kill "$pid"
	for _ in $(seq 30); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
fi
rm -f "$dir/weed.pid"
