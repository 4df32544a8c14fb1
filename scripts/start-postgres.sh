#!/usr/bin/env bash
# Starts a PostgreSQL 15 for Sluice's PostgreSQL tests (make test-postgres)
# and prints its URL on the last line. Idempotent: a server already running
# in the folder is reused; Debian's postgresql-15 is installed with apt-get
# when /usr/lib/postgresql/15/bin/initdb is missing.
#
#   SLUICE_PG_DIR   the cluster's folder (default ~/.cache/sluice/postgres)
#   SLUICE_PG_PORT  its port (default 55432)
#
# The cluster trusts local connections on 127.0.0.1 (a test server: never
# expose it). Stop it with:
#   su postgres -c "/usr/lib/postgresql/15/bin/pg_ctl -D DIR stop"   (as root)
#   /usr/lib/postgresql/15/bin/pg_ctl -D DIR stop                   (otherwise)
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
dir="${SLUICE_PG_DIR:-$HOME/.cache/sluice/postgres}"
port="${SLUICE_PG_PORT:-55432}"

if [ ! -x "$bin/initdb" ]; then
	if ! command -v apt-get >/dev/null; then
		echo "start-postgres: $bin/initdb is missing and there is no apt-get to install postgresql-15" >&2
		exit 1
	fi
	sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
	echo "start-postgres: installing postgresql-15 (apt-get)" >&2
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends postgresql-15 >&2
fi

# As root, the server runs as the postgres user (PostgreSQL refuses root).
run() {
	if [ "$(id -u)" = 0 ]; then
		su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
	else
		"$@"
	fi
}
if [ "$(id -u)" = 0 ]; then
	install -d -o postgres -m 0700 "$dir"
	# The cache folder's parents must let the postgres user reach $dir.
	p="$(dirname "$dir")"
	while [ "$p" != "/" ]; do chmod o+x "$p" 2>/dev/null || true; p="$(dirname "$p")"; done
else
	mkdir -p "$dir"; chmod 0700 "$dir"
fi
if [ ! -f "$dir/PG_VERSION" ]; then
	run "$bin/initdb" -D "$dir" -A trust -U postgres >&2
fi
if ! run "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
	run "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 30 \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >&2
fi
# Wait until it accepts connections (start -w does; a reused one may be starting).
for _ in $(seq 1 50); do
	if run "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then break; fi
	sleep 0.2
done
run "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" || { echo "start-postgres: the server in $dir does not answer on 127.0.0.1:$port (see $dir/server.log)" >&2; exit 1; }
run "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='sluice'" | grep -q 1 ||
	run "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres sluice >&2
echo "postgres://postgres@127.0.0.1:$port/sluice?sslmode=disable"
