#!/usr/bin/python3
"""Make the multi-input ONNX fixture (issue 23 item 4): a text classifier
whose graph is built by hand with onnx.helper, and its expected outputs
computed by numpy from the same weights.

Writes:
  internal/runtime/onnx/testdata/text.onnx      inputs "input_ids" and
                                                "attention_mask", both int64
                                                [batch, seq] (dynamic axes),
                                                output "probs" float32
                                                [batch, 3]
  internal/runtime/onnx/testdata/text_ref.json  rows of lengths 1..128 (ids,
                                                mask) and numpy's softmax for
                                                each row alone, unpadded
  examples/text/model.onnx, examples/text/model.yaml
                                                the same model as a package,
                                                with golden examples

The model is an embedding bag: Gather the ids' embeddings (vocab 1000,
dim 32), multiply by the mask, ReduceSum over the sequence and divide by
the mask's sum (at least 1), a hidden layer (MatMul, Add, Relu), then
MatMul, Add and Softmax over 3 classes. The mask, not the pad id, says
which positions count: padding a row with any id and mask 0 does not
change its output. Some reference rows carry a 0 inside the mask (a
masked token, as a tokenizer's special tokens can be).

Run with Debian's python3-onnx (1.12) and numpy:

    /usr/bin/python3 scripts/make_onnx_text_fixture.py
"""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TESTDATA = os.path.join(ROOT, "internal", "runtime", "onnx", "testdata")
EXAMPLE = os.path.join(ROOT, "examples", "text")
VOCAB, DIM, HIDDEN, CLASSES, MAXLEN = 1000, 32, 64, 3, 128
LABELS = ["negative", "neutral", "positive"]


def weights(rng):
    return {
        "emb": (rng.standard_normal((VOCAB, DIM)) * 0.8).astype(np.float32),
        "w1": (rng.standard_normal((DIM, HIDDEN)) * 0.5).astype(np.float32),
        "b1": (rng.standard_normal((HIDDEN,)) * 0.1).astype(np.float32),
        "w2": (rng.standard_normal((HIDDEN, CLASSES)) * 0.5).astype(np.float32),
        "b2": (rng.standard_normal((CLASSES,)) * 0.1).astype(np.float32),
    }


def graph(w):
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    probs = helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", CLASSES])
    inits = [numpy_helper.from_array(v, name) for name, v in w.items()]
    inits += [
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis_seq"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis_last"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
    ]
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["e"], axis=0),           # [b, s, D]
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),  # [b, s]
        helper.make_node("Unsqueeze", ["m", "axis_last"], ["m3"]),                # [b, s, 1]
        helper.make_node("Mul", ["e", "m3"], ["em"]),
        helper.make_node("ReduceSum", ["em", "axis_seq"], ["sum"], keepdims=0),   # [b, D]
        helper.make_node("ReduceSum", ["m", "axis_seq"], ["cnt0"], keepdims=1),   # [b, 1]
        helper.make_node("Max", ["cnt0", "one"], ["cnt"]),
        helper.make_node("Div", ["sum", "cnt"], ["pooled"]),
        helper.make_node("MatMul", ["pooled", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["l0"]),
        helper.make_node("Add", ["l0", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    g = helper.make_graph(nodes, "text-embedding-bag", [ids, mask], [probs], initializer=inits)
    m = helper.make_model(g, producer_name="sluice make_onnx_text_fixture.py",
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def reference(w, ids, mask):
    """numpy's forward pass of one unpadded row, in float32 like ONNX Runtime."""
    ids = np.asarray(ids, dtype=np.int64)
    m = np.asarray(mask, dtype=np.float32)
    e = w["emb"][ids] * m[:, None]
    pooled = e.sum(axis=0) / max(np.float32(m.sum()), np.float32(1.0))
    h = np.maximum(pooled @ w["w1"] + w["b1"], 0)
    logits = h @ w["w2"] + w["b2"]
    z = np.exp(logits - logits.max())
    return (z / z.sum()).astype(np.float32)


def rows(rng):
    out = []
    for length in [1, 2, 3, 5, 8, 9, 13, 16, 17, 24, 31, 32, 33, 47, 64, 65, 90, 100, 127, 128]:
        ids = rng.integers(1, VOCAB, size=length)
        mask = np.ones(length, dtype=np.int64)
        if length >= 9:
            mask[length // 3] = 0  # a masked position inside the row
        out.append((ids.tolist(), mask.tolist()))
    return out


def main():
    rng = np.random.default_rng(23)
    w = weights(rng)
    model = graph(w)
    data = model.SerializeToString()
    with open(os.path.join(TESTDATA, "text.onnx"), "wb") as f:
        f.write(data)
    ref = []
    for ids, mask in rows(rng):
        p = reference(w, ids, mask)
        ref.append({"input_ids": ids, "attention_mask": mask, "probs": [float(x) for x in p]})
    with open(os.path.join(TESTDATA, "text_ref.json"), "w") as f:
        json.dump({"labels": LABELS, "rows": ref}, f, indent=1)
        f.write("\n")

    os.makedirs(EXAMPLE, exist_ok=True)
    with open(os.path.join(EXAMPLE, "model.onnx"), "wb") as f:
        f.write(data)
    golden = []
    for r in (ref[0], ref[6], ref[-1]):
        golden.append(
            "  - instance: {input_ids: %s, attention_mask: %s}\n"
            "    expect: {%s}\n"
            "    tolerance: 1e-5\n" % (
                json.dumps(r["input_ids"]), json.dumps(r["attention_mask"]),
                ", ".join("%s: %r" % (l, p) for l, p in zip(LABELS, r["probs"]))))
    with open(os.path.join(EXAMPLE, "model.yaml"), "w") as f:
        f.write(
            "# A text classifier with two inputs (input_ids, attention_mask: int64\n"
            "# [batch, seq]) built by hand with onnx.helper by\n"
            "# scripts/make_onnx_text_fixture.py: an embedding bag averaged under the\n"
            "# mask, a hidden layer and a softmax over 3 classes. Clients send rows of\n"
            "# any length up to 128; Sluice batches rows of similar length (length\n"
            "# buckets) and pads them, input_ids with padValue and attention_mask with 0.\n"
            "name: text\n"
            "description: embedding-bag text classifier with input_ids and attention_mask\n"
            "runtime: onnx\n"
            "artifact: model.onnx\n"
            "input:\n"
            "  schema: text-input@1\n"
            "  fields:\n"
            "    - {name: input_ids, type: sequence, dtype: int64, maxLength: %d}\n"
            "    - {name: attention_mask, type: sequence, dtype: int64, maxLength: %d, mask: true}\n"
            "output:\n"
            "  schema: text-output@1\n"
            "  fields: [%s]\n"
            "serving:\n"
            "  maxBatchSize: 32\n"
            "  maxBatchDelay: 2ms\n"
            "  lengthBuckets: [16, 32, 64, 128]\n"
            "  padValue: 0\n"
            "golden:\n" % (MAXLEN, MAXLEN, ", ".join("{name: %s}" % l for l in LABELS)))
        f.write("".join(golden))


if __name__ == "__main__":
    main()
