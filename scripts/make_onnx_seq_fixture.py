#!/usr/bin/python3
"""Make the ONNX runtime's sequence-model fixture from real PyTorch (issue 6).

Writes:
  internal/runtime/onnx/testdata/seq.onnx       input "tokens" int64 [batch, seq]
                                                (both axes dynamic), output
                                                "score" float32 [batch, 1]
  internal/runtime/onnx/testdata/seq_ref.json   rows of different lengths and
                                                torch's output for each row run
                                                alone, unpadded

The model: an embedding (vocab 100, dim 16), mean pooling over the positions
whose token is not the pad id 0 (the mask is computed inside the model, so
padding a row with zeros does not change its output), a linear layer and a
sigmoid.

Run with Debian's python3-torch. Its torch (1.13) exports with the legacy
TorchScript exporter by default and has no dynamo= argument; on torch >= 2.5
add dynamo=False to the export call.

    /usr/bin/python3 scripts/make_onnx_seq_fixture.py
"""
import json
import os

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TESTDATA = os.path.join(ROOT, "internal", "runtime", "onnx", "testdata")
VOCAB, DIM = 100, 16

torch.manual_seed(6)


class SeqModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, DIM)
        self.lin = torch.nn.Linear(DIM, 1)

    def forward(self, tokens):
        mask = (tokens != 0).to(torch.float32).unsqueeze(-1)  # [b, s, 1]
        e = self.emb(tokens) * mask
        n = mask.sum(dim=1).clamp(min=1.0)  # [b, 1]
        pooled = e.sum(dim=1) / n
        return torch.sigmoid(self.lin(pooled))


def main():
    m = SeqModel().eval()
    with torch.no_grad():
        # Larger weights so that outputs differ visibly between rows.
        m.emb.weight.mul_(0.5)
        m.lin.weight.mul_(3.0)
    path = os.path.join(TESTDATA, "seq.onnx")
    dummy = torch.tensor([[5, 7, 9, 0], [1, 2, 3, 4]], dtype=torch.int64)
    torch.onnx.export(m, (dummy,), path, input_names=["tokens"], output_names=["score"],
                      dynamic_axes={"tokens": {0: "batch", 1: "seq"}, "score": {0: "batch"}},
                      opset_version=17)
    g = torch.Generator().manual_seed(7)
    rows = []
    for length in [1, 2, 3, 5, 8, 13, 16, 17, 30, 33, 64, 100, 128]:
        r = torch.randint(1, VOCAB, (length,), generator=g)
        if length >= 5:
            r[length // 2] = 0  # an inner pad id is masked too
        rows.append(r.tolist())
    ref = []
    with torch.no_grad():
        for r in rows:
            y = m(torch.tensor([r], dtype=torch.int64))
            ref.append({"tokens": r, "score": float(y[0, 0])})
    with open(os.path.join(TESTDATA, "seq_ref.json"), "w") as f:
        json.dump({"rows": ref}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
