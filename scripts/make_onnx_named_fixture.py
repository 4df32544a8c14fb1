#!/usr/bin/python3
"""Writes internal/runtime/onnx/testdata/named.onnx: a tiny ONNX graph
x [batch, 3] -> MatMul w[3, 1] -> y [batch, 1] whose metadata property
feature_names (a JSON list) names its input columns age, income, tenure,
as a user adds them with onnx.helper.set_model_props. The onnx runtime
reads them into runtime.Info.FeatureNames for the check of a package's
field order (docs/model-yaml.md, "Field order").

    /usr/bin/python3 scripts/make_onnx_named_fixture.py   # Debian's python3-onnx
"""
import json
import os

import onnx
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "internal", "runtime", "onnx", "testdata", "named.onnx")

g = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["y"])], "named",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1])],
    [helper.make_tensor("w", TensorProto.FLOAT, [3, 1], [0.01, 0.02, 0.03])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_onnx_named_fixture")
m.ir_version = 8
helper.set_model_props(m, {"feature_names": json.dumps(["age", "income", "tenure"])})
onnx.checker.check_model(m)
with open(OUT, "wb") as f:
    f.write(m.SerializeToString())
