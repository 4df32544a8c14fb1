#!/usr/bin/env bash
# Stops the PostgreSQL that scripts/start-postgres.sh started (same
# SLUICE_PG_DIR). Idempotent: a server that is not running is left so.
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
dir="${SLUICE_PG_DIR:-$HOME/.cache/sluice/postgres}"
run() {
	if [ "$(id -u)" = 0 ]; then
		su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
	else
		"$@"
	fi
}
if [ -f "$dir/PG_VERSION" ] && run "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
	run "$bin/pg_ctl" -D "$dir" -m fast -w stop >&2
fi
