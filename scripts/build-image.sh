#!/usr/bin/env bash
# Builds Sluice's OCI image as a tarball, without a Docker daemon, with ko
# (github.com/google/ko, from the Go module proxy, cached in
# ~/.cache/sluice/bin). The image holds the static sluice binary as
# /ko-app/sluice (its entrypoint), runs as uid 65532, and is what
# deploy/kubernetes/ runs for the gateway, the controller and the workers.
#
#   scripts/build-image.sh [TAG]      # default TAG: git describe, else dev
#
# Output: $SLUICE_IMAGE_TAR (default bin/sluice-image.tar), a `docker
# save`-style tarball that `crane push`, `skopeo copy docker-archive:…`,
# `podman load` or `kind load image-archive` take. The image is named
# $SLUICE_IMAGE_REPO:TAG (default ghcr.io/sluiceml/sluice).
#
# Base image: $SLUICE_IMAGE_BASE when set (e.g. cgr.dev/chainguard/static,
# pulled from its registry). Otherwise, so that the build needs no
# registry at all, a minimal base is made here: one layer with
# /etc/passwd and /etc/group (user nonroot, 65532) and the host's CA
# bundle (for HTTPS to an object store), served to ko by a registry that
# `crane registry serve` runs on 127.0.0.1 for the length of the build.
set -euo pipefail
cd "$(dirname "$0")/.."

ko_version=v0.19.1
crane_version=v0.22.1
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/bin"
tag="${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
repo="${SLUICE_IMAGE_REPO:-ghcr.io/sluiceml/sluice}"
out="${SLUICE_IMAGE_TAR:-bin/sluice-image.tar}"

tool() { # tool NAME VERSION MODULE/PATH: go install once into the cache
	local dir="$cache/$1-$2"
	if [ ! -x "$dir/$1" ]; then
		echo "build-image: building $1 $2 into $dir" >&2
		mkdir -p "$dir"
		GOBIN="$dir" GOFLAGS=-mod=mod go install "$3@$2" >&2
	fi
	echo "$dir/$1"
}
ko="$(tool ko "$ko_version" github.com/google/ko)"

work="$(mktemp -d)"
reg_pid=""
cleanup() {
	if [ -n "$reg_pid" ]; then kill "$reg_pid" 2>/dev/null || true; wait "$reg_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

base="${SLUICE_IMAGE_BASE:-}"
if [ -z "$base" ]; then
	crane="$(tool crane "$crane_version" github.com/google/go-containerregistry/cmd/crane)"
	port="$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
	"$crane" registry serve --address "127.0.0.1:$port" >"$work/registry.log" 2>&1 &
	reg_pid=$!
	for _ in $(seq 50); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
		sleep 0.1
	done
	mkdir -p "$work/root/etc/ssl/certs" "$work/root/tmp" "$work/root/home/nonroot"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$work/root/etc/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$work/root/etc/group"
	if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
		cp /etc/ssl/certs/ca-certificates.crt "$work/root/etc/ssl/certs/ca-certificates.crt"
	fi
	tar -C "$work/root" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$work/base.tar" .
	base="127.0.0.1:$port/sluice-base:static"
	"$crane" append --oci-empty-base -f "$work/base.tar" -t "$base.tmp" >&2
	"$crane" mutate --set-platform linux/amd64 --user 65532 -t "$base" "$base.tmp" >&2
fi

mkdir -p "$(dirname "$out")"
echo "build-image: $repo:$tag on $base -> $out" >&2
KO_DOCKER_REPO="$repo" KO_DEFAULTBASEIMAGE="$base" CGO_ENABLED=0 \
	"$ko" build ./cmd/sluice --bare --push=false --tarball="$out" --tags="$tag" \
	--platform=linux/amd64 --sbom=none --image-label="org.opencontainers.image.source=https://github.com/sluiceml/sluice" >&2
echo "$out"
