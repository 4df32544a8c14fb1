#!/usr/bin/python3
"""A small Open Inference Protocol v2 gRPC server that is not Sluice.

It stands for Triton or MLServer in the tests of Sluice's "oip" runtime
(internal/runtime/oip). It needs only Debian's python3-grpcio and
python3-protobuf; its stubs (grpc_predict_v2_pb2*.py) were generated from
proto/inference/grpc_predict_v2.proto by scripts/make_oip_python_stubs.sh.

    /usr/bin/python3 server.py --port 0      # prints "PORT <n>" on stdout

It listens on 127.0.0.1 and serves these models (version "1"):

  linear        FP32 input__0 [-1, 4] -> FP32 output__0 [-1, 1]
                logistic(w.x + b), w = WEIGHTS, b = BIAS, computed in float64
                from the float32 inputs; answers with raw_output_contents
  linear_typed  the same model, answering with typed contents (fp32_contents)
  seq           INT64 tokens [-1, -1] -> FP32 output__0 [-1, 2]:
                (sum of the row's token ids, the padded length L)
  liar          the metadata of linear, but answers one value short
  hang          the metadata of linear, but never answers (sleeps 60 s)

Requests may carry raw_input_contents or typed contents. Every ModelInfer
call and its rows are counted per model; ServerMetadata reports the counts
as extensions "calls/<model>=N" and "rows/<model>=N". With --exit-on-eof
(the tests use it) the server exits when its stdin closes, so a test that
dies does not leave it behind; otherwise it runs until killed.
"""

import argparse
import math
import os
import struct
import sys
import threading
import time
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import grpc_predict_v2_pb2 as pb  # noqa: E402
import grpc_predict_v2_pb2_grpc as pbg  # noqa: E402

WEIGHTS = [0.5, -1.25, 2.0, 0.75]
BIAS = -0.3
D = len(WEIGHTS)

LINEAR_META = dict(
    inputs=[("input__0", "FP32", [-1, D])],
    outputs=[("output__0", "FP32", [-1, 1])],
)
MODELS = {
    "linear": LINEAR_META,
    "linear_typed": LINEAR_META,
    "liar": LINEAR_META,
    "hang": LINEAR_META,
    "seq": dict(
        inputs=[("tokens", "INT64", [-1, -1])],
        outputs=[("output__0", "FP32", [-1, 2])],
    ),
}


class Failure(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def logistic(z):
    return 1.0 / (1.0 + math.exp(-z))


class Service(pbg.GRPCInferenceServiceServicer):
    def __init__(self):
        self.lock = threading.Lock()  # guards calls and rows
        self.calls = {}
        self.rows = {}

    def _model(self, name, version):
        if name not in MODELS:
            raise Failure(grpc.StatusCode.NOT_FOUND, "unknown model %r" % name)
        if version not in ("", "1"):
            raise Failure(grpc.StatusCode.NOT_FOUND, "model %r has no version %r" % (name, version))
        return MODELS[name]

    def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=True)

    def ServerReady(self, request, context):
        return pb.ServerReadyResponse(ready=True)

    def ModelReady(self, request, context):
        try:
            self._model(request.name, request.version)
        except Failure:
            return pb.ModelReadyResponse(ready=False)
        return pb.ModelReadyResponse(ready=True)

    def ServerMetadata(self, request, context):
        with self.lock:
            ext = ["calls/%s=%d" % kv for kv in sorted(self.calls.items())]
            ext += ["rows/%s=%d" % kv for kv in sorted(self.rows.items())]
        return pb.ServerMetadataResponse(name="oipserver.py", version="1", extensions=ext)

    def ModelMetadata(self, request, context):
        try:
            meta = self._model(request.name, request.version)
        except Failure as f:
            context.abort(f.code, f.message)
        T = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(
            name=request.name,
            versions=["1"],
            platform="python_oipserver",
            inputs=[T(name=n, datatype=t, shape=s) for n, t, s in meta["inputs"]],
            outputs=[T(name=n, datatype=t, shape=s) for n, t, s in meta["outputs"]],
        )

    def ModelInfer(self, request, context):
        try:
            return self._infer(request, context)
        except Failure as f:
            context.abort(f.code, f.message)

    def _infer(self, request, context):
        name = request.model_name
        meta = self._model(name, request.model_version)
        (in_name, in_type, in_shape) = meta["inputs"][0]
        if len(request.inputs) != 1:
            raise Failure(grpc.StatusCode.INVALID_ARGUMENT, "want 1 input, got %d" % len(request.inputs))
        t = request.inputs[0]
        if t.name != in_name or t.datatype != in_type:
            raise Failure(grpc.StatusCode.INVALID_ARGUMENT,
                          "want input %s %s, got %s %s" % (in_name, in_type, t.name, t.datatype))
        if len(t.shape) != 2 or t.shape[0] < 1 or t.shape[1] < 1 or (in_shape[1] > 0 and t.shape[1] != in_shape[1]):
            raise Failure(grpc.StatusCode.INVALID_ARGUMENT, "bad input shape %s" % list(t.shape))
        n, cols = t.shape[0], t.shape[1]
        fmt = "<%d%s" % (n * cols, "f" if in_type == "FP32" else "q")
        if request.raw_input_contents:
            raw = request.raw_input_contents[0]
            if len(raw) != struct.calcsize(fmt):
                raise Failure(grpc.StatusCode.INVALID_ARGUMENT,
                              "raw input has %d bytes, want %d" % (len(raw), struct.calcsize(fmt)))
            vals = struct.unpack(fmt, raw)
        elif in_type == "FP32":
            vals = list(t.contents.fp32_contents)
        else:
            vals = list(t.contents.int64_contents)
        if len(vals) != n * cols:
            raise Failure(grpc.StatusCode.INVALID_ARGUMENT, "got %d values, want %d" % (len(vals), n * cols))
        with self.lock:
            self.calls[name] = self.calls.get(name, 0) + 1
            self.rows[name] = self.rows.get(name, 0) + n
        if name == "hang":
            time.sleep(60)
        rows = [vals[i * cols:(i + 1) * cols] for i in range(n)]
        if name == "seq":
            out = []
            for r in rows:
                out += [float(sum(r)), float(cols)]
            k = 2
        else:
            out = [logistic(sum(w * x for w, x in zip(WEIGHTS, r)) + BIAS) for r in rows]
            k = 1
        (out_name, _, _) = meta["outputs"][0]
        o = pb.ModelInferResponse.InferOutputTensor(name=out_name, datatype="FP32", shape=[n, k])
        resp = pb.ModelInferResponse(model_name=name, model_version="1", id=request.id, outputs=[o])
        if name == "linear_typed":
            resp.outputs[0].contents.fp32_contents.extend(out)
            return resp
        if name == "liar":
            out = out[:-1]
        resp.raw_output_contents.append(struct.pack("<%df" % len(out), *out))
        return resp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: pick one and print it)")
    ap.add_argument("--exit-on-eof", action="store_true", help="exit when stdin closes")
    args = ap.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    pbg.add_GRPCInferenceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:%d" % args.port)
    if port == 0:
        sys.exit("cannot listen on 127.0.0.1:%d" % args.port)
    server.start()
    print("PORT %d" % port, flush=True)
    if args.exit_on_eof:
        sys.stdin.read()  # returns at EOF: the parent went away
        server.stop(0)
    else:
        server.wait_for_termination()


if __name__ == "__main__":
    main()
