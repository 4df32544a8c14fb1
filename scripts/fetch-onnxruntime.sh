#!/usr/bin/env bash
# Fetch ONNX Runtime's shared library for `runtime: onnx` (docs/onnx.md).
#
# It comes from the npm registry's onnxruntime-node package (the registry is
# the one place this project's machines and CI can download from): `npm pack`
# fetches the tarball (npm checks the registry's sha512), this script checks
# the tarball's and the library's SHA-256 against the pinned values below and
# extracts package/bin/napi-v6/linux/x64/libonnxruntime.so.1. No npm install
# and so no install scripts run.
#
# The library goes to a cache folder, by default
#   ${XDG_CACHE_HOME:-$HOME/.cache}/sluice/onnxruntime/<version>/
# (override with SLUICE_ONNXRUNTIME_CACHE), where Sluice also looks for it.
# A second run with the library in place does nothing. The last line printed
# on stdout is always the library's path, so:
#   export SLUICE_ONNXRUNTIME_LIB="$(bash scripts/fetch-onnxruntime.sh | tail -1)"
set -euo pipefail

VERSION=1.30.0
TGZ_SHA256=6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75
LIB_SHA256=ffb75a925ba05e47b235bb66e3e3911714a80b328a9c9425539feb204aa32a23
MEMBER=package/bin/napi-v6/linux/x64/libonnxruntime.so.1

case "$(uname -s)/$(uname -m)" in
Linux/x86_64) ;;
*)
	echo "fetch-onnxruntime: only linux/x86_64 is pinned here (this is $(uname -s)/$(uname -m)); install ONNX Runtime $VERSION yourself and set SLUICE_ONNXRUNTIME_LIB" >&2
	exit 1
	;;
esac

cache="${SLUICE_ONNXRUNTIME_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/onnxruntime}/$VERSION"
lib="$cache/libonnxruntime.so.1"

sha256() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$lib" ] && [ "$(sha256 "$lib")" = "$LIB_SHA256" ]; then
	echo "$lib"
	exit 0
fi

if ! command -v npm >/dev/null; then
	echo "fetch-onnxruntime: npm is needed (apt-get install -y npm)" >&2
	exit 1
fi

mkdir -p "$cache"
work="$(mktemp -d "$cache/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "fetch-onnxruntime: npm pack onnxruntime-node@$VERSION (about 110 MB)" >&2
(cd "$work" && npm pack --silent "onnxruntime-node@$VERSION" >/dev/null)
tgz="$work/onnxruntime-node-$VERSION.tgz"
if [ ! -f "$tgz" ]; then
	echo "fetch-onnxruntime: npm pack did not produce $tgz" >&2
	exit 1
fi
if [ "$(sha256 "$tgz")" != "$TGZ_SHA256" ]; then
	echo "fetch-onnxruntime: $tgz has SHA-256 $(sha256 "$tgz"), want $TGZ_SHA256" >&2
	exit 1
fi
tar -xzf "$tgz" -C "$work" "$MEMBER"
if [ "$(sha256 "$work/$MEMBER")" != "$LIB_SHA256" ]; then
	echo "fetch-onnxruntime: extracted library has SHA-256 $(sha256 "$work/$MEMBER"), want $LIB_SHA256" >&2
	exit 1
fi
chmod 0755 "$work/$MEMBER"
mv -f "$work/$MEMBER" "$lib" # atomic within the cache folder
echo "fetch-onnxruntime: installed $lib" >&2
echo "$lib"
