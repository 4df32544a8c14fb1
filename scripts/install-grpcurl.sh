#!/usr/bin/env bash
# Builds grpcurl (an independent gRPC client the OIP e2e tests drive) from
# the Go module proxy into a cache folder, once, and prints its path on the
# last line. A no-op when it is there already. `make unit` passes the path
# to the tests in SLUICE_GRPCURL.
set -euo pipefail
version=v1.9.4
dir="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/bin/grpcurl-$version"
bin="$dir/grpcurl"
if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	echo "building grpcurl $version into $dir" >&2
	GOBIN="$dir" GOFLAGS=-mod=mod go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$version" >&2
fi
echo "$bin"
