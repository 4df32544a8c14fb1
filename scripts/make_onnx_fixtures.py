#!/usr/bin/python3
"""Make the ONNX runtime's fixtures from real PyTorch (issue 6).

Writes:
  examples/mlp/model.onnx            an MLP 30->256->256->1 with sigmoid, trained
                                     briefly on a synthetic tabular dataset and
                                     exported with a dynamic batch axis
  examples/mlp/golden.json           golden examples (instance -> torch output)
  internal/runtime/onnx/testdata/mlp.model.yaml
                                     the example's model.yaml (golden examples
                                     from torch, tolerance 1e-5); it becomes
                                     examples/mlp/model.yaml once examples.go
                                     embeds */model.onnx
  internal/runtime/onnx/testdata/mlp_reference.json
                                     input rows and torch's outputs for batches
                                     of 1, 7 and 64 rows
  internal/runtime/onnx/testdata/*.onnx
                                     small hand-built graphs (onnx.helper) for
                                     the shape checks: a vector output, three
                                     outputs, a float64 input, a fixed batch, ...

Needs Debian's python3-torch and python3-onnx; the pyenv python3 on PATH cannot
see them, so run it with /usr/bin/python3:

    apt-get install -y python3-torch python3-onnx
    /usr/bin/python3 scripts/make_onnx_fixtures.py

The legacy TorchScript exporter is used (torch.onnx.export without dynamo):
the dynamo exporter needs onnxscript, which Debian does not package.
"""
import io
import json
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
EXAMPLE = os.path.join(ROOT, "examples", "mlp")
TESTDATA = os.path.join(ROOT, "internal", "runtime", "onnx", "testdata")
D = 30
OPSET = 17

torch.manual_seed(6)
rng = np.random.default_rng(6)


def make_data(n):
    """Synthetic tabular data: 30 standard-normal features, a label from a
    nonlinear score (interactions and a threshold), 25% noise-free signal."""
    x = rng.standard_normal((n, D)).astype(np.float32)
    score = (1.2 * x[:, 0] - 0.8 * x[:, 1] + 0.9 * x[:, 2] * x[:, 3]
             + 0.7 * np.abs(x[:, 4]) - 0.5 * (x[:, 5] > 0.5) + 0.3 * x[:, 6:12].sum(axis=1)
             - 0.6 * np.sin(2 * x[:, 12]))
    y = (rng.random(n) < 1 / (1 + np.exp(-score))).astype(np.float32)
    return x, y


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(D, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 1), torch.nn.Sigmoid())

    def forward(self, x):
        return self.net(x)


def train():
    x, y = make_data(8000)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).unsqueeze(1)
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    lossf = torch.nn.BCELoss()
    for epoch in range(8):
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), 256):
            idx = perm[i:i + 256]
            opt.zero_grad()
            loss = lossf(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    model.eval()
    xv, yv = make_data(2000)
    with torch.no_grad():
        p = model(torch.from_numpy(xv)).numpy()[:, 0]
    acc = ((p > 0.5) == (yv > 0.5)).mean()
    print(f"trained: final batch loss {loss.item():.4f}, holdout accuracy {acc:.3f}")
    return model


def export_mlp(model):
    buf = io.BytesIO()
    torch.onnx.export(model, torch.zeros(1, D), buf,
                      input_names=["features"], output_names=["probability"],
                      dynamic_axes={"features": {0: "batch"}, "probability": {0: "batch"}},
                      opset_version=OPSET, do_constant_folding=True)
    data = buf.getvalue()
    m = onnx.load_from_string(data)
    onnx.checker.check_model(m)
    m.producer_name = "pytorch"
    m.doc_string = "Sluice example: MLP 30-256-256-1 (sigmoid), scripts/make_onnx_fixtures.py"
    data = m.SerializeToString()
    os.makedirs(EXAMPLE, exist_ok=True)
    with open(os.path.join(EXAMPLE, "model.onnx"), "wb") as f:
        f.write(data)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"examples/mlp/model.onnx: {len(data)} bytes, {nparams} parameters")


def f32list(a):
    # repr of a float32 widened to float64 round-trips exactly through JSON.
    return [float(v) for v in np.asarray(a, dtype=np.float32).ravel()]


def torch_out(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(np.asarray(x, dtype=np.float32))).numpy()


def references(model):
    cases = []
    for n in (1, 7, 64):
        x, _ = make_data(n)
        cases.append({"rows": n, "input": f32list(x), "output": f32list(torch_out(model, x))})
    ref = {"model": "examples/mlp/model.onnx", "features": D, "outputs": 1,
           "torch": torch.__version__, "cases": cases}
    with open(os.path.join(TESTDATA, "mlp_reference.json"), "w") as f:
        json.dump(ref, f)
    print("testdata/mlp_reference.json:", [c["rows"] for c in cases])


def golden(model):
    """Golden instances with 4-decimal inputs (so YAML holds them exactly as
    float32 sees them) and torch's outputs."""
    x, _ = make_data(4)
    x = np.round(x, 4).astype(np.float32)
    out = torch_out(model, x)[:, 0]
    items = []
    for row, p in zip(x, out):
        inst = {f"f{i}": float(np.format_float_positional(v, precision=4)) for i, v in enumerate(row)}
        items.append({"instance": inst, "expect": {"probability": float(p)}})
    with open(os.path.join(EXAMPLE, "golden.json"), "w") as f:
        json.dump(items, f, indent=1)
    lines = [
        "# An MLP (30 -> 256 -> 256 -> 1, sigmoid) trained in PyTorch on a synthetic",
        "# tabular dataset and exported to ONNX by scripts/make_onnx_fixtures.py.",
        "name: mlp",
        "description: synthetic tabular classifier, a PyTorch MLP served by ONNX Runtime",
        "runtime: onnx",
        "artifact: model.onnx",
        "input:",
        "  schema: mlp-input@1",
        "  fields:",
    ]
    lines += [f"    - {{name: f{i}, type: float, min: -10, max: 10}}" for i in range(D)]
    lines += [
        "output:",
        "  schema: mlp-output@1",
        "  fields: [{name: probability}]",
        "onnx:",
        "  intraOpThreads: 1",
        "  interOpThreads: 1",
        "serving:",
        "  defaultDeadline: 50ms",
        "  maxBatchSize: 64",
        "  maxBatchDelay: 2ms",
        "golden:",
    ]
    for it in items:
        inst = ", ".join(f"{k}: {v}" for k, v in it["instance"].items())
        lines.append(f"  - instance: {{{inst}}}")
        lines.append(f"    expect: {{probability: {it['expect']['probability']!r}}}")
        lines.append("    tolerance: 1.0e-5")
    with open(os.path.join(TESTDATA, "mlp.model.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("golden:", [it["expect"]["probability"] for it in items])


def save(name, graph, opset=OPSET):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="make_onnx_fixtures")
    m.ir_version = 8
    onnx.checker.check_model(m)
    with open(os.path.join(TESTDATA, name), "wb") as f:
        f.write(m.SerializeToString())


def weights(name, shape, dtype=np.float32):
    # Deterministic small weights: w[i] = (i+1)/100 (Go tests recompute them).
    w = (np.arange(int(np.prod(shape)), dtype=np.float64) + 1) / 100
    return helper.make_tensor(name, TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT,
                              shape, w.astype(dtype).ravel().tolist())


def tiny_graphs():
    F, DB = TensorProto.FLOAT, TensorProto.DOUBLE
    # vec: x [batch, 30] -> MatMul w[30] -> y [batch]: k = 1 as a vector.
    save("vec.onnx", helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["score"])], "vec",
        [helper.make_tensor_value_info("x", F, ["batch", D])],
        [helper.make_tensor_value_info("score", F, ["batch"])], [weights("w", [D])]))
    # three: x [N, 30] -> MatMul w[30,3] -> y [N, 3].
    save("three.onnx", helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "three",
        [helper.make_tensor_value_info("x", F, ["N", D])],
        [helper.make_tensor_value_info("y", F, ["N", 3])], [weights("w", [D, 3])]))
    # f64: a float64 input.
    save("f64.onnx", helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "f64",
        [helper.make_tensor_value_info("x", DB, ["N", D])],
        [helper.make_tensor_value_info("y", DB, ["N", 1])], [weights("w", [D, 1], np.float64)]))
    # fixed: batch fixed to 1 (exported without a dynamic batch axis).
    save("fixed.onnx", helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "fixed",
        [helper.make_tensor_value_info("x", F, [1, D])],
        [helper.make_tensor_value_info("y", F, [1, 1])], [weights("w", [D, 1])]))
    # two_inputs: a and b [N, 30].
    save("two_inputs.onnx", helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("MatMul", ["s", "w"], ["y"])], "two_inputs",
        [helper.make_tensor_value_info("a", F, ["N", D]), helper.make_tensor_value_info("b", F, ["N", D])],
        [helper.make_tensor_value_info("y", F, ["N", 1])], [weights("w", [D, 1])]))
    # two_outputs: y and z.
    save("two_outputs.onnx", helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Neg", ["y"], ["z"])], "two_outputs",
        [helper.make_tensor_value_info("x", F, ["N", D])],
        [helper.make_tensor_value_info("y", F, ["N", 1]), helper.make_tensor_value_info("z", F, ["N", 1])],
        [weights("w", [D, 1])]))
    # rank3: x [N, 5, 6].
    save("rank3.onnx", helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["f"], axis=1), helper.make_node("MatMul", ["f", "w"], ["y"])], "rank3",
        [helper.make_tensor_value_info("x", F, ["N", 5, 6])],
        [helper.make_tensor_value_info("y", F, ["N", 1])], [weights("w", [D, 1])]))
    # int_out: output int64 (ArgMax).
    save("int_out.onnx", helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("ArgMax", ["p"], ["label"], axis=1)], "int_out",
        [helper.make_tensor_value_info("x", F, ["N", D])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["N", 1])], [weights("w", [D, 3])]))
    # sym_features: the feature dimension is symbolic.
    save("sym_features.onnx", helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)], "sym_features",
        [helper.make_tensor_value_info("x", F, ["N", "D"])],
        [helper.make_tensor_value_info("y", F, ["N", 1])],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [1])]))
    print("testdata: tiny graphs written")


if __name__ == "__main__":
    os.makedirs(TESTDATA, exist_ok=True)
    model = train()
    export_mlp(model)
    references(model)
    golden(model)
    tiny_graphs()
