#!/usr/bin/env bash
# Regenerates the Python stubs of proto/inference/grpc_predict_v2.proto used by
# the OIP v2 test server (internal/runtime/oip/testdata/oipserver). The stubs
# are committed: tests need only Debian's python3-grpcio and python3-protobuf
# at run time, not this script. Needs Debian's python3-grpc-tools; uses
# /usr/bin/python3 because that is the interpreter that sees Debian's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3
"$py" -c 'import grpc_tools.protoc' 2>/dev/null || {
	echo "grpc_tools not importable by $py: apt-get install python3-grpc-tools" >&2
	exit 1
}
out=internal/runtime/oip/testdata/oipserver
"$py" -m grpc_tools.protoc -I proto/inference \
	--python_out="$out" --grpc_python_out="$out" \
	grpc_predict_v2.proto
echo "wrote $out/grpc_predict_v2_pb2.py and $out/grpc_predict_v2_pb2_grpc.py"
