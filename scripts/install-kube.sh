#!/usr/bin/env bash
# Builds a Kubernetes control plane that runs without containers, from the Go
# module proxy, into a cache folder, once: kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl (k8s.io/kubernetes),
# etcd and kwok (fake nodes that "run" pods). `make test-kube` uses them; so
# can anyone who wants to try deploy/kubernetes/ on a laptop without a cluster.
# Prints the folder holding the binaries on its last line. A no-op when they
# are there already (each binary is built only if it is missing).
#
# Why a scratch module: k8s.io/kubernetes requires its staging modules at
# v0.0.0 and replaces them with ./staging/… paths, which do not exist in the
# module zip; `go install pkg@version` refuses modules with replace lines. A
# module of our own that requires k8s.io/kubernetes and replaces each staging
# module v0.0.0 with its published v0.X.Y resolves and builds. About 5.5
# minutes cold on 2 cores (kube-apiserver alone ~190 s, 2.3 GB peak); it
# caches ~1.3 GB of modules and ~4.4 GB of build cache.
set -euo pipefail

k8s_version=v1.37.2     # k8s.io/kubernetes
staging_version=v0.37.2 # its staging modules (k8s.io/api, …)
etcd_version=v3.6.16    # go.etcd.io/etcd/server/v3
kwok_version=v0.8.0     # sigs.k8s.io/kwok

cache="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/kube"
bin="$cache/bin-$k8s_version-etcd$etcd_version-kwok$kwok_version"
mkdir -p "$bin"

log() { echo "install-kube: $*" >&2; }

# A build goes to a temporary name first and is renamed into place, so a
# killed build never leaves a binary that looks complete.
build() { # build OUT PKG (in the current module)
	local out="$1" pkg="$2"
	[ -x "$bin/$out" ] && return 0
	log "building $out ($pkg)"
	local start=$SECONDS
	go build -trimpath -o "$bin/.$out.tmp" "$pkg" >&2
	mv "$bin/.$out.tmp" "$bin/$out"
	log "built $out in $((SECONDS - start)) s"
}

need_k8s=0
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
	[ -x "$bin/$b" ] || need_k8s=1
done
if [ "$need_k8s" = 1 ]; then
	mod="$cache/mod-kubernetes-$k8s_version"
	mkdir -p "$mod"
	if [ ! -f "$mod/go.sum.done" ]; then
		log "resolving k8s.io/kubernetes $k8s_version in $mod"
		gomod="$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
		[ -f "$gomod" ] || { log "cannot download k8s.io/kubernetes@$k8s_version's go.mod"; exit 1; }
		{
			echo "module sluice.local/kubebuild"
			echo
			echo "go 1.26.0"
			echo
			echo "require k8s.io/kubernetes $k8s_version"
			echo
			# Every staging module k8s.io/kubernetes replaces with a path,
			# except the two samples nobody imports (not on the proxy).
			sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$gomod" |
				grep -v -e '^k8s.io/sample-cli-plugin$' -e '^k8s.io/sample-controller$' |
				while read -r m; do echo "replace $m v0.0.0 => $m $staging_version"; done
		} >"$mod/go.mod"
		cat >"$mod/tools.go" <<-'EOF'
			//go:build tools

			package tools

			import (
				_ "k8s.io/kubernetes/cmd/kube-apiserver"
				_ "k8s.io/kubernetes/cmd/kube-controller-manager"
				_ "k8s.io/kubernetes/cmd/kube-scheduler"
				_ "k8s.io/kubernetes/cmd/kubectl"
			)
		EOF
		(cd "$mod" && GOFLAGS=-mod=mod go mod tidy -e >&2)
		touch "$mod/go.sum.done"
	fi
	cd "$mod"
	build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
	build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
	build kubectl k8s.io/kubernetes/cmd/kubectl
fi

if [ ! -x "$bin/etcd" ]; then
	mod="$cache/mod-etcd-$etcd_version"
	mkdir -p "$mod"
	if [ ! -f "$mod/go.sum.done" ]; then
		log "resolving go.etcd.io/etcd/server/v3 $etcd_version in $mod"
		printf 'module sluice.local/etcdbuild\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$etcd_version" >"$mod/go.mod"
		printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$mod/tools.go"
		(cd "$mod" && GOFLAGS=-mod=mod go mod tidy -e >&2)
		touch "$mod/go.sum.done"
	fi
	(cd "$mod" && build etcd go.etcd.io/etcd/server/v3)
fi

if [ ! -x "$bin/kwok" ]; then
	log "building kwok $kwok_version"
	start=$SECONDS
	tmp="$cache/gobin-kwok-$kwok_version"
	GOBIN="$tmp" GOFLAGS=-mod=mod go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@$kwok_version" >&2
	mv "$tmp/kwok" "$bin/kwok"
	log "built kwok in $((SECONDS - start)) s"
fi

echo "$bin"
