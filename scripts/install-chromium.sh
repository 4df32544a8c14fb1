#!/usr/bin/env bash
# Installs Debian's chromium (and fonts-dejavu-core, so screenshots have
# text) for the console's browser test (make test-ui), and prints the
# browser's path on the last line. Idempotent: a chromium already on PATH
# (or named by SLUICE_CHROMIUM) is used as it is.
#
# As root the test runs it with --no-sandbox (docs/console.md).
set -euo pipefail
if [ -n "${SLUICE_CHROMIUM:-}" ] && [ -x "$SLUICE_CHROMIUM" ]; then
	echo "$SLUICE_CHROMIUM"
	exit 0
fi
find_browser() { command -v chromium || command -v chromium-browser || true; }
bin="$(find_browser)"
if [ -z "$bin" ] || ! fc-list 2>/dev/null | grep -qi dejavu; then
	if ! command -v apt-get >/dev/null; then
		echo "install-chromium: chromium is missing and there is no apt-get to install it" >&2
		exit 1
	fi
	sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
	echo "install-chromium: installing chromium and fonts-dejavu-core (apt-get)" >&2
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
	bin="$(find_browser)"
fi
if [ -z "$bin" ]; then
	echo "install-chromium: chromium is still not on PATH after apt-get" >&2
	exit 1
fi
echo "$bin"
