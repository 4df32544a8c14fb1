#!/usr/bin/python3
"""Writes internal/oip/testdata/clients/*.json: the requests the official
Open Inference Protocol clients send for each ordinary call, as facts of
the protocol read from their public sources, with the answer each client
expects. internal/server's TestClientFixtures replays every one against
the real handlers (REST and gRPC) and checks the answer.

The clients cannot be installed here (not in Debian), so their request
building is transcribed, line by line, from:

  tritonclient  github.com/triton-inference-server/client  @ 58a44caa0dce77303115302e6dbdf64626b2b093
                src/python/library/tritonclient/{http,grpc}/
  kserve        github.com/kserve/kserve                   @ aaac4e294dae2c7b1aa1886447793f3aa1c30912
                python/kserve/kserve/

Each fixture names the file and lines it follows. What matters is what
goes on the wire: paths, headers (tritonclient's geventhttpclient sends
no Content-Type), JSON key order and number text (numpy float32 values
become Python floats with .item(): 5.1 is 5.099999904632568), binary
layout (numpy tobytes, little-endian; BYTES as 4-byte length + bytes),
compression (gzip.compress, zlib.compress), gRPC parameter kinds
(priority is a uint64_param, timeout an int64_param, a float custom
parameter a double_param).

Run: /usr/bin/python3 scripts/make_oip_client_fixtures.py (needs Debian's
python3-numpy). The output is deterministic.
"""
import base64
import gzip
import json
import os
import struct
import sys
import zlib

import numpy as np

TRITON = "triton-inference-server/client@58a44caa0dce77303115302e6dbdf64626b2b093"
KSERVE = "kserve/kserve@aaac4e294dae2c7b1aa1886447793f3aa1c30912"
TH = "src/python/library/tritonclient/http/"
TG = "src/python/library/tritonclient/grpc/"
KS = "python/kserve/kserve/"

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "internal", "oip", "testdata", "clients")

# The golden rows of examples/iris and examples/churn, and what they give.
IRIS = {"sepalLength": 5.1, "sepalWidth": 3.5, "petalLength": 1.4, "petalWidth": 0.2}
IRIS_OUT = {"setosa": [0.9531188], "versicolor": [0.02448534], "virginica": [0.022395868]}
CHURN_OUT = {"churnProbability": [0.6735384908678002]}


def dumps(obj):
    """rapidjson.dumps / orjson.dumps: compact, keys in insertion order."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def b64(b):
    return base64.b64encode(b).decode()


def serialize_bytes(strs):
    """tritonclient.utils.serialize_byte_tensor (utils/__init__.py:208)."""
    return b"".join(struct.pack("<I", len(s)) + s for s in strs)


def fixtures():
    fx = []

    def rest(name, client, call, source, method, path, expect, headers=None, body=b"", note=""):
        f = {"name": name, "client": client, "call": call, "source": source, "transport": "rest",
             "request": {"method": method, "path": path, "headers": headers or {}}, "expect": expect}
        if body:
            try:
                f["request"]["body"] = body.decode()
            except UnicodeDecodeError:
                f["request"]["body_base64"] = b64(body)
        if note:
            f["note"] = note
        fx.append(f)

    def grpc(name, client, call, source, rpc, message, expect, note=""):
        f = {"name": name, "client": client, "call": call, "source": source, "transport": "grpc",
             "request": {"rpc": rpc, "message": message}, "expect": expect}
        if note:
            f["note"] = note
        fx.append(f)

    th = "tritonclient.http (" + TRITON + ")"
    tg = "tritonclient.grpc (" + TRITON + ")"
    kr = "kserve InferenceRESTClient (" + KSERVE + ")"
    kg = "kserve InferenceGRPCClient (" + KSERVE + ")"

    # --- tritonclient.http: health, metadata, readiness (_client.py). The
    # client reads status 200 as true, anything else as false.
    rest("triton-http-server-live", th, "is_server_live()", TH + "_client.py:340-368", "GET", "/v2/health/live", {"status": 200})
    rest("triton-http-server-ready", th, "is_server_ready()", TH + "_client.py:371-399", "GET", "/v2/health/ready", {"status": 200})
    rest("triton-http-model-ready", th, 'is_model_ready("iris")', TH + "_client.py:401-445", "GET", "/v2/models/iris/ready", {"status": 200})
    rest("triton-http-model-version-ready", th, 'is_model_ready("iris", "1")', TH + "_client.py:433-437", "GET", "/v2/models/iris/versions/1/ready", {"status": 200})
    rest("triton-http-unknown-model-ready", th, 'is_model_ready("nope")', TH + "_client.py:439-445", "GET", "/v2/models/nope/ready",
         {"status": 404}, note="not 200: the client returns False")
    rest("triton-http-server-metadata", th, "get_server_metadata()", TH + "_client.py:447-480", "GET", "/v2",
         {"status": 200, "json": {"name": "sluice", "extensions": ["binary_tensor_data"]}})
    rest("triton-http-model-metadata", th, 'get_model_metadata("iris")', TH + "_client.py:482-530", "GET", "/v2/models/iris",
         {"status": 200, "json": {"name": "iris", "versions": ["1"], "inputs": [{"name": "sepalLength", "datatype": "FP32", "shape": [-1]}, {}, {}, {}]}})

    # --- tritonclient.http infer. _utils.py:90-151 builds the body:
    # {"id"?, "inputs", "outputs"?, "parameters"?}; with no requested
    # output it sets binary_data_output true; each InferRequestedOutput
    # carries {"binary_data": <bool>} (_requested_output.py:51-57, 106-117).
    iris32 = {k: np.array([v], dtype=np.float32) for k, v in IRIS.items()}

    # JSON: set_data_from_numpy(binary_data=False) (_infer_input.py:196).
    body = {"inputs": [{"name": k, "shape": [1], "datatype": "FP32", "data": [x.item() for x in a.flatten()]} for k, a in iris32.items()],
            "outputs": [{"name": "setosa", "parameters": {"binary_data": False}}]}
    rest("triton-http-infer-json", th, 'infer("iris", inputs (binary_data=False), outputs=[InferRequestedOutput("setosa", binary_data=False)])',
         TH + "_utils.py:90-151, _infer_input.py:196, _requested_output.py:51-57, _client.py:1466-1480", "POST", "/v2/models/iris/infer",
         {"status": 200, "json": {"model_name": "iris", "model_version": "1"}, "outputs": {"setosa": IRIS_OUT["setosa"]}, "binary": False},
         body=dumps(body).encode(), note="no Content-Type: geventhttpclient sends none")

    # Binary (the defaults): set_data_from_numpy() keeps the bytes and
    # sets binary_data_size (_infer_input.py:212-213); no outputs named,
    # so binary_data_output (_utils.py:119-122); the JSON's length goes in
    # Inference-Header-Content-Length (_client.py:1462-1465).
    def triton_binary(inputs, params=None, outputs=None, request_id=""):
        req = {}
        if request_id:
            req["id"] = request_id
        tensors, raws = [], []
        for name, dt, arr in inputs:
            raw = serialize_bytes(list(arr.flatten())) if dt == "BYTES" else arr.tobytes()
            tensors.append({"name": name, "shape": list(arr.shape), "datatype": dt, "parameters": {"binary_data_size": len(raw)}})
            raws.append(raw)
        req["inputs"] = tensors
        p = dict(params or {})
        if outputs:
            req["outputs"] = [{"name": o, "parameters": {"binary_data": True}} for o in outputs]
        else:
            p["binary_data_output"] = True
        if p:
            req["parameters"] = p
        j = dumps(req).encode()
        return j + b"".join(raws), len(j)

    iris_in = [(k, "FP32", a) for k, a in iris32.items()]
    b, n = triton_binary(iris_in)
    rest("triton-http-infer-binary", th, 'infer("iris", inputs (set_data_from_numpy defaults))',
         TH + "_utils.py:90-151, _infer_input.py:206-213, _client.py:1462-1480", "POST", "/v2/models/iris/infer",
         {"status": 200, "json": {"model_name": "iris"}, "outputs": IRIS_OUT, "binary": True},
         headers={"Inference-Header-Content-Length": str(n)}, body=b)

    # With the call's options: request_id, priority, timeout (µs) and a
    # custom parameter (_utils.py:102-133); outputs requested by name.
    b, n = triton_binary(iris_in, params={"priority": 1, "timeout": 2000000, "tag": "fixture"}, outputs=["virginica"], request_id="1")
    rest("triton-http-infer-parameters", th, 'infer("iris", inputs, outputs=[InferRequestedOutput("virginica")], request_id="1", priority=1, timeout=2000000, parameters={"tag": "fixture"})',
         TH + "_utils.py:90-151, _requested_output.py:51-57", "POST", "/v2/models/iris/infer",
         {"status": 200, "json": {"id": "1", "model_name": "iris"}, "outputs": {"virginica": IRIS_OUT["virginica"]}, "binary": True},
         headers={"Inference-Header-Content-Length": str(n)}, body=b)

    # Compression (_client.py:1439-1450): the header length is the
    # uncompressed JSON's; the server decompresses first.
    b, n = triton_binary(iris_in)
    rest("triton-http-infer-gzip", th, 'infer("iris", inputs, request_compression_algorithm="gzip")', TH + "_client.py:1439-1444", "POST", "/v2/models/iris/infer",
         {"status": 200, "outputs": IRIS_OUT, "binary": True},
         headers={"Inference-Header-Content-Length": str(n), "Content-Encoding": "gzip"}, body=gzip.compress(b, mtime=0))
    rest("triton-http-infer-deflate", th, 'infer("iris", inputs, request_compression_algorithm="deflate")', TH + "_client.py:1445-1450", "POST", "/v2/models/iris/infer",
         {"status": 200, "outputs": IRIS_OUT, "binary": True},
         headers={"Inference-Header-Content-Length": str(n), "Content-Encoding": "deflate"}, body=zlib.compress(b))

    # BYTES and narrower datatypes: churn's plan as BYTES
    # (serialize_byte_tensor), its tickets as INT32 and UINT8, its tenure
    # as FP16, all the ways numpy arrays of those dtypes are sent; the
    # same request_id "1" as above with other rows: another request, not
    # an idempotency conflict.
    churn = [("tenureMonths", "FP32", np.array([3], dtype=np.float32)), ("supportTickets", "INT32", np.array([4], dtype=np.int32)),
             ("plan", "BYTES", np.array([b"basic"], dtype=np.object_))]
    b, n = triton_binary(churn, request_id="1")
    rest("triton-http-infer-bytes-int32", th, 'infer("churn", FP32, INT32 and BYTES inputs, request_id="1")',
         TH + "_infer_input.py:198-213, ../utils/__init__.py:208-260", "POST", "/v2/models/churn/infer",
         {"status": 200, "json": {"id": "1"}, "outputs": CHURN_OUT, "binary": True},
         headers={"Inference-Header-Content-Length": str(n)}, body=b)
    churn16 = [("tenureMonths", "FP16", np.array([3], dtype=np.float16)), ("supportTickets", "UINT8", np.array([4], dtype=np.uint8)),
               ("plan", "BYTES", np.array([b"basic"], dtype=np.object_))]
    b, n = triton_binary(churn16)
    rest("triton-http-infer-fp16-uint8", th, 'infer("churn", FP16, UINT8 and BYTES inputs)', TH + "_infer_input.py:206-213", "POST", "/v2/models/churn/infer",
         {"status": 200, "outputs": CHURN_OUT, "binary": True},
         headers={"Inference-Header-Content-Length": str(n)}, body=b)

    # --- tritonclient.grpc: the messages of _client.py and _utils.py.
    grpc("triton-grpc-server-live", tg, "is_server_live()", TG + "_client.py:267-305", "ServerLive", {}, {"code": "OK", "json": {"live": True}})
    grpc("triton-grpc-server-ready", tg, "is_server_ready()", TG + "_client.py:307-344", "ServerReady", {}, {"code": "OK", "json": {"ready": True}})
    grpc("triton-grpc-model-ready", tg, 'is_model_ready("iris")', TG + "_client.py:346-395", "ModelReady", {"name": "iris", "version": ""}, {"code": "OK", "json": {"ready": True}})
    grpc("triton-grpc-unknown-model-ready", tg, 'is_model_ready("nope")', TG + "_client.py:380-395", "ModelReady", {"name": "nope", "version": ""},
         {"code": "OK", "json": {"ready": False}}, note="Triton answers OK, ready false (core server.cc ModelIsReady); any other status raises in the client")
    grpc("triton-grpc-model-metadata", tg, 'get_model_metadata("iris")', TG + "_client.py:453-500", "ModelMetadata", {"name": "iris", "version": ""},
         {"code": "OK", "json": {"name": "iris", "versions": ["1"]}})

    # _utils.py:80-139: raw_input_contents from set_data_from_numpy
    # (_infer_input.py:173); the client reads raw_output_contents only
    # (_infer_result.py:63-96).
    tensors = [{"name": k, "datatype": "FP32", "shape": ["1"]} for k in IRIS]
    raws = [b64(a.tobytes()) for a in iris32.values()]
    grpc("triton-grpc-infer", tg, 'infer("iris", inputs)', TG + "_utils.py:80-101, _infer_input.py:160-173, _infer_result.py:63-96", "ModelInfer",
         {"model_name": "iris", "model_version": "", "inputs": tensors, "raw_input_contents": raws},
         {"code": "OK", "json": {"model_name": "iris", "model_version": "1"}, "outputs": IRIS_OUT, "raw": True})
    grpc("triton-grpc-infer-parameters", tg,
         'infer("iris", inputs, outputs=[InferRequestedOutput("virginica")], request_id="7", priority=2, timeout=2000000, parameters={"temperature": 0.5, "tag": "fixture"})',
         TG + "_utils.py:96-137", "ModelInfer",
         {"model_name": "iris", "model_version": "", "id": "7", "inputs": tensors, "outputs": [{"name": "virginica"}],
          "parameters": {"priority": {"uint64_param": "2"}, "timeout": {"int64_param": "2000000"}, "temperature": {"double_param": 0.5}, "tag": {"string_param": "fixture"}},
          "raw_input_contents": raws},
         {"code": "OK", "json": {"id": "7"}, "outputs": {"virginica": IRIS_OUT["virginica"]}, "raw": True})
    grpc("triton-grpc-infer-sequence", tg, 'infer("iris", inputs, request_id="7", sequence_id=42, sequence_start=True)', TG + "_utils.py:105-111", "ModelInfer",
         {"model_name": "iris", "model_version": "", "id": "7", "inputs": tensors,
          "parameters": {"sequence_id": {"int64_param": "42"}, "sequence_start": {"bool_param": True}, "sequence_end": {"bool_param": False}},
          "raw_input_contents": raws},
         {"code": "OK", "json": {"id": "7"}, "outputs": IRIS_OUT, "raw": True}, note="the same id as the call before: echoed, not a replay or a conflict")

    # --- KServe REST (inference_client.py): live and ready read the JSON
    # and raise on a non-2xx status; model ready reads the status.
    rest("kserve-rest-server-live", kr, "is_server_live(base_url)", KS + "inference_client.py:604-642", "GET", "/v2/health/live", {"status": 200, "json": {"live": True}})
    rest("kserve-rest-server-ready", kr, "is_server_ready(base_url)", KS + "inference_client.py:572-602", "GET", "/v2/health/ready", {"status": 200, "json": {"ready": True}})
    rest("kserve-rest-model-ready", kr, 'is_model_ready(base_url, "iris")', KS + "inference_client.py:644-696", "GET", "/v2/models/iris/ready", {"status": 200})

    # infer: InferRequest.to_rest (protocol/infer_type.py:717-786) writes
    # {"id": uuid4, "model_name", "inputs", "outputs"?, "parameters"?};
    # a dict body gets content-type application/json, a binary one
    # application/octet-stream (inference_client.py:491-502).
    body = {"id": "5f0c6f5e-93c4-4d2e-9a53-3b1f1c0e2a11", "model_name": "iris",
            "inputs": [{"name": k, "shape": [1], "datatype": "FP32", "data": [v]} for k, v in IRIS.items()]}
    rest("kserve-rest-infer-json", kr, 'infer(base_url, InferRequest("iris", [InferInput(name, [1], "FP32", data=[v])]))',
         KS + "protocol/infer_type.py:717-786, inference_client.py:447-526", "POST", "/v2/models/iris/infer",
         {"status": 200, "json": {"id": body["id"], "model_name": "iris"}, "outputs": IRIS_OUT, "binary": False},
         headers={"content-type": "application/json"}, body=dumps(body).encode())
    # numpy data with set_data_from_numpy(binary_data=True): the input's
    # parameters carry binary_data_size (infer_type.py:325-338); a
    # requested output asks binary_data.
    req = {"id": "6a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "model_name": "iris",
           "inputs": [{"name": k, "shape": [1], "datatype": "FP32", "parameters": {"binary_data_size": 4}} for k in IRIS],
           "outputs": [{"name": "setosa", "parameters": {"binary_data": True}}, {"name": "virginica"}],
           "parameters": {"binary_data_output": False}}
    j = dumps(req).encode()
    rest("kserve-rest-infer-binary", kr, 'infer(base_url, InferRequest("iris", inputs with set_data_from_numpy(binary_data=True), request_outputs=[...]))',
         KS + "protocol/infer_type.py:325-338, 717-786, inference_client.py:491-497", "POST", "/v2/models/iris/infer",
         {"status": 200, "json": {"id": req["id"]}, "outputs": {"setosa": IRIS_OUT["setosa"], "virginica": IRIS_OUT["virginica"]}, "binary": True},
         headers={"Inference-Header-Content-Length": str(len(j)), "content-type": "application/octet-stream"},
         body=j + b"".join(a.tobytes() for a in iris32.values()))

    # --- KServe gRPC (inference_client.py:197-238, infer_type.py:791-847):
    # numpy data goes raw, each input with binary_data_size as an
    # int64_param (to_grpc_parameters, infer_type.py:1522-1545); list data
    # goes in the datatype's contents field.
    grpc("kserve-grpc-server-live", kg, "is_server_live()", KS + "inference_client.py:269-296", "ServerLive", {}, {"code": "OK", "json": {"live": True}})
    grpc("kserve-grpc-server-ready", kg, "is_server_ready()", KS + "inference_client.py:240-267", "ServerReady", {}, {"code": "OK", "json": {"ready": True}})
    grpc("kserve-grpc-model-ready", kg, 'is_model_ready("iris")', KS + "inference_client.py:298-334", "ModelReady", {"name": "iris"}, {"code": "OK", "json": {"ready": True}})
    grpc("kserve-grpc-infer-raw", kg, 'infer(InferRequest("iris", inputs with numpy data))', KS + "protocol/infer_type.py:791-847, 1522-1545", "ModelInfer",
         {"model_name": "iris", "inputs": [{"name": k, "datatype": "FP32", "shape": ["1"], "parameters": {"binary_data_size": {"int64_param": "4"}}} for k in IRIS],
          "raw_input_contents": raws},
         {"code": "OK", "json": {"model_name": "iris"}, "outputs": IRIS_OUT, "raw": True})
    grpc("kserve-grpc-infer-contents", kg, 'infer(InferRequest("iris", [InferInput(name, [1], "FP32", data=[v])], request_id="1"))',
         KS + "protocol/infer_type.py:791-847", "ModelInfer",
         {"id": "1", "model_name": "iris", "inputs": [{"name": k, "datatype": "FP32", "shape": ["1"], "contents": {"fp32_contents": [v]}} for k, v in IRIS.items()]},
         {"code": "OK", "json": {"id": "1"}, "outputs": IRIS_OUT, "raw": False})
    return fx


def main():
    os.makedirs(OUT, exist_ok=True)
    for old in os.listdir(OUT):
        if old.endswith(".json"):
            os.remove(os.path.join(OUT, old))
    fx = fixtures()
    for i, f in enumerate(fx):
        with open(os.path.join(OUT, "%02d-%s.json" % (i + 1, f["name"])), "w") as fh:
            json.dump(f, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
    print("%d fixtures in %s" % (len(fx), os.path.normpath(OUT)), file=sys.stderr)


if __name__ == "__main__":
    main()
