#!/usr/bin/env bash
# Regenerates the Go code of proto/ (committed; builds and tests never run
# this). Needs protoc (Debian protobuf-compiler) and the two Go plugins at the
# versions below (go install puts them in $(go env GOPATH)/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
command -v protoc-gen-go >/dev/null || go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
command -v protoc-gen-go-grpc >/dev/null || go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
mod=github.com/sluiceml/sluice
protoc -I proto \
  --go_out=. --go_opt=module=$mod \
  --go-grpc_out=. --go-grpc_opt=module=$mod \
  inference/grpc_predict_v2.proto sluice/worker/v1/worker.proto
