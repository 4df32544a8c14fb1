#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (the S3-compatible object store `make test-s3`
# runs the artifact store's tests against) from the Go module proxy into a
# cache folder, once, and prints its path on the last line. A no-op when it
# is there already.
#
# `go install github.com/seaweedfs/seaweedfs/weed@VERSION` is refused because
# SeaweedFS's go.mod has a replace directive, so this builds it from a scratch
# module that requires that version, repeats its one replace line and imports
# the command from a tools.go (docs/operations.md, "Object store"). Cold it
# takes about 6.5 minutes on 2 cores and makes a 233 MB binary; warm (the
# module and build caches kept) about 20 s.
set -euo pipefail
version=v0.0.0-20261109003541-7506e5f91cd6
dir="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/bin/weed-$version"
bin="$dir/weed"
if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	scratch="$(mktemp -d)"
	trap 'rm -rf "$scratch"' EXIT
	echo "building SeaweedFS weed $version into $dir (about 6.5 minutes cold)" >&2
	cat >"$scratch/go.mod" <<MOD
module sluice.local/weedbuild

go 1.26

require github.com/seaweedfs/seaweedfs $version

replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0
MOD
	cat >"$scratch/tools.go" <<'GO'
//go:build tools

// Package weedbuild only pins SeaweedFS's weed command for go build.
package weedbuild

import _ "github.com/seaweedfs/seaweedfs/weed"
GO
	(
		cd "$scratch"
		GOFLAGS=-mod=mod go mod tidy >&2
		GOFLAGS=-mod=mod go build -o "$scratch/weed" github.com/seaweedfs/seaweedfs/weed >&2
	)
	# Move into place only when the build is complete, so an interrupted
	# build never leaves a half-written binary that looks installed.
	mv "$scratch/weed" "$bin.tmp"
	mv "$bin.tmp" "$bin"
fi
echo "$bin"
