#!/usr/bin/env bash
# The OIP conformance suite `make test-oip` runs (.ci/run calls it):
#
# 1. the client fixtures (internal/oip/testdata/clients: what tritonclient
#    http/grpc and the KServe SDK send, read from their sources) replayed
#    against the handlers and through the real binary;
# 2. a Go client generated here from proto/inference/grpc_predict_v2.proto
#    by protoc (Debian protobuf-compiler, installed if missing) with
#    protoc-gen-go and protoc-gen-go-grpc from the Go module proxy, into a
#    temporary module that shares nothing with Sluice's code, built into a
#    small program that calls a real `sluice serve --grpc-addr`: health,
#    readiness, metadata, an unknown model (ready false), infer with raw
#    and typed contents and Triton's parameters (uint64 priority, int64
#    timeout, double), and checks the answers against the example's
#    golden values.
#
# Idempotent; prints "test-oip: ok" on success.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/bin"
gen_go=v1.36.12   # as scripts/gen-proto.sh
gen_grpc=v1.5.1

if ! command -v protoc >/dev/null; then
	if command -v apt-get >/dev/null; then
		sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends protobuf-compiler >/dev/null
	else
		echo "test-oip: protoc not found and no apt-get (install Debian's protobuf-compiler)" >&2
		exit 1
	fi
fi
plugins="$cache/protoc-gen-go-$gen_go-grpc-$gen_grpc"
if [ ! -x "$plugins/protoc-gen-go" ] || [ ! -x "$plugins/protoc-gen-go-grpc" ]; then
	mkdir -p "$plugins"
	GOBIN="$plugins" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$gen_go"
	GOBIN="$plugins" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$gen_grpc"
fi

echo "test-oip: the client fixtures against the handlers and through the binary"
go test -count=1 -run 'TestClientFixtures' ./internal/server/
go test -count=1 -run 'TestOIPClientsThroughTheBinary' ./cmd/sluice/

work="$(mktemp -d)"
srv_pid=""
cleanup() {
	if [ -n "$srv_pid" ]; then kill "$srv_pid" 2>/dev/null || true; wait "$srv_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "test-oip: a Go client generated from proto/inference/grpc_predict_v2.proto (protoc $(protoc --version | cut -d' ' -f2))"
mkdir -p "$work/client/inference"
PATH="$plugins:$PATH" protoc -I "$root/proto" \
	--go_out="$work/client/inference" --go_opt=paths=source_relative --go_opt=Minference/grpc_predict_v2.proto=oipclient/inference \
	--go-grpc_out="$work/client/inference" --go-grpc_opt=paths=source_relative --go-grpc_opt=Minference/grpc_predict_v2.proto=oipclient/inference \
	inference/grpc_predict_v2.proto
mv "$work/client/inference/inference/"* "$work/client/inference/" && rmdir "$work/client/inference/inference"
grpc_v="$(go list -m -f '{{.Version}}' google.golang.org/grpc)"
pb_v="$(go list -m -f '{{.Version}}' google.golang.org/protobuf)"
cat > "$work/client/go.mod" <<EOF
module oipclient

go $(go list -m -f '{{.GoVersion}}' github.com/sluiceml/sluice)

require (
	google.golang.org/grpc $grpc_v
	google.golang.org/protobuf $pb_v
)
EOF
grep -v "^//go:build ignore" "$root/scripts/oipclient/main.go" > "$work/client/main.go"
(cd "$work/client" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 && go build -o "$work/oipclient" .)

go build -o "$work/sluice" ./cmd/sluice
mkdir -p "$work/models"
cp -r examples/iris "$work/models/"
"$work/sluice" serve --addr 127.0.0.1:0 --grpc-addr 127.0.0.1:0 --data "$work/data" --models "$work/models" 2>"$work/serve.log" &
srv_pid=$!
addr=""
for _ in $(seq 1 300); do
	addr="$(sed -n 's/.*serving grpc.*grpc_addr=\([0-9.:]*\).*/\1/p' "$work/serve.log" | head -1)"
	[ -n "$addr" ] && break
	kill -0 "$srv_pid" 2>/dev/null || { cat "$work/serve.log" >&2; echo "test-oip: sluice serve exited" >&2; exit 1; }
	sleep 0.1
done
[ -n "$addr" ] || { cat "$work/serve.log" >&2; echo "test-oip: no gRPC address in the log" >&2; exit 1; }
"$work/oipclient" "$addr"
echo "test-oip: ok"
